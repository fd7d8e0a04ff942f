/**
 * Independent endpoints for multi-Redis tests: each its own redis-server, its own in-process
 * bridge (with its own faults and stats) and a raw client behind the bridge's back.
 */
import { randomBytes } from "node:crypto";
import type { Redis, RedisConfigNodejs } from "@upstash/redis";
import { afterAll, beforeAll } from "vitest";
import { startRedisServer } from "../../demo/redis-server.js";
import { type Bridge, startBridge } from "../../src/bridge/index.js";
import { EdgeLock, type EdgeLockOptions } from "../../src/index.js";
import { bridgeRedis, connectRaw, type RawRedis } from "./env.js";

/** One independent Redis behind its own bridge. */
export interface Endpoint {
  bridge: Bridge;
  raw: RawRedis;
  /** A client on this endpoint's bridge, with `@upstash/redis`'s defaults (5 retries) unless overridden. */
  redis(options?: Partial<RedisConfigNodejs>): Redis;
  /** A new EdgeLock on this endpoint (no client retries by default, so faults show at once). */
  edgelock(options?: Partial<EdgeLockOptions>): EdgeLock;
}

/** Starts `n` endpoints for the test file (in `beforeAll`; stopped in `afterAll`). */
export function useEndpoints(n: number): Endpoint[] {
  const endpoints: Endpoint[] = [];
  const stops: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const server = await startRedisServer();
        const token = randomBytes(16).toString("hex");
        const bridge = await startBridge({ redisUrl: server.url, token });
        const raw = await connectRaw(server.url);
        stops.push(async () => {
          await raw.close();
          await bridge.close();
          await server.stop();
        });
        endpoints[i] = {
          bridge,
          raw,
          redis: (options) => bridgeRedis(options, { url: bridge.url, token }),
          edgelock: (options) =>
            new EdgeLock({
              redis: bridgeRedis({ retry: { retries: 0 } }, { url: bridge.url, token }),
              ...options,
            }),
        };
      }),
    );
  }, 60_000);
  afterAll(async () => {
    await Promise.all(stops.map((stop) => stop()));
  });
  return endpoints;
}
