/**
 * What every primitive's entry (`edgelock/lock`, `edgelock/semaphore`, ...) re-exports besides
 * its own primitive, so one import line is enough: the core client, the lease, the errors and
 * the event types.
 * @module
 */
export { EdgeLockClient, type EdgeLockOptions } from "../core.js";
export {
  ConfigurationError,
  EdgeLockError,
  type EdgeLockErrorCode,
  LeaseLostError,
  LockNotHeldError,
  LockTimeoutError,
  type ServiceLimit,
  ServiceLimitError,
  TransportError,
} from "../errors.js";
export type { LockEvent, LockEventListener } from "../events.js";
export type { Holder, Inspectable, Inspection } from "../inspect.js";
export type { OnLeaseLost } from "../lease/guarded.js";
// Types only: a semaphore's or a latch's bundle does not hold the Lease class.
export type {
  KeepAlive,
  KeeperKeepAlive,
  Lease,
  ReleaseResult,
  SerializedLease,
} from "../lease/lease.js";
export type { RedisLike } from "../transport/index.js";
export type { BackoffOptions } from "../wait/backoff.js";
export type { LeaseOptions } from "./protocol.js";
