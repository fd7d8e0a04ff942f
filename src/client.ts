/**
 * EdgeLock: configuration and factory of lock primitives.
 * @module
 */

import { LockTimeoutError, TransportError } from "./errors.js";
import type { LockEvent, LockEventListener } from "./events.js";
import { randomHex } from "./ids.js";
import type { KeeperLeaseKind, LeaseKeeperBinding } from "./keeper.js";
import { type KeepAlive, type Lease, parseSerializedLease, type SerializedLease } from "./lease.js";
import {
  DEFAULT_DEFINITE_WITHIN_REQUEST_TIMEOUTS,
  DEFAULT_MAX_SUBSCRIPTIONS,
  DEFAULT_REPLAY_WINDOW_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_WATCHDOG_TIMEOUT_MS,
  DEFAULT_WITH_LOCK_WAIT_MS,
  MAX_CLIENT_ID_LENGTH,
  MIN_REPLAY_WINDOW_MS,
  MIN_REQUEST_TIMEOUT_MS,
  MIN_WATCHDOG_TIMEOUT_MS,
} from "./limits.js";
import type { LockContext } from "./locks/context.js";
import { CountDownLatch } from "./locks/count-down-latch/index.js";
import { FairLock } from "./locks/fair-lock/index.js";
import { FencedLock } from "./locks/fenced-lock/index.js";
import { IdempotencyKey } from "./locks/idempotency/index.js";
import { type LeaseToRenew, ReentrantLock, renewLeases } from "./locks/lock/index.js";
import { checkMembers, type LockLike, MultiLock } from "./locks/multi-lock/index.js";
import { PermitExpirableSemaphore } from "./locks/permit-expirable-semaphore/index.js";
import { ReadWriteLock, renewReadWriteHold } from "./locks/read-write-lock/index.js";
import { Semaphore } from "./locks/semaphore/index.js";
import { WakeHub } from "./locks/wakes.js";
import { type RedisLike, ScriptRunner } from "./transport/index.js";
import {
  checkFunction,
  checkMs,
  checkName,
  checkOptions,
  checkOwner,
  checkWaitTime,
} from "./validate.js";
import { type BackoffOptions, resolveBackoff } from "./wait.js";

/** Options of {@link EdgeLock}. Times in integer ms. */
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
   * ambiguous {@link TransportError} (it may still be applied: an acquire is then cancelled in
   * the background, and every script is replay-safe). Keep-alive renewals use at most a sixth
   * of their lease, so a hung one is retried before the lease runs out. @default 3000
   */
  requestTimeout?: number;
  /**
   * How long replay records (what each request id did, so a resent request applies once) live,
   * in integer ms ≥ 1000. Must cover how long a copy of a request can still reach Redis: the
   * default is the larger of 30 000 and 10 × `requestTimeout`. Records are kept per lock name in
   * two hashes, `edgelock_replay:{<name>}` and `…:old`; give every client of a name the same
   * window. @default max(30000, 10 × requestTimeout)
   */
  replayWindow?: number;
  /**
   * How long a call that its caller cannot repeat safely — the release of any lease (every lock
   * kind, permit leases), `unlock`, a semaphore's `release(permits)`, `addPermits`,
   * `trySetPermits`, a latch's `countDown` and `trySetCount` — resends its own request (same
   * request id: it applies at most once) until Redis answers, in integer ms in
   * [0, `replayWindow` / 2]. The first send has the full `requestTimeout`; another copy follows
   * a failed one after a backoff pause (50 ms doubling to 1 s, jittered), or a copy unanswered
   * for a third of `requestTimeout`, each ending by this bound. Only past it does the
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
  /** Receives acquire/wait/renew/release/lost/error events. Must not throw. */
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

/** Options of {@link EdgeLock.withLock}. */
export interface WithLockOptions {
  /** How long to wait for the lock, in ms, integer in [0, 86 400 000]. @default 10000 */
  waitTime?: number;
  /** Fixed lease in ms; omitted = watchdog mode kept alive by `keepAlive`. */
  leaseTime?: number;
  /** Keep-alive strategy. @default "timer" in watchdog mode, "none" with a fixed lease */
  keepAlive?: KeepAlive;
  /** Aborts the wait (rejects with `signal.reason`). The callback gets `lease.signal`. */
  signal?: AbortSignal;
  /** Owner to acquire as; see `TryLockOptions.owner`. */
  owner?: string;
}

/**
 * Entry point: holds the Redis client and configuration, and hands out lock primitives.
 *
 * @example
 * ```ts
 * import { Redis } from "@upstash/redis";
 * import { EdgeLock } from "edgelock";
 * const edgelock = new EdgeLock({ redis: Redis.fromEnv() });
 * const lease = await edgelock.getLock("invoice:42").tryLock({ waitTime: 2_000, leaseTime: 10_000 });
 * if (lease) {
 *   try { await work(); } finally { await lease.release(); }
 * }
 * ```
 */
export class EdgeLock {
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
  readonly #ctx: LockContext;

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
    if (o.clientId !== undefined) {
      if (typeof o.clientId !== "string") throw new TypeError("`clientId` must be a string");
      if (o.clientId.length === 0 || o.clientId.length > MAX_CLIENT_ID_LENGTH) {
        throw new RangeError(`\`clientId\` must be 1 to ${MAX_CLIENT_ID_LENGTH} characters long`);
      }
    }
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
    const runner = new ScriptRunner(redis as RedisLike, this.requestTimeout);
    this.#ctx = {
      runner,
      clientId: this.clientId,
      watchdogTimeout: this.watchdogTimeout,
      replayWindow: this.replayWindow,
      definiteWithin: this.definiteWithin,
      backoff,
      wait,
      wakes: new WakeHub(runner, maxSubscriptions),
      maxSubscriptions,
      keeper: o.keeper,
      cluster: o.cluster ?? false,
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
    contexts.set(this, this.#ctx);
  }

  /**
   * A reentrant lock (Redisson RLock) on `name`.
   * @param name lock name = Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getLock(name: string): ReentrantLock {
    return new ReentrantLock(this.#ctx, checkName(name));
  }

  /**
   * A fair (FIFO) reentrant lock (Redisson RFairLock) on `name`: same methods and Lease as
   * `getLock`, waiters served in arrival order, each woken by the release that hands it the lock.
   * See {@link FairLock}.
   * @param name lock name = Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getFairLock(name: string): FairLock {
    return new FairLock(this.#ctx, checkName(name));
  }

  /**
   * A read-write lock (Redisson RReadWriteLock) on `name`: `.readLock()` and `.writeLock()`, each
   * with the lock methods and Lease. See {@link ReadWriteLock}.
   * @param name lock name = Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getReadWriteLock(name: string): ReadWriteLock {
    return new ReadWriteLock(this.#ctx, checkName(name));
  }

  /**
   * A fenced lock (Redisson RFencedLock) on `name`: the reentrant lock whose every lease carries
   * `lease.fencingToken`, strictly increasing per name. See {@link FencedLock}.
   * @param name lock name = Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getFencedLock(name: string): FencedLock {
    return new FencedLock(this.#ctx, checkName(name));
  }

  /**
   * A count-down latch (Redisson RCountDownLatch) on `name`: `trySetCount`, `countDown`,
   * `getCount` and `await`, replay-safe, waiters woken by the count-down that opens it. See
   * {@link CountDownLatch}.
   * @param name latch name = Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getCountDownLatch(name: string): CountDownLatch {
    return new CountDownLatch(this.#ctx, checkName(name));
  }

  /**
   * Several locks taken as one, all or none (Redisson RedissonMultiLock): members may come from
   * different EdgeLock clients (different databases) and be of different kinds. See
   * {@link MultiLock}.
   * @param locks the member locks, in acquisition order (at least one).
   * @throws TypeError / RangeError when a member is not a lock or none is given.
   */
  getMultiLock(...locks: LockLike[]): MultiLock {
    return new MultiLock(this.#ctx, checkMembers(locks, "getMultiLock"));
  }

  /**
   * A counting semaphore (Redisson RSemaphore) on `name`: permits taken with `tryAcquire` and
   * given back with `release`, replay-safe, releases bounded by the permits set. See
   * {@link Semaphore}.
   * @param name semaphore name = Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getSemaphore(name: string): Semaphore {
    return new Semaphore(this.#ctx, checkName(name));
  }

  /**
   * A semaphore whose permits have leases (Redisson RPermitExpirableSemaphore) on `name`:
   * `tryAcquire` returns a lease on the permits, renewed and released like a lock lease, and a
   * crashed holder's permits return to the pool when their lease runs out. See
   * {@link PermitExpirableSemaphore}.
   * @param name semaphore name = Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getPermitExpirableSemaphore(name: string): PermitExpirableSemaphore {
    return new PermitExpirableSemaphore(this.#ctx, checkName(name));
  }

  /**
   * An idempotency key on `name`: a lock plus a completion record, so work keyed by an id (a
   * webhook delivery, a payment) runs once. See {@link IdempotencyKey}.
   * @param name key name = lock's Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getIdempotencyKey(name: string): IdempotencyKey {
    return new IdempotencyKey(this.#ctx, checkName(name));
  }

  /**
   * Runs `fn` while holding the lock `name`, then releases it (also when `fn` throws).
   * `fn` receives the lease; its `signal` aborts if the lease is lost. A failed release is
   * reported as an `error` event, not thrown: the lock then expires after its lease.
   * @returns what `fn` returns.
   * @throws {LockTimeoutError} when the lock stayed busy for `waitTime` (default 10 000 ms).
   * @throws signal.reason when aborted while waiting.
   */
  async withLock<T>(
    name: string,
    fn: (lease: Lease) => T | Promise<T>,
    options?: WithLockOptions,
  ): Promise<T> {
    const lock = this.getLock(name);
    if (typeof fn !== "function") throw new TypeError("withLock: `fn` must be a function");
    const o = checkOptions(options, "withLock", [
      "waitTime",
      "leaseTime",
      "keepAlive",
      "signal",
      "owner",
    ]);
    const waitTime = checkWaitTime(o.waitTime) ?? DEFAULT_WITH_LOCK_WAIT_MS;
    const { lease, attempts } = await lock.tryAcquire({ ...o, waitTime });
    if (!lease) throw new LockTimeoutError(name, waitTime, attempts);
    try {
      return await fn(lease);
    } finally {
      await lease.release().catch((error: unknown) => {
        if (error instanceof TransportError) {
          this.#ctx.emit({
            type: "error",
            name,
            requests: 1,
            durationMs: 0,
            operation: "release",
            error,
          });
        }
      });
    }
  }

  /**
   * Rebuilds a lease from `lease.toJSON()` (or its JSON string) so another invocation can
   * renew or release it. Synchronous; no keep-alive is started.
   * @throws TypeError for anything that is not a serialized lease.
   */
  restoreLease(serialized: SerializedLease | string): Lease {
    const s = parseSerializedLease(serialized);
    // Dispatch on the kind of primitive that issued the lease.
    switch (s.kind) {
      case "lock":
        return this.getLock(s.name).restore(s);
      case "fair-lock":
        return this.getFairLock(s.name).restore(s);
      case "fenced-lock":
        return this.getFencedLock(s.name).restore(s);
      case "read-lock":
        return this.getReadWriteLock(s.name).readLock().restore(s);
      case "write-lock":
        return this.getReadWriteLock(s.name).writeLock().restore(s);
      case "permit":
        return this.getPermitExpirableSemaphore(s.name).restore(s);
    }
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

/** The context of every EdgeLock, for the integrations' internal entry points below. */
const contexts = new WeakMap<EdgeLock, LockContext>();

function contextOf(edgelock: EdgeLock): LockContext {
  const ctx = contexts.get(edgelock);
  if (!ctx) throw new TypeError("expected an EdgeLock created by this copy of edgelock");
  return ctx;
}

/**
 * Internal (integrations only, not exported from the package): delivers `event` to the
 * EdgeLock's `onEvent` on behalf of an integration built on it (e.g. the `skip` of a cron run or
 * webhook delivery that found its lock taken). Listener errors are ignored; never throws.
 */
export function reportEvent(edgelock: EdgeLock, event: LockEvent): void {
  contexts.get(edgelock)?.emit(event);
}

/**
 * Internal (the `LeaseKeeper` alarm): renews one lease of a kind that the batch of
 * {@link renewLeasesOf} cannot (a read or write hold, permits), in one HTTP request.
 * @returns true when renewed, false when no longer held.
 * @throws TypeError / RangeError for a bad lease, before any request.
 * @throws {TransportError} when Redis could not be reached.
 */
export async function renewLeaseOf(
  edgelock: EdgeLock,
  lease: {
    kind: KeeperLeaseKind;
    name: string;
    owner: string;
    leaseTime: number;
    permitIds?: readonly string[] | undefined;
  },
): Promise<boolean> {
  const ctx = contextOf(edgelock);
  const name = checkName(lease.name, "lease.name");
  const owner = checkOwner(lease.owner, "lease.owner");
  const leaseTime = checkMs(lease.leaseTime, "lease.leaseTime", 1);
  switch (lease.kind) {
    case "read-lock":
    case "write-lock":
      return renewReadWriteHold(
        ctx,
        name,
        lease.kind === "read-lock" ? "read" : "write",
        owner,
        leaseTime,
      );
    case "permit":
      if (!lease.permitIds?.length) throw new TypeError("a permit lease needs `permitIds`");
      return edgelock.getPermitExpirableSemaphore(name).renewPermits(lease.permitIds, leaseTime);
  }
}

/**
 * Internal (the `LeaseKeeper` alarm): renews many leases in one HTTP request (one per hash slot
 * of their names with `cluster: true`). Each lease is renewed only if its owner still holds it.
 * @returns per lease, true when renewed, false when no longer held.
 * @throws TypeError / RangeError for a bad lease, before any request.
 * @throws {TransportError} when Redis could not be reached.
 */
export async function renewLeasesOf(
  edgelock: EdgeLock,
  leases: readonly LeaseToRenew[],
): Promise<boolean[]> {
  for (const l of leases) {
    checkName(l.name, "lease.name");
    checkOwner(l.owner, "lease.owner");
    checkMs(l.leaseTime, "lease.leaseTime", 1);
  }
  return renewLeases(contextOf(edgelock), leases, { requests: 0 });
}
