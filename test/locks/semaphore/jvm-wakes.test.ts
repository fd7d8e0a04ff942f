/**
 * Semaphore waiters and JVM holders: an edge waiter whose missing permits a Redisson client
 * holds listens on Redisson's channel (`redisson_sc:{<name>}`), so the JVM release (Redisson's
 * own script, a fixture) wakes it within a round trip; with only edgelock holders it stays on
 * its own wake channel, where each release wakes one waiter per permit (no herd).
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { EdgeLock } from "../../../src/index.js";
import {
  REDISSON_SEMAPHORE_ACQUIRE,
  REDISSON_SEMAPHORE_RELEASE,
  REDISSON_SEMAPHORE_TRY_SET_PERMITS,
} from "../../fixtures/redisson.js";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";
import {
  redissonMessages,
  redissonSubscribers,
  semaphoreChannelOf,
} from "../../support/redisson-channel.js";
import { expectOneWakePerRelease, waiting, wokenBy } from "../../support/semaphore-waiters.js";

const prefix = keyPrefix();
const raw = useRawRedis();

/** A Redisson client on the same Redis: its scripts, its keys. */
function jvm(name: string) {
  return {
    tryAcquire: async (n: number) =>
      Number(await raw.eval(REDISSON_SEMAPHORE_ACQUIRE, { keys: [name], arguments: [String(n)] })),
    release: (n: number) =>
      raw.eval(REDISSON_SEMAPHORE_RELEASE, {
        keys: [name, semaphoreChannelOf(name)],
        arguments: [String(n)],
      }),
    trySetPermits: async (n: number) =>
      Number(
        await raw.eval(REDISSON_SEMAPHORE_TRY_SET_PERMITS, {
          keys: [name, semaphoreChannelOf(name)],
          arguments: [String(n)],
        }),
      ),
  };
}

/** A waiter's call: one permit of `name`, waiting up to 20 s. */
const tryAcquireOf = (name: string) => (edgelock: EdgeLock) =>
  edgelock.getSemaphore(name).tryAcquire({ waitTime: 20_000 });

describe("semaphore waiters behind JVM holders", () => {
  // Redis knows the scripts, so that each attempt counted below is one request (no NOSCRIPT).
  beforeAll(async () => {
    const warm = recordingEdgeLock().edgelock.getSemaphore(`${prefix}warm`);
    await warm.trySetPermits(1);
    await (await warm.tryAcquire())?.release();
  });

  it("a Redisson release wakes an edge tryAcquire within a round trip (permits set by edgelock)", async () => {
    const name = `${prefix}edge-set`;
    const owner = recordingEdgeLock().edgelock.getSemaphore(name);
    await owner.trySetPermits(2);
    // One permit held by edgelock, one by a JVM client: the one missing is not edgelock's.
    expect(await owner.tryAcquire()).not.toBeNull();
    expect(await jvm(name).tryAcquire(1)).toBe(1);
    // Busy, subscribed to Redisson's channel, busy again: waiting for its message.
    const { waiter, pending } = await waiting(tryAcquireOf(name));
    expect(await redissonSubscribers(raw, name)).toBe(1);
    // It listens there instead: nothing of ours would wake it, so it is not registered.
    expect(await raw.exists(`edgelock_waiting:{${name}}`)).toBe(0);
    // One round trip and the message; without it the wait lasts until its 15 s bound.
    expect(await wokenBy(pending, () => jvm(name).release(1))).not.toBeNull();
    // Busy attempt, Redisson's channel, busy attempt, the attempt its message triggered.
    expect(waiter.requests("acquire")).toBe(4);
  });

  it("a Redisson release wakes an edge acquire() on a semaphore a Redisson client set", async () => {
    const name = `${prefix}jvm-set`;
    expect(await jvm(name).trySetPermits(1)).toBe(1);
    expect(await jvm(name).tryAcquire(1)).toBe(1);
    const { waiter, pending } = await waiting((e) => e.getSemaphore(name).acquire());
    const permits = await wokenBy(pending, () => jvm(name).release(1));
    expect(waiter.requests("acquire")).toBe(4);
    expect(await permits.release()).toBe(1);
  });

  it("behind JVM and edgelock holders, an edgelock release still wakes the waiter (it publishes on Redisson's channel)", async () => {
    const name = `${prefix}mixed`;
    const owner = recordingEdgeLock().edgelock.getSemaphore(name);
    await owner.trySetPermits(2);
    const held = await owner.tryAcquire();
    expect(await jvm(name).tryAcquire(1)).toBe(1);
    const { waiter, pending } = await waiting(tryAcquireOf(name));
    expect(await wokenBy(pending, async () => held?.release())).not.toBeNull();
    expect(waiter.requests("acquire")).toBe(4);
  });

  it("with only edgelock holders, waiters stay off Redisson's channel and each release wakes one (no herd)", async () => {
    const name = `${prefix}edge-only`;
    const owner = recordingEdgeLock().edgelock.getSemaphore(name);
    await owner.trySetPermits(3);
    const held = await Promise.all([1, 2, 3].map(() => owner.tryAcquire()));
    await expectOneWakePerRelease({
      raw,
      name,
      owner,
      held,
      release: async (permits) => {
        await permits?.release();
      },
      wait: tryAcquireOf(name),
      handsOff: true,
    });
  });

  it("edgelock's release and addPermits publish the new count on Redisson's channel, as Redisson's do (JVM waiters wake)", async () => {
    const name = `${prefix}publishes`;
    const s = recordingEdgeLock().edgelock.getSemaphore(name);
    await s.trySetPermits(2);
    const permits = await s.tryAcquire({ permits: 2 });
    const jvmWaiter = await redissonMessages(raw, name);
    expect(await permits?.release()).toBe(2);
    expect(await s.addPermits(1)).toBe(3);
    await jvmWaiter.received(2);
    expect(jvmWaiter.messages).toEqual(["2", "3"]);
    await jvmWaiter.close();
  });
});
