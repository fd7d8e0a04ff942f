/**
 * `edgelock/multi-lock`: several locks taken as one, all or none (Redisson RedissonMultiLock),
 * over the core client; the members come from the lock entries (`getLock` of `edgelock/lock`,
 * ...). `EdgeLock#getMultiLock` is {@link getMultiLock}.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { checkMembers, type LockLike, MultiLock } from "./index.js";

export * from "../shared-exports.js";
export * from "./exports.js";

/**
 * Several locks taken as one, all or none (Redisson `RedissonClient#getMultiLock`): members may
 * come from different clients (different databases) and be of different kinds.
 * @param client the {@link EdgeLockClient} whose `onEvent` hears the MultiLock's events.
 * @param locks the member locks, in acquisition order (at least one).
 * @throws TypeError / RangeError when a member is not a lock, none is given, or `client` is not
 * an EdgeLockClient.
 */
export function getMultiLock(client: EdgeLockClient, ...locks: LockLike[]): MultiLock {
  return new MultiLock(contextOf(client), checkMembers(locks, "getMultiLock"));
}
