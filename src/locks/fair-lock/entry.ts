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

export * from "../shared-exports.js";
export * from "./exports.js";

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
 * A fair lock's lease (kind `"fair-lock"`) rebuilt from `lease.toJSON()` or its JSON string, so
 * that another invocation renews or releases the hold (a release hands the lock to the next
 * waiter in line, as the original's would). `EdgeLock#restoreLease` without the other kinds;
 * synchronous, with no request and no keep-alive.
 * @param client an {@link EdgeLockClient} (or `EdgeLock`) on the lease's database.
 * @throws TypeError for what is not a serialized lease, a lease another kind issued, or a
 * `client` that is not an EdgeLockClient; RangeError for a bad name or owner in it.
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
