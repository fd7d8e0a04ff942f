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
import { ClusterBackend } from "./cluster.js";
import type { BlockingMode } from "./commands.js";
import type { FaultConfig } from "./faults.js";
import { FaultInjector } from "./faults.js";
import type { RequestLogEntry } from "./log.js";
import { DEFAULT_MAX_SUBSCRIPTIONS, Subscriptions } from "./pubsub.js";
import { type Backend, DEFAULT_BLOCKING_CONNECTIONS, RedisBackend } from "./redis.js";
import { createBridgeApp } from "./server.js";
import type { BridgeStats } from "./stats.js";
import { StatsRecorder } from "./stats.js";

export type { BlockingMode } from "./commands.js";
export type { FaultConfig, FaultLimit, FaultRule } from "./faults.js";
export type { RequestLogEntry } from "./log.js";
export { DEFAULT_MAX_SUBSCRIPTIONS } from "./pubsub.js";
export type { BlockingPoolStats } from "./redis.js";
export { DEFAULT_BLOCKING_CONNECTIONS, RedisUnavailableError } from "./redis.js";
export type { BridgeStats } from "./stats.js";

/** Where a bridge in front of a Redis Cluster finds it: see {@link BridgeOptions.cluster}. */
export interface BridgeClusterOptions {
  /**
   * URLs of some nodes of the cluster (one is enough, all is safer), e.g.
   * `["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]`: the bridge discovers the others
   * from them. Username, password and `rediss://` (TLS) of the first apply to every node.
   */
  rootNodes: string[];
}

/** Options of {@link startBridge}. */
export interface BridgeOptions {
  /**
   * Redis to forward to, e.g. `redis://127.0.0.1:6379` (password and db in the URL work).
   * Required unless {@link BridgeOptions.cluster} is given (never both).
   */
  redisUrl?: string;
  /**
   * Front a Redis Cluster instead of one server (`@redis/client`'s cluster client, RESP2). Each
   * command goes to the master owning its first key's slot (`EVAL`/`EVALSHA`: the first of their
   * keys); commands without keys go where the cluster client routes them (`SCRIPT LOAD` and
   * `SCRIPT FLUSH` to every master). A `/multi-exec` whose keys span slots is answered 400
   * (`CROSSSLOT ...`) without reaching Redis, and so is a request holding a blocking command
   * whose keys live on several nodes; a blocking command otherwise runs on a pooled connection
   * to its key's node. Each master has its own script cache, so `EVALSHA` may answer `NOSCRIPT`
   * on one node after another ran the script. Faults and stats work as on one server.
   */
  cluster?: BridgeClusterOptions;
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
   * How blocking commands (see {@link BridgeOptions.blockingConnections}) are answered:
   * `"refuse"` with 400, as the Upstash REST API lists them as not supported over REST;
   * `"instant"` at once, as their non-blocking forms would (the element, or null); `"block"` held
   * open until they return. Changeable at run time ({@link Bridge.setBlocking}).
   * Default: `"refuse"`.
   */
  blocking?: BlockingMode;
  /**
   * The most pub/sub subscriptions (`POST /subscribe/<channel>`, `/psubscribe/<pattern>`, each
   * a Server-Sent Events stream on a Redis connection of its own) open at once; one more is
   * answered 503. Default: {@link DEFAULT_MAX_SUBSCRIPTIONS} (256).
   */
  maxSubscriptions?: number;
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

/** The Redis URL, or the cluster's root node URLs, after checking that exactly one is given. */
function checkTarget(options: BridgeOptions): string | string[] {
  const { redisUrl, cluster } = options;
  if (cluster === undefined) {
    if (redisUrl === undefined) throw new TypeError("`redisUrl` or `cluster` is required");
    return checkRedisUrl(redisUrl);
  }
  if (redisUrl !== undefined) throw new TypeError("pass `redisUrl` or `cluster`, not both");
  const rootNodes: unknown = cluster?.rootNodes;
  if (!Array.isArray(rootNodes) || rootNodes.length === 0) {
    throw new TypeError("`cluster.rootNodes` must be a non-empty array of redis:// URLs");
  }
  return rootNodes.map((url, i) => checkRedisUrl(String(url), `cluster.rootNodes[${i}]`));
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
  /** Changes how blocking commands are answered (see {@link BridgeOptions.blocking}). */
  setBlocking(mode: BlockingMode): void;
  /** Ends every open subscription stream, as a lost connection to Redis would. */
  dropSubscriptions(): void;
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
 * Connects to Redis (or to a Redis Cluster), then starts the HTTP server.
 *
 * @throws RedisUnavailableError when Redis cannot be reached at start (with `cluster`: when no
 * root node answers).
 * @throws TypeError when `options.redisUrl` (or a root node) is not a `redis://`/`rediss://`
 * URL, when neither or both of `redisUrl` and `cluster` are given, or when `options.faults`,
 * `options.log` or `options.blockingConnections` is invalid.
 */
export async function startBridge(options: BridgeOptions): Promise<Bridge> {
  const target = checkTarget(options);
  if (options.log !== undefined && typeof options.log !== "function") {
    throw new TypeError("`log` must be a function");
  }
  const blocking = options.blockingConnections;
  if (blocking !== undefined && !(Number.isSafeInteger(blocking) && blocking >= 0)) {
    throw new TypeError("`blockingConnections` must be an integer >= 0");
  }
  const mode = options.blocking ?? "refuse";
  if (mode !== "refuse" && mode !== "instant" && mode !== "block") {
    throw new TypeError('`blocking` must be "refuse", "instant" or "block"');
  }
  const maxSubscriptions = options.maxSubscriptions ?? DEFAULT_MAX_SUBSCRIPTIONS;
  if (!(Number.isSafeInteger(maxSubscriptions) && maxSubscriptions >= 0)) {
    throw new TypeError("`maxSubscriptions` must be an integer >= 0");
  }
  const blockingState = { mode };
  const faults = new FaultInjector(options.faults ?? {});
  const stats = new StatsRecorder();
  const pool = { max: options.blockingConnections ?? DEFAULT_BLOCKING_CONNECTIONS, idleMs: 30_000 };
  const redis: Backend =
    typeof target === "string"
      ? await RedisBackend.connect(target, pool)
      : await ClusterBackend.connect(target, pool);
  const closing = new AbortController();
  const subscriptions = new Subscriptions(
    (kind, channel) =>
      kind === "subscribe"
        ? redis.subscriptionUrl(channel)
        : Promise.resolve(redis.blockingPool.url),
    maxSubscriptions,
  );
  const app = createBridgeApp({
    token: options.token,
    redis,
    subscriptions,
    blocking: blockingState,
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
    subscriptions.close();
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
    setBlocking: (next) => {
      if (next !== "refuse" && next !== "instant" && next !== "block") {
        throw new TypeError('mode must be "refuse", "instant" or "block"');
      }
      blockingState.mode = next;
    },
    dropSubscriptions: () => subscriptions.dropAll(),
    stats: () =>
      stats.snapshot(faults.injected, redis.blockingPool.stats(), {
        open: subscriptions.open,
        max: subscriptions.max,
      }),
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
