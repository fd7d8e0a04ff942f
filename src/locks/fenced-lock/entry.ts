/**
 * `edgelock/fenced-lock`: the fenced lock (Redisson RFencedLock) alone, over the core client.
 * `EdgeLock#getFencedLock` is {@link getFencedLock}.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { checkName } from "../../validate.js";
import { FencedLock } from "./index.js";

export type { AcquireResult, LockHolder, LockOptions, TryLockOptions } from "../lock/index.js";
export * from "../shared-exports.js";
export type { FencedLease, FencedLock, FencedLockInspection } from "./index.js";

/**
 * A fenced lock (Redisson `RedissonClient#getFencedLock`) on `name`: the reentrant lock whose
 * every lease carries `lease.fencingToken`, strictly increasing per name.
 * @param client an {@link EdgeLockClient} (an `EdgeLock` is one too).
 * @param name lock name = Redis key, 1–512 characters, no `{` or `}`.
 * @throws TypeError / RangeError for a bad name, or when `client` is not an EdgeLockClient.
 */
export function getFencedLock(client: EdgeLockClient, name: string): FencedLock {
  return new FencedLock(contextOf(client), checkName(name));
}
