/**
 * The names of the read-write lock that its entry (`edgelock/read-write-lock`) and the root (`edgelock`) both
 * export: its types (with the lock options it shares with the reentrant lock) and its error. Written once here, re-exported by both.
 * @module
 */
export { LockUpgradeError } from "../../errors.js";
export type { AcquireResult, LockHolder, LockOptions, TryLockOptions } from "../lock/index.js";
export type {
  ReadLock,
  ReadWriteLock,
  ReadWriteLockHolder,
  ReadWriteLockInspection,
  WriteLock,
} from "./index.js";
