/**
 * Idempotency key: a reentrant lock (Redisson RLock layout at the key's name) plus a completion
 * marker, so that work keyed by an id (a webhook delivery, a payment, a job) runs once: a
 * duplicate arriving while the work runs finds the lock taken, and one arriving after the work
 * completed finds the marker. Claiming and completing are one atomic script each.
 * @module
 */

import type { LockContext } from "../../context.js";
import { Lease, type ReleaseResult } from "../../lease/lease.js";
import type { RequestCounter } from "../../transport/index.js";
import { checkMs, checkOptions } from "../../validate.js";
import {
  emitAcquire,
  holdSettings,
  LEASE_OPTION_KEYS,
  type LeaseOptions,
  leaseFor,
} from "../protocol.js";
import { IdempotencyHolds } from "./hold.js";

/** Longest accepted completion TTL: 365 days, in ms. */
export const MAX_COMPLETION_TTL_MS = 31_536_000_000;

/** Options of {@link IdempotencyKey.claim}: the {@link LeaseOptions} (a claim does not wait). */
export type ClaimOptions = LeaseOptions;

/**
 * What {@link IdempotencyKey.claim} found:
 * - `"acquired"`: the work is yours; finish with `complete(lease, ttl)` on success, or
 *   `lease.release()` to let a retry do it;
 * - `"locked"`: another claim holds the key right now; `holderTtl` is its remaining lease in ms
 *   (PTTL: -1 when the key has no TTL, 0 when unknown);
 * - `"completed"`: the work was completed earlier; `completedTtl` is how long the record still
 *   lasts in ms (PTTL: -1 when it has no TTL).
 */
export type ClaimResult =
  | { status: "acquired"; lease: Lease }
  | { status: "locked"; holderTtl: number }
  | { status: "completed"; completedTtl: number };

/**
 * An idempotency key on `name`. Get one with `edgelock.getIdempotencyKey(name)`; the object
 * holds no state, so it can be created per request.
 *
 * Keys: the lock HASH at `name` (Redisson RLock layout, so a Redisson client locking `name`
 * excludes a claim and vice versa), `edgelock_done:{<name>}` (the completion marker, kept for
 * the TTL given to `complete`), and the name's short-lived replay records
 * `edgelock_replay:{<name>}:<request id>`.
 *
 * @example
 * ```ts
 * const key = edgelock.getIdempotencyKey(`stripe:${event.id}`);
 * const claim = await key.claim();
 * if (claim.status === "acquired") {
 *   try { await fulfil(event); } catch (e) { await claim.lease.release(); throw e; }
 *   await key.complete(claim.lease, 3 * 86_400_000);
 * }
 * ```
 */
export class IdempotencyKey {
  /** Key name (the lock's Redis key). */
  readonly name: string;
  readonly #ctx: LockContext;
  /** The lock's hold protocol, with attempts that report a completion marker. */
  readonly #holds: IdempotencyHolds;

  /** Internal: use `edgelock.getIdempotencyKey(name)`. */
  constructor(ctx: LockContext, name: string) {
    this.name = name;
    this.#ctx = ctx;
    this.#holds = new IdempotencyHolds(ctx, name);
  }

  /**
   * One attempt to claim the key: reports a completed key, or acquires its lock (one HTTP
   * request on a warm client). No waiting: a duplicate should be told to come back later.
   * @returns {@link ClaimResult}.
   * @throws TypeError / RangeError for bad options, before any request.
   * @throws signal.reason when aborted; a claim in flight is cancelled in the background.
   * @throws {TransportError} when Redis could not be reached (an ambiguous claim is cancelled in
   * the background, so it leaves no hold behind).
   */
  async claim(options?: ClaimOptions): Promise<ClaimResult> {
    const settings = holdSettings(this.#ctx, checkOptions(options, "claim", LEASE_OPTION_KEYS));
    settings.signal?.throwIfAborted();
    const started = Date.now();
    const counter: RequestCounter = { requests: 0 };
    let acquired = false;
    try {
      const reply = await this.#holds.attempt(settings, counter);
      if (reply.status === "completed") return { status: "completed", completedTtl: reply.pttl };
      if (reply.status === "busy") return { status: "locked", holderTtl: reply.pttl };
      const lease = await leaseFor(this.#ctx, this.#holds, settings, reply.grant);
      acquired = true;
      return { status: "acquired", lease };
    } finally {
      emitAcquire(this.#ctx, this.name, started, counter, acquired, 1);
    }
  }

  /**
   * Records that the work of this key is done, for `ttl` ms, and releases the lease's hold, in
   * one atomic step (one HTTP request on a warm client, for a lease this key's `claim` issued).
   * Until the record expires, every `claim` reports `"completed"`. The record is made even when
   * the lease was lost meanwhile (the work did finish); an existing record is kept, not
   * extended. Replay-safe; completing an already released lease still records completion.
   * @param lease the lease from `claim` (or any lease on this name).
   * @param ttl how long the record lasts, in ms, integer in [1, 31 536 000 000]: longer than the
   * sender's retry window (Stripe retries for up to 3 days).
   * @returns what releasing the hold found, as `lease.release()`: `"released"`, `"still-held"`
   * (reentrant holds remain), `"expired"` or `"not-owner"` (the lease had been lost).
   * @throws TypeError / RangeError for bad arguments, before any request.
   * @throws {TransportError} when Redis could not be reached; calling again is safe.
   */
  async complete(lease: Lease, ttl: number): Promise<ReleaseResult> {
    if (!(lease instanceof Lease)) throw new TypeError("complete: `lease` must be a Lease");
    if (lease.name !== this.name) {
      throw new RangeError("complete: `lease` belongs to another name");
    }
    checkMs(ttl, "ttl", 1, MAX_COMPLETION_TTL_MS);
    // The lease's own once-only release path, with the marker recorded in the same request.
    const { started, result } = lease.releaseVia((l) => this.#holds.complete(l, ttl));
    const released = await result;
    // Released earlier (without the marker): record the completion on its own; the replayed
    // release reports what it found then.
    return started ? released : this.#holds.complete(lease, ttl);
  }
}
