/**
 * The names of the fenced lock that its entry (`edgelock/fenced-lock`) and the root (`edgelock`) both
 * export: its types (with the lock options it shares with the reentrant lock). Written once here, re-exported by both.
 * @module
 */
export type { AcquireResult, LockHolder, LockOptions, TryLockOptions } from "../lock/index.js";
export type { FencedLease, FencedLock, FencedLockInspection } from "./index.js";
