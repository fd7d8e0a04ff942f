/**
 * `edgelock/fenced-lock`: the fenced lock (Redisson RFencedLock) alone, over the core client.
 * `EdgeLock#getFencedLock` is {@link getFencedLock}.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { parseLeaseOfKind, type SerializedLease } from "../../lease/json.js";
import { checkName } from "../../validate.js";
import { type FencedLease, FencedLock } from "./index.js";

export * from "../shared-exports.js";
export * from "./exports.js";

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
 * A fenced lock's lease (kind `"fenced-lock"`) rebuilt from `lease.toJSON()` or its JSON string,
 * with the `fencingToken` it was granted, for another invocation to renew or release (and to
 * keep passing the token to the storage it guards). Only this kind, unlike
 * `EdgeLock#restoreLease`; synchronous: nothing is sent and no keep-alive starts.
 * @param client an {@link EdgeLockClient} (or `EdgeLock`) on the lease's database.
 * @throws TypeError for what is not a serialized lease, one without its `fencingToken`, a lease
 * another kind issued, or a `client` that is not an EdgeLockClient; RangeError for a bad name or
 * owner in it.
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
