/**
 * Documented limits and defaults, in one place. All times are integer milliseconds.
 * @module
 */

/** Longest accepted lock name, in characters. */
export const MAX_NAME_LENGTH = 512;
/** Longest accepted caller-supplied owner, in characters. */
export const MAX_OWNER_LENGTH = 200;
/** Longest accepted `clientId`, in characters (owners are `<clientId>:<taskId>`). */
export const MAX_CLIENT_ID_LENGTH = 128;
/** Upper bound of `leaseTime`, `waitTime` and `maxHoldTime`: one day. */
export const MAX_TIME_MS = 86_400_000;
/** Smallest `watchdogTimeout`. */
export const MIN_WATCHDOG_TIMEOUT_MS = 100;
/** Default `watchdogTimeout`, as Redisson's `lockWatchdogTimeout`. */
export const DEFAULT_WATCHDOG_TIMEOUT_MS = 30_000;
/**
 * How long replay records (request-id latches) live. Covers `@upstash/redis`'s retries (up to
 * six sends over ~4.3 s of backoff) even when each send waits for a slow response, while keeping
 * the number of short-lived keys bounded.
 */
export const REPLAY_WINDOW_MS = 600_000;
/** Default `waitTime` of `withLock` when the caller gives none. */
export const DEFAULT_WITH_LOCK_WAIT_MS = 10_000;
