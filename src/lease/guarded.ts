/**
 * What `withLock` and the integrations do once their guarded function has settled: tell whether
 * the lease was lost while it ran, and then either reject with {@link LeaseLostError} (the
 * function's outcome attached) or hand the outcome back as if nothing happened.
 * @module
 */
import { LeaseLostError } from "../errors.js";
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
export async function settleOf<T>(fn: () => T | Promise<T>): Promise<Settled<T>> {
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
export function releaseFoundLost(released: ReleaseResult | undefined): boolean {
  return released === "expired" || released === "not-owner";
}

/**
 * The guarded call's answer: with `lost` and `"throw"`, a {@link LeaseLostError} carrying the
 * outcome; otherwise the outcome itself (the value, or the function's error rethrown).
 */
export function answer<T>(name: string, settled: Settled<T>, lost: boolean, mode: OnLeaseLost): T {
  if (lost && mode === "throw") throw new LeaseLostError(name, "lost", settled);
  if (settled.outcome === "threw") throw settled.error;
  return settled.result;
}
