/**
 * What the runtime checks (`check:runtimes`, `check:next`) share: a throwaway redis-server behind
 * the REST bridge on free loopback ports, the stops an interrupted check must still make, and a
 * time limit on a step. A module of its own: run.ts and next.ts run their check when loaded.
 */
import { randomBytes } from "node:crypto";
import { startRedisServer } from "../../demo/redis-server.js";
import { startBridge } from "../../src/bridge/index.js";

/** What an interrupted run must still stop: the processes it started would outlive it. */
export const stops = new Set<() => Promise<unknown>>();
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void Promise.allSettled([...stops].map((stop) => stop())).finally(() => process.exit(130));
  });
}

/** Rejects after `ms` unless `work` settles first. */
export async function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Starts a redis-server and the REST bridge in front of it, with a fresh token; an interrupted
 * run stops the server. `close()` ends both.
 */
export async function startRedisBehindBridge() {
  const redis = await startRedisServer();
  stops.add(redis.stop);
  const token = randomBytes(16).toString("hex");
  const bridge = await startBridge({ redisUrl: redis.url, token }).catch(async (error: unknown) => {
    await redis.stop();
    throw error;
  });
  return {
    redisUrl: redis.url,
    bridgeUrl: bridge.url,
    token,
    close: async () => {
      await bridge.close();
      await redis.stop();
    },
  };
}
