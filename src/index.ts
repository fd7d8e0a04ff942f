/**
 * edgelock: Redisson's distributed locks for serverless and edge runtimes (Cloudflare Workers,
 * Vercel, Node), over HTTP Redis (Upstash's REST API through `@upstash/redis`).
 *
 * The root exports what every primitive's entry does (`./locks/shared-exports.ts` and each
 * kind's `exports.ts`, written once there), `EdgeLock`, and what only the root carries: the
 * lease class, every event type, the keeper's types and the limits.
 * @module
 */
export { EdgeLock, type WithLockOptions } from "./client.js";
export type {
  AcquireEvent,
  DefiniteOperation,
  ErrorEvent,
  LostEvent,
  ReleaseEvent,
  RenewEvent,
  SettleEvent,
  SkipEvent,
  WaitEvent,
  WaitingEvent,
  WaitStrategyEvent,
} from "./events.js";
export {
  DEFAULT_KEEPER_INSTANCE,
  type KeeperLeaseKind,
  type KeeperRegistration,
  type KeeperReply,
  type KeeperStatus,
  type LeaseKeeperBinding,
  type LeaseKeeperStub,
} from "./keeper.js";
// The class, where the entries export its type only.
export { Lease } from "./lease/lease.js";
export {
  DEFAULT_DEFINITE_WITHIN_REQUEST_TIMEOUTS,
  DEFAULT_REPLAY_WINDOW_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_WATCHDOG_TIMEOUT_MS,
  DEFAULT_WITH_LOCK_WAIT_MS,
  FAIR_CLAIM_WINDOW_MS,
  FAIR_SLOT_MS,
  HAND_OFF_CLAIM_WINDOW_MS,
  LOCK_WAITER_SLOT_MS,
  MAX_NAME_LENGTH,
  MAX_OWNER_LENGTH,
  MAX_TIME_MS,
} from "./limits.js";
export * from "./locks/count-down-latch/exports.js";
export * from "./locks/fair-lock/exports.js";
export * from "./locks/fenced-lock/exports.js";
export * from "./locks/idempotency/exports.js";
export * from "./locks/lock/exports.js";
export type { LeaseToRenew } from "./locks/lock/index.js";
export * from "./locks/multi-lock/exports.js";
export * from "./locks/permit-expirable-semaphore/exports.js";
export * from "./locks/read-write-lock/exports.js";
export * from "./locks/redlock/entry.js";
export * from "./locks/semaphore/exports.js";
export * from "./locks/shared-exports.js";
export { DEFAULT_BACKOFF, SLEEP_FLOOR_MS } from "./wait/backoff.js";
