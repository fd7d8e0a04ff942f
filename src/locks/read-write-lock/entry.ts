/**
 * `edgelock/read-write-lock`: the read-write lock (Redisson RReadWriteLock) alone, over the core
 * client. `EdgeLock#getReadWriteLock` is {@link getReadWriteLock}.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { parseLeaseOfKind, type SerializedLease } from "../../lease/json.js";
import type { Lease } from "../../lease/lease.js";
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

/**
 * Rebuilds a lease of a read-write lock (kinds `"read-lock"` and `"write-lock"`: a read or a write
 * hold) from `lease.toJSON()` (or its JSON string), so another invocation can renew or release it:
 * `EdgeLock#restoreLease` for `"read-lock"` and `"write-lock"` leases only, without bundling the
 * other kinds. Synchronous; no keep-alive is started; no request is sent.
 * @param client an {@link EdgeLockClient} (an `EdgeLock` is one too), on the lease's database.
 * @param serialized what `lease.toJSON()` returned, or its JSON string.
 * @throws TypeError for anything that is not a serialized lease, for a lease another kind issued
 * (restore it with its own kind's entry), or when `client` is not an EdgeLockClient; RangeError
 * for a bad name or owner in it.
 */
export function restoreReadWriteLockLease(
  client: EdgeLockClient,
  serialized: SerializedLease | string,
): Lease {
  const ctx = contextOf(client);
  const s = parseLeaseOfKind(
    serialized,
    ["read-lock", "write-lock"],
    "restoreReadWriteLockLease",
    "edgelock/read-write-lock",
  );
  const rw = new ReadWriteLock(ctx, s.name);
  return (s.kind === "read-lock" ? rw.readLock() : rw.writeLock()).restore(s);
}
