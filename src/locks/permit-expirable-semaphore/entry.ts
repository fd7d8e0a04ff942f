/**
 * `edgelock/permit-expirable-semaphore`: the semaphore whose permits have leases (Redisson
 * RPermitExpirableSemaphore) alone, over the core client.
 * `EdgeLock#getPermitExpirableSemaphore` is {@link getPermitExpirableSemaphore}.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { parseLeaseOfKind, type SerializedLease } from "../../lease/json.js";
import { checkName } from "../../validate.js";
import { PermitExpirableSemaphore, type PermitLease } from "./index.js";

export { PermitNotHeldError } from "../../errors.js";
export * from "../shared-exports.js";
export {
  MAX_INSPECT_PERMITS,
  MAX_PERMITS_PER_ACQUIRE,
  type PermitAcquireOptions,
  type PermitExpirableSemaphore,
  type PermitExpirableSemaphoreInspection,
  type PermitHolder,
  type PermitLease,
} from "./index.js";

/**
 * A semaphore whose permits have leases (Redisson
 * `RedissonClient#getPermitExpirableSemaphore`) on `name`: `tryAcquire` returns a lease on the
 * permits, renewed and released like a lock lease; a crashed holder's permits return to the
 * pool when their lease runs out.
 * @param client an {@link EdgeLockClient} (an `EdgeLock` is one too).
 * @param name semaphore name = Redis key, 1–512 characters, no `{` or `}`.
 * @throws TypeError / RangeError for a bad name, or when `client` is not an EdgeLockClient.
 */
export function getPermitExpirableSemaphore(
  client: EdgeLockClient,
  name: string,
): PermitExpirableSemaphore {
  return new PermitExpirableSemaphore(contextOf(client), checkName(name));
}

/**
 * Rebuilds a lease of a permit-expirable semaphore (kind `"permit"`: its permits) from
 * `lease.toJSON()` (or its JSON string), so another invocation can renew or release it:
 * `EdgeLock#restoreLease` for `"permit"` leases only, without bundling the other kinds.
 * Synchronous; no keep-alive is started; no request is sent.
 * @param client an {@link EdgeLockClient} (an `EdgeLock` is one too), on the lease's database.
 * @param serialized what `lease.toJSON()` returned, or its JSON string.
 * @throws TypeError for anything that is not a serialized lease, for a lease another kind issued
 * (restore it with its own kind's entry), or when `client` is not an EdgeLockClient; RangeError
 * for a bad name or owner in it.
 */
export function restorePermitLease(
  client: EdgeLockClient,
  serialized: SerializedLease | string,
): PermitLease {
  const ctx = contextOf(client);
  const s = parseLeaseOfKind(
    serialized,
    ["permit"],
    "restorePermitLease",
    "edgelock/permit-expirable-semaphore",
  );
  return new PermitExpirableSemaphore(ctx, s.name).restore(s);
}
