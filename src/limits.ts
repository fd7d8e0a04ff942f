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
 * Default `requestTimeout`: the local time limit on every Redis request. Renewals run every
 * `watchdogTimeout / 3` (10 s by default) and are retried every `leaseTime / 9` after a failure,
 * so a hung renewal abandoned after 3 s still leaves room for two more before a 30 s lease runs
 * out; it is also far above a healthy Upstash round trip (milliseconds in-region, a few hundred
 * across regions) plus a few of `@upstash/redis`'s own resends after network errors.
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 3_000;
/** Smallest `requestTimeout`. */
export const MIN_REQUEST_TIMEOUT_MS = 10;
/**
 * Shortest wait for an answer before a call that resends its own request (an acquire attempt,
 * a release) sends another copy: above the transport's own resend after an HTTP 5xx (50 ms
 * pause plus a round trip) and the stalls of a busy runtime (a garbage collection, a loaded
 * event loop), so that a healthy but briefly slow client rarely pays for copies, and short
 * enough that a hung answer costs little (bench/hung-responses.ts). The wait itself follows the client's measured
 * round trips (`ScriptRunner#hedgeAfter`), at most a third of `requestTimeout`.
 */
export const MIN_HEDGE_MS = 100;
/** Answers a client must have seen before its measured round trips set {@link MIN_HEDGE_MS}'s wait. */
export const HEDGE_SAMPLES = 3;
/**
 * Smallest and default `replayWindow` floor: replay records (what each request id did) live at
 * least this long. The default window is the larger of this and 10 × `requestTimeout`: a request
 * is abandoned after `requestTimeout`, `@upstash/redis` resends after a network error at most 5
 * times over ~4.3 s of backoff, and the transport once after an HTTP 5xx, so no copy of a request
 * can still arrive much later than 6 × `requestTimeout` + 4.3 s after it was first sent.
 */
export const DEFAULT_REPLAY_WINDOW_MS = 30_000;
/**
 * Default `definiteWithin`, in `requestTimeout`s (capped at half the replay window): how long a
 * call that cannot be repeated safely (a release, `countDown`, …) resends its request before it
 * reports the rare ambiguous outcome. Three sends of a full `requestTimeout` each ride out a
 * lost answer or two, and leave the rest of the first half of the window to background resends.
 */
export const DEFAULT_DEFINITE_WITHIN_REQUEST_TIMEOUTS = 3;
/** Smallest `replayWindow` accepted. */
export const MIN_REPLAY_WINDOW_MS = 1_000;
/**
 * Claim window of a hand-off, for the reentrant and the fair lock: how long a release (or a
 * holder's expiry) holds the lock for the waiter it chose before that waiter confirms it, by
 * holding it on the message or by an attempt. A waiter that died after registering costs the
 * others at most this, never a full lease. The protocol: docs/waiting.md, "The hand-off".
 */
export const HAND_OFF_CLAIM_WINDOW_MS = 2_000;
/**
 * @deprecated Use {@link HAND_OFF_CLAIM_WINDOW_MS}: the same claim window, which serves the
 * reentrant lock's hand-off as well as the fair lock's.
 */
export const FAIR_CLAIM_WINDOW_MS = HAND_OFF_CLAIM_WINDOW_MS;
/**
 * Fair lock: how long a waiter keeps its place in the queue without coming back. A waiter comes
 * back at least every third of it (each wait or sleep is bounded by that), so a dead waiter is
 * skipped at most this long after it died; a hand-off to it that nobody hears wakes the next
 * waiter at once (lua/lib/fair.lua), so a dead waiter at the head costs the others a claim
 * window, not its slot. Long enough that a waiter behind a few long holds waits them out
 * without coming back.
 */
export const FAIR_SLOT_MS = 60_000;
/**
 * Reentrant lock: how long a waiter stays registered for a wake-up without coming back. Each
 * busy attempt of a waiting call refreshes it, and the call blocks at most half of it at a time,
 * so a waiter that died costs at most one needless token within this time.
 */
export const LOCK_WAITER_SLOT_MS = 30_000;
/**
 * Reentrant lock: how long a waiter that asks for a hand-off stays registered without coming
 * back. Its waits last at most a third of it, and it keeps its place in the registry while at
 * least half is left (lua/lib/reentrant.lua), so a waiter that comes back at the end of a wait
 * is not put behind waiters that registered after it; longer than {@link LOCK_WAITER_SLOT_MS}
 * so that a waiter behind a few long holds waits them out without coming back. A waiter that
 * died is handed the lock at most once (its registration ends with the hand-off), and nobody
 * hearing that hand-off wakes the next waiter.
 */
export const LOCK_HAND_OFF_SLOT_MS = 60_000;
/** Default `waitTime` of `withLock` when the caller gives none. */
export const DEFAULT_WITH_LOCK_WAIT_MS = 10_000;
/** Most permits a semaphore call takes, gives or sets at once (2^31 − 1, Redisson's int). */
export const MAX_PERMITS = 2_147_483_647;
/** Default most wake-up subscriptions a client keeps open (a Worker invocation may keep 6). */
export const DEFAULT_MAX_SUBSCRIPTIONS = 4;
