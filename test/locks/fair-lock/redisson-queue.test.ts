/**
 * A fair lock whose queue mixes edgelock and Redisson clients (Redisson's own scripts, with its
 * default 5-minute fairLockWaitTimeout): the lock goes in arrival order whoever queued, and a
 * Redisson newcomer polling while an edge waiter is first never overtakes it.
 */
import { describe, expect, it } from "vitest";
import type { Lease } from "../../../src/index.js";
import { REDISSON_FAIR_ACQUIRE, REDISSON_FAIR_UNLOCK } from "../../fixtures/redisson.js";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const LEASE = 30_000;
/** Redisson's Config#fairLockWaitTimeout default. */
const FAIR_LOCK_WAIT_TIMEOUT = 300_000;

/** A Redisson client's fair lock on `name`, as `owner`, with the client's clock. */
function jvm(name: string, owner: string) {
  const queue = `redisson_lock_queue:{${name}}`;
  const zset = `redisson_lock_timeout:{${name}}`;
  return {
    /** One attempt of lock(): null = acquired, else the ms it would wait. */
    attempt: () =>
      raw.eval(REDISSON_FAIR_ACQUIRE, {
        keys: [name, queue, zset],
        arguments: [String(LEASE), owner, String(FAIR_LOCK_WAIT_TIMEOUT), String(Date.now())],
      }),
    unlock: () =>
      raw.eval(REDISSON_FAIR_UNLOCK, {
        keys: [name, queue, zset, `redisson_lock__channel:{${name}}`],
        arguments: [String(LEASE), owner, String(Date.now())],
      }),
  };
}

/** An edge waiter on `name`, resolved once it waits for a message (after `waits` waits). */
async function edgeWaiter(name: string, waits: number) {
  const edge = recordingEdgeLock();
  const pending = edge.edgelock.getFairLock(name).tryLock({ waitTime: 20_000, leaseTime: LEASE });
  await edge.waited(waits);
  return { edge, pending };
}

/** Runs `unlock`, then expects `pending` to hold the lock within 400 ms; releases it. */
async function wokenBy(unlock: () => Promise<unknown>, pending: Promise<Lease | null>) {
  const unlocked = Date.now();
  expect(await unlock()).toBe(1);
  const lease = await pending;
  expect(lease).not.toBeNull();
  // One round trip and the message; the holder's TTL is 30 s, a re-check comes after 2 s.
  expect(Date.now() - unlocked).toBeLessThan(400);
  return lease;
}

const queueOf = async (name: string) =>
  (await raw.lRange(`redisson_lock_queue:{${name}}`, 0, -1)).map(String);

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

  it("an edge waiter first in line behind a Redisson holder wakes on Redisson's unlock within a round trip", async () => {
    const name = `${prefix}jvm-wakes-edge`;
    const a = jvm(name, "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:1");
    expect(await a.attempt()).toBeNull();
    // Queued (a JVM holder), subscribed to its own and to its Redisson channel at once, queued
    // again: waiting for a message.
    const { edge, pending } = await edgeWaiter(name, 2);
    const lease = await wokenBy(a.unlock, pending);
    // Queued, the two subscriptions, queued again, the attempt the message triggered.
    expect(edge.requests("acquire")).toBe(5);
    await lease?.release();
    expect(await queueOf(name)).toEqual([]);
  });

  it("an edge waiter behind a Redisson waiter is told by that waiter's unlock, on Redisson's channel", async () => {
    const name = `${prefix}jvm-waiter-wakes-edge`;
    const a = jvm(name, "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:1");
    const b = jvm(name, "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:2");
    expect(await a.attempt()).toBeNull();
    expect(typeof (await b.attempt())).toBe("number");
    const { pending } = await edgeWaiter(name, 2);
    expect(await a.unlock()).toBe(1);
    expect(await b.attempt()).toBeNull();
    const lease = await wokenBy(b.unlock, pending);
    await lease?.release();
    expect(await queueOf(name)).toEqual([]);
  });

  it("an edge waiter behind edge clients only does not subscribe to Redisson's channel", async () => {
    const name = `${prefix}edge-only`;
    const holder = await recordingEdgeLock()
      .edgelock.getFairLock(name)
      .tryLock({ leaseTime: LEASE });
    const { edge, pending } = await edgeWaiter(name, 2);
    expect(await holder?.release()).toBe("released");
    const lease = await pending;
    expect(lease).not.toBeNull();
    // Queued, queued again after subscribing, then held on the hand-off's message: one
    // subscription, none on Redisson's channel.
    expect(edge.requests("acquire")).toBe(3);
    await lease?.release();
  });

  it("an edge waiter behind a Redisson waiter, while an edge client holds, listens on Redisson's channel too", async () => {
    const name = `${prefix}jvm-ahead`;
    const holder = await recordingEdgeLock()
      .edgelock.getFairLock(name)
      .tryLock({ leaseTime: LEASE });
    const b = jvm(name, "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:2");
    expect(typeof (await b.attempt())).toBe("number");
    const { pending } = await edgeWaiter(name, 2);
    // The edge release tells the Redisson waiter first in line, which takes the lock.
    expect(await holder?.release()).toBe("released");
    expect(await b.attempt()).toBeNull();
    // Without Redisson's channel it would come back only after a claim window (2 s).
    const lease = await wokenBy(b.unlock, pending);
    await lease?.release();
    expect(await queueOf(name)).toEqual([]);
  });
});
