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

export * from "../shared-exports.js";
export * from "./exports.js";

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
 * A permit lease (kind `"permit"`) of a permit-expirable semaphore rebuilt from `lease.toJSON()`
 * or its JSON string: another invocation renews the permits it names or gives them back. The
 * semaphore's share of `EdgeLock#restoreLease`, without the other kinds' code; synchronous, no
 * request is sent and no keep-alive is started.
 * @param client the core client (or an `EdgeLock`) on the semaphore's database.
 * @throws TypeError when the input is not a serialized lease (or a permit lease without its
 * `permitIds`), when another kind issued it, or when `client` is not an EdgeLockClient;
 * RangeError for a bad name or owner in it.
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
