/**
 * The core client every primitive's entry builds on: options, the script runner, the wake-up
 * subscriptions and the event listener, and no primitive. `EdgeLock` (client.ts) is this client
 * with a factory method per primitive; `edgelock/lock`, `edgelock/semaphore`, ... take it as
 * their first argument (`getLock(client, name)`), so a bundle holds only the primitives it uses.
 * @module
 */

import type { LockContext } from "./context.js";
import type { LockEvent, LockEventListener } from "./events.js";
import { randomHex } from "./ids.js";
import type { LeaseKeeperBinding } from "./keeper.js";
import {
  DEFAULT_DEFINITE_WITHIN_REQUEST_TIMEOUTS,
  DEFAULT_MAX_SUBSCRIPTIONS,
  DEFAULT_REPLAY_WINDOW_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_WATCHDOG_TIMEOUT_MS,
  MAX_CLIENT_ID_LENGTH,
  MIN_REPLAY_WINDOW_MS,
  MIN_REQUEST_TIMEOUT_MS,
  MIN_WATCHDOG_TIMEOUT_MS,
} from "./limits.js";
import { type RedisLike, ScriptRunner } from "./transport/index.js";
import { checkFunction, checkMs, checkOptions, checkText } from "./validate.js";
import { type BackoffOptions, resolveBackoff } from "./wait/backoff.js";

/** Options of {@link EdgeLockClient} and {@link EdgeLock}. Times in integer ms. */
export interface EdgeLockOptions {
  /** Any `@upstash/redis` client (`Redis.fromEnv()`, `new Redis({ url, token })`). Required. */
  redis: RedisLike;
  /**
   * Prefix of every owner this instance creates (`<clientId>:<taskId>`), 1–128 characters.
   * @default 32 random hex characters (128 bits from Web Crypto) per EdgeLock instance
   */
  clientId?: string;
  /**
   * Lease of locks acquired without `leaseTime` (watchdog mode), renewed every third of it by
   * the keep-alive. Integer ms ≥ 100. Redisson's `lockWatchdogTimeout`. @default 30000
   */
  watchdogTimeout?: number;
  /**
   * Local time limit of every Redis call, in integer ms ≥ 10. A call past it fails with an
   * ambiguous {@link TransportError} (it may still be applied: every script is replay-safe).
   * Acquires and releases send another copy of their request (same request id) after a failed
   * copy, or one unanswered for the client's measured round trip plus four deviations (at
   * least 100 ms, at most a third of this); an acquire throws only when no copy was answered
   * within its wait budget (at least this long), and is then cancelled in the background. Keep-alive renewals use at most a sixth
   * of their lease, so a hung one is retried before the lease runs out. @default 3000
   */
  requestTimeout?: number;
  /**
   * How long replay records (what each request id did, so a resent request applies once) live,
   * in integer ms ≥ 1000. Must cover how long a copy of a request can still reach Redis: the
   * default is the larger of 30 000 and 10 × `requestTimeout`. A record is a STRING
   * `edgelock_replay:{<name>}:<request id>` that lives exactly this long, written only where the
   * lock itself cannot tell what a request did; give every client of a name the same window.
   * @default max(30000, 10 × requestTimeout)
   */
  replayWindow?: number;
  /**
   * How long a call that its caller cannot repeat safely — the release of any lease (every lock
   * kind, permit leases), `unlock`, a semaphore's `release(permits)`, `addPermits`,
   * `trySetPermits`, a latch's `countDown` and `trySetCount` — resends its own request (same
   * request id: it applies at most once) until Redis answers, in integer ms in
   * [0, `replayWindow` / 2]. The first send has the full `requestTimeout`; another copy follows
   * a failed one after a backoff pause (50 ms doubling to 1 s, jittered), or a copy unanswered
   * for the client's measured round trip plus four deviations (at least 100 ms, at most a third
   * of `requestTimeout`), each ending by this bound. Only past it does the
   * call throw an ambiguous {@link TransportError}; the request is then resent in the background
   * until Redis answers or half the `replayWindow` has passed, and a `settle` event says which.
   * 0: one send, then background resends only.
   * @default min(3 × requestTimeout, replayWindow / 2)
   */
  definiteWithin?: number;
  /**
   * How waiters wait between attempts:
   * - `"subscribe"`: for a release's message over pub/sub (`redis.subscribe()`, which the REST
   *   API serves as Server-Sent Events): a busy attempt registers the waiter and the release
   *   that frees the lock (or hands a fair lock on, or frees permits, or opens a latch) wakes
   *   exactly the waiters it can serve. One subscription per client and name, shared by its
   *   waits, open while they wait and 1 s after; each wait is still
   *   bounded by the holder's TTL and the time left. Throws at construction if the client has no
   *   `subscribe`.
   * - `"poll"`: sleep with `backoff` between attempts (bounded by the holder's TTL).
   * - `"auto"`: `"subscribe"` where the client has `subscribe` (`@upstash/redis` ≥ 1.35), else
   *   `"poll"`. A wait that finds `maxSubscriptions` open, or whose subscription fails, polls.
   * - `"block"`: deprecated, the same as `"auto"` (waiters no longer use BLPOP, which the Upstash
   *   REST API lists as not supported).
   * @default "auto"
   */
  wait?: "auto" | "subscribe" | "poll" | "block";
  /**
   * Most wake-up subscriptions (each one long-lived HTTP request) this client keeps open at
   * once, integer ≥ 0; a wait beyond it polls. A Worker invocation may keep 6 connections open.
   * 0 = never subscribe. @default 4
   */
  maxSubscriptions?: number;
  /** Backoff between acquire attempts while waiting. See {@link BackoffOptions}. */
  backoff?: BackoffOptions;
  /** Default `LeaseKeeper` Durable Object namespace for `keepAlive: { maxHoldTime }`. */
  keeper?: LeaseKeeperBinding;
  /**
   * Receives acquire/wait/renew/release/lost/error events. Must not throw. With a listener,
   * scripts are sent inside the wrapper that counts their billed commands (`event.billed`);
   * without one, as they are (same bill, a little less work per request: docs/cost.md).
   */
  onEvent?: LockEventListener;
  /**
   * Keeps background work alive past the response (cancelling an acquire whose answer never
   * arrived). Pass `ctx.waitUntil.bind(ctx)` on Workers, `waitUntil` from `@vercel/functions`.
   * @default none: the work runs as a detached promise
   */
  waitUntil?: (promise: Promise<unknown>) => void;
  /**
   * The Redis behind the REST API is a Redis Cluster. Every script of a primitive touches keys
   * of one hash slot only (all its keys carry the name as hash tag, `{<name>}`), so only requests
   * spanning several names change: the batched renewal of many leases (the `LeaseKeeper` alarm)
   * is split into one request per hash slot of the names, instead of one request that Redis
   * Cluster would refuse with CROSSSLOT. @default false
   */
  cluster?: boolean;
}

/**
 * The Redis client and configuration that primitives are built on, without any primitive: pass
 * it to the functions of the primitives' entries (`getLock(client, name)` from `edgelock/lock`,
 * `getSemaphore(client, name)` from `edgelock/semaphore`, ...). An {@link EdgeLock} is one too.
 *
 * @example
 * ```ts
 * import { Redis } from "@upstash/redis";
 * import { EdgeLockClient, getLock } from "edgelock/lock";
 * const client = new EdgeLockClient({ redis: Redis.fromEnv() });
 * const lease = await getLock(client, "invoice:42").tryLock({ waitTime: 2_000 });
 * ```
 */
export class EdgeLockClient {
  /** Prefix of the owners this instance creates. */
  readonly clientId: string;
  /** Lease of watchdog-mode locks, in ms. */
  readonly watchdogTimeout: number;
  /** Local time limit of every Redis call, in ms. */
  readonly requestTimeout: number;
  /** How long replay records live, in ms. */
  readonly replayWindow: number;
  /** How long a call its caller cannot repeat safely resends its request, in ms. */
  readonly definiteWithin: number;

  /** @throws TypeError / RangeError for bad options. */
  constructor(options: EdgeLockOptions) {
    const o = checkOptions(options, "EdgeLock", [
      "redis",
      "clientId",
      "watchdogTimeout",
      "requestTimeout",
      "replayWindow",
      "definiteWithin",
      "wait",
      "backoff",
      "keeper",
      "onEvent",
      "waitUntil",
      "cluster",
      "maxSubscriptions",
    ]);
    const redis = o.redis as Partial<RedisLike> | undefined;
    if (!redis || typeof redis.eval !== "function" || typeof redis.evalsha !== "function") {
      throw new TypeError("`redis` must be an @upstash/redis client (with eval and evalsha)");
    }
    if (o.clientId !== undefined) checkText(o.clientId, "clientId", MAX_CLIENT_ID_LENGTH);
    if (o.keeper !== undefined && typeof o.keeper.getByName !== "function") {
      throw new TypeError("`keeper` must be a LeaseKeeper Durable Object namespace");
    }
    const onEvent = checkFunction<LockEventListener>(o.onEvent, "onEvent");
    const waitUntil = checkFunction<(p: Promise<unknown>) => void>(o.waitUntil, "waitUntil");
    this.clientId = o.clientId ?? randomHex();
    this.watchdogTimeout =
      o.watchdogTimeout === undefined
        ? DEFAULT_WATCHDOG_TIMEOUT_MS
        : checkMs(o.watchdogTimeout, "watchdogTimeout", MIN_WATCHDOG_TIMEOUT_MS);
    this.requestTimeout =
      o.requestTimeout === undefined
        ? DEFAULT_REQUEST_TIMEOUT_MS
        : checkMs(o.requestTimeout, "requestTimeout", MIN_REQUEST_TIMEOUT_MS);
    this.replayWindow =
      o.replayWindow === undefined
        ? Math.max(DEFAULT_REPLAY_WINDOW_MS, 10 * this.requestTimeout)
        : checkMs(o.replayWindow, "replayWindow", MIN_REPLAY_WINDOW_MS);
    this.definiteWithin = checkDefiniteWithin(
      o.definiteWithin,
      this.requestTimeout,
      this.replayWindow,
    );
    const backoff = resolveBackoff(o.backoff);
    const waitOption = o.wait ?? "auto";
    if (!["auto", "subscribe", "poll", "block"].includes(waitOption)) {
      throw new TypeError('`wait` must be "auto", "subscribe" or "poll"');
    }
    const wait = waitOption === "block" ? "auto" : waitOption;
    if (wait === "subscribe" && typeof (redis as RedisLike).subscribe !== "function") {
      throw new TypeError(
        '`wait: "subscribe"` needs a Redis client with subscribe() (@upstash/redis >= 1.35)',
      );
    }
    const maxSubscriptions = o.maxSubscriptions ?? DEFAULT_MAX_SUBSCRIPTIONS;
    if (!Number.isSafeInteger(maxSubscriptions) || maxSubscriptions < 0) {
      throw new RangeError("`maxSubscriptions` must be an integer >= 0");
    }
    if (o.cluster !== undefined && typeof o.cluster !== "boolean") {
      throw new TypeError("`cluster` must be a boolean");
    }
    // The bill of each request is only read by onEvent: without one, scripts go uncounted and
    // no event is built.
    const observed = onEvent !== undefined;
    const runner = new ScriptRunner(redis as RedisLike, this.requestTimeout, observed);
    const ctx: LockContext = {
      runner,
      clientId: this.clientId,
      watchdogTimeout: this.watchdogTimeout,
      replayWindow: this.replayWindow,
      definiteWithin: this.definiteWithin,
      backoff,
      wait,
      maxSubscriptions,
      keeper: o.keeper,
      cluster: o.cluster ?? false,
      observed,
      emit: (event: LockEvent) => {
        try {
          onEvent?.(event);
        } catch {
          // A listener's failure must never break a lock operation.
        }
      },
      background: (task) => {
        if (waitUntil) waitUntil(task);
      },
    };
    contexts.set(this, ctx);
  }
}

/**
 * `definiteWithin`: an integer in [0, replayWindow / 2] (resends past half the window could
 * apply twice); default min(3 × requestTimeout, replayWindow / 2).
 */
function checkDefiniteWithin(value: unknown, requestTimeout: number, replayWindow: number): number {
  const max = Math.floor(replayWindow / 2);
  if (value === undefined) {
    return Math.min(DEFAULT_DEFINITE_WITHIN_REQUEST_TIMEOUTS * requestTimeout, max);
  }
  if (typeof value === "number" && Number.isInteger(value) && value > max) {
    throw new RangeError(
      `\`definiteWithin\` must be at most half of \`replayWindow\` (${max} ms): a resend later than that could apply twice`,
    );
  }
  return checkMs(value, "definiteWithin", 0, max);
}

/** The context of every client, for the entries and the integrations' internal entry points. */
const contexts = new WeakMap<EdgeLockClient, LockContext>();

/**
 * Internal: what the primitives of `client` are built on.
 * @throws TypeError when `client` is not an EdgeLockClient (or EdgeLock) of this copy of edgelock.
 */
export function contextOf(client: EdgeLockClient): LockContext {
  const ctx = contexts.get(client);
  if (!ctx) {
    throw new TypeError("expected an EdgeLockClient or EdgeLock created by this copy of edgelock");
  }
  return ctx;
}

/**
 * Internal (integrations only, not exported from the package): delivers `event` to the
 * EdgeLock's `onEvent` on behalf of an integration built on it (e.g. the `skip` of a cron run or
 * webhook delivery that found its lock taken). Listener errors are ignored; never throws.
 */
export function reportEvent(edgelock: EdgeLockClient, event: LockEvent): void {
  contexts.get(edgelock)?.emit(event);
}
