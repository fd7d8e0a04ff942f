/**
 * EdgeLock: the core client (core.ts) with a factory method per primitive, each the function of
 * that primitive's entry (`getLock` of `edgelock/lock`, ...).
 * @module
 */

// First, so that a bundle of EdgeLock places every kind's scripts side by side (each kind's
// module would otherwise sit beside its primitive's code): gzip then shares the library text
// they repeat (lua/lib/), about 1.5 kB min+gzip less than the scripts scattered. A re-export,
// not a bare import: the package has no side effects, and bundlers warn about a bare import.
export { lockAcquire as scriptsFirst } from "./lua.gen.js";

import { EdgeLockClient } from "./core.js";
import { type Lease, parseSerializedLease, type SerializedLease } from "./lease/lease.js";
import { type CountDownLatch, getCountDownLatch } from "./locks/count-down-latch/entry.js";
import { type FairLock, getFairLock } from "./locks/fair-lock/entry.js";
import { type FencedLock, getFencedLock } from "./locks/fenced-lock/entry.js";
import { getIdempotencyKey, type IdempotencyKey } from "./locks/idempotency/entry.js";
import { getLock, type ReentrantLock, type WithLockOptions, withLock } from "./locks/lock/entry.js";
import { getMultiLock, type LockLike, type MultiLock } from "./locks/multi-lock/entry.js";
import {
  getPermitExpirableSemaphore,
  type PermitExpirableSemaphore,
} from "./locks/permit-expirable-semaphore/entry.js";
import { getReadWriteLock, type ReadWriteLock } from "./locks/read-write-lock/entry.js";
import { getSemaphore, type Semaphore } from "./locks/semaphore/entry.js";

export { contextOf, type EdgeLockOptions, reportEvent } from "./core.js";
export type { WithLockOptions } from "./locks/lock/entry.js";
export { renewLeaseOf, renewLeasesOf } from "./renewers.js";

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
export class EdgeLock extends EdgeLockClient {
  /**
   * A reentrant lock (Redisson RLock) on `name`.
   * @param name lock name = Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getLock(name: string): ReentrantLock {
    return getLock(this, name);
  }

  /**
   * A fair (FIFO) reentrant lock (Redisson RFairLock) on `name`: same methods and Lease as
   * `getLock`, waiters served in arrival order, each woken by the release that hands it the lock.
   * See {@link FairLock}.
   * @param name lock name = Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getFairLock(name: string): FairLock {
    return getFairLock(this, name);
  }

  /**
   * A read-write lock (Redisson RReadWriteLock) on `name`: `.readLock()` and `.writeLock()`, each
   * with the lock methods and Lease. See {@link ReadWriteLock}.
   * @param name lock name = Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getReadWriteLock(name: string): ReadWriteLock {
    return getReadWriteLock(this, name);
  }

  /**
   * A fenced lock (Redisson RFencedLock) on `name`: the reentrant lock whose every lease carries
   * `lease.fencingToken`, strictly increasing per name. See {@link FencedLock}.
   * @param name lock name = Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getFencedLock(name: string): FencedLock {
    return getFencedLock(this, name);
  }

  /**
   * A count-down latch (Redisson RCountDownLatch) on `name`: `trySetCount`, `countDown`,
   * `getCount` and `await`, replay-safe, waiters woken by the count-down that opens it. See
   * {@link CountDownLatch}.
   * @param name latch name = Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getCountDownLatch(name: string): CountDownLatch {
    return getCountDownLatch(this, name);
  }

  /**
   * Several locks taken as one, all or none (Redisson RedissonMultiLock): members may come from
   * different EdgeLock clients (different databases) and be of different kinds. See
   * {@link MultiLock}.
   * @param locks the member locks, in acquisition order (at least one).
   * @throws TypeError / RangeError when a member is not a lock or none is given.
   */
  getMultiLock(...locks: LockLike[]): MultiLock {
    return getMultiLock(this, ...locks);
  }

  /**
   * A counting semaphore (Redisson RSemaphore) on `name`: permits taken with `tryAcquire` and
   * given back with `release`, replay-safe, releases bounded by the permits set. See
   * {@link Semaphore}.
   * @param name semaphore name = Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getSemaphore(name: string): Semaphore {
    return getSemaphore(this, name);
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
    return getPermitExpirableSemaphore(this, name);
  }

  /**
   * An idempotency key on `name`: a lock plus a completion record, so work keyed by an id (a
   * webhook delivery, a payment) runs once. See {@link IdempotencyKey}.
   * @param name key name = lock's Redis key, 1–512 characters, no `{` or `}`.
   * @throws TypeError / RangeError for a bad name.
   */
  getIdempotencyKey(name: string): IdempotencyKey {
    return getIdempotencyKey(this, name);
  }

  /**
   * Runs `fn` while holding the lock `name`, then releases it (also when `fn` throws).
   * `fn` receives the lease; its `signal` aborts if the lease is lost. A failed release is
   * reported as an `error` event, not thrown: the lock then expires after its lease.
   * A lease lost while `fn` ran (its signal aborted for a loss, or the release found the hold
   * gone) makes the call reject once `fn` has settled, unless `onLeaseLost: "return"`.
   * @returns what `fn` returns.
   * @throws {LeaseLostError} (`outcome`, `result` or `cause`: how `fn` ended) when the lease was
   * lost while `fn` ran, unless `onLeaseLost: "return"`.
   * @throws {LockTimeoutError} when the lock stayed busy for `waitTime` (default 10 000 ms).
   * @throws signal.reason when aborted while waiting.
   * @throws what `fn` throws, when the lease held (or with `onLeaseLost: "return"`).
   * @throws TypeError / RangeError for a bad name, function or option, before any request.
   */
  withLock<T>(
    name: string,
    fn: (lease: Lease) => T | Promise<T>,
    options?: WithLockOptions,
  ): Promise<T> {
    return withLock(this, name, fn, options);
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
