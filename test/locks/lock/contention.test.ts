import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startBridge } from "../../../src/bridge/index.js";
import { bridgeRedis, keyPrefix } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";
import { startRedisServer } from "../../support/redis-server.js";

const prefix = keyPrefix();

describe("contention", () => {
  it("16 clients × 25 unguarded read-modify-writes: exact count, no overlapping sections", async () => {
    const name = `${prefix}counter-lock`;
    const counterKey = `${prefix}counter`;
    let inside = 0;
    let overlaps = 0;
    const clients = Array.from({ length: 16 }, () => recordingEdgeLock());
    await Promise.all(
      clients.map(async ({ edgelock, redis }) => {
        const lock = edgelock.getLock(name);
        for (let i = 0; i < 25; i++) {
          const lease = await lock.tryLock({ waitTime: 60_000, leaseTime: 10_000 });
          if (!lease) throw new Error("waitTime ran out");
          inside++;
          if (inside > 1) overlaps++;
          const value = Number((await redis.get<number>(counterKey)) ?? 0);
          await redis.set(counterKey, value + 1);
          inside--;
          expect(await lease.release()).toBe("released");
        }
      }),
    );
    expect(overlaps).toBe(0);
    expect(Number(await bridgeRedis().get<number>(counterKey))).toBe(400);
    const acquisitions = clients.flatMap((c) => c.events).filter((e) => e.type === "acquire");
    expect(acquisitions).toHaveLength(400);
    expect(acquisitions.every((e) => e.type === "acquire" && e.acquired)).toBe(true);
  });
});

describe("cold client", () => {
  let server: Awaited<ReturnType<typeof startRedisServer>>;
  let bridge: Awaited<ReturnType<typeof startBridge>>;
  const token = "cold-token-0123456789";
  beforeAll(async () => {
    server = await startRedisServer();
    bridge = await startBridge({ redisUrl: server.url, token });
  });
  afterAll(async () => {
    await bridge.close();
    await server.stop();
  });

  it("a Redis without the scripts cached costs one extra request, once", async () => {
    const rec = recordingEdgeLock({}, bridgeRedis({}, { url: bridge.url, token }));
    const lock = rec.edgelock.getLock(`${prefix}cold`);
    await (await lock.tryLock({ leaseTime: 5_000 }))?.release();
    expect(rec.requests("acquire")).toBe(2); // EVALSHA → NOSCRIPT, then EVAL
    expect(rec.requests("release")).toBe(1); // the cache is known cold: EVAL at once
    rec.events.length = 0;
    await (await lock.tryLock({ leaseTime: 5_000 }))?.release();
    expect(rec.requests()).toBe(2);
    expect(bridge.stats().byCommand).toMatchObject({ evalsha: 3, eval: 2 });
  });
});
