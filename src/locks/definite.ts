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
 * @module
 */
import { sleep } from "../abort.js";
import { type EdgeLockError, TransportError } from "../errors.js";
import type { DefiniteOperation } from "../events.js";
import { MIN_REQUEST_TIMEOUT_MS } from "../limits.js";
import type { RequestCounter, ScriptCall } from "../transport/index.js";
import { type BackoffPolicy, backoffDelay } from "../wait.js";
import type { LockContext } from "./context.js";

/** Backoff between two sends of one request: from 50 ms, doubling, at most 1 s (jittered). */
const RESEND_BACKOFF: Readonly<BackoffPolicy> = Object.freeze({
  initialDelay: 50,
  maxDelay: 1_000,
  multiplier: 2,
});

/** What the sends of one request came to. */
type Sent<T> = { value: T } | { error: unknown };

/** True for a failure after which the request may or may not have been applied. */
function isAmbiguous(error: unknown): error is TransportError {
  return error instanceof TransportError && error.ambiguous;
}

/**
 * Runs `call` (a replay-safe script whose request id is in its arguments) until Redis answers:
 * the first send has the full `requestTimeout`, resends follow with backoff while
 * `definiteWithin` (from the first send) lasts, each limited to the time left. Counts every
 * HTTP request in `counter`.
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
  const first = await sendUntil(ctx, call, decode, counter, started + ctx.definiteWithin, 0);
  if ("value" in first.sent) return first.sent.value;
  const error = first.sent.error;
  if (!isAmbiguous(error)) throw error;
  resendInBackground(ctx, operation, call, decode, counter, started, first.sends, error);
  throw new TransportError(
    call.name,
    `${error.message} (sent ${first.sends} time(s) within definiteWithin, ${ctx.definiteWithin} ms; still resending in the background, see the settle event)`,
    true,
    { cause: error.cause },
  );
}

/**
 * Sends `call` (the first send counted as number `sends + 1`) until an answer, a definite
 * failure, or `deadline`: a resend is made only when at least the smallest `requestTimeout`
 * is left, and waits for at most the time left.
 */
async function sendUntil<T>(
  ctx: LockContext,
  call: ScriptCall,
  decode: (reply: unknown) => T | undefined,
  counter: RequestCounter,
  deadline: number,
  sends: number,
): Promise<{ sent: Sent<T>; sends: number }> {
  let sent: Sent<T> | undefined;
  let n = sends;
  for (;;) {
    // The first send of a call keeps its full time limit; every later one ends by the deadline.
    const timeout =
      n === 0 ? call.timeout : Math.min(deadline - Date.now(), ctx.runner.requestTimeout);
    try {
      n += 1;
      return {
        sent: { value: await ctx.runner.run({ ...call, timeout }, decode, counter) },
        sends: n,
      };
    } catch (error) {
      sent = { error };
      if (!isAmbiguous(error)) return { sent, sends: n };
    }
    const left = deadline - Date.now();
    const pause = backoffDelay(RESEND_BACKOFF, n - 1, -1, left);
    if (left - pause < MIN_REQUEST_TIMEOUT_MS) return { sent, sends: n };
    await sleep(pause);
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
  call: ScriptCall,
  decode: (reply: unknown) => T | undefined,
  counter: RequestCounter,
  started: number,
  sends: number,
  lastError: TransportError,
): void {
  const horizon = started + Math.floor(ctx.replayWindow / 2);
  const task = (async () => {
    let sent: Sent<T> = { error: lastError };
    // The call has just failed: one backoff step before the first background send.
    const pause = backoffDelay(RESEND_BACKOFF, sends - 1, -1, Math.max(0, horizon - Date.now()));
    await sleep(pause);
    if (horizon - Date.now() >= MIN_REQUEST_TIMEOUT_MS) {
      ({ sent } = await sendUntil(ctx, call, decode, counter, horizon, sends));
    }
    const error = "error" in sent ? (sent.error as EdgeLockError) : undefined;
    ctx.emit({
      type: "settle",
      name: call.name,
      requests: counter.requests,
      durationMs: Date.now() - started,
      operation,
      outcome: error === undefined ? "answered" : isAmbiguous(error) ? "unknown" : "refused",
      ...(error === undefined ? {} : { error }),
    });
  })();
  ctx.background(task);
}
