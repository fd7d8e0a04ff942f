/**
 * edgelock: Redisson's distributed locks for serverless and edge runtimes (Cloudflare Workers,
 * Vercel, Node), over HTTP Redis (Upstash's REST API through `@upstash/redis`).
 * @module
 */
export { EdgeLock, type WithLockOptions } from "./client.js";
export { EdgeLockClient, type EdgeLockOptions } from "./core.js";
export {
  EdgeLockError,
  type EdgeLockErrorCode,
  LeaseLostError,
  LockNotHeldError,
  LockTimeoutError,
  LockUpgradeError,
  OverReleaseError,
  PermitNotHeldError,
  TransportError,
} from "./errors.js";
export type {
  AcquireEvent,
  DefiniteOperation,
  ErrorEvent,
  LockEvent,
  LockEventListener,
  LostEvent,
  ReleaseEvent,
  RenewEvent,
  SettleEvent,
  SkipEvent,
  WaitEvent,
} from "./events.js";
export type { Holder, Inspectable, Inspection } from "./inspect.js";
export {
  DEFAULT_KEEPER_INSTANCE,
  type KeeperLeaseKind,
  type KeeperRegistration,
  type KeeperReply,
  type KeeperStatus,
  type LeaseKeeperBinding,
  type LeaseKeeperStub,
} from "./keeper.js";
export {
  type KeepAlive,
  type KeeperKeepAlive,
  Lease,
  type ReleaseResult,
  type SerializedLease,
} from "./lease/lease.js";
export {
  DEFAULT_DEFINITE_WITHIN_REQUEST_TIMEOUTS,
  DEFAULT_REPLAY_WINDOW_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_WATCHDOG_TIMEOUT_MS,
  DEFAULT_WITH_LOCK_WAIT_MS,
  FAIR_CLAIM_WINDOW_MS,
  FAIR_SLOT_MS,
  LOCK_WAITER_SLOT_MS,
  MAX_NAME_LENGTH,
  MAX_OWNER_LENGTH,
  MAX_PERMITS,
  MAX_TIME_MS,
} from "./limits.js";
export type {
  CountDownLatch,
  CountDownLatchAwaitOptions,
  CountDownLatchInspection,
  CountDownOptions,
} from "./locks/count-down-latch/index.js";
export type { FairLock, FairLockInspection } from "./locks/fair-lock/index.js";
export type {
  FencedLease,
  FencedLock,
  FencedLockInspection,
} from "./locks/fenced-lock/index.js";
export {
  type ClaimOptions,
  type ClaimResult,
  type IdempotencyKey,
  MAX_COMPLETION_TTL_MS,
} from "./locks/idempotency/index.js";
export {
  type AcquireResult,
  type LeaseToRenew,
  type LockHolder,
  type LockInspection,
  type LockOptions,
  MAX_INSPECT_HOLDERS,
  type ReentrantLock,
  type TryLockOptions,
} from "./locks/lock/index.js";
export type {
  CompositeLease,
  LockLike,
  MemberRelease,
  MultiLock,
  MultiLockOptions,
} from "./locks/multi-lock/index.js";
export {
  MAX_INSPECT_PERMITS,
  MAX_PERMITS_PER_ACQUIRE,
  type PermitAcquireOptions,
  type PermitExpirableSemaphore,
  type PermitExpirableSemaphoreInspection,
  type PermitHolder,
  type PermitLease,
} from "./locks/permit-expirable-semaphore/index.js";
export type { LeaseOptions } from "./locks/protocol.js";
export type {
  ReadLock,
  ReadWriteLock,
  ReadWriteLockHolder,
  ReadWriteLockInspection,
  WriteLock,
} from "./locks/read-write-lock/index.js";
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
} from "./locks/redlock/index.js";
export type {
  Semaphore,
  SemaphoreAcquireOptions,
  SemaphoreInspection,
  SemaphorePermits,
  SemaphoreReleaseOptions,
} from "./locks/semaphore/index.js";
export type { RedisLike } from "./transport/index.js";
export { type BackoffOptions, DEFAULT_BACKOFF, SLEEP_FLOOR_MS } from "./wait/backoff.js";
