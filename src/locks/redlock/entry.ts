/**
 * `edgelock/redlock`: RedLock (Redisson RedissonRedLock) over independent Redis databases, one
 * member lock per database (`getLock` of `edgelock/lock` on one client each). It needs no client
 * of its own: `new RedLock([lockA, lockB, lockC])`.
 * @module
 */
export {
  EdgeLockError,
  LeaseLostError,
  LockNotHeldError,
  LockTimeoutError,
  type ServiceLimit,
  ServiceLimitError,
  TransportError,
} from "../../errors.js";
export type { KeepAlive, Lease, ReleaseResult } from "../../lease/lease.js";
export type { LockLike } from "../multi-lock/index.js";
export {
  CLOCK_DRIFT_FACTOR,
  DEFAULT_ENDPOINT_TIMEOUT_MS,
  DEFAULT_REDLOCK_LEASE_MS,
  DEFAULT_RETRY_DELAY_MS,
  driftOf,
  MIN_REDLOCK_LEASE_MS,
  quorumOf,
  RedLock,
  type RedLockAcquireOptions,
  type RedLockOptions,
} from "./index.js";
