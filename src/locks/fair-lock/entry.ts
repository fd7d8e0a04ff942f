/**
 * `edgelock/fair-lock`: the fair (FIFO) reentrant lock (Redisson RFairLock) alone, over the core
 * client. `EdgeLock#getFairLock` is {@link getFairLock}.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { checkName } from "../../validate.js";
import { FairLock } from "./index.js";

export type { AcquireResult, LockHolder, LockOptions, TryLockOptions } from "../lock/index.js";
export * from "../shared-exports.js";
export type { FairLock, FairLockInspection } from "./index.js";

/**
 * A fair (FIFO) reentrant lock (Redisson `RedissonClient#getFairLock`) on `name`: the lock's
 * methods and Lease, waiters served in arrival order, each woken by the release that hands it
 * the lock.
 * @param client an {@link EdgeLockClient} (an `EdgeLock` is one too).
 * @param name lock name = Redis key, 1–512 characters, no `{` or `}`.
 * @throws TypeError / RangeError for a bad name, or when `client` is not an EdgeLockClient.
 */
export function getFairLock(client: EdgeLockClient, name: string): FairLock {
  return new FairLock(contextOf(client), checkName(name));
}
