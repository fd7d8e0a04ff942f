/**
 * The wait loop's clock: between attempts the waiter either waits for a wake-up (a message on
 * its subscription, see wait/wakes.ts) or polls, sleeping with jittered exponential backoff.
 * Each wait is bounded by the holder's PTTL (returned by the acquire script, so the waiter is
 * back when a crashed holder's lease runs out) and by the waiter's own deadline, and never drops
 * below a floor, so a waiter never loops hot. Redisson waits on pub/sub with a timeout of
 * `min(ttl, remaining)` (RedissonLock#tryLock); RedissonSpinLock polls with exponential backoff.
 * @module
 */
import { sleep } from "../abort.js";
import { HAND_OFF_CLAIM_WINDOW_MS } from "../limits.js";
import { checkOptions } from "../validate.js";

/**
 * Backoff between acquire attempts. Every poll is a billed request, so the defaults start
 * small (a hand-off after a short critical section is picked up within a few ms) and grow
 * quickly to a cap of one poll per second per waiter for long holds.
 */
export interface BackoffOptions {
  /** First sleep before jitter, in ms. Integer ≥ 1. @default 20 */
  initialDelay?: number;
  /** Largest sleep before jitter, in ms. Integer ≥ `initialDelay`. @default 1000 */
  maxDelay?: number;
  /** Growth factor per failed attempt. Number in [1, 10]. @default 2 */
  multiplier?: number;
}

/** Backoff with every field resolved. */
export type BackoffPolicy = Required<BackoffOptions>;

/** Defaults of {@link BackoffOptions}. */
export const DEFAULT_BACKOFF: Readonly<BackoffPolicy> = Object.freeze({
  initialDelay: 20,
  maxDelay: 1_000,
  multiplier: 2,
});

/** No sleep between two attempts is shorter than this (ms), whatever the PTTL says. */
export const SLEEP_FLOOR_MS = 5;

/** Validates and fills in {@link BackoffOptions}. */
export function resolveBackoff(options: BackoffOptions | undefined): BackoffPolicy {
  const o = checkOptions(options, "backoff", ["initialDelay", "maxDelay", "multiplier"]);
  const policy = { ...DEFAULT_BACKOFF, ...o };
  const { initialDelay, maxDelay, multiplier } = policy;
  if (typeof initialDelay !== "number" || !Number.isInteger(initialDelay) || initialDelay < 1) {
    throw new RangeError("`backoff.initialDelay` must be an integer number of ms ≥ 1");
  }
  if (typeof maxDelay !== "number" || !Number.isInteger(maxDelay) || maxDelay < initialDelay) {
    throw new RangeError(
      "`backoff.maxDelay` must be an integer number of ms ≥ `backoff.initialDelay`",
    );
  }
  if (typeof multiplier !== "number" || !(multiplier >= 1 && multiplier <= 10)) {
    throw new RangeError("`backoff.multiplier` must be a number in [1, 10]");
  }
  return policy;
}

/**
 * The sleep before attempt `attempt + 1`, in ms: equal jitter over the exponential step
 * (half fixed, half random, as Redisson's EqualJitterDelay), capped by the holder's PTTL
 * (`pttl` < 0 means unknown or no TTL) and by `remaining`, and never below the floor unless
 * the deadline is closer than that.
 */
export function backoffDelay(
  policy: BackoffPolicy,
  attempt: number,
  pttl: number,
  remaining: number,
  random: () => number = Math.random,
): number {
  const step = Math.min(policy.maxDelay, policy.initialDelay * policy.multiplier ** attempt);
  let delay = step / 2 + random() * (step / 2);
  if (pttl >= 0) delay = Math.min(delay, pttl);
  delay = Math.max(delay, SLEEP_FLOOR_MS);
  return Math.max(0, Math.ceil(Math.min(delay, remaining)));
}

/**
 * When a blocked waiter must be back at the latest because the holder's lease may run out
 * unreleased, in ms from now (-1: not then; see `AttemptOutcome.ahead`): at the holder's expiry
 * for the first waiter, and a claim window ({@link HAND_OFF_CLAIM_WINDOW_MS}) later for each
 * registration ahead of it, in case those waiters' clients died (a live first waiter takes the
 * lock within that window, and from then on the lock's changes of hands tell the first waiter
 * when it must be back: lua/lib/wake.lua, notify_first). So a waiter behind any number of dead
 * ones is bounded, and the waiters come back one claim window apart, never all at once.
 */
export function expiryBound({ pttl, ahead }: { pttl: number; ahead?: number }): number {
  return !ahead || pttl < 0 ? pttl : pttl + ahead * HAND_OFF_CLAIM_WINDOW_MS;
}

/**
 * How long a waiter blocks for a wake-up, in ms: until its deadline (`remaining`) but no longer
 * than `cap`, and back no later than the holder's lease runs out (a crashed holder wakes nobody;
 * `pttl` < 0 means unknown or no TTL); never below the floor unless the deadline is closer.
 */
export function blockBound(pttl: number, remaining: number, cap: number): number {
  let bound = Math.min(remaining, cap);
  if (pttl >= 0) bound = Math.min(bound, pttl + SLEEP_FLOOR_MS);
  return Math.max(bound, Math.min(SLEEP_FLOOR_MS, remaining));
}

/**
 * What one acquire attempt found: acquired, or busy until at most `pttl` ms; `foreign`: the
 * holder's release wakes nobody registered (a Redisson client publishes only on its own
 * channel), so the waiter listens on that channel, or polls.
 */
export type AttemptOutcome<T> =
  | { acquired: T }
  | {
      pttl: number;
      foreign?: boolean;
      /** Longest block or sleep before the next attempt, in ms (e.g. to renew a queue slot). */
      cap?: number;
      /**
       * How many registered waiters are ahead of this one (absent or 0: none; 1 also stands for
       * an unknown number, when the holder's PTTL outlasts the longest block anyway). When the
       * holder's lease runs out unreleased, the first waiter takes the lock (and its release hands
       * it on), so a wait for a wake-up behind others comes back later: a claim window after the
       * holder's expiry per waiter ahead (see {@link expiryBound}); sleeps are not moved.
       */
      ahead?: number;
      /**
       * Server time in ms (Redis TIME) when the attempt registered the waiter: dates a hand-off
       * the wait then receives (src/locks/protocol.ts, grantFromHandOff).
       */
      serverTime?: number;
      /**
       * The cancel this attempt sent (its request went out more than once and Redis answered
       * busy), settling true once Redis answered it. Until then a late copy of the attempt may
       * still reach Redis, take a hand-off made to this wait as that attempt's, and the cancel
       * undo it: the wait holds no hand-off on its message meanwhile (wait/loop.ts).
       */
      undoing?: Promise<boolean>;
    };

/** Options of {@link pollUntil}. */
export interface PollOptions {
  /** Wait budget in ms; `undefined` waits until `signal` aborts. 0 = one attempt. */
  waitTime: number | undefined;
  signal: AbortSignal | undefined;
  policy: BackoffPolicy;
  /**
   * Called before each sleep or block (`"waiting"`, 0 ms) and when it ends (`"wait"`: it ran
   * out or a wake-up came, with the ms it actually lasted; not when aborted, nor for a block
   * that could not wait), with its longest length in ms.
   */
  onWait?: (type: "waiting" | "wait", ms: number, attempt: number, maxMs: number) => void;
  /**
   * Waits for a wake-up instead of sleeping, for at most the given ms (see {@link blockBound};
   * `blockCap` caps it). Resolves `true` once it has waited (woken or timed out), `false` when
   * it could not wait: the loop then sleeps the backoff delay instead. Rejects to abort.
   * `foreign`: the busy attempt reported a JVM holder (see {@link AttemptOutcome}). `limit`: the
   * longest the block may last whatever the holder's lease says (the deadline and the caps), in
   * ms, for a block that learns a new bound while it waits.
   */
  block?: (ms: number, foreign: boolean, limit: number) => Promise<boolean>;
  /** Longest single block in ms. @default Infinity */
  blockCap?: number;
  /** When the wait began (`Date.now()`), which its budget counts from. @default now */
  startedAt?: number;
}

/**
 * Runs `attempt` until it acquires or the wait budget is spent. The last attempt starts no later
 * than the deadline, so the call returns at most one round trip after it; once it has returned
 * `null` it makes no further attempt. `first`: what the wait's first attempt found, made by the
 * caller (it counts as attempt 1): the loop begins with its wait instead of an attempt.
 * @returns the acquired value and the number of attempts, or `null`, the attempts made and the
 * holder's PTTL seen by the last attempt.
 * @throws signal.reason when aborted (an attempt in flight is the caller's to clean up).
 */
export async function pollUntil<T>(
  attempt: () => Promise<AttemptOutcome<T>>,
  options: PollOptions,
  first?: AttemptOutcome<T>,
): Promise<{ value: T; attempts: number } | { value: null; attempts: number; pttl: number }> {
  const deadline =
    options.waitTime === undefined
      ? Number.POSITIVE_INFINITY
      : (options.startedAt ?? Date.now()) + options.waitTime;
  for (let n = 0; ; n++) {
    const outcome = n === 0 && first ? first : await attempt();
    if ("acquired" in outcome) return { value: outcome.acquired, attempts: n + 1 };
    const remaining = deadline - Date.now();
    if (remaining <= 0) return { value: null, attempts: n + 1, pttl: outcome.pttl };
    const cap = Math.min(outcome.cap ?? remaining, remaining);
    // A block that could not wait returned at once: the sleep after it is timed from here too.
    const started = Date.now();
    const report = options.onWait;
    let ms: number | undefined;
    if (options.block) {
      const limit = options.blockCap ?? remaining;
      ms = blockBound(expiryBound(outcome), cap, limit);
      report?.("waiting", 0, n + 1, ms);
      if (!(await options.block(ms, outcome.foreign === true, blockBound(-1, cap, limit)))) {
        ms = undefined;
      }
    }
    if (ms === undefined) {
      ms = backoffDelay(options.policy, n, outcome.pttl, cap);
      report?.("waiting", 0, n + 1, ms);
      await sleep(ms, options.signal);
    }
    report?.("wait", Date.now() - started, n + 1, ms);
  }
}
