/**
 * The names of the counting semaphore that its entry (`edgelock/semaphore`) and the root (`edgelock`) both
 * export: its types, its limit and its error. Written once here, re-exported by both.
 * @module
 */
export { OverReleaseError } from "../../errors.js";
export { MAX_PERMITS } from "../../limits.js";
export type {
  Semaphore,
  SemaphoreAcquireOptions,
  SemaphoreInspection,
  SemaphoreNameReleaseOptions,
  SemaphorePermits,
  SemaphoreReleaseOptions,
} from "./index.js";
