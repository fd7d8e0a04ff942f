/**
 * `edgelock/read-write-lock`: the read-write lock (Redisson RReadWriteLock) alone, over the core
 * client. `EdgeLock#getReadWriteLock` is {@link getReadWriteLock}.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { checkName } from "../../validate.js";
import { ReadWriteLock } from "./index.js";

export { LockUpgradeError } from "../../errors.js";
export type { AcquireResult, LockHolder, LockOptions, TryLockOptions } from "../lock/index.js";
export * from "../shared-exports.js";
export type {
  ReadLock,
  ReadWriteLock,
  ReadWriteLockHolder,
  ReadWriteLockInspection,
  WriteLock,
} from "./index.js";

/**
 * A read-write lock (Redisson `RedissonClient#getReadWriteLock`) on `name`: `.readLock()` and
 * `.writeLock()`, each with the lock's methods and Lease.
 * @param client an {@link EdgeLockClient} (an `EdgeLock` is one too).
 * @param name lock name = Redis key, 1–512 characters, no `{` or `}`.
 * @throws TypeError / RangeError for a bad name, or when `client` is not an EdgeLockClient.
 */
export function getReadWriteLock(client: EdgeLockClient, name: string): ReadWriteLock {
  return new ReadWriteLock(contextOf(client), checkName(name));
}
