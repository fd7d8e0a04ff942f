/**
 * RedLock: the Redis distlock page's algorithm over N independent Redis databases (Redisson's
 * RedissonRedLock, deprecated there; node-redlock's structure of a vote per endpoint and a quorum
 * step). The same owner asks every endpoint's lock at once, each with its own time limit; the
 * lock is held when a majority granted it and validity = leaseTime − elapsed − drift is left. On
 * failure every endpoint is released, those that did not answer included (an unanswered acquire
 * is cancelled in the background, so it leaves nothing behind even if it applies late). Renewal
 * succeeds only on a quorum. See the README for what it does and does not guarantee.
 * @module
 */
import { sleep } from "../../abort.js";
import { LeaseLostError, TransportError } from "../../errors.js";
import { randomHex } from "../../ids.js";
import type { Lease } from "../../lease/lease.js";
import { checkMs, checkOptions, checkOwner, checkSignal, checkWaitTime } from "../../validate.js";
import {
  CompositeLease,
  checkMembers,
  type LockLike,
  type MultiLockOptions,
  releaseQuietly,
} from "../multi-lock/index.js";
import { TRY_LOCK_KEYS } from "../protocol.js";
import { collectVotes, decide, driftOf, quorumOf, type Vote } from "./quorum.js";

export { CLOCK_DRIFT_FACTOR, driftOf, quorumOf } from "./quorum.js";

/** The leases of the granted votes. */
const grantsOf = (votes: readonly Vote<Lease>[]): Lease[] =>
  votes.flatMap((v) => (v.outcome === "granted" ? [v.value] : []));

/** Options of `new RedLock(locks, options)`. Times in integer ms. */
export interface RedLockOptions {
  /**
   * Time limit of each endpoint's request: an endpoint slower than this votes "no" (its acquire
   * is cancelled in the background). Keep it small against the lease (the distlock page suggests
   * 5–50 ms for a 10 s lease over TCP; HTTP needs more). @default 500
   */
  endpointTimeout?: number;
  /** Most time between two rounds after a failed one, in ms; the wait is random in [½, 1] of it. @default 200 */
  retryDelay?: number;
}

/**
 * Options of {@link RedLock.tryLock}: a MultiLock's, taken on every endpoint (`owner`: a fresh
 * random id when omitted; `signal`: what was granted is released and the call rejects). Times in
 * integer ms.
 */
export interface RedLockAcquireOptions extends MultiLockOptions {
  /** How long to keep trying rounds. @default 0 (one round) */
  waitTime?: number;
  /** Lease on every endpoint, in ms, integer ≥ 100. @default 30 000 */
  leaseTime?: number;
  /** `"timer"` renews (on a quorum) every third of the lease while the invocation runs. @default "none" */
  keepAlive?: "none" | "timer";
}

/** Default time limit of each endpoint's request, in ms. */
export const DEFAULT_ENDPOINT_TIMEOUT_MS = 500;
/** Default most wait between rounds, in ms. */
export const DEFAULT_RETRY_DELAY_MS = 200;
/** Default lease, in ms. */
export const DEFAULT_REDLOCK_LEASE_MS = 30_000;
/** Shortest lease, in ms: below it drift and round trips leave no validity. */
export const MIN_REDLOCK_LEASE_MS = 100;

/**
 * A lock held on a majority of N independent Redis databases (the Redis distlock page's
 * Redlock). Build it from one lock per database, e.g. `new RedLock(clients.map((c) =>
 * c.getLock("invoice:42")))`, usually with the same name on each. A lease's `expiresAt` is the
 * computed validity (start + leaseTime − drift), never later than any granting endpoint's TTL.
 */
export class RedLock {
  /** The member locks, one per endpoint. */
  readonly locks: readonly LockLike[];
  readonly #endpointTimeout: number;
  readonly #retryDelay: number;

  /**
   * @param locks one lock per endpoint (at least 1; use an odd number, 3 or 5).
   * @throws TypeError / RangeError for bad locks or options.
   */
  constructor(locks: readonly LockLike[], options?: RedLockOptions) {
    if (!Array.isArray(locks)) throw new TypeError("RedLock: `locks` must be an array of locks");
    this.locks = Object.freeze(checkMembers(locks, "RedLock"));
    const o = checkOptions(options, "RedLock", ["endpointTimeout", "retryDelay"]);
    this.#endpointTimeout =
      o.endpointTimeout === undefined
        ? DEFAULT_ENDPOINT_TIMEOUT_MS
        : checkMs(o.endpointTimeout, "endpointTimeout", 1);
    this.#retryDelay =
      o.retryDelay === undefined ? DEFAULT_RETRY_DELAY_MS : checkMs(o.retryDelay, "retryDelay", 1);
  }

  /** Votes needed: N/2 + 1. */
  get quorum(): number {
    return quorumOf(this.locks.length);
  }

  /**
   * Acquires on a quorum, trying rounds until `waitTime` is spent: each round asks every
   * endpoint at once (one request each, limited to `endpointTimeout`), holds the lock if a
   * quorum granted it with validity left, and otherwise releases every endpoint and waits a
   * random delay before the next round.
   * @returns the lease (its `members` are the granting endpoints' leases), or `null`.
   * @throws TypeError / RangeError for bad options, before any request.
   * @throws signal.reason when aborted (what was granted is released first).
   */
  async tryLock(options?: RedLockAcquireOptions): Promise<CompositeLease | null> {
    const o = checkOptions(options, "tryLock", TRY_LOCK_KEYS);
    const waitTime = checkWaitTime(o.waitTime) ?? 0;
    const leaseTime =
      o.leaseTime === undefined
        ? DEFAULT_REDLOCK_LEASE_MS
        : checkMs(o.leaseTime, "leaseTime", MIN_REDLOCK_LEASE_MS);
    const owner = o.owner === undefined ? `redlock:${randomHex()}` : checkOwner(o.owner);
    const signal = checkSignal(o.signal);
    if (o.keepAlive !== undefined && o.keepAlive !== "none" && o.keepAlive !== "timer") {
      throw new TypeError('`keepAlive` must be "none" or "timer"');
    }
    signal?.throwIfAborted();
    const deadline = Date.now() + waitTime;
    for (;;) {
      const lease = await this.#round(leaseTime, owner, signal);
      if (lease) {
        await lease.startKeepAlive(o.keepAlive ?? "none", undefined);
        return lease;
      }
      const remaining = deadline - Date.now();
      if (remaining <= 0) return null;
      const delay = this.#retryDelay / 2 + Math.random() * (this.#retryDelay / 2);
      await sleep(Math.min(remaining, Math.ceil(delay)), signal);
    }
  }

  /**
   * One round: votes, decided as soon as a quorum granted (or can no longer grant), then on
   * success a lease that late grants join, on failure the release of every grant, late ones
   * included.
   */
  async #round(
    leaseTime: number,
    owner: string,
    signal: AbortSignal | undefined,
  ): Promise<CompositeLease | null> {
    const startedAt = Date.now();
    const started = performance.now();
    const n = this.locks.length;
    const quorum = this.quorum;
    const { votes, rest } = await collectVotes(
      this.locks,
      (lock, limit) => lock.tryLock({ leaseTime, owner, signal: limit, keepAlive: "none" }),
      this.#endpointTimeout,
      signal,
      (so) => {
        const yes = so.filter((v) => v.outcome === "granted").length;
        return yes >= quorum || so.length - yes > n - quorum;
      },
    );
    const granted = grantsOf(votes);
    const { held } = decide(granted.length, n, leaseTime, performance.now() - started);
    if (!held || signal?.aborted) {
      // Every grant goes back, also those still on their way.
      await releaseQuietly([...granted, ...grantsOf(await rest)]);
      signal?.throwIfAborted();
      return null;
    }
    return new CompositeLease({
      kind: "redlock",
      owner,
      leaseTime,
      watchdog: false,
      expiresAt: startedAt + leaseTime - driftOf(leaseTime),
      sent: { wall: startedAt, mono: started },
      members: granted,
      late: rest.then(grantsOf),
      renew: (lease, ms) => this.#renew((lease as CompositeLease).members, ms),
      lost: () => {},
      backgroundError: () => {},
    });
  }

  /**
   * Renews every granted endpoint at once; held again only if a quorum renewed with validity
   * left. Lost when too few can still renew; a transport failure that might have made the
   * difference is thrown, so a keep-alive retries.
   */
  async #renew(members: readonly Lease[], leaseTime: number) {
    const startedAt = Date.now();
    const started = performance.now();
    const quorum = this.quorum;
    // Decided once a quorum renewed, or once too many cannot; the others finish on their own.
    const { votes } = await collectVotes(
      members,
      async (member) => {
        await member.renew(leaseTime);
        return true;
      },
      this.#endpointTimeout,
      undefined,
      (so) => {
        const yes = so.filter((v) => v.outcome === "granted").length;
        return yes >= quorum || so.length - yes > members.length - quorum;
      },
    );
    const renewed = votes.filter((v) => v.outcome === "granted").length;
    const { held } = decide(renewed, this.locks.length, leaseTime, performance.now() - started);
    if (held) {
      return {
        expiresAt: startedAt + leaseTime - driftOf(leaseTime),
        sent: { wall: startedAt, mono: started },
      };
    }
    const lost = votes.filter((v) => v.outcome === "failed" && v.error instanceof LeaseLostError);
    const failure = votes.find(
      (v) => v.outcome === "failed" && !(v.error instanceof LeaseLostError),
    );
    // Enough endpoints may still hold it: a retry can tell.
    if (failure && members.length - lost.length >= this.quorum && failure.outcome === "failed") {
      throw failure.error instanceof TransportError
        ? failure.error
        : new TransportError(
            this.locks.map((l) => l.name).join("+"),
            "RedLock renewal failed",
            true,
          );
    }
    return false;
  }
}
