/**
 * A guarded call, as `withLock` and the integrations make it: run the function holding a lease,
 * end the hold, tell whether the lease was lost while the function ran, and then either reject
 * with {@link LeaseLostError} (the function's outcome attached) or hand the outcome back as if
 * nothing happened.
 * @module
 */
import type { EdgeLockClient } from "../core.js";
import { LeaseLostError } from "../errors.js";
import { endQuietly } from "../settle.js";
import type { Lease, ReleaseResult } from "./lease.js";

/**
 * What a guarded call does when its lease was lost while its function ran: `"throw"` rejects
 * with {@link LeaseLostError} (the function's value in `result`, or its error in `cause`);
 * `"return"` returns the value (or rethrows the error) as if the lease had held.
 */
export type OnLeaseLost = "throw" | "return";

/** How a guarded function ended. */
export type Settled<T> = { outcome: "returned"; result: T } | { outcome: "threw"; error: unknown };

/** `onLeaseLost` as the caller wrote it; undefined is the default, `"throw"`. */
export function checkOnLeaseLost(value: unknown, label = "onLeaseLost"): OnLeaseLost {
  if (value === undefined) return "throw";
  if (value !== "throw" && value !== "return") {
    throw new TypeError(`\`${label}\` must be "throw" or "return"`);
  }
  return value;
}

/** Runs `fn`, capturing a synchronous throw as well as a rejection. */
async function settleOf<T>(fn: () => T | Promise<T>): Promise<Settled<T>> {
  try {
    return { outcome: "returned", result: await fn() };
  } catch (error) {
    return { outcome: "threw", error };
  }
}

/**
 * True when the lease is known lost: its signal aborted for a loss (a renewal found it gone, or
 * its expiry passed unrenewed), not for a release. Read it before releasing: a release ends the
 * signal too, and a timer may still fire while the release is in flight.
 */
export function lostBeforeRelease(lease: Lease): boolean {
  const reason: unknown = lease.signal.reason;
  return reason instanceof LeaseLostError && reason.reason === "lost";
}

/** True when the release found the hold gone: it expired, or another owner holds the lock. */
function releaseFoundLost(released: ReleaseResult | undefined): boolean {
  return released === "expired" || released === "not-owner";
}

/**
 * The guarded call's answer: with `lost` and `"throw"`, a {@link LeaseLostError} carrying the
 * outcome; otherwise the outcome itself (the value, or the function's error rethrown).
 */
function answer<T>(name: string, settled: Settled<T>, lost: boolean, mode: OnLeaseLost): T {
  if (lost && mode === "throw") throw new LeaseLostError(name, "lost", settled);
  if (settled.outcome === "threw") throw settled.error;
  return settled.result;
}

/** A call {@link runGuarded} makes: `fn` holding `lease`, then the end of the hold. */
export interface GuardedCall<T> {
  /** Receives the `error` event of an end that failed (see `endQuietly`). */
  client: EdgeLockClient;
  /** The lock name, for events and the {@link LeaseLostError}. */
  name: string;
  lease: Lease;
  onLeaseLost: OnLeaseLost;
  fn: () => T | Promise<T>;
  /** Ends the hold once `fn` settled: a release, or a completion. @default `lease.release()` */
  end?: (settled: Settled<T>) => Promise<ReleaseResult>;
  /**
   * Takes the end (already started) off the answer's path, e.g. to `waitUntil`; only a loss the
   * lease's signal saw then counts. @default none: the end is awaited before answering
   */
  defer?: ((task: Promise<unknown>) => void) | undefined;
}

/**
 * Runs `fn`, ends the hold, and answers (see {@link answer}). The order is the contract:
 * the loss is read from the signal before the end starts (an end aborts the signal too), and
 * unless deferred the end has landed before the call answers, so a caller that got the answer
 * finds the lock free (or the delivery completed), and an end that found the hold gone counts
 * as a loss.
 */
export async function runGuarded<T>(call: GuardedCall<T>): Promise<T> {
  const { lease, end } = call;
  const settled = await settleOf(call.fn);
  const lost = await endGuarded(
    call.client,
    call.name,
    lease,
    end ? () => end(settled) : () => lease.release(),
    call.defer,
  );
  return answer(call.name, settled, lost, call.onLeaseLost);
}

/**
 * Ends the hold of a guarded call whose function has settled, without throwing (a failed end is
 * an `error` event), and resolves to whether the lease counts as lost: its signal saw a loss
 * before the end started, or, when the end is awaited (no `defer`), the end found the hold gone.
 */
export async function endGuarded(
  client: EdgeLockClient,
  name: string,
  lease: Lease,
  end: () => Promise<ReleaseResult>,
  defer?: ((task: Promise<unknown>) => void) | undefined,
): Promise<boolean> {
  const lost = lostBeforeRelease(lease);
  const task = endQuietly(client, name, end);
  if (defer) {
    defer(task);
    return lost;
  }
  return releaseFoundLost(await task) || lost;
}
