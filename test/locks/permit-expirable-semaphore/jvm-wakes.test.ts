/**
 * Permit-expirable semaphore waiters and JVM holders: while a Redisson client holds a live
 * permit, an edge waiter listens on Redisson's channel (`redisson_sc:{<name>}`), so the JVM
 * release (Redisson's own scripts, fixtures) wakes it within a round trip; with only edgelock
 * holders it stays on its own wake channel, where each release wakes one waiter per permit.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { type EdgeLock, LeaseLostError } from "../../../src/index.js";
import { REDISSON_PES_ACQUIRE, REDISSON_PES_RELEASE } from "../../fixtures/redisson.js";
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

/** A waiter's call: one permit of `name` for 5 s, waiting up to 20 s. */
const tryAcquireOf = (name: string) => (edgelock: EdgeLock) =>
  edgelock.getPermitExpirableSemaphore(name).tryAcquire({ waitTime: 20_000, leaseTime: 5_000 });

/** The JVM client's release of its permit `JVM_ID` of `name`, which it holds. */
const releaseOfJvm = (name: string) => async () => expect(await jvm(name).release(JVM_ID)).toBe(1);

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
    // Busy, subscribed to Redisson's channel, busy again: waiting for its message.
    const { waiter, pending } = await waiting(tryAcquireOf(name));
    expect(await redissonSubscribers(raw, name)).toBe(1);
    expect(await raw.exists(`edgelock_waiting:{${name}}`)).toBe(0);
    // One round trip and the message; without it the wait lasts until the JVM lease runs out.
    const lease = await wokenBy(pending, releaseOfJvm(name));
    expect(lease).not.toBeNull();
    // Busy attempt, Redisson's channel, busy attempt, the attempt its message triggered.
    expect(waiter.requests("acquire")).toBe(4);
    expect(await lease?.release()).toBe("released");
  });

  it("a waiter on its own channel moves to Redisson's once a Redisson client holds a permit", async () => {
    const name = `${prefix}overtaken`;
    const owner = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await owner.trySetPermits(2);
    const first = await owner.tryAcquire({ leaseTime: 20_000 });
    // Only edgelock holds a permit: registered on its own channel.
    const { waiter, pending } = await waiting((e) =>
      e.getPermitExpirableSemaphore(name).acquire({ permits: 2, leaseTime: 5_000 }),
    );
    expect((await owner.inspect()).waiters).toBe(1);
    expect(await redissonSubscribers(raw, name)).toBe(0);
    // A Redisson client takes the other permit; the edgelock release wakes the waiter, which
    // finds the JVM permit missing and moves to Redisson's channel.
    expect(await jvm(name).tryAcquire(JVM_ID, -1)).toBe("OK");
    expect(await first?.release()).toBe("released");
    await waiter.waited(4);
    expect(await redissonSubscribers(raw, name)).toBe(1);
    expect((await owner.inspect()).waiters).toBe(0);
    const lease = await wokenBy(pending, releaseOfJvm(name));
    // Attempt, own channel, attempt, woken: attempt, Redisson's channel, attempt, woken: attempt.
    expect(waiter.requests("acquire")).toBe(7);
    await lease.release();
  });

  it("an edgelock permit a Redisson client released by id is gone for edgelock too: the waiter behind the JVM's permit listens on Redisson's channel", async () => {
    const name = `${prefix}jvm-released-mine`;
    const owner = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await owner.trySetPermits(1);
    const mine = await owner.tryAcquire({ leaseTime: 20_000 });
    // A JVM client releases that permit by its id, then takes the freed permit itself.
    expect(await jvm(name).release(mine?.permitIds[0] ?? "")).toBe(1);
    expect(await jvm(name).tryAcquire(JVM_ID, -1)).toBe("OK");
    await expect(mine?.renew()).rejects.toBeInstanceOf(LeaseLostError);
    const { pending } = await waiting(tryAcquireOf(name));
    expect(await redissonSubscribers(raw, name)).toBe(1);
    expect(await wokenBy(pending, releaseOfJvm(name))).not.toBeNull();
  });

  it("behind JVM and edgelock holders, an edgelock release still wakes the waiter", async () => {
    const name = `${prefix}mixed`;
    const owner = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await owner.trySetPermits(2);
    const mine = await owner.tryAcquire({ leaseTime: 20_000 });
    expect(await jvm(name).tryAcquire(JVM_ID, -1)).toBe("OK");
    const { waiter, pending } = await waiting(tryAcquireOf(name));
    const lease = await wokenBy(pending, async () =>
      expect(await mine?.release()).toBe("released"),
    );
    expect(lease).not.toBeNull();
    expect(waiter.requests("acquire")).toBe(4);
    await lease?.release();
    expect(await jvm(name).release(JVM_ID)).toBe(1);
  });

  it("with only edgelock holders, waiters stay off Redisson's channel and each release wakes one (no herd)", async () => {
    const name = `${prefix}edge-only`;
    const owner = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await owner.trySetPermits(3);
    const held = await Promise.all([1, 2, 3].map(() => owner.tryAcquire({ leaseTime: 20_000 })));
    const leases = await expectOneWakePerRelease({
      raw,
      name,
      owner,
      held,
      release: async (lease) => expect(await lease?.release()).toBe("released"),
      wait: tryAcquireOf(name),
      handsOff: true,
    });
    for (const lease of leases) expect(await lease.release()).toBe("released");
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
