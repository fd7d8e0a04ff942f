/**
 * `edgelock/fenced-lock`: the fenced lock (Redisson RFencedLock) alone, over the core client.
 * `EdgeLock#getFencedLock` is {@link getFencedLock}.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { parseLeaseOfKind, type SerializedLease } from "../../lease/json.js";
import { checkName } from "../../validate.js";
import { type FencedLease, FencedLock } from "./index.js";

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

/**
 * Rebuilds a lease of a fenced lock (kind `"fenced-lock"`), with its `fencingToken`, from
 * `lease.toJSON()` (or its JSON string), so another invocation can renew or release it:
 * `EdgeLock#restoreLease` for `"fenced-lock"` leases only, without bundling the other kinds.
 * Synchronous; no keep-alive is started; no request is sent.
 * @param client an {@link EdgeLockClient} (an `EdgeLock` is one too), on the lease's database.
 * @param serialized what `lease.toJSON()` returned, or its JSON string.
 * @throws TypeError for anything that is not a serialized lease, for a lease another kind issued
 * (restore it with its own kind's entry), or when `client` is not an EdgeLockClient; RangeError
 * for a bad name or owner in it; TypeError for a lease without its `fencingToken`.
 */
export function restoreFencedLockLease(
  client: EdgeLockClient,
  serialized: SerializedLease | string,
): FencedLease {
  const ctx = contextOf(client);
  const where = "restoreFencedLockLease";
  const s = parseLeaseOfKind(serialized, ["fenced-lock"], where, "edgelock/fenced-lock");
  // Every fenced grant carries its token: one without it did not come from this kind's toJSON.
  if (s.fencingToken === undefined) {
    throw new TypeError(`${where}: a fenced-lock lease needs \`lease.fencingToken\``);
  }
  return new FencedLock(ctx, s.name).restore(s) as FencedLease;
}
