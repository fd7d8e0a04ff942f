/**
 * A Redisson JVM client and edgelock exclude each other on the same lock name: Redisson's own
 * acquire and unlock scripts (as published) play the JVM client, run directly on Redis.
 */
import { describe, expect, it } from "vitest";
import { REDISSON_ACQUIRE, REDISSON_UNLOCK } from "../../fixtures/redisson.js";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const JVM_OWNER = "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:76";
const raw = useRawRedis();

const redissonAcquire = (name: string, leaseMs: number) =>
  raw.eval(REDISSON_ACQUIRE, { keys: [name], arguments: [String(leaseMs), JVM_OWNER] });
const redissonUnlock = (name: string, leaseMs: number) =>
  raw.eval(REDISSON_UNLOCK, {
    keys: [name, `redisson_lock__channel:{${name}}`],
    arguments: ["0", String(leaseMs), JVM_OWNER],
  });

describe("interop with Redisson", () => {
  it("a lock held by Redisson blocks edgelock, which gets in after Redisson unlocks", async () => {
    const name = `${prefix}jvm-first`;
    expect(await redissonAcquire(name, 30_000)).toBeNull(); // nil = acquired
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(name);
    const busy = await lock.tryAcquire({ leaseTime: 5_000 });
    expect(busy.lease).toBeNull();
    if (busy.lease === null) expect(busy.holderTtl).toBeGreaterThan(25_000);
    expect(await lock.isLocked()).toBe(true);
    expect(await lock.isHeldBy(JVM_OWNER)).toBe(true);
    expect(await lock.getHoldCount(JVM_OWNER)).toBe(1);
    expect(await redissonUnlock(name, 30_000)).toBe(1);
    const lease = await lock.tryLock({ leaseTime: 5_000 });
    expect(lease).not.toBeNull();
    await lease?.release();
  });

  it("a lock held by edgelock blocks Redisson, which gets in after edgelock releases", async () => {
    const name = `${prefix}edge-first`;
    const { edgelock } = recordingEdgeLock();
    const lease = await edgelock.getLock(name).tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    const pttl = await redissonAcquire(name, 30_000);
    expect(typeof pttl).toBe("number");
    expect(pttl as number).toBeGreaterThan(8_000);
    expect(await lease.release()).toBe("released");
    expect(await redissonAcquire(name, 30_000)).toBeNull();
    expect(await redissonUnlock(name, 30_000)).toBe(1);
    expect(await raw.exists(name)).toBe(0);
  });

  it("a Redisson hold can be re-entered by Redisson only, and edgelock's unlock of it is refused", async () => {
    const name = `${prefix}jvm-reentry`;
    await redissonAcquire(name, 30_000);
    await redissonAcquire(name, 30_000);
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(name);
    expect(await lock.getHoldCount(JVM_OWNER)).toBe(2);
    // edgelock passing the JVM owner acts as that owner, exactly as Redisson's threadId API.
    const reentered = await lock.tryLock({ owner: JVM_OWNER, leaseTime: 30_000 });
    expect(reentered).not.toBeNull();
    expect(await lock.getHoldCount(JVM_OWNER)).toBe(3);
    await reentered?.release();
    expect(await redissonUnlock(name, 30_000)).toBe(0);
    expect(await redissonUnlock(name, 30_000)).toBe(1);
    expect(await raw.exists(name)).toBe(0);
  });

  it("an edgelock unlock publishes on Redisson's channel so JVM waiters wake up", async () => {
    const name = `${prefix}channel`;
    const sub = raw.duplicate();
    await sub.connect();
    let deliver: (m: string) => void = () => {};
    const message = new Promise<string>((resolve) => {
      deliver = resolve;
    });
    // SUBSCRIBE resolves once Redis has confirmed the subscription.
    await sub.subscribe(`redisson_lock__channel:{${name}}`, (m) => deliver(String(m)));
    const { edgelock } = recordingEdgeLock();
    const lease = await edgelock.getLock(name).tryLock({ leaseTime: 5_000 });
    await lease?.release();
    expect(await message).toBe("0");
    await sub.close();
  });

  it("an edge waiter behind a Redisson holder listens on Redisson's channel: the JVM unlock wakes it within a round trip", async () => {
    const name = `${prefix}jvm-wakes-edge`;
    await redissonAcquire(name, 30_000);
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 5_000 });
    // Busy (a JVM holder), subscribed to Redisson's channel, busy again: waiting for its message.
    await waiter.waited(2);
    // The holder carries no epoch: nobody registers for a wake-up of ours that would never come.
    expect(await raw.exists(`edgelock_waiting:{${name}}`)).toBe(0);
    const unlocked = Date.now();
    expect(await redissonUnlock(name, 30_000)).toBe(1);
    const lease = await pending;
    expect(lease).not.toBeNull();
    // One round trip and the message; polling would take up to backoff.maxDelay (1 s), the
    // holder's TTL 30 s.
    expect(Date.now() - unlocked).toBeLessThan(400);
    // Busy attempt, Redisson's channel, busy attempt, the attempt its message triggered.
    expect(waiter.requests("acquire")).toBe(4);
    await lease?.release();
  });

  it("a Redisson holder of a name whose Redisson channel no REST path carries is heard by polling", async () => {
    // Redisson's channel keeps its name (the JVM client publishes there): with a '/', the REST
    // API cannot subscribe to it, so the edge waiter polls instead of listening.
    const name = `${prefix}jvm/polled`;
    await redissonAcquire(name, 30_000);
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 5_000 });
    await waiter.waited(4);
    expect((await raw.pubSubChannels(`redisson_lock__channel:*`)).map(String)).not.toContain(
      `redisson_lock__channel:{${name}}`,
    );
    const unlocked = Date.now();
    expect(await redissonUnlock(name, 30_000)).toBe(1);
    const lease = await pending;
    expect(lease).not.toBeNull();
    // Its next poll (backoff.maxDelay 1 s at most), not the holder's 30 s.
    expect(Date.now() - unlocked).toBeLessThan(1_500);
    // No subscription, and no attempt without a sleep before it.
    expect(waiter.events.filter((e) => e.type === "wait-strategy")).toEqual([]);
    expect(waiter.requests("acquire")).toBeLessThanOrEqual(
      waiter.events.filter((e) => e.type === "waiting").length + 1,
    );
    await lease?.release();
  });
});
