/**
 * Calls that end definite. A release, `countDown`, a semaphore's `release(permits)`,
 * `addPermits`, `trySetPermits` and `trySetCount` cannot be repeated safely by their caller (a
 * new call is a new request id, so it may apply twice), but each of their scripts is replay-safe
 * for its own request id: resending *the same request* applies it at most once. So instead of
 * handing a lost answer to the caller as an ambiguous `TransportError`, such a call resends its
 * request, with backoff, until Redis answers or `definiteWithin` has passed; only then does it
 * throw the ambiguous error, and it goes on resending in the background until Redis answers or
 * half the replay window has passed since the call began, reporting which in a `settle` event.
 *
 * Why half the window: a request's replay record lives at least `replayWindow` from when Redis
 * first applied it (never before the call began), and a copy sent late can still be in flight
 * for a while (`@upstash/redis` resends after network errors); the second half of the window is
 * that margin. Past it a resend could apply a second time, so none is sent.
 *
 * Acquire attempts resend their request the same way ({@link runAttempt}), bounded by the wait
 * budget instead of `definiteWithin`: a caller can repeat an acquire safely (an unanswered one is
 * cancelled), but a lost answer should cost a copy, not the call.
 * @module
 */

import type { Alarm } from "../abort.js";
import type { LockContext } from "../context.js";
import { type EdgeLockError, TransportError } from "../errors.js";
import { cost, type DefiniteOperation } from "../events.js";
import { MIN_REQUEST_TIMEOUT_MS } from "../limits.js";
import type { RequestCounter, ScriptCall } from "../transport/index.js";
import { afterSends, isUnanswered } from "../transport/scrub.js";
import { type BackoffPolicy, backoffDelay, SLEEP_FLOOR_MS } from "../wait/backoff.js";

/** Backoff between two sends of one request: from 50 ms, doubling, at most 1 s (jittered). */
const RESEND_BACKOFF: Readonly<BackoffPolicy> = Object.freeze({
  initialDelay: 50,
  maxDelay: 1_000,
  multiplier: 2,
});

/**
 * How late a copy's timer may fire before the wait counts as a stall of this client rather than
 * a late answer, in ms.
 */
const STALL_MS = 20;

/** What the sends of one request came to, and how many copies went (earlier runs' included). */
type Sent<T> = { ok: true; value: T; sends: number } | { ok: false; error: unknown; sends: number };

/** Sends one copy of a request: its time limit (`undefined`: the call's) and its hedge. */
type SendCopy<T> = (timeout: number | undefined, hedge: Alarm | undefined) => Promise<T>;

/**
 * Sends `call` with a time limit of its own (`undefined`: the call's), counted in `counter`; the
 * hedge rings on the request's own timer (ScriptRunner.run).
 */
function sender<T>(
  ctx: LockContext,
  call: ScriptCall,
  decode: (reply: unknown) => T | undefined,
  counter: RequestCounter,
): SendCopy<T> {
  return (timeout, hedge) => ctx.runner.run(call, decode, counter, timeout, hedge);
}

/** True for a failure after which the request may or may not have been applied. */
function isAmbiguous(error: unknown): error is TransportError {
  return error instanceof TransportError && error.ambiguous;
}

/**
 * Runs `call` (a replay-safe script whose request id is in its arguments) until Redis answers,
 * within `definiteWithin` from the first send (see {@link sendUntil}). Counts every HTTP request
 * in `counter`.
 * @returns the decoded answer.
 * @throws {TransportError} a definite failure at once (`ambiguous: false`: nothing applied); an
 * ambiguous one only once `definiteWithin` has passed, and the request is then resent in the
 * background until Redis answers or half the `replayWindow` has passed, reported by a `settle`
 * event for `operation`.
 */
export async function runDefinite<T>(
  ctx: LockContext,
  operation: DefiniteOperation,
  call: ScriptCall,
  decode: (reply: unknown) => T | undefined,
  counter: RequestCounter,
): Promise<T> {
  const started = Date.now();
  const requests = counter.requests;
  const send = sender(ctx, call, decode, counter);
  const first = await sendUntil(ctx, send, started + ctx.definiteWithin, 0, 0);
  if (first.ok) return first.value;
  const error = first.error;
  if (!isAmbiguous(error)) throw error;
  resendInBackground(ctx, operation, call.name, send, counter, started, first.sends, error);
  throw afterSends(
    error,
    {
      sends: first.sends,
      requests: counter.requests - requests,
      ms: Date.now() - started,
      requestTimeout: ctx.runner.requestTimeout,
    },
    `definiteWithin (${ctx.definiteWithin} ms) has passed; still resending in the background, see the settle event`,
  );
}

/**
 * Runs one acquire attempt's request (`call`, raced against its `signal`), sending copies of it
 * (the same request id: the acquire scripts are replay-safe) as {@link sendUntil} does until
 * Redis answers or `until` (the end of the call's wait budget) has passed, and in any case for
 * one `requestTimeout` from the first send (what a single request was given before), never past
 * half the replay window (a copy applied later could apply twice). So a lost or hung answer
 * costs a copy, not the call. When no answer arrives at all (the signal aborted it, or every
 * copy failed ambiguously) the attempt may still have applied, so `undo` runs (a cancel in the
 * background), if given, before the error propagates. When copies went out and the answer that
 * came is not a grant (`isGrant` given and false), a copy still on its way could apply later
 * and take what the caller no longer waits for: `undo` runs too, and its tombstone turns such
 * a copy into a no-op. (A waiter the attempt may have registered is the wait loop's to
 * unregister.)
 * @returns the decoded answer.
 * @throws what the request threw.
 */
export async function runAttempt<T>(
  ctx: LockContext,
  call: ScriptCall,
  decode: (reply: unknown) => T | undefined,
  counter: RequestCounter,
  undo?: () => void,
  until?: number,
  isGrant?: (value: T) => boolean,
): Promise<T> {
  const started = Date.now();
  const requests = counter.requests;
  const deadline = Math.min(
    started + Math.floor(ctx.replayWindow / 2),
    Math.max(until ?? 0, started + ctx.runner.requestTimeout),
  );
  const send = sender(ctx, call, decode, counter);
  const sent = await sendUntil(ctx, send, deadline, 0, 0);
  const sends = sent.sends;
  if (sent.ok) {
    if (sends > 1 && isGrant && !isGrant(sent.value)) undo?.();
    return sent.value;
  }
  const error = sent.error;
  if (call.signal?.aborted && error === call.signal.reason) {
    undo?.();
    throw error;
  }
  if (!isAmbiguous(error)) throw error;
  undo?.();
  if (sends < 2) throw error;
  throw afterSends(
    error,
    {
      sends,
      requests: counter.requests - requests,
      ms: Date.now() - started,
      requestTimeout: ctx.runner.requestTimeout,
    },
    "cancelled in the background",
  );
}

/**
 * Runs `task` — one replay-safe request that nobody awaits, e.g. the cancel of an acquire whose
 * answer never arrived, given its hedge to pass to ScriptRunner.run — and sends it again while
 * it fails ambiguously, as the background resends of {@link runDefinite} do: until Redis
 * answers or half the `replayWindow` has passed.
 * @returns the task's answer.
 * @throws the last failure.
 */
export async function resendUntilAnswered<T>(
  ctx: LockContext,
  task: (hedge: Alarm | undefined) => Promise<T>,
): Promise<T> {
  const horizon = Date.now() + Math.floor(ctx.replayWindow / 2);
  const sent = await sendUntil(ctx, (_, hedge) => task(hedge), horizon, 0, 0);
  if (sent.ok) return sent.value;
  throw sent.error;
}

/**
 * Sends copies of a request (`sendCopy`, given each copy's time limit and hedge) until one is
 * answered, one fails definitely, or `deadline` leaves no room for another: the first after
 * `delay` ms, then a next one when a copy failed (after a backoff pause) or when the latest copy
 * has had no answer for the runner's `hedgeAfter` (the client's measured round trip plus four
 * times its deviation, within [100 ms, a third of `requestTimeout`]: a hung request is not
 * waited out before the next copy goes, while a merely slow one is rarely doubled). Copies in
 * flight together are harmless: the request id makes every one answer what the first applied
 * did. The very first send of a call keeps its full time limit (`undefined`: the call's own);
 * every later one ends by `deadline`. `sends`: copies sent before this run (they number the
 * backoff). Each copy's hedge rings on its request's own timer (ScriptRunner.run: one timer
 * per request).
 */
function sendUntil<T>(
  ctx: LockContext,
  sendCopy: SendCopy<T>,
  deadline: number,
  sends: number,
  delay: number,
): Promise<Sent<T>> {
  return new Copies(ctx, sendCopy, deadline, sends).run(delay);
}

/**
 * The copies of one request ({@link sendUntil}): its state in fields and its steps in methods,
 * so that a call builds this object, its outcome's promise and, per copy, a hedge and two
 * callbacks, and no closures over the rest.
 */
class Copies<T> {
  readonly #ctx: LockContext;
  readonly #sendCopy: SendCopy<T>;
  readonly #deadline: number;
  /** Copies sent so far, earlier runs' included (they number the backoff). */
  #n: number;
  #inFlight = 0;
  #last: unknown;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Which hedge is current: a copy sent, a pause scheduled or the end makes older ones void. */
  #generation = 0;
  #done = false;
  #resolve: ((sent: Sent<T>) => void) | undefined;

  constructor(ctx: LockContext, sendCopy: SendCopy<T>, deadline: number, sends: number) {
    this.#ctx = ctx;
    this.#sendCopy = sendCopy;
    this.#deadline = deadline;
    this.#n = sends;
  }

  /** Sends the first copy after `delay` ms (0: now); settles with the first outcome. */
  run(delay: number): Promise<Sent<T>> {
    return new Promise<Sent<T>>((resolve) => {
      this.#resolve = resolve;
      if (delay > 0) this.#next(delay);
      else this.send();
    });
  }

  /** Schedules the next copy in `ms`, or ends once nothing is in flight and time is up. */
  #next(ms: number): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#generation += 1;
    if (this.roomAfter(ms)) {
      this.#timer = setTimeout(() => this.send(), ms);
    } else if (this.#inFlight === 0) {
      this.#finish({ ok: false, error: this.#last, sends: this.#n });
    }
  }

  /** Sends the next copy (the first, or a pause ended, or the hedge rang). */
  send(): void {
    const copy = this.#n;
    this.#sendOne().then(
      (value) => this.#finish({ ok: true, value, sends: this.#n }),
      (error: unknown) => this.#failed(error, copy),
    );
  }

  /**
   * Sends copy number `#n`: the very first of a call keeps its full time limit, every later one
   * ends by the deadline.
   */
  #sendOne(): Promise<T> {
    this.#timer = undefined;
    const copy = this.#n;
    const timeout =
      copy === 0
        ? undefined
        : Math.min(this.#deadline - Date.now(), this.#ctx.runner.requestTimeout);
    this.#n += 1;
    this.#inFlight += 1;
    const after = this.#ctx.runner.hedgeAfter;
    const generation = ++this.#generation;
    const hedge = this.roomAfter(after) ? new Hedge(this, generation, after) : undefined;
    return this.#sendCopy(timeout, hedge);
  }

  /** Whether the hedge of copy `generation` still stands: nothing newer went and no end came. */
  current(generation: number): boolean {
    return !this.#done && generation === this.#generation;
  }

  /** Whether the deadline leaves room for a copy after `ms` more. */
  roomAfter(ms: number): boolean {
    return this.#deadline - Date.now() - ms >= MIN_REQUEST_TIMEOUT_MS;
  }

  #failed(error: unknown, copy: number): void {
    this.#inFlight -= 1;
    // A send that timed out says less than the failure another send got (an HTTP answer's
    // status and text, a network error's code): that one is what the call reports.
    if (this.#last === undefined || !isUnanswered(error) || isUnanswered(this.#last)) {
      this.#last = error;
    }
    if (!isAmbiguous(error)) this.#finish({ ok: false, error, sends: this.#n });
    else if (!this.#done) {
      // The pause is cut short so that a last copy still goes out before the deadline.
      const room = this.#deadline - Date.now() - MIN_REQUEST_TIMEOUT_MS;
      const pause = backoffDelay(RESEND_BACKOFF, copy, -1, room);
      this.#next(pause >= SLEEP_FLOOR_MS ? pause : room + 1);
    }
  }

  /** Ends with `sent`; only the first ending counts. */
  #finish(sent: Sent<T>): void {
    if (this.#done) return;
    this.#done = true;
    clearTimeout(this.#timer);
    this.#resolve?.(sent);
  }
}

/** A copy's hedge ({@link Alarm}): another copy once it has had no answer for `after` ms. */
class Hedge<T> implements Alarm {
  readonly after: number;
  readonly #copies: Copies<T>;
  readonly #generation: number;
  #due: number;

  constructor(copies: Copies<T>, generation: number, after: number) {
    this.#copies = copies;
    this.#generation = generation;
    this.after = after;
    this.#due = Date.now() + after;
  }

  ring(): number | undefined {
    if (!this.#copies.current(this.#generation)) return undefined;
    // Rang late: this client did not run for a while (a busy event loop, a descheduled
    // process), so its answer may be waiting unread. Not a late answer: wait once more.
    if (Date.now() - this.#due > STALL_MS) {
      if (!this.#copies.roomAfter(this.after)) return undefined;
      this.#due = Date.now() + this.after;
      return this.after;
    }
    this.#copies.send();
    return undefined;
  }
}

/**
 * Goes on resending an unanswered request after its call gave up, until Redis answers or half
 * the replay window has passed since `started`, then reports a `settle` event. Kept alive by
 * `waitUntil`.
 */
function resendInBackground<T>(
  ctx: LockContext,
  operation: DefiniteOperation,
  name: string,
  send: SendCopy<T>,
  counter: RequestCounter,
  started: number,
  sends: number,
  lastError: TransportError,
): void {
  const horizon = started + Math.floor(ctx.replayWindow / 2);
  const task = (async () => {
    // The call has just failed: one backoff pause before the first background send.
    const pause = backoffDelay(RESEND_BACKOFF, sends - 1, -1, Math.max(0, horizon - Date.now()));
    const sent: Sent<T> =
      horizon - Date.now() - pause >= MIN_REQUEST_TIMEOUT_MS
        ? await sendUntil(ctx, send, horizon, sends, Math.max(1, pause))
        : { ok: false, error: lastError, sends };
    // No copy sent (time was up): the call's own last failure stands.
    const error = sent.ok ? undefined : ((sent.error ?? lastError) as EdgeLockError);
    ctx.emit({
      type: "settle",
      name,
      ...cost(counter, started),
      operation,
      outcome: error === undefined ? "answered" : isAmbiguous(error) ? "unknown" : "refused",
      ...(error === undefined ? {} : { error }),
    });
  })();
  ctx.background(task);
}
