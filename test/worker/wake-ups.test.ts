/**
 * Wake-ups inside workerd: `@upstash/redis/cloudflare`'s own `subscribe()` reads the bridge's
 * Server-Sent Events unchanged, and an edgelock waiter in a Worker is woken by a release's
 * message instead of polling.
 */
import { describe, expect, it } from "vitest";
import { keyPrefix, recordingEdgeLock, redisOn } from "./support.js";

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
});
