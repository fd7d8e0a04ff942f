/**
 * The names of the permit-expirable semaphore that its entry (`edgelock/permit-expirable-semaphore`) and the root (`edgelock`) both
 * export: its types, its limits and its error. Written once here, re-exported by both.
 * @module
 */
export { PermitNotHeldError } from "../../errors.js";
export {
  MAX_INSPECT_PERMITS,
  MAX_PERMITS_PER_ACQUIRE,
  type PermitAcquireOptions,
  type PermitExpirableSemaphore,
  type PermitExpirableSemaphoreInspection,
  type PermitHolder,
  type PermitLease,
} from "./index.js";
