/**
 * Replay records (lua/lib/replay.lua): one STRING per request id that lives exactly one replay
 * window, written only where the lock HASH cannot say what a request did; all of them gone once
 * the name is idle.
 */
import { describe, expect, it } from "vitest";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { isReplayRecord, recordingEdgeLock, replayRecords } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();

describe("replay records", () => {
  it("are one key per request, each living one replay window, and all expire when idle", async () => {
    const { edgelock } = recordingEdgeLock({ replayWindow: 1_000 });
    const name = `${prefix}records`;
    const lock = edgelock.getLock(name);
    const leases = [];
    for (let i = 0; i < 5; i++) {
      const lease = await lock.lock({ leaseTime: 5_000 });
      leases.push(lease);
      expect(await lease.release()).toBe("released");
    }
    const keys = (await raw.keys(`*${name}*`)).map(String);
    expect(keys.every((k) => isReplayRecord(name, k))).toBe(true);
    // Each release that freed the lock recorded its answer under its lease's id.
    const records = await replayRecords(raw, name);
    expect(Object.keys(records).sort()).toEqual(leases.map((l) => l.id).sort());
    expect(new Set(Object.values(records))).toEqual(new Set(["R1"]));
    for (const key of keys) {
      const pttl = await raw.pTTL(key);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(1_000);
    }
    await expect
      .poll(async () => (await raw.keys(`*${name}*`)).length, { timeout: 5_000, interval: 100 })
      .toBe(0);
  });

  it("a lock held for longer than the window writes no record while it is held", async () => {
    const { edgelock } = recordingEdgeLock({ replayWindow: 1_000 });
    const name = `${prefix}held`;
    const lease = await edgelock.getLock(name).lock({ leaseTime: 5_000 });
    expect(await replayRecords(raw, name)).toEqual({});
    // A lease shorter than the window may expire while a copy is in flight: it is recorded.
    const short = await edgelock.getLock(`${name}:short`).lock({ leaseTime: 500 });
    expect(await replayRecords(raw, `${name}:short`)).toEqual({ [short.id]: `A${short.epoch}` });
    expect(await lease.release()).toBe("released");
    expect(await short.release()).toBe("released");
  });

  it("a partial release replayed within the window still reports its first result", async () => {
    const { edgelock } = recordingEdgeLock({ replayWindow: 1_000 });
    const name = `${prefix}partial`;
    const lock = edgelock.getLock(name);
    const outer = await lock.lock({ leaseTime: 10_000 });
    const inner = await lock.lock({ leaseTime: 10_000, owner: outer.owner });
    expect(await inner.release()).toBe("still-held");
    expect((await replayRecords(raw, name))[inner.id]).toBe("R2");
    // Replayed (a restored copy of the same lease): reports "still-held", decrements nothing.
    expect(await edgelock.restoreLease(inner.toJSON()).release()).toBe("still-held");
    expect(await lock.getHoldCount(outer.owner)).toBe(1);
    expect(await outer.release()).toBe("released");
    // A copy of the release that freed the lock answers "released", not "expired".
    expect(await edgelock.restoreLease(outer.toJSON()).release()).toBe("released");
  });
});
