/**
 * What every lock kind kept in Redisson's lock HASH offers (Redisson RLock's methods).
 * @module
 */

import type { LockContext } from "../../context.js";
import { LockNotHeldError } from "../../errors.js";
import { randomHex } from "../../ids.js";
import type { Inspectable, Inspection } from "../../inspect.js";
import type { Lease, SerializedLease } from "../../lease/lease.js";
import { lockInspect } from "../../lua/lock.gen.js";
import { asIntegers } from "../../transport/index.js";
import { checkOwner, tryWithin, untilAcquired } from "../../validate.js";
import type { HashHolds } from "../hash-holds.js";
import {
  type AcquireResult,
  attemptUntil,
  type HoldSettings,
  holdSettings,
  type LeaseOptions,
  reportCall,
  restoredLease,
  TRY_LOCK_KEYS,
} from "../protocol.js";

/** Options of `tryLock`: the {@link LeaseOptions} and `waitTime`. Times in integer ms. */
export interface TryLockOptions extends LeaseOptions {
  /**
   * How long to keep trying, in ms, integer in [0, 86 400 000]. Omitted or 0: one attempt.
   * Waiters wait for a release's message or poll with jittered backoff, bounded by the
   * holder's lease.
   */
  waitTime?: number;
}

/** Options of `lock()`: waits until acquired or `signal` aborts. */
export type LockOptions = Omit<TryLockOptions, "waitTime">;

const decodeInspect = (r: unknown) => asIntegers(r, 3) as [number, number, number] | undefined;

/**
 * The lock methods of every kind kept in Redisson's lock HASH (the reentrant lock, the fair
 * lock): acquire through the kind's {@link HashLock.acquireWith}, and the queries, `unlock` and
 * `forceUnlock` through its hold protocol. Internal base class.
 */
export abstract class HashLock<I extends Inspection> implements Inspectable<I> {
  /** Lock name (the Redis key). */
  readonly name: string;
  /** Internal. */
  protected readonly ctx: LockContext;
  /** Internal: the kind's hold protocol. */
  protected abstract readonly holds: HashHolds<I>;

  /** Internal: use `edgelock.getLock(name)` and the like. */
  constructor(ctx: LockContext, name: string) {
    this.ctx = ctx;
    this.name = name;
  }

  /** Internal: how this kind acquires (waiting up to `waitTime`; `undefined`: no deadline). */
  protected abstract acquireWith(
    settings: HoldSettings,
    waitTime: number | undefined,
  ): Promise<AcquireResult>;

  /**
   * Tries to acquire, waiting up to `waitTime`. One HTTP request per attempt on a warm client,
   * plus one subscription per client and name while it waits (docs/waiting.md). Algorithm:
   * Redisson RedissonLock#tryLock(waitTime, leaseTime) with its acquire script
   * (RedissonLock#tryLockInnerAsync), its pub/sub wake-ups (one waiter woken per release) or
   * polling, and a replay record per attempt.
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
    // Awaited, not returned: an async function that returns a promise settles two microtask
    // turns after it (a thenable job), which every acquire would pay.
    return await tryWithin(options, "tryLock", TRY_LOCK_KEYS, (o, waitTime) =>
      this.#acquire(o, waitTime),
    );
  }

  /**
   * Acquires, waiting as long as it takes (until `signal` aborts). Redisson RLock#lock(leaseTime).
   * @throws TypeError / RangeError for bad options, before any request.
   * @throws signal.reason when aborted; an attempt in flight is cancelled in the background.
   * @throws {TransportError} when Redis could not be reached.
   */
  async lock(options?: LockOptions): Promise<Lease> {
    return untilAcquired(
      options,
      "lock",
      TRY_LOCK_KEYS,
      async (o) => (await this.#acquire(o, undefined)).lease,
    );
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
    const result = await this.holds.release({ owner, id: randomHex(), leaseTime: 0, epoch: 0 });
    if (result === "expired" || result === "not-owner")
      throw new LockNotHeldError(this.name, result);
  }

  /**
   * Deletes the lock whoever holds it. Redisson RLock#forceUnlock.
   * @returns true when a lock was deleted.
   */
  async forceUnlock(): Promise<boolean> {
    return this.holds.forceUnlock();
  }

  /** True when any owner holds the lock (Redisson RLock#isLocked: EXISTS). */
  async isLocked(): Promise<boolean> {
    return (await this.status(""))[0] === 1;
  }

  /** True when `owner` holds the lock (Redisson RLock#isHeldByThread: HEXISTS). */
  async isHeldBy(owner: string): Promise<boolean> {
    checkOwner(owner);
    return (await this.status(owner))[2] > 0;
  }

  /** Hold count of `owner`, 0 when it holds nothing (Redisson RLock#getHoldCount). */
  async getHoldCount(owner: string): Promise<number> {
    checkOwner(owner);
    return (await this.status(owner))[2];
  }

  /**
   * Remaining lease in ms, with PTTL semantics: -2 when not locked, -1 when the key has no TTL
   * (Redisson RLock#remainTimeToLive).
   */
  async remainTimeToLive(): Promise<number> {
    return (await this.status(""))[1];
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
  async inspect(): Promise<I> {
    return this.holds.inspect();
  }

  /** Internal: a lease object for a serialized lease of this lock. */
  restore(s: SerializedLease): Lease {
    return restoredLease(this.ctx, this.holds, s);
  }

  /** Not async (one frame fewer per acquire): both callers run it inside async functions. */
  #acquire(o: Partial<TryLockOptions>, waitTime: number | undefined): Promise<AcquireResult> {
    return this.acquireWith(holdSettings(this.ctx, o, attemptUntil(waitTime)), waitTime);
  }

  /**
   * Internal: `[locked 0|1, pttl, hold count of owner]` in one read-only request (inspect.lua:
   * EXISTS, PTTL, HGET). A kind with another layout overrides it.
   */
  protected async status(owner: string): Promise<[number, number, number]> {
    const call = { script: lockInspect, name: this.name, keys: [this.name], args: [owner] };
    return reportCall(this.ctx, this.name, "inspect", (counter) =>
      this.ctx.runner.run(call, decodeInspect, counter),
    );
  }
}
