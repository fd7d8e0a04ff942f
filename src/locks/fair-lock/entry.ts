/**
 * `edgelock/fair-lock`: the fair (FIFO) reentrant lock (Redisson RFairLock) alone, over the core
 * client. `EdgeLock#getFairLock` is {@link getFairLock}.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { parseLeaseOfKind, type SerializedLease } from "../../lease/json.js";
import type { Lease } from "../../lease/lease.js";
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

/**
 * Rebuilds a lease of a fair lock (kind `"fair-lock"`) from `lease.toJSON()` (or its JSON string),
 * so another invocation can renew or release it: `EdgeLock#restoreLease` for `"fair-lock"` leases
 * only, without bundling the other kinds. Synchronous; no keep-alive is started; no request is
 * sent.
 * @param client an {@link EdgeLockClient} (an `EdgeLock` is one too), on the lease's database.
 * @param serialized what `lease.toJSON()` returned, or its JSON string.
 * @throws TypeError for anything that is not a serialized lease, for a lease another kind issued
 * (restore it with its own kind's entry), or when `client` is not an EdgeLockClient; RangeError
 * for a bad name or owner in it.
 */
export function restoreFairLockLease(
  client: EdgeLockClient,
  serialized: SerializedLease | string,
): Lease {
  const ctx = contextOf(client);
  const s = parseLeaseOfKind(
    serialized,
    ["fair-lock"],
    "restoreFairLockLease",
    "edgelock/fair-lock",
  );
  return new FairLock(ctx, s.name).restore(s);
}
