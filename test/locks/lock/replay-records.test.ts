/**
 * Replay records (lua/lib/replay.lua): two hashes per name whatever the traffic, each record
 * kept at least one replay window across a rotation, and all of them gone after the name is idle.
 */
import { describe, expect, it } from "vitest";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock, replayKeys, replayRecords } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();

describe("replay records", () => {
  it("stay in two keys per name, survive a rotation for a window, and expire when idle", async () => {
    const { edgelock } = recordingEdgeLock({ replayWindow: 1_000 });
    const name = `${prefix}rotation`;
    const lock = edgelock.getLock(name);
    // Cycles for longer than a window: the current hash rotates into the old one.
    const until = Date.now() + 1_300;
    let cycles = 0;
    while (Date.now() < until) {
      await (await lock.lock({ leaseTime: 5_000 })).release();
      cycles += 1;
      const keys = (await raw.keys(`*${name}*`)).map(String).sort();
      expect(keys.every((k) => replayKeys(name).includes(k))).toBe(true);
    }
    expect(cycles).toBeGreaterThan(5);
    expect(await raw.exists(replayKeys(name)[1] as string)).toBe(1);
    expect(Object.keys(await replayRecords(raw, name)).length).toBeGreaterThan(0);
    await expect
      .poll(async () => (await raw.keys(`*${name}*`)).length, { timeout: 5_000, interval: 100 })
      .toBe(0);
  });

  it("a release replayed after a rotation still reports its first result", async () => {
    const { edgelock } = recordingEdgeLock({ replayWindow: 1_000 });
    const name = `${prefix}replay-after-rotation`;
    const lock = edgelock.getLock(name);
    const outer = await lock.lock({ leaseTime: 10_000 });
    const inner = await lock.lock({ leaseTime: 10_000, owner: outer.owner });
    expect(await inner.release()).toBe("still-held");
    const started = Date.now();
    // Another request after a full window rotates the hashes: the record moves to the old one.
    await new Promise((r) => setTimeout(r, 1_050));
    await lock.isLocked();
    await (
      await edgelock.getLock(name).tryLock({ leaseTime: 10_000, owner: outer.owner })
    )?.release();
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(Object.keys(await raw.hGetAll(replayKeys(name)[1] as string))).toContain(inner.id);
    // Replayed (a restored copy of the same lease): reports "still-held", decrements nothing.
    expect(await edgelock.restoreLease(inner.toJSON()).release()).toBe("still-held");
    expect(await lock.getHoldCount(outer.owner)).toBe(1);
    expect(await outer.release()).toBe("released");
  });
});
