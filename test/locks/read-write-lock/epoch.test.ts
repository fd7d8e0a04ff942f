/**
 * A read or write hold belongs to one incarnation of the lock (its epoch, kept beside Redisson's
 * HASH): a background cancel that lands late never undoes a newer hold the same owner made after
 * the first expired. (A stale lease's release is guarded in redisson-interop.test.ts.)
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Lease } from "../../../src/index.js";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();
afterEach(() => {
  bridge.bridge.clearFaults();
});

function held(lease: Lease | null): Lease {
  if (!lease) throw new Error("not acquired");
  return lease;
}

describe("read-write lock epoch", () => {
  for (const side of ["read", "write"] as const) {
    it(`a late ${side} cancel carrying an old epoch leaves the owner's newer ${side} hold alone`, async () => {
      const name = `${prefix}late-cancel-${side}`;
      const owner = `tenant-7:${side}-job`;
      const sideOf = (rw: ReturnType<typeof a.edgelock.getReadWriteLock>) =>
        side === "read" ? rw.readLock() : rw.writeLock();
      // A talks through the fault bridge; the retry comes from another client as the same owner.
      const a = recordingEdgeLock({}, bridge.redis());
      await (
        await sideOf(a.edgelock.getReadWriteLock(`${prefix}warm`)).tryLock({ leaseTime: 1_000 })
      )?.release(); // scripts loaded, so the fault hits the acquire
      bridge.bridge.setFaults({
        rules: [{ action: "lose", mode: "hang", match: "evalsha", times: 1 }],
      });
      const controller = new AbortController();
      const pending = sideOf(a.edgelock.getReadWriteLock(name)).tryLock({
        leaseTime: 300,
        owner,
        signal: controller.signal,
      });
      await expect.poll(() => raw.exists(name), { timeout: 2_000, interval: 5 }).toBe(1);
      // The cancel A sends on abort is held at the bridge until long after the hold expired.
      bridge.bridge.setFaults({ delayMs: 1_500 });
      controller.abort(new Error("gave up"));
      await expect(pending).rejects.toThrow("gave up");
      expect(a.background).toHaveLength(1);
      await expect.poll(() => raw.exists(name), { timeout: 3_000, interval: 20 }).toBe(0);
      const b = recordingEdgeLock();
      const lock = sideOf(b.edgelock.getReadWriteLock(name));
      const retry = held(await lock.tryLock({ leaseTime: 10_000, owner }));
      await Promise.all(a.background); // the cancel lands now, on the newer incarnation
      expect(await lock.getHoldCount(owner)).toBe(1);
      // Still held: a writer from elsewhere is kept out.
      expect(await b.edgelock.getReadWriteLock(name).writeLock().tryLock()).toBeNull();
      expect(retry.signal.aborted).toBe(false);
      expect(await retry.release()).toBe("released");
    });
  }
});
