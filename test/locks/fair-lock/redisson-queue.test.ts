/**
 * A fair lock whose queue mixes edgelock and Redisson clients (Redisson's own scripts, with its
 * default 5-minute fairLockWaitTimeout): the lock goes in arrival order whoever queued, and a
 * Redisson newcomer polling while an edge waiter is first never overtakes it. How its waiters
 * hear a Redisson release (listening beside their own channel): test/wait/beside.test.ts.
 */
import { describe, expect, it } from "vitest";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";
import { fairQueueOf, REDISSON_LEASE, redissonFairLock } from "../../support/redisson-fair.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const LEASE = REDISSON_LEASE;
const jvm = (name: string, owner: string) => redissonFairLock(raw, name, owner);
const queueOf = (name: string) => fairQueueOf(raw, name);

describe("fair lock queue shared with Redisson", () => {
  it("an edge waiter queued between Redisson waiters gets the lock in its turn", async () => {
    const name = `${prefix}mixed`;
    const a = jvm(name, "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:1");
    const b = jvm(name, "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:2");
    const c = jvm(name, "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:3");
    expect(await a.attempt()).toBeNull();
    expect(typeof (await b.attempt())).toBe("number");
    const edge = recordingEdgeLock({ wait: "poll" });
    let edgeHolds = false;
    const pending = edge.edgelock
      .getFairLock(name)
      .lock({ leaseTime: LEASE })
      .then((lease) => {
        edgeHolds = true;
        return lease;
      });
    await expect.poll(() => queueOf(name), { timeout: 3_000, interval: 10 }).toHaveLength(2);
    expect(typeof (await c.attempt())).toBe("number");
    const edgeOwner = (await queueOf(name))[1];
    expect(await queueOf(name)).toEqual([
      "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:2",
      edgeOwner,
      "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:3",
    ]);
    // a → b: Redisson's own hand-off, which lowers every queued score by 5 minutes.
    expect(await a.unlock()).toBe(1);
    expect(await b.attempt()).toBeNull();
    expect(await b.unlock()).toBe(1);
    // The edge waiter is first now. c polls as Redisson's lock() loop does: it must not take it.
    const freed = Date.now();
    while (!edgeHolds) {
      expect(await c.attempt()).not.toBeNull();
      await new Promise((r) => setTimeout(r, 25));
      expect(Date.now() - freed).toBeLessThan(15_000);
    }
    const lease = await pending;
    expect(await c.attempt()).not.toBeNull();
    expect(await lease.release()).toBe("released");
    expect(await c.attempt()).toBeNull();
    expect(await c.unlock()).toBe(1);
    expect(await queueOf(name)).toEqual([]);
  });
});
