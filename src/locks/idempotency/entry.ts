/**
 * `edgelock/idempotency`: the idempotency key (a reentrant lock plus a completion record) alone,
 * over the core client, with the lock's scripts only. `EdgeLock#getIdempotencyKey` and the
 * `lockWebhook` of `edgelock/vercel` are {@link getIdempotencyKey}.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { parseLeaseOfKind, type SerializedLease } from "../../lease/json.js";
import type { Lease } from "../../lease/lease.js";
import { checkName } from "../../validate.js";
import { restoredLease } from "../protocol.js";
import { IdempotencyHolds } from "./hold.js";
import { IdempotencyKey } from "./index.js";

export * from "../shared-exports.js";
export * from "./exports.js";

/**
 * An idempotency key on `name`: a lock plus a completion record, so work keyed by an id (a
 * webhook delivery, a payment, a job) runs once. See {@link IdempotencyKey}.
 * @param client an {@link EdgeLockClient} (an `EdgeLock` is one too).
 * @param name key name = the lock's Redis key, 1–512 characters, no `{` or `}`.
 * @throws TypeError / RangeError for a bad name, or when `client` is not an EdgeLockClient.
 *
 * @example
 * ```ts
 * import { Redis } from "@upstash/redis";
 * import { EdgeLockClient, getIdempotencyKey } from "edgelock/idempotency";
 * const client = new EdgeLockClient({ redis: Redis.fromEnv() });
 * const key = getIdempotencyKey(client, `stripe:${event.id}`);
 * const claim = await key.claim();
 * if (claim.status === "acquired") {
 *   try { await fulfil(event); } catch (e) { await claim.lease.release(); throw e; }
 *   await key.complete(claim.lease, 3 * 86_400_000);
 * }
 * ```
 */
export function getIdempotencyKey(client: EdgeLockClient, name: string): IdempotencyKey {
  return new IdempotencyKey(contextOf(client), checkName(name));
}

/**
 * A claim's lease (`claim.lease.toJSON()` or its JSON string) rebuilt for another invocation,
 * which completes the key with it (`key.complete(lease, ttl)`), renews it or releases it. A claim
 * holds the key's reentrant lock (kind `"lock"`); restored here, its release wakes waiters
 * without handing the key on, as the claim's would. No request, no keep-alive.
 * @param client an {@link EdgeLockClient} (or `EdgeLock`) on the key's database.
 * @throws TypeError for what is not a serialized lease, a lease of a kind other than `"lock"`, or
 * a `client` that is not an EdgeLockClient; RangeError for a bad name or owner in it.
 */
export function restoreClaimLease(
  client: EdgeLockClient,
  serialized: SerializedLease | string,
): Lease {
  const ctx = contextOf(client);
  const s = parseLeaseOfKind(serialized, ["lock"], "restoreClaimLease", "edgelock/idempotency");
  // The key's own holds: a release wakes waiters without handing the lock on, as the claim's.
  return restoredLease(ctx, new IdempotencyHolds(ctx, s.name), s);
}
