/**
 * Wake-ups inside workerd: `@upstash/redis/cloudflare`'s own `subscribe()` reads the bridge's
 * Server-Sent Events unchanged, an edgelock waiter in a Worker is woken by a release's message
 * instead of polling, and it notices a stream that the host ends (edgelock reads the stream
 * itself, over the client's URL and token).
 */
import { describe, expect, it } from "vitest";
import {
  keyPrefix,
  recordingEdgeLock,
  redisOn,
  workerBridge,
  workerBridgeControl,
} from "./support.js";

const prefix = keyPrefix();

describe("pub/sub in workerd", () => {
  it("@upstash/redis/cloudflare subscribe() gets the confirmation and a PUBLISH", async () => {
    const redis = redisOn();
    const channel = `${prefix}ch`;
    const subscriber = redis.subscribe([channel]);
    const confirmed = new Promise((resolve) => subscriber.on("subscribe", resolve));
    const message = new Promise((resolve) => subscriber.on("message", resolve));
    expect(await confirmed).toBe(1);
    expect(await redis.publish(channel, "w|1")).toBe(1);
    expect(await message).toEqual({ channel, message: "w|1" });
    await subscriber.unsubscribe();
  });

  it("a waiting Worker is handed the lock by the release's message: it subscribes once and never polls", async () => {
    const name = `${prefix}lock`;
    const holder = recordingEdgeLock();
    const held = await holder.edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 15_000, leaseTime: 5_000 });
    await waiter.until((_e, all) => all.filter((e) => e.type === "waiting").length === 2);
    const released = Date.now();
    await held.release();
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect(Date.now() - released).toBeLessThan(2_000);
    expect(waiter.events.filter((e) => e.type === "wait-strategy")).toEqual([
      expect.objectContaining({ strategy: "subscribe" }),
    ]);
    // Busy attempt, subscription, registering attempt; the release's message hands it the lock.
    expect(waiter.requests("acquire")).toBe(3);
    await lease?.release();
  });

  it("a stream the host ends mid-wait is noticed: the Worker subscribes again, and the release hands it the lock", async () => {
    // Every stream of the worker bridge ends 1.2 s after its confirmation.
    await workerBridgeControl.setFaults({ streamLifetimeMs: 1_200 });
    try {
      const name = `${prefix}ended`;
      const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
      const waiter = recordingEdgeLock({ redis: redisOn(workerBridge) });
      const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 15_000, leaseTime: 5_000 });
      // Subscribed, the stream ended, subscribed again and registered with the attempt after it.
      await waiter.until((_e, all) => all.filter((e) => e.type === "waiting").length === 3);
      expect(waiter.events.filter((e) => e.type === "wait-strategy")).toEqual([
        expect.objectContaining({ strategy: "subscribe" }),
        expect.objectContaining({ strategy: "subscribe" }),
      ]);
      const released = Date.now();
      await held.release();
      const lease = await pending;
      expect(lease).not.toBeNull();
      expect(Date.now() - released).toBeLessThan(1_000);
      // Busy attempt; per stream, the subscription and one attempt; the hand-off needs none.
      expect(waiter.requests("acquire")).toBe(5);
      await lease?.release();
    } finally {
      await workerBridgeControl.clearFaults();
    }
  });
});
