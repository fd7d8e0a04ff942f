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

export * from "../shared-exports.js";
export * from "./exports.js";

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
 * A read or a write lease of a read-write lock (kinds `"read-lock"`, `"write-lock"`) rebuilt from
 * `lease.toJSON()` or its JSON string: the restored lease renews and releases the same side's
 * hold. Restores these two kinds only, so the bundle holds no other primitive (as
 * `EdgeLock#restoreLease` does). Synchronous; sends nothing; starts no keep-alive.
 * @param client the {@link EdgeLockClient} (an `EdgeLock` too) on the lease's database.
 * @throws TypeError for input that is not a serialized lease, a lease of another kind, or a
 * non-client; RangeError for a bad name or owner in the lease.
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
