/**
 * The names of the fair lock that its entry (`edgelock/fair-lock`) and the root (`edgelock`) both
 * export: its types (with the lock options it shares with the reentrant lock). Written once here, re-exported by both.
 * @module
 */
export type { AcquireResult, LockHolder, LockOptions, TryLockOptions } from "../lock/index.js";
export type { FairLock, FairLockInspection } from "./index.js";
