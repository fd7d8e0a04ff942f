/**
 * Read-write lock: Redisson's RReadWriteLock over HTTP. Many readers or one writer, both
 * reentrant, the writer may also take the read lock (downgrade). Redisson's layout (the lock
 * HASH with `mode`, reader fields `<owner>`, writer fields `<owner>:write`, one
 * `{<name>}:<owner>:rwlock_timeout:<k>` key per read hold so a crashed reader's holds expire on
 * their own), so JVM readers and writers exclude edge ones on the same name. Waiters of both
 * sides wait for a message on their client's wake channel (or poll); the release that lets them
 * in wakes them.
 * Scripts: lua/read-write-lock/*.lua.
 * @module
 */

import type { LockContext } from "../../context.js";
import type { LockUpgradeError } from "../../errors.js";
import type { Inspectable } from "../../inspect.js";
import { HashLock } from "../lock/base.js";
import { type AcquireResult, acquire, type HoldSettings } from "../protocol.js";
import { ReadWriteHolds, type RwSide, renewSide } from "./hold.js";
import type { ReadWriteLockInspection } from "./inspect.js";

export type { ReadWriteLockHolder, ReadWriteLockInspection } from "./inspect.js";

/**
 * One side of a read-write lock, with the lock methods (`tryLock`, `lock`, `unlock`,
 * `forceUnlock`, `isLocked`, `isHeldBy`, `getHoldCount`, `remainTimeToLive`, `inspect`) and
 * leases of kind `"read-lock"` / `"write-lock"`. Internal base of {@link ReadLock} and
 * {@link WriteLock}.
 */
abstract class ReadWriteSide extends HashLock<ReadWriteLockInspection> {
  protected readonly holds: ReadWriteHolds;

  constructor(ctx: LockContext, name: string, side: RwSide) {
    super(ctx, name);
    this.holds = new ReadWriteHolds(ctx, name, side);
  }

  protected acquireWith(s: HoldSettings, waitTime: number | undefined): Promise<AcquireResult> {
    return acquire(this.ctx, this.holds, s, waitTime);
  }

  protected override status(owner: string): Promise<[number, number, number]> {
    return this.holds.status(owner);
  }
}

/**
 * Internal (the `LeaseKeeper` alarm): renews one read or write hold of `owner`, within `timeout`
 * ms. One request.
 * @returns true when renewed, false when the owner no longer holds that side.
 */
export function renewReadWriteHold(
  ctx: LockContext,
  name: string,
  side: RwSide,
  owner: string,
  leaseTime: number,
  timeout?: number,
): Promise<boolean> {
  return renewSide(ctx, name, side, owner, leaseTime, "timer", timeout);
}

/**
 * The read side (Redisson RReadWriteLock#readLock): shared with every other reader, excluded by
 * a writer of another owner. Each read hold has its own lease: a reader that dies stops
 * counting once its holds' timeout keys expire, even while other readers keep the lock.
 * `isLocked()` is true in read mode, or when the writer also holds reads.
 */
export class ReadLock extends ReadWriteSide {
  /** Internal: use `edgelock.getReadWriteLock(name).readLock()`. */
  constructor(ctx: LockContext, name: string) {
    super(ctx, name, "read");
  }
}

/**
 * The write side (Redisson RReadWriteLock#writeLock): exclusive, reentrant; its holder may also
 * take the read lock (downgrade), and when the last write hold goes, those reads keep the lock
 * in read mode. An owner holding only the read lock cannot take the write lock (no upgrade):
 * the attempt throws {@link LockUpgradeError} instead of waiting for itself. A writer waiting
 * behind readers is woken when the last reader leaves.
 */
export class WriteLock extends ReadWriteSide {
  /** Internal: use `edgelock.getReadWriteLock(name).writeLock()`. */
  constructor(ctx: LockContext, name: string) {
    super(ctx, name, "write");
  }
}

/**
 * A read-write lock (Redisson RReadWriteLock): a factory for its two sides on one name. Get one
 * with `edgelock.getReadWriteLock(name)`; it holds no state.
 *
 * ```ts
 * const rw = edgelock.getReadWriteLock("catalog");
 * const reading = await rw.readLock().tryLock({ waitTime: 2_000, leaseTime: 10_000 });
 * ```
 */
export class ReadWriteLock implements Inspectable<ReadWriteLockInspection> {
  /** Lock name (the Redis key). */
  readonly name: string;
  readonly #ctx: LockContext;

  /** Internal: use `edgelock.getReadWriteLock(name)`. */
  constructor(ctx: LockContext, name: string) {
    this.#ctx = ctx;
    this.name = name;
  }

  /** The read side: shared by readers. */
  readLock(): ReadLock {
    return new ReadLock(this.#ctx, this.name);
  }

  /** The write side: exclusive. */
  writeLock(): WriteLock {
    return new WriteLock(this.#ctx, this.name);
  }

  /** Readers, writer, mode and TTL in one read-only request. See {@link ReadWriteLockInspection}. */
  inspect(): Promise<ReadWriteLockInspection> {
    return this.readLock().inspect();
  }
}
