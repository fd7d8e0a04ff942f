/**
 * Observability events passed to `onEvent`. Each carries the lock name, the HTTP requests the
 * operation made (each one is billed by Upstash) and its duration; none carries owner ids,
 * request ids, tokens or credentials.
 * @module
 */
import type { EdgeLockError } from "./errors.js";
import type { RequestCounter } from "./transport/index.js";

interface EventBase {
  /** Lock name. */
  name: string;
  /** HTTP requests the operation made (EVALSHA, plus EVAL after NOSCRIPT, plus retries). */
  requests: number;
  /**
   * Commands Upstash bills for the operation's answered requests, as the scripts themselves
   * count them: each script's EVAL/EVALSHA plus every call inside it, and 1 per confirmed
   * subscription (SUBSCRIBE). A request that got no answer may be billed as well and is not
   * counted. Summed over every event, it is the bill (see docs/cost.md).
   */
  billed: number;
  /** Wall-clock duration of the operation in ms. */
  durationMs: number;
}

/** The cost fields every event carries. */
type Cost = Omit<EventBase, "name">;

/**
 * Internal: an event's cost, from the counter its requests were counted in and its start
 * (epoch ms; 0 = unknown, duration 0).
 */
export const cost = (counter: RequestCounter, started: number): Cost => ({
  requests: counter.requests,
  billed: counter.billed ?? 0,
  durationMs: started && Date.now() - started,
});

/**
 * Internal: the cost of an event that sent nothing of its own (a loss seen by a timer, a skip
 * whose request another event counted), lasting `durationMs`.
 */
export const noCost = (durationMs = 0): Cost => ({ requests: 0, billed: 0, durationMs });

/** An acquire call finished (`tryLock`, `lock`, `withLock`). */
export interface AcquireEvent extends EventBase {
  type: "acquire";
  acquired: boolean;
  /** Acquire attempts made (scripts sent; waits between them are not counted). */
  attempts: number;
}
/**
 * A waiter found the primitive taken and is about to wait before its next attempt: blocking for
 * a wake-up, or sleeping (polling). `durationMs` is 0; the wait lasts at most `maxMs`.
 */
export interface WaitingEvent extends EventBase {
  type: "waiting";
  /** The attempt that just failed (1-based). */
  attempt: number;
  /** The longest the wait can last, in ms (the backoff delay, or the bound of a block). */
  maxMs: number;
}
/**
 * A waiter's wait ended: a wake-up came, its `maxMs` ran out, or the call was aborted.
 * `durationMs` is the time it actually waited; the next attempt follows (unless aborted).
 */
export interface WaitEvent extends EventBase {
  type: "wait";
  /** The attempt that failed before this wait (1-based), as in its `waiting` event. */
  attempt: number;
  /** The longest the wait could have lasted, in ms. */
  maxMs: number;
}
/**
 * A waiter changed how it waits: `strategy` is what it does from now on.
 * `"subscribe"`: it subscribed (one request, counted in its `acquire` event) and waits for a
 * release's message; again after a stream that the server ended or that failed;
 * `"poll"`: it sleeps with backoff, because its client cannot subscribe, `maxSubscriptions`
 * are open, the subscription failed or was not confirmed, or its stream ended within a second
 * of opening (`reason`). Once it polls, it polls until the wait ends.
 */
export interface WaitStrategyEvent extends EventBase {
  type: "wait-strategy";
  strategy: "subscribe" | "poll";
  reason?: "limit" | "failed" | "lost";
}
/** A lease was renewed (or found lost while renewing). */
export interface RenewEvent extends EventBase {
  type: "renew";
  renewed: boolean;
  /** Who renewed: an explicit `lease.renew()` or the in-invocation timer. */
  by: "call" | "timer";
}
/**
 * A hold was given back: a lease or `unlock(owner)` released one hold, a semaphore's permits
 * were released (by their handle or `semaphore.release(permits)`; a refused release sends none),
 * or every member of a MultiLock's lease answered its release.
 */
export interface ReleaseEvent extends EventBase {
  type: "release";
  result: "released" | "still-held" | "expired" | "not-owner";
}
/** A lease was found lost; its `signal` has aborted with `LeaseLostError`. */
export interface LostEvent extends EventBase {
  type: "lost";
}
/**
 * A cron run or webhook delivery was skipped: `name` is the lock name the integration uses (the
 * cron's or webhook's own name, never an internal helper key).
 */
export interface SkipEvent extends EventBase {
  type: "skip";
  /**
   * Why: `"overlap"`, another run or delivery holds the lock right now; `"duplicate"`, this
   * delivery was already processed (a repeated cron delivery of one scheduled time, a webhook
   * redelivery after success).
   */
  reason: "overlap" | "duplicate";
  /** With `"overlap"`: the holder's remaining lease in ms (PTTL), when known. */
  holderTtl?: number;
}
/** A background operation (cancelling an unanswered acquire, a timer renewal) failed. */
export interface ErrorEvent extends EventBase {
  type: "error";
  operation: "cancel" | "renew" | "release" | "keeper";
  error: EdgeLockError;
}

/**
 * The calls a `call` event reports: every call that sends a request and is neither an acquire,
 * a renewal nor a lease's release.
 * - `"inspect"`: a read-only query (`inspect`, `isLocked`, `remainTimeToLive`, `getHoldCount`,
 *   `getToken`, `getCount`, `availablePermits`, …);
 * - `"renew"`: a `LeaseKeeper` alarm's batched renewal of many leases (one event per batch;
 *   `name` is its first lease's);
 * - `"release"`: a permit-expirable semaphore's release by id (`tryRelease(id)`, `release(id)`),
 *   and a semaphore release that was refused or threw (one that gave permits back is a
 *   `release` event);
 * - the others: the method of that name.
 */
export type CallOperation =
  | "inspect"
  | "renew"
  | "release"
  | "forceUnlock"
  | "delete"
  | "trySetCount"
  | "countDown"
  | "await"
  | "trySetPermits"
  | "addPermits"
  | "drainPermits";

/**
 * A call other than an acquire, a renewal or a lease's release finished, answered or not (it
 * threw when `failed`). With the other events, every request the library sends is reported once,
 * so that the `billed` of all events sums to the bill.
 */
export interface CallEvent extends EventBase {
  type: "call";
  operation: CallOperation;
  failed: boolean;
}

/** The calls that resend their request until Redis answers (see `definiteWithin`). */
export type DefiniteOperation =
  | "release"
  | "countDown"
  | "trySetCount"
  | "addPermits"
  | "trySetPermits";

/**
 * How a call that threw an ambiguous `TransportError` (no answer within `definiteWithin`) ended:
 * the library kept resending the same request (same request id, so it applies at most once) in
 * the background until Redis answered or half the `replayWindow` had passed since the call began.
 * `requests` and `durationMs` count from the call's first send (the call's own sends included).
 */
export interface SettleEvent extends EventBase {
  type: "settle";
  /** The call: a release (of any lease, `unlock`, or semaphore permits) or a count change. */
  operation: DefiniteOperation;
  /**
   * - `"answered"`: Redis answered; the request took effect exactly once, as its answer says
   *   (e.g. a release that found the lease expired, or a semaphore release the over-release guard
   *   refused, changed nothing);
   * - `"refused"`: Redis refused it (a definite error, in `error`): nothing was applied;
   * - `"unknown"`: no answer before the resends stopped (`error` is the last failure): it was
   *   applied once or not at all, and a resend now could no longer be told apart from a new call.
   */
  outcome: "answered" | "refused" | "unknown";
  /** With `"refused"` and `"unknown"`: the last error. */
  error?: EdgeLockError;
}

/** Every event `onEvent` can receive; switch on `type`. */
export type LockEvent =
  | AcquireEvent
  | WaitingEvent
  | WaitEvent
  | WaitStrategyEvent
  | RenewEvent
  | ReleaseEvent
  | LostEvent
  | SkipEvent
  | ErrorEvent
  | SettleEvent
  | CallEvent;

/** Listener for {@link LockEvent}s. It must not throw; if it does, the error is ignored. */
export type LockEventListener = (event: LockEvent) => void;
