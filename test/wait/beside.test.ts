/**
 * Listening beside the wait's own channel (src/wait/beside.ts), through the fair lock: a waiter
 * behind a Redisson holder or a Redisson waiter also listens on its own Redisson channel
 * `redisson_lock__channel:{<name>}:<owner>`, where a Redisson release tells the next waiter, and
 * keeps its edgelock channel, where an edgelock release hands it the lock; behind edgelock
 * clients only, it does not subscribe there.
 */
import { describe, expect, it } from "vitest";
import type { Lease } from "../../src/index.js";
import { keyPrefix, useRawRedis } from "../support/env.js";
import { recordingEdgeLock } from "../support/locks.js";
import { fairQueueOf, REDISSON_LEASE, redissonFairLock } from "../support/redisson-fair.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const LEASE = REDISSON_LEASE;
const jvm = (name: string, owner: string) => redissonFairLock(raw, name, owner);
const queueOf = (name: string) => fairQueueOf(raw, name);

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

describe("a fair-lock waiter listens on Redisson's channel beside its own", () => {
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
