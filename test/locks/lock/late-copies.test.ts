/**
 * Late copies of an acquire (a request delayed in the network, arriving after its answer was
 * used): the lock HASH is the creating acquire's replay record while it lives (lua/lib/hold.lua
 * BY), so whatever ends the hold must leave a record behind for the rest of the replay window,
 * or the late copy would take the lock again for nobody. Each copy is sent as the transport
 * would resend it: the same script, keys and arguments, the same request id.
 */
import { describe, expect, it } from "vitest";
import type { Lease } from "../../../src/index.js";
import { lockAcquire } from "../../../src/lua/lock.gen.js";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock, replayKeys, replayRecords } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();

/** Sends the acquire of `lease` again, as its first copy was sent (no waiter). */
async function lateCopy(lease: Lease, leaseTime: number): Promise<unknown> {
  const name = lease.name;
  return raw.eval(lockAcquire.source, {
    keys: [name, ...replayKeys(name), `edgelock_waiting:{${name}}`, `edgelock_wake:{${name}}`],
    arguments: [String(leaseTime), lease.owner, "30000", lease.id, "", "0", "0", "0"],
  });
}

describe("a late copy of an acquire takes nothing", () => {
  it("after its lease, shorter than the replay window, expired", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}expired`);
    const lease = await lock.tryLock({ leaseTime: 300 });
    if (!lease) throw new Error("not acquired");
    await expect.poll(() => lock.isLocked(), { timeout: 5_000, interval: 50 }).toBe(false);
    expect(await lateCopy(lease, 300)).toEqual([-1, 0, 0]);
    expect(await lock.isLocked()).toBe(false);
  });

  it("after its own release freed the lock", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}released`);
    const lease = await lock.tryLock();
    if (!lease) throw new Error("not acquired");
    expect(await lease.release()).toBe("released");
    expect(await lateCopy(lease, 30_000)).toEqual([-1, 0, 0]);
    expect(await lock.isLocked()).toBe(false);
  });

  it("after another lease of its owner, a release under another request id, unlock(owner) or forceUnlock freed the lock", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}others`);
    const endings: [string, (first: Lease) => Promise<unknown>][] = [
      [
        "a re-entry released last",
        async (first) => {
          const second = await lock.tryLock({ owner: first.owner });
          expect(await first.release()).toBe("still-held");
          expect(await second?.release()).toBe("released");
        },
      ],
      [
        // The owner's only hold in the lease's incarnation, released by a request that did not
        // create it: the common path of release.lua, which must record "G" for the creator too.
        "a release under another request id",
        async (first) => {
          const other = edgelock.restoreLease({ ...first.toJSON(), id: "f".repeat(32) });
          expect(await other.release()).toBe("released");
        },
      ],
      ["unlock(owner)", (first) => lock.unlock(first.owner)],
      ["forceUnlock", () => lock.forceUnlock()],
    ];
    for (const [label, end] of endings) {
      const first = await lock.tryLock();
      if (!first) throw new Error("not acquired");
      await end(first);
      expect(await lock.isLocked(), label).toBe(false);
      // The request that ended it recorded "G" for the request that created it.
      expect((await replayRecords(raw, lock.name))[first.id], label).toBe("G");
      expect(await lateCopy(first, 30_000), label).toEqual([-1, 0, 0]);
      expect(await lock.isLocked(), label).toBe(false);
    }
  });

  it("a lock held longer than the window writes no record until it ends", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}held`);
    const lease = await lock.tryLock();
    if (!lease) throw new Error("not acquired");
    expect(await replayRecords(raw, lock.name)).toEqual({});
    // A copy while it is held answers the hold it made, and adds none.
    expect(await lateCopy(lease, 30_000)).toEqual([1, 1, lease.epoch]);
    expect(await lock.getHoldCount(lease.owner)).toBe(1);
    expect(await lease.release()).toBe("released");
  });
});
