/**
 * Reentrant lock: Redisson's RLock over HTTP. Data layout as Redisson's (a HASH at the lock
 * name, field `<clientId>:<taskId>`, value = hold count, PEXPIRE = lease), so a Redisson JVM
 * client and edgelock exclude each other on the same name.
 * @module
 */
import { LockNotHeldError } from "../errors.js";
import { randomHex } from "../ids.js";
import type { Holder, Inspectable, Inspection } from "../inspect.js";
import { type KeepAlive, Lease } from "../lease.js";
import { lockForceUnlock, lockHolders, lockInspect, lockRenew } from "../lua.gen.js";
import { asInteger, asIntegers, type RequestCounter } from "../transport/index.js";
import { checkOptions, checkOwner, checkWaitTime } from "../validate.js";
import { type AttemptOutcome, pollUntil } from "../wait.js";
import { keys, type LockContext } from "./context.js";
import { Holds } from "./hold.js";

/** Options of {@link ReentrantLock.tryLock}. Times in integer ms. */
export interface TryLockOptions {
  /**
   * How long to keep trying, in ms, integer in [0, 86 400 000]. Omitted or 0: one attempt.
   * Attempts poll with jittered backoff bounded by the holder's remaining lease.
   */
  waitTime?: number;
  /**
   * Fixed lease in ms, integer in [1, 86 400 000]; no automatic renewal. Omitted: watchdog
   * mode, TTL = `watchdogTimeout`, kept alive by `keepAlive` (default `"timer"`).
   */
  leaseTime?: number;
  /**
   * Owner to acquire as (1–200 characters). Omitted: a fresh `<clientId>:<taskId>`, so two
   * calls exclude each other. Pass `lease.owner` to re-enter (hold count + 1).
   */
  owner?: string;
  /** Aborts the wait; the call rejects with `signal.reason` and leaves no hold behind. */
  signal?: AbortSignal;
  /** Keep-alive strategy; see {@link KeepAlive}. */
  keepAlive?: KeepAlive;
}

/**
 * Result of {@link ReentrantLock.tryAcquire}: the lease, or why there is none. `holderTtl` is
 * the holder's remaining lease in ms as the last attempt saw it (PTTL: -1 when the key has no
 * TTL), e.g. for an HTTP `Retry-After`.
 */
export type AcquireResult =
  | { lease: Lease; attempts: number }
  | { lease: null; attempts: number; holderTtl: number };

/** Options of {@link ReentrantLock.lock}: waits until acquired or `signal` aborts. */
export type LockOptions = Omit<TryLockOptions, "waitTime">;

/** One holder of a reentrant lock: its owner id and how many times it holds the lock. */
export interface LockHolder extends Holder {
  /** Reentrant hold count (≥ 1 while held; each `release()` of one lease takes one away). */
  holdCount: number;
}

/**
 * What {@link ReentrantLock.inspect} reports, e.g.
 * `{ kind: "lock", name: "invoice:42", locked: true, ttl: 8_734, holders: [{ owner, holdCount: 2 }] }`.
 */
export interface LockInspection extends Inspection {
  kind: "lock";
  /** True when the lock's key exists (someone holds it). */
  locked: boolean;
  /** The holders: at most one for a reentrant lock. */
  holders: LockHolder[];
}

/** Most holders `inspect()` returns (a reentrant lock has one; this bounds a wrong key). */
export const MAX_INSPECT_HOLDERS = 100;

const TRY_LOCK_KEYS = ["waitTime", "leaseTime", "owner", "signal", "keepAlive"] as const;
const decodeInspect = (r: unknown) => asIntegers(r, 3) as [number, number, number] | undefined;

/** Decodes lua/lock/holders.lua: `[pttl, "=owner", count, ...]`. */
function decodeHolders(reply: unknown): { ttl: number; holders: LockHolder[] } | undefined {
  if (!Array.isArray(reply) || reply.length % 2 !== 1) return undefined;
  const ttl = asInteger(reply[0]);
  if (ttl === undefined) return undefined;
  const holders: LockHolder[] = [];
  for (let i = 1; i < reply.length; i += 2) {
    const owner: unknown = reply[i];
    const holdCount = asInteger(reply[i + 1]);
    if (typeof owner !== "string" || !owner.startsWith("=") || holdCount === undefined) {
      return undefined;
    }
    holders.push({ owner: owner.slice(1), holdCount });
  }
  return { ttl, holders };
}

/**
 * A reentrant, non-fair distributed lock (Redisson RLock). Get one with `edgelock.getLock(name)`;
 * the object holds no state, so it can be created per request.
 */
export class ReentrantLock implements Inspectable<LockInspection> {
  /** Lock name (the Redis key). */
  readonly name: string;
  readonly #ctx: LockContext;
  readonly #holds: Holds;

  /** Internal: use `edgelock.getLock(name)`. */
  constructor(ctx: LockContext, name: string) {
    this.#ctx = ctx;
    this.name = name;
    this.#holds = new Holds(ctx, name);
  }

  /**
   * Tries to acquire, waiting up to `waitTime`. One HTTP request per attempt on a warm client.
   * Algorithm: Redisson RedissonLock#tryLock(waitTime, leaseTime) with its acquire script
   * (RedissonLock#tryLockInnerAsync), polling instead of pub/sub, and a replay latch per attempt.
   * @returns the lease, or `null` when the lock stayed busy for the whole `waitTime`.
   * @throws TypeError / RangeError for bad options, before any request.
   * @throws signal.reason when aborted; an attempt in flight is cancelled in the background.
   * @throws {TransportError} when Redis could not be reached.
   */
  async tryLock(options?: TryLockOptions): Promise<Lease | null> {
    return (await this.tryAcquire(options)).lease;
  }

  /**
   * `tryLock` that also says why it failed: same options, same requests, same errors.
   * @returns {@link AcquireResult}: the lease and attempts, or `lease: null` with the attempts
   * and the holder's remaining lease (`holderTtl`, ms).
   */
  async tryAcquire(options?: TryLockOptions): Promise<AcquireResult> {
    const o = checkOptions(options, "tryLock", TRY_LOCK_KEYS);
    const waitTime = checkWaitTime(o.waitTime) ?? 0;
    return this.#acquire(o, waitTime);
  }

  /**
   * Acquires, waiting as long as it takes (until `signal` aborts). Redisson RLock#lock(leaseTime).
   * @throws TypeError / RangeError for bad options, before any request.
   * @throws signal.reason when aborted; an attempt in flight is cancelled in the background.
   * @throws {TransportError} when Redis could not be reached.
   */
  async lock(options?: LockOptions): Promise<Lease> {
    const o = checkOptions(
      options,
      "lock",
      TRY_LOCK_KEYS.filter((k) => k !== "waitTime"),
    );
    const { lease } = await this.#acquire(o, undefined);
    if (!lease) throw new Error("unreachable: lock() without a deadline returned no lease");
    return lease;
  }

  /**
   * Releases one hold of `owner`. Redisson RLock#unlock. Prefer `lease.release()`, which is
   * replay-safe across calls and never throws for an expired lease.
   * @throws {LockNotHeldError} when `owner` does not hold the lock (like Redisson's
   * IllegalMonitorStateException).
   * @throws {TransportError} when Redis could not be reached.
   */
  async unlock(owner: string): Promise<void> {
    checkOwner(owner);
    const result = await this.#holds.release(owner, randomHex(), 0, 0);
    if (result === "expired" || result === "not-owner")
      throw new LockNotHeldError(this.name, result);
  }

  /**
   * Deletes the lock whoever holds it. Redisson RLock#forceUnlock.
   * @returns true when a lock was deleted.
   */
  async forceUnlock(): Promise<boolean> {
    const counter = { requests: 0 };
    const n = await this.#ctx.runner.run(
      {
        script: lockForceUnlock,
        name: this.name,
        keys: [this.name, keys.channel(this.name)],
        args: [],
      },
      asInteger,
      counter,
    );
    return n === 1;
  }

  /** True when any owner holds the lock (Redisson RLock#isLocked: EXISTS). */
  async isLocked(): Promise<boolean> {
    return (await this.#inspect(""))[0] === 1;
  }

  /** True when `owner` holds the lock (Redisson RLock#isHeldByThread: HEXISTS). */
  async isHeldBy(owner: string): Promise<boolean> {
    checkOwner(owner);
    return (await this.#inspect(owner))[2] > 0;
  }

  /** Hold count of `owner`, 0 when it holds nothing (Redisson RLock#getHoldCount). */
  async getHoldCount(owner: string): Promise<number> {
    checkOwner(owner);
    return (await this.#inspect(owner))[2];
  }

  /**
   * Remaining lease in ms, with PTTL semantics: -2 when not locked, -1 when the key has no TTL
   * (Redisson RLock#remainTimeToLive).
   */
  async remainTimeToLive(): Promise<number> {
    return (await this.#inspect(""))[1];
  }

  /**
   * Who holds the lock and for how long, read in one request (read-only script
   * lua/lock/holders.lua): `{ kind: "lock", name, locked, ttl, holders: [{ owner, holdCount }] }`
   * with `ttl` in ms (PTTL semantics: -2 not locked, -1 no TTL). For administrators and
   * tooling (`npx edgelock inspect <name>`): unlike events and errors, the result contains owner
   * ids. Works on locks taken by Redisson too (same layout).
   * @throws {TransportError} when Redis could not be reached, or the key is not a lock (a
   * HASH).
   */
  async inspect(): Promise<LockInspection> {
    const { ttl, holders } = await this.#ctx.runner.run(
      {
        script: lockHolders,
        name: this.name,
        keys: [this.name],
        args: [MAX_INSPECT_HOLDERS],
      },
      decodeHolders,
      { requests: 0 },
    );
    return { kind: "lock", name: this.name, locked: ttl !== -2, ttl, holders };
  }

  /** Internal: a lease object for a serialized lease of this lock. */
  restore(init: {
    owner: string;
    id: string;
    epoch: number;
    leaseTime: number;
    watchdog: boolean;
    expiresAt: number;
  }): Lease {
    return new Lease({ host: this.#holds.host, name: this.name, ...init });
  }

  async #acquire(o: Partial<TryLockOptions>, waitTime: number | undefined): Promise<AcquireResult> {
    const settings = this.#holds.settings(o);
    settings.signal?.throwIfAborted();
    const started = Date.now();
    const counter: RequestCounter = { requests: 0 };
    let attempts = 0;
    let acquired = false;
    try {
      const polled = await pollUntil(
        async (): Promise<AttemptOutcome<{ id: string; sentAt: number; epoch: number }>> => {
          const reply = await this.#holds.attempt(settings, counter);
          return reply.status === "acquired" ? { acquired: reply } : { pttl: reply.pttl };
        },
        {
          waitTime,
          signal: settings.signal,
          policy: this.#ctx.backoff,
          onSleep: (delayMs, attempt) =>
            this.#ctx.emit({
              type: "wait",
              name: this.name,
              requests: 0,
              durationMs: delayMs,
              attempt,
            }),
        },
      );
      attempts = polled.attempts;
      if (polled.value === null) return { lease: null, attempts, holderTtl: polled.pttl };
      const lease = await this.#holds.lease(settings, polled.value);
      acquired = true;
      return { lease, attempts };
    } finally {
      this.#holds.emitAcquire(started, counter, acquired, attempts);
    }
  }

  async #inspect(owner: string): Promise<[number, number, number]> {
    return this.#ctx.runner.run(
      { script: lockInspect, name: this.name, keys: [this.name], args: [owner] },
      decodeInspect,
      { requests: 0 },
    );
  }
}

/** One lease to renew in a batch: see {@link renewLeases}. */
export interface LeaseToRenew {
  name: string;
  owner: string;
  leaseTime: number;
}

/**
 * Renews many leases in one request (Redisson LockRenewalScheduler's batched renewal).
 * @returns per lease, true when renewed, false when no longer held.
 */
export async function renewLeases(
  ctx: LockContext,
  leases: readonly LeaseToRenew[],
  counter: RequestCounter,
): Promise<boolean[]> {
  if (leases.length === 0) return [];
  const reply = await ctx.runner.run(
    {
      script: lockRenew,
      name: leases[0]?.name ?? "",
      keys: leases.map((l) => l.name),
      args: leases.flatMap((l) => [l.leaseTime, l.owner]),
    },
    (r) => asIntegers(r, leases.length),
    counter,
  );
  return reply.map((n) => n === 1);
}
