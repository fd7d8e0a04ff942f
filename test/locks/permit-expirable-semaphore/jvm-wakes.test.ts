/**
 * Permit-expirable semaphore waiters and JVM holders: while a Redisson client holds a live
 * permit, an edge waiter listens on Redisson's channel (`redisson_sc:{<name>}`), so the JVM
 * release (Redisson's own scripts, fixtures) wakes it within a round trip; with only edgelock
 * holders it stays on its own wake channel, where each release wakes one waiter per permit.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { LeaseLostError } from "../../../src/index.js";
import { REDISSON_PES_ACQUIRE, REDISSON_PES_RELEASE } from "../../fixtures/redisson.js";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";
import {
  redissonMessages,
  redissonSubscribers,
  semaphoreChannelOf,
} from "../../support/redisson-channel.js";

const prefix = keyPrefix();
const raw = useRawRedis();

const NON_EXPIRABLE = "922337203685477";
const timeouts = (name: string) => `{${name}}:timeout`;

/** A Redisson client on the same Redis: its scripts, its keys, its clock. */
function jvm(name: string) {
  return {
    /**
     * Takes one permit `id` (32 hex characters) with a lease in ms, or none (-1): "OK", else
     * ":<nearest expiry>" or null.
     */
    tryAcquire: async (id: string, leaseMs: number) => {
      const now = Date.now();
      const reply = await raw.eval(REDISSON_PES_ACQUIRE, {
        keys: [name, timeouts(name), semaphoreChannelOf(name)],
        arguments: [
          "1",
          leaseMs < 0 ? NON_EXPIRABLE : String(now + leaseMs),
          String(now),
          NON_EXPIRABLE,
          "publish",
          id,
        ],
      });
      return reply === null ? null : String(reply);
    },
    release: async (id: string) =>
      Number(
        await raw.eval(REDISSON_PES_RELEASE, {
          keys: [name, semaphoreChannelOf(name), timeouts(name)],
          arguments: [id, "1", String(Date.now()), "publish"],
        }),
      ),
  };
}

const JVM_ID = "0123456789abcdef0123456789abcdef";

describe("permit-expirable semaphore waiters behind JVM holders", () => {
  // Redis knows the scripts, so that each attempt counted below is one request (no NOSCRIPT).
  beforeAll(async () => {
    const warm = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(`${prefix}warm`);
    await warm.trySetPermits(1);
    await (await warm.tryAcquire({ leaseTime: 1_000 }))?.release();
  });

  it("a Redisson release wakes an edge waiter within a round trip", async () => {
    const name = `${prefix}jvm-holds`;
    const owner = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await owner.trySetPermits(1);
    expect(await jvm(name).tryAcquire(JVM_ID, 30_000)).toBe("OK");
    // edgelock renewing a JVM client's permit does not make it edgelock's.
    expect(await owner.updateLeaseTime(JVM_ID, 40_000)).toBe(true);
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock
      .getPermitExpirableSemaphore(name)
      .tryAcquire({ waitTime: 20_000, leaseTime: 5_000 });
    // Busy, subscribed to Redisson's channel, busy again: waiting for its message.
    await waiter.waited(2);
    expect(await redissonSubscribers(raw, name)).toBe(1);
    expect(await raw.exists(`edgelock_waiting:{${name}}`)).toBe(0);
    const released = Date.now();
    expect(await jvm(name).release(JVM_ID)).toBe(1);
    const lease = await pending;
    expect(lease).not.toBeNull();
    // One round trip and the message; without it the wait lasts until the JVM lease runs out.
    expect(Date.now() - released).toBeLessThan(400);
    // Busy attempt, Redisson's channel, busy attempt, the attempt its message triggered.
    expect(waiter.requests("acquire")).toBe(4);
    expect(await lease?.release()).toBe("released");
  });

  it("a waiter on its own channel moves to Redisson's once a Redisson client holds a permit", async () => {
    const name = `${prefix}overtaken`;
    const owner = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await owner.trySetPermits(2);
    const first = await owner.tryAcquire({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock
      .getPermitExpirableSemaphore(name)
      .acquire({ permits: 2, leaseTime: 5_000 });
    // Only edgelock holds a permit: registered on its own channel.
    await waiter.waited(2);
    expect((await owner.inspect()).waiters).toBe(1);
    expect(await redissonSubscribers(raw, name)).toBe(0);
    // A Redisson client takes the other permit; the edgelock release wakes the waiter, which
    // finds the JVM permit missing and moves to Redisson's channel.
    expect(await jvm(name).tryAcquire(JVM_ID, -1)).toBe("OK");
    expect(await first?.release()).toBe("released");
    await waiter.waited(4);
    expect(await redissonSubscribers(raw, name)).toBe(1);
    expect((await owner.inspect()).waiters).toBe(0);
    const released = Date.now();
    expect(await jvm(name).release(JVM_ID)).toBe(1);
    const lease = await pending;
    expect(Date.now() - released).toBeLessThan(400);
    // Attempt, own channel, attempt, woken: attempt, Redisson's channel, attempt, woken: attempt.
    expect(waiter.requests("acquire")).toBe(7);
    await lease.release();
  });

  it("an edgelock permit a Redisson client released stops counting as edgelock's once its renewal finds it gone", async () => {
    const name = `${prefix}jvm-released-mine`;
    const owner = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await owner.trySetPermits(1);
    const mine = await owner.tryAcquire({ leaseTime: 20_000 });
    // A JVM client releases that permit by its id, then takes the freed permit itself.
    expect(await jvm(name).release(mine?.permitIds[0] ?? "")).toBe(1);
    expect(await jvm(name).tryAcquire(JVM_ID, -1)).toBe("OK");
    await expect(mine?.renew()).rejects.toBeInstanceOf(LeaseLostError);
    expect(await raw.exists(`edgelock_held:{${name}}`)).toBe(0);
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock
      .getPermitExpirableSemaphore(name)
      .tryAcquire({ waitTime: 20_000, leaseTime: 5_000 });
    await waiter.waited(2);
    expect(await redissonSubscribers(raw, name)).toBe(1);
    const released = Date.now();
    expect(await jvm(name).release(JVM_ID)).toBe(1);
    expect(await pending).not.toBeNull();
    expect(Date.now() - released).toBeLessThan(400);
  });

  it("behind JVM and edgelock holders, an edgelock release still wakes the waiter", async () => {
    const name = `${prefix}mixed`;
    const owner = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await owner.trySetPermits(2);
    const mine = await owner.tryAcquire({ leaseTime: 20_000 });
    expect(await jvm(name).tryAcquire(JVM_ID, -1)).toBe("OK");
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock
      .getPermitExpirableSemaphore(name)
      .tryAcquire({ waitTime: 20_000, leaseTime: 5_000 });
    await waiter.waited(2);
    const released = Date.now();
    expect(await mine?.release()).toBe("released");
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect(Date.now() - released).toBeLessThan(400);
    expect(waiter.requests("acquire")).toBe(4);
    await lease?.release();
    expect(await jvm(name).release(JVM_ID)).toBe(1);
  });

  it("with only edgelock holders, waiters stay off Redisson's channel and each release wakes one (no herd)", async () => {
    const name = `${prefix}edge-only`;
    const owner = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await owner.trySetPermits(3);
    const held = await Promise.all([1, 2, 3].map(() => owner.tryAcquire({ leaseTime: 20_000 })));
    const waiters = Array.from({ length: 3 }, () => recordingEdgeLock());
    const pending = waiters.map((w) =>
      w.edgelock
        .getPermitExpirableSemaphore(name)
        .tryAcquire({ waitTime: 20_000, leaseTime: 5_000 }),
    );
    await Promise.all(waiters.map((w) => w.waited(2)));
    expect(await redissonSubscribers(raw, name)).toBe(0);
    expect((await owner.inspect()).waiters).toBe(3);
    const done = () => waiters.filter((w) => w.events.some((e) => e.type === "acquire")).length;
    // Resolves on the acquire event that makes `n` waiters done.
    const acquired = (n: number) => Promise.race(waiters.map((w) => w.until(() => done() >= n)));
    for (const [i, lease] of held.entries()) {
      expect(await lease?.release()).toBe("released");
      expect((await owner.inspect()).waiters).toBe(2 - i);
      await acquired(i + 1);
      expect(await owner.availablePermits()).toBe(0);
    }
    const leases = await Promise.all(pending);
    // An attempt, the subscription, an attempt, the wake-up's attempt: nobody attempted in vain.
    for (const w of waiters) expect(w.requests("acquire")).toBe(4);
    for (const w of waiters) expect(w.events.filter((e) => e.type === "wait")).toHaveLength(2);
    for (const lease of leases) expect(await lease?.release()).toBe("released");
  });

  it("edgelock's release publishes the new count on Redisson's channel, as Redisson's does (JVM waiters wake)", async () => {
    const name = `${prefix}publishes`;
    const s = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await s.trySetPermits(2);
    const lease = await s.tryAcquire({ permits: 2, leaseTime: 20_000 });
    const jvmWaiter = await redissonMessages(raw, name);
    expect(await lease?.release()).toBe("released");
    await jvmWaiter.received(1);
    expect(jvmWaiter.messages).toEqual(["2"]);
    await jvmWaiter.close();
  });
});
