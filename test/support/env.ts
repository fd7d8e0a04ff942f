/**
 * Helpers for test files: clients for the shared bridge and Redis started by
 * `test/global-setup.ts`, key prefixes, bridge control over HTTP and private bridges.
 */

import { randomBytes } from "node:crypto";
import { createClient, RESP_TYPES } from "@redis/client";
import type { RedisConfigNodejs } from "@upstash/redis";
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, inject } from "vitest";
import type { Bridge, BridgeOptions, BridgeStats, FaultConfig } from "../../src/bridge/index.js";
import { startBridge } from "../../src/bridge/index.js";

/** Where a bridge listens and the token it wants. */
export interface BridgeEndpoint {
  url: string;
  token: string;
}

/** The shared bridge of this test run. */
export function sharedBridge(): BridgeEndpoint {
  return { url: inject("bridgeUrl"), token: inject("bridgeToken") };
}

/**
 * A real `@upstash/redis` client on the shared bridge (or on `endpoint`), with the client's own
 * defaults unless overridden: auto-pipelining on, base64 response encoding on, 5 retries on
 * network errors, automatic JSON deserialisation on.
 */
export function bridgeRedis(
  options: Partial<RedisConfigNodejs> = {},
  endpoint: BridgeEndpoint = sharedBridge(),
): Redis {
  return new Redis({ url: endpoint.url, token: endpoint.token, ...options });
}

/**
 * A fresh random key prefix such as `t:3f9a1c2b:`. Call it once at the top of a test file and
 * build every key from it; never flush the shared Redis.
 */
export function keyPrefix(): string {
  return `t:${randomBytes(4).toString("hex")}:`;
}

/** The control endpoints of a bridge, over HTTP (tests run in workers, not beside the setup). */
export interface BridgeControl {
  /** `POST /__bridge/faults`: replaces the fault configuration. */
  setFaults(faults: FaultConfig): Promise<void>;
  /** `DELETE /__bridge/faults`. */
  clearFaults(): Promise<void>;
  /** `GET /__bridge/stats`. */
  stats(): Promise<BridgeStats>;
  /** `POST /__bridge/stats/reset`. */
  resetStats(): Promise<void>;
}

/**
 * Control of the shared bridge (or of `endpoint`). The shared bridge is shared by every test file
 * running at the same time: prefer {@link startPrivateBridge} for faults and exact stats.
 */
export function bridgeControl(endpoint: BridgeEndpoint = sharedBridge()): BridgeControl {
  const call = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const response = await fetch(`${endpoint.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${endpoint.token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const parsed: unknown = await response.json();
    if (!response.ok) {
      throw new Error(
        `${method} ${path} failed with ${response.status}: ${JSON.stringify(parsed)}`,
      );
    }
    return parsed;
  };
  return {
    setFaults: async (faults) => {
      await call("POST", "/__bridge/faults", faults);
    },
    clearFaults: async () => {
      await call("DELETE", "/__bridge/faults");
    },
    stats: async () => (await call("GET", "/__bridge/stats")) as BridgeStats,
    resetStats: async () => {
      await call("POST", "/__bridge/stats/reset");
    },
  };
}

/** Opens a direct RESP2 client (bulk strings as `Buffer`) on the shared redis-server. */
export async function connectRaw(url: string) {
  const client = createClient({ url, RESP: 2, disableClientInfo: true }).withTypeMapping({
    [RESP_TYPES.BLOB_STRING]: Buffer,
  });
  client.on("error", () => undefined);
  await client.connect();
  return client;
}

/** A connected direct client, for assertions behind the bridge's back. Call `close()` after. */
export type RawRedis = Awaited<ReturnType<typeof connectRaw>>;

/**
 * A connected `@redis/client` client (RESP2; bulk strings come back as `Buffer`) on the shared
 * redis-server. Close it with `await client.close()`.
 */
export function rawRedis(): Promise<RawRedis> {
  return connectRaw(inject("redisUrl"));
}

/** A bridge started inside the test worker, with its own stats and faults. */
export interface PrivateBridge extends BridgeEndpoint {
  /** The in-process bridge (direct `setFaults`, `stats`, ...). */
  bridge: Bridge;
  /** A client on this bridge; same defaults as {@link bridgeRedis}. */
  redis(options?: Partial<RedisConfigNodejs>): Redis;
  /** The HTTP control endpoints of this bridge. */
  control: BridgeControl;
  /** Closes the bridge. */
  close(): Promise<void>;
}

/**
 * Starts a second bridge in this worker on the shared redis-server, with a random token and
 * `faults` from the start. Close it in `afterAll`/`afterEach`.
 */
export async function startPrivateBridge(
  faults?: FaultConfig,
  options: Partial<BridgeOptions> = {},
): Promise<PrivateBridge> {
  const token = randomBytes(16).toString("hex");
  const bridge = await startBridge({ redisUrl: inject("redisUrl"), token, faults, ...options });
  const endpoint = { url: bridge.url, token };
  return {
    ...endpoint,
    bridge,
    redis: (options) => bridgeRedis(options, endpoint),
    control: bridgeControl(endpoint),
    close: () => bridge.close(),
  };
}

/**
 * A handle usable at a test file's top level whose target opens in `beforeAll` and closes in
 * `afterAll`; touching it outside a test throws.
 */
function perFile<T extends object>(
  open: () => Promise<T>,
  close: (t: T) => Promise<void>,
  what: string,
): T {
  let target: T | undefined;
  beforeAll(async () => {
    target = await open();
  });
  afterAll(async () => {
    if (target) await close(target);
  });
  return new Proxy({} as T, {
    get(_, key) {
      if (!target) throw new Error(`${what} is only open while the file's tests run`);
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** {@link rawRedis} for a whole test file: `const raw = useRawRedis();` at the top level. */
export function useRawRedis(): RawRedis {
  return perFile(rawRedis, (client) => client.close(), "the raw Redis client");
}

/** {@link startPrivateBridge} for a whole test file: `const bridge = usePrivateBridge();`. */
export function usePrivateBridge(faults?: FaultConfig): PrivateBridge {
  return perFile(
    () => startPrivateBridge(faults),
    (b) => b.close(),
    "the private bridge",
  );
}
