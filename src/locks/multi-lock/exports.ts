/**
 * The names of the multi-lock that its entry (`edgelock/multi-lock`) and the root (`edgelock`) both
 * export: its types. Written once here, re-exported by both.
 * @module
 */
export type {
  CompositeLease,
  LockLike,
  MemberRelease,
  MultiLock,
  MultiLockOptions,
} from "./index.js";
