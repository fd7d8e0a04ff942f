/**
 * `edgelock/permit-expirable-semaphore`: the semaphore whose permits have leases (Redisson
 * RPermitExpirableSemaphore) alone, over the core client.
 * `EdgeLock#getPermitExpirableSemaphore` is {@link getPermitExpirableSemaphore}.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { checkName } from "../../validate.js";
import { PermitExpirableSemaphore } from "./index.js";

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
