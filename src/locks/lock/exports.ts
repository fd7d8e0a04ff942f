/**
 * The names of the reentrant lock that its entry (`edgelock/lock`) and the root (`edgelock`) both
 * export: its types, and the constants of its inspection. Written once here, re-exported by both.
 * @module
 */
export {
  type AcquireResult,
  type LockHolder,
  type LockInspection,
  type LockOptions,
  MAX_INSPECT_HOLDERS,
  type ReentrantLock,
  type TryLockOptions,
} from "./index.js";
