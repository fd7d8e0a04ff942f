/**
 * The libraries under test behind one small interface: a client (one isolate or process with
 * its own HTTP client or TCP connection) that acquires a lock with the library's own waiting
 * and releases it. Lease: 10 000 ms everywhere (the default of @upstash/lock and
 * redis-semaphore; edgelock and redlock are given it explicitly).
 * @module
 */
import { Lock as UpstashLock } from "@upstash/lock";
import { type BackoffOptions, DEFAULT_BACKOFF, EdgeLock, type LockEvent } from "edgelock";
import { Mutex } from "redis-semaphore";
import Redlock from "redlock";
import { type BenchEnv, messageArrivals } from "./env.js";
import { now } from "./stats.js";

/**
 * edgelock reads its streams itself (src/transport/sse.ts), past env.ts's hook on
 * `redis.subscribe`: a wait that ended before its bound ended on a message, so its `wait` event
 * dates that message (what follows it, building the lease, is not in it).
 */
function dateMessages(event: LockEvent): void {
  if (event.type === "wait" && event.durationMs < event.maxMs - 1) messageArrivals.push(now());
}

/** The keys of the Bench JSON (DESIGN.md). */
export const LIBRARY_NAMES = [
  "edgelock",
  "edgelock-poll",
  "edgelock-fair",
  "upstash-lock",
  "redlock",
  "redis-semaphore",
  "bare-handoff",
] as const;
export type LibraryName = (typeof LIBRARY_NAMES)[number];

/** `default`: the library's documented defaults. `sameBudget`: retries spanning edgelock's 10 s. */
export type WaitMode = "default" | "sameBudget";

/** A lock held by a client. */
export interface Held {
  release(): Promise<void>;
}

/** One simulated isolate/process of a library. */
export interface LibClient {
  /** One acquire call with the mode's waiting; `null` when the library gave up. */
  acquire(key: string): Promise<Held | null>;
  close(): Promise<void>;
}

/** A library under test. */
export interface Library {
  name: LibraryName;
  /** How it reaches Redis: through `@upstash/redis` and the bridge, or RESP over TCP. */
  transport: "http" | "tcp";
  /** What each mode means, in words, for RESULTS.md. */
  settings: Record<WaitMode, string>;
  /** False when `sameBudget` is the library's default already (run once, reported for both). */
  sameBudgetDiffers: boolean;
  /**
   * `waitMs`: edgelock's wait budget when not its default (the long-hold scenario). `timed`:
   * edgelock clients get the `onEvent` listener that dates wake-up messages (contended
   * scenarios); without it they run as a client without a listener does (scripts uncounted,
   * src/transport/billed.ts). Default true.
   */
  client(env: BenchEnv, mode: WaitMode, waitMs?: number, timed?: boolean): Promise<LibClient>;
}

/** Lease of every acquisition, ms. */
export const LEASE_MS = 10_000;
/** edgelock's default wait budget (`withLock` waitTime), which `sameBudget` gives the peers. */
export const WAIT_BUDGET_MS = 10_000;

/**
 * edgelock's reentrant lock: waiters subscribe and are woken by a release's message (the
 * default, `wait: "auto"`), or with `wait: "poll"` poll with its default backoff or with
 * `backoff`.
 */
export function edgelockLibrary(wait: "auto" | "poll", backoff?: BackoffOptions): Library {
  const b = { ...DEFAULT_BACKOFF, ...backoff };
  const described =
    wait === "auto"
      ? "waiters subscribe (SSE) and the release that frees the lock publishes to one of them (default wait)"
      : `wait: "poll", ${backoff ? "NON-DEFAULT " : "default "}backoff ${b.initialDelay} ms × ${b.multiplier} up to ${b.maxDelay} ms, equal jitter, bounded by the holder's PTTL`;
  return {
    name: wait === "auto" ? "edgelock" : "edgelock-poll",
    transport: "http",
    settings: {
      default: `tryLock({ waitTime: ${WAIT_BUDGET_MS}, leaseTime: ${LEASE_MS} }) (withLock's default wait); ${described}`,
      sameBudget: "same as default (edgelock defines the budget)",
    },
    sameBudgetDiffers: false,
    client: async (env, _mode, waitMs = WAIT_BUDGET_MS, timed = true) => {
      const edge = new EdgeLock({
        redis: env.http(),
        wait,
        ...(timed && { onEvent: dateMessages }),
        ...(backoff && { backoff }),
      });
      return {
        acquire: async (key) => {
          const lease = await edge.getLock(key).tryLock({ waitTime: waitMs, leaseTime: LEASE_MS });
          return lease && { release: async () => void (await lease.release()) };
        },
        close: async () => {},
      };
    },
  };
}

/**
 * edgelock's fair lock: waiters queue, subscribe, and take the lock from the release's hand-off
 * message.
 */
export const edgelockFairLibrary: Library = {
  name: "edgelock-fair",
  transport: "http",
  settings: {
    default: `getFairLock(key).tryLock({ waitTime: ${WAIT_BUDGET_MS}, leaseTime: ${LEASE_MS} }); waiters subscribe and hold the lock on the release's hand-off message`,
    sameBudget: "same as default (edgelock defines the budget)",
  },
  sameBudgetDiffers: false,
  client: async (env, _mode, waitMs = WAIT_BUDGET_MS, timed = true) => {
    const edge = new EdgeLock({ redis: env.http(), ...(timed && { onEvent: dateMessages }) });
    return {
      acquire: async (key) => {
        const lease = await edge
          .getFairLock(key)
          .tryLock({ waitTime: waitMs, leaseTime: LEASE_MS });
        return lease && { release: async () => void (await lease.release()) };
      },
      close: async () => {},
    };
  },
};

type UpstashLockOptions = ConstructorParameters<typeof UpstashLock>[0];
const UPSTASH_DELAY_MS = 100;
const upstashLock: Library = {
  name: "upstash-lock",
  transport: "http",
  settings: {
    default:
      "new Lock({ id, redis }): lease 10 000 ms, retry { attempts: 3, delay: 100 } (gives up after ~300 ms)",
    sameBudget: `retry { attempts: ${WAIT_BUDGET_MS / UPSTASH_DELAY_MS}, delay: ${UPSTASH_DELAY_MS} } (~${WAIT_BUDGET_MS} ms)`,
  },
  sameBudgetDiffers: true,
  client: async (env, mode) => {
    // @upstash/lock's declarations name the CommonJS build of @upstash/redis; same class.
    const redis = env.http() as unknown as UpstashLockOptions["redis"];
    const retry =
      mode === "sameBudget"
        ? { attempts: WAIT_BUDGET_MS / UPSTASH_DELAY_MS, delay: UPSTASH_DELAY_MS }
        : undefined;
    return {
      acquire: async (id) => {
        const lock = new UpstashLock({ id, redis, lease: LEASE_MS, ...(retry && { retry }) });
        if (!(await lock.acquire())) return null;
        return { release: async () => void (await lock.release()) };
      },
      close: async () => {},
    };
  },
};

const REDLOCK_DELAY_MS = 200;
const redlock: Library = {
  name: "redlock",
  transport: "tcp",
  settings: {
    default:
      "new Redlock([ioredis]): retryCount 10, retryDelay 200 ms, retryJitter 100 ms (gives up after ~2 s); acquire([key], 10 000)",
    sameBudget: `retryCount ${WAIT_BUDGET_MS / REDLOCK_DELAY_MS} (same delay and jitter, ~${WAIT_BUDGET_MS} ms)`,
  },
  sameBudgetDiffers: true,
  client: async (env, mode) => {
    const tcp = await env.tcp();
    const settings = mode === "sameBudget" ? { retryCount: WAIT_BUDGET_MS / REDLOCK_DELAY_MS } : {};
    const rl = new Redlock([tcp], settings);
    return {
      acquire: async (key) => {
        try {
          const lock = await rl.acquire([key], LEASE_MS);
          return { release: async () => void (await lock.release()) };
        } catch (error) {
          if (error instanceof Error && error.name === "ExecutionError") return null;
          throw error;
        }
      },
      close: async () => void tcp.disconnect(),
    };
  },
};

const redisSemaphore: Library = {
  name: "redis-semaphore",
  transport: "tcp",
  settings: {
    default:
      "new Mutex(ioredis, key): lockTimeout 10 000 ms, acquireTimeout 10 000 ms, retryInterval 10 ms, refreshInterval 8 000 ms",
    sameBudget: "same as default (its acquireTimeout is already 10 000 ms)",
  },
  sameBudgetDiffers: false,
  client: async (env) => {
    const tcp = await env.tcp();
    return {
      acquire: async (key) => {
        const mutex = new Mutex(tcp, key, { lockTimeout: LEASE_MS });
        if (!(await mutex.tryAcquire())) return null;
        return { release: () => mutex.release() };
      },
      close: async () => void tcp.disconnect(),
    };
  },
};

/**
 * Every library, edgelock first. `edgelockBackoff` replaces the backoff of edgelock's polling
 * waiters (for exploring the waiting policy; RESULTS.md flags it).
 */
export function createLibraries(edgelockBackoff?: BackoffOptions): readonly Library[] {
  return [
    edgelockLibrary("auto"),
    edgelockLibrary("poll", edgelockBackoff),
    edgelockFairLibrary,
    upstashLock,
    redlock,
    redisSemaphore,
  ];
}
