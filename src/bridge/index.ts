/**
 * `edgelock/bridge`: an Upstash-REST-compatible HTTP bridge to a real Redis, for tests and local
 * development (Node only). It speaks what `@upstash/redis` sends (`POST /`, `/pipeline`,
 * `/multi-exec`, base64 response encoding) and can inject faults such as lost responses.
 *
 * @example
 * ```ts
 * import { startBridge } from "edgelock/bridge";
 * import { Redis } from "@upstash/redis";
 *
 * const bridge = await startBridge({ redisUrl: "redis://127.0.0.1:6379", token: "dev" });
 * const redis = new Redis({ url: bridge.url, token: "dev" });
 * await redis.set("k", "v");
 * await bridge.close();
 * ```
 *
 * @module
 */

import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { FaultConfig } from "./faults.js";
import { FaultInjector } from "./faults.js";
import type { RequestLogEntry } from "./log.js";
import { DEFAULT_BLOCKING_CONNECTIONS, RedisBackend } from "./redis.js";
import { createBridgeApp } from "./server.js";
import type { BridgeStats } from "./stats.js";
import { StatsRecorder } from "./stats.js";

export type { FaultConfig, FaultRule } from "./faults.js";
export type { RequestLogEntry } from "./log.js";
export type { BlockingPoolStats } from "./redis.js";
export { DEFAULT_BLOCKING_CONNECTIONS, RedisUnavailableError } from "./redis.js";
export type { BridgeStats } from "./stats.js";

/** Options of {@link startBridge}. */
export interface BridgeOptions {
  /** Redis to forward to, e.g. `redis://127.0.0.1:6379` (password and db in the URL work). */
  redisUrl: string;
  /** Bearer token clients must present (`Authorization: Bearer <token>` or `?_token=`). */
  token: string;
  /** TCP port to listen on. Default: `0`, a free port chosen by the OS (see {@link Bridge.port}). */
  port?: number;
  /** Interface to bind. Default: `"127.0.0.1"`. */
  host?: string;
  /** Initial fault configuration. Default: no faults. */
  faults?: FaultConfig;
  /**
   * The most Redis connections serving blocking commands at once (`BLPOP`, `BRPOP`, `BLMOVE`,
   * `BRPOPLPUSH`, `BLMPOP`, `BZPOPMIN`, `BZPOPMAX`, `BZMPOP`, `XREAD`/`XREADGROUP ... BLOCK`,
   * `WAIT`, `WAITAOF`). Each such request (a single command, or a whole `/pipeline` holding one)
   * runs on a pooled connection of its own, so it never delays other requests; a request that
   * finds all of them busy is answered 503 at once (it never reached Redis: retrying is safe). A
   * client that disconnects mid-block frees its connection at once. `0` answers every blocking
   * command with 400, like a REST server without blocking support. Inside `/multi-exec` Redis
   * never blocks (the commands act as their non-blocking forms), so those stay on the
   * transaction connection. Default: {@link DEFAULT_BLOCKING_CONNECTIONS} (64).
   */
  blockingConnections?: number;
  /**
   * Request log: called once per answered request with its route, status, duration and command
   * names (never the token, the query string or command arguments). Default: no log.
   */
  log?: (entry: RequestLogEntry) => void;
}

/**
 * Checks that `url` is a `redis://` or `rediss://` URL. A URL without a scheme
 * (`127.0.0.1:6379`) gets a message suggesting `redis://127.0.0.1:6379`.
 * @throws TypeError naming `what` (e.g. `--redis-url`) otherwise.
 */
export function checkRedisUrl(url: string, what = "redisUrl"): string {
  let protocol: string | undefined;
  try {
    protocol = new URL(url).protocol;
  } catch {
    protocol = undefined;
  }
  if (protocol === "redis:" || protocol === "rediss:") return url;
  const bare = /^[^/:@\s]+(:\d+)?$/.test(url) || /^\[[0-9a-f:.]+\](:\d+)?$/i.test(url);
  const hint = bare ? `: did you mean redis://${url}?` : ", e.g. redis://127.0.0.1:6379";
  throw new TypeError(`${what} must be a redis:// or rediss:// URL${hint}`);
}

/** A running bridge. */
export interface Bridge {
  /** Base URL for `new Redis({ url })`, e.g. `http://127.0.0.1:41234` (no trailing slash). */
  url: string;
  /** The port actually bound. */
  port: number;
  /** Replaces the fault configuration; resets rule counters and re-seeds the PRNG. */
  setFaults(faults: FaultConfig): void;
  /** Removes every fault rule and the added latency. */
  clearFaults(): void;
  /** Counters since start or the last {@link Bridge.resetStats}. */
  stats(): BridgeStats;
  /** Sets every counter (including `faultsInjected`) back to zero. */
  resetStats(): void;
  /**
   * Stops listening, destroys open sockets (hanging responses included), then closes the Redis
   * connections. Leaves no handles behind. Idempotent.
   */
  close(): Promise<void>;
}

/**
 * Connects to Redis, then starts the HTTP server.
 *
 * @throws RedisUnavailableError when Redis cannot be reached at start.
 * @throws TypeError when `options.redisUrl` is not a `redis://`/`rediss://` URL, or
 * `options.faults`, `options.log` or `options.blockingConnections` is invalid.
 */
export async function startBridge(options: BridgeOptions): Promise<Bridge> {
  checkRedisUrl(options.redisUrl);
  if (options.log !== undefined && typeof options.log !== "function") {
    throw new TypeError("`log` must be a function");
  }
  const blocking = options.blockingConnections;
  if (blocking !== undefined && !(Number.isSafeInteger(blocking) && blocking >= 0)) {
    throw new TypeError("`blockingConnections` must be an integer >= 0");
  }
  const faults = new FaultInjector(options.faults ?? {});
  const stats = new StatsRecorder();
  const redis = await RedisBackend.connect(options.redisUrl, {
    max: options.blockingConnections ?? DEFAULT_BLOCKING_CONNECTIONS,
    idleMs: 30_000,
  });
  const closing = new AbortController();
  const app = createBridgeApp({
    token: options.token,
    redis,
    faults,
    stats,
    closing: closing.signal,
    log: options.log,
  });
  const host = options.host ?? "127.0.0.1";

  let server: ReturnType<typeof serve>;
  let port: number;
  try {
    ({ server, port } = await new Promise<{ server: ReturnType<typeof serve>; port: number }>(
      (resolve, reject) => {
        const created = serve(
          {
            fetch: app.fetch,
            port: options.port ?? 0,
            hostname: host,
            overrideGlobalObjects: false,
          },
          (info: AddressInfo) => resolve({ server: created, port: info.port }),
        );
        created.once("error", reject);
      },
    ));
  } catch (error) {
    await redis.close();
    throw error;
  }

  let closed: Promise<void> | undefined;
  const close = async (): Promise<void> => {
    closing.abort();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      if ("closeAllConnections" in server) server.closeAllConnections();
    });
    await redis.close();
  };

  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`,
    port,
    setFaults: (config) => faults.set(config),
    clearFaults: () => faults.clear(),
    stats: () => stats.snapshot(faults.injected, redis.blockingPool.stats()),
    resetStats: () => {
      stats.reset();
      faults.resetCount();
      redis.blockingPool.resetCount();
    },
    close: () => {
      closed ??= close();
      return closed;
    },
  };
}
