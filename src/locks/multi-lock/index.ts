/**
 * MultiLock: Redisson's RedissonMultiLock over HTTP. Several locks, possibly of different kinds
 * and on different EdgeLock clients (different Redis databases), taken as one: all or none.
 * Members are acquired in the order given, each waiting for what is left of `waitTime`; when one
 * cannot be had, every member already taken is released and the call fails. The grant is one
 * {@link CompositeLease} whose `expiresAt` is the earliest member's and whose keep-alive renews
 * every member.
 * @module
 */

import type { LockContext } from "../../context.js";
import { LeaseLostError } from "../../errors.js";
import { noCost } from "../../events.js";
import type { Lease } from "../../lease/lease.js";
import { MAX_TIME_MS } from "../../limits.js";
import { tryWithin, untilAcquired } from "../../validate.js";
import type { TryLockOptions } from "../lock/base.js";
import { emitAcquire, holdSettings, reportError, TRY_LOCK_KEYS } from "../protocol.js";
import { CompositeLease } from "./lease.js";

export { CompositeLease, type MemberRelease } from "./lease.js";

/** A lock a MultiLock or RedLock can hold: any lock of any EdgeLock (`getLock`, `getFairLock`, …). */
export interface LockLike {
  /** Lock name (its Redis key). */
  readonly name: string;
  tryLock(
    options?: Omit<TryLockOptions, "keepAlive"> & { keepAlive?: "none" },
  ): Promise<Lease | null>;
}

/**
 * Options of {@link MultiLock.tryLock}: the `LeaseOptions` every member is taken with
 * (watchdog mode without `leaseTime`: the composite lease's timer renews them all every third of
 * the EdgeLock's `watchdogTimeout`), a `keepAlive` without a keeper, and `waitTime`. Times in
 * integer ms.
 */
export interface MultiLockOptions extends Omit<TryLockOptions, "keepAlive"> {
  /** How long to wait for all members together. @default 0 (each member tried once) */
  waitTime?: number;
  /**
   * `"timer"` renews every member every third of the lease while the invocation runs; `"none"`
   * leaves renewing to `lease.renew()`. A `LeaseKeeper` cannot keep a lease on several locks
   * alive (register the members' leases with it instead). @default "timer" without `leaseTime`, else "none"
   */
  keepAlive?: "none" | "timer";
}

/** Validates a list of member locks. */
export function checkMembers(locks: readonly unknown[], where: string): LockLike[] {
  if (locks.length === 0) throw new RangeError(`${where}: give at least one lock`);
  return locks.map((lock, i) => {
    const l = lock as Partial<LockLike> | null;
    if (
      typeof l !== "object" ||
      l === null ||
      typeof l.tryLock !== "function" ||
      typeof l.name !== "string"
    ) {
      throw new TypeError(
        `${where}: member ${i} is not a lock (edgelock.getLock(name) and the like)`,
      );
    }
    return l as LockLike;
  });
}

/**
 * Several locks taken as one (Redisson RedissonMultiLock). Get one with
 * `edgelock.getMultiLock(...locks)`; members may come from different EdgeLock clients (different
 * databases) and be of different kinds (reentrant, fair, fenced, read or write side).
 */
export class MultiLock {
  readonly #ctx: LockContext;
  /** The member locks, in acquisition order. */
  readonly locks: readonly LockLike[];

  /** Internal: use `edgelock.getMultiLock(...locks)`. */
  constructor(ctx: LockContext, locks: readonly LockLike[]) {
    this.#ctx = ctx;
    this.locks = Object.freeze([...locks]);
  }

  /**
   * Takes every member, or none, waiting up to `waitTime` in all (Redisson
   * RedissonMultiLock#tryLock(waitTime, leaseTime)): members in order, each waiting for what
   * is left; if one stays busy, or an error or abort comes, the members already taken are
   * released first. Requests: each member's acquire (1 when free).
   * @returns the lease on all members, or `null` when one stayed busy for the whole `waitTime`.
   * @throws TypeError / RangeError for bad options, before any request.
   * @throws signal.reason when aborted; {@link TransportError} when a Redis could not be reached.
   */
  async tryLock(options?: MultiLockOptions): Promise<CompositeLease | null> {
    return tryWithin(options, "tryLock", TRY_LOCK_KEYS, (o, w) => this.#acquire(o, w));
  }

  /**
   * Takes every member, waiting as long as it takes (until `signal` aborts). Redisson
   * RedissonMultiLock#lock(leaseTime).
   * @throws TypeError / RangeError for bad options, before any request.
   * @throws signal.reason when aborted; {@link TransportError} when a Redis could not be reached.
   */
  async lock(options?: Omit<MultiLockOptions, "waitTime">): Promise<CompositeLease> {
    return untilAcquired(options, "lock", TRY_LOCK_KEYS, (o, w) => this.#acquire(o, w));
  }

  async #acquire(
    o: Partial<MultiLockOptions>,
    waitTime: number | undefined,
  ): Promise<CompositeLease | null> {
    if (typeof o.keepAlive === "object") {
      throw new TypeError(
        "`keepAlive`: a lease on several locks is kept alive by the timer or renew(), not by a LeaseKeeper",
      );
    }
    const s = holdSettings(this.#ctx, o);
    s.signal?.throwIfAborted();
    const started = Date.now();
    const deadline = waitTime === undefined ? undefined : started + waitTime;
    const name = this.locks.map((l) => l.name).join("+");
    const taken: Lease[] = [];
    let acquired = false;
    try {
      for (const lock of this.locks) {
        let member: Lease | null = null;
        do {
          // Without a deadline, wait in the longest steps a lock takes until one succeeds.
          member = await lock.tryLock({
            waitTime: deadline === undefined ? MAX_TIME_MS : Math.max(0, deadline - Date.now()),
            leaseTime: s.leaseTime,
            owner: s.owner,
            signal: s.signal,
            keepAlive: "none",
          });
        } while (member === null && deadline === undefined);
        if (!member) return null;
        taken.push(member);
      }
      const lease = new CompositeLease({
        kind: "multi-lock",
        owner: s.owner,
        leaseTime: s.leaseTime,
        watchdog: s.watchdog,
        expiresAt: Math.min(...taken.map((m) => m.expiresAt)),
        members: taken,
        renew: (_lease, leaseTime) => renewAll(taken, leaseTime),
        lost: () => this.#ctx.emit({ type: "lost", name, ...noCost() }),
        backgroundError: (_lease, operation, error) =>
          reportError(this.#ctx, name, operation, error, { requests: 0 }, 0),
        // Requests are counted by each member's own client (their release events).
        released: (result, durationMs) =>
          this.#ctx.emit({ type: "release", name, ...noCost(durationMs), result }),
      });
      // A member found lost (its own expiry passed, a renewal found it gone) loses them all.
      for (const member of taken) {
        member.signal.addEventListener("abort", () => {
          const reason: unknown = member.signal.reason;
          if (!(reason instanceof LeaseLostError && reason.reason === "released")) lease.markLost();
        });
      }
      await lease.startKeepAlive(s.keepAlive, undefined);
      acquired = true;
      return lease;
    } finally {
      if (!acquired) await releaseQuietly(taken);
      // Requests are counted by each member's own client (their acquire events).
      emitAcquire(this.#ctx, name, started, { requests: 0 }, acquired, acquired ? 1 : 0);
    }
  }
}

/**
 * Renews every member (in parallel). Lost if any member is lost; a transport failure of any is
 * thrown (after all were tried) so the keep-alive retries; else the earliest member's expiry.
 */
export async function renewAll(
  members: readonly Lease[],
  leaseTime: number,
): Promise<false | { expiresAt: number }> {
  const settled = await Promise.allSettled(members.map((m) => m.renew(leaseTime)));
  if (settled.some((s) => s.status === "rejected" && s.reason instanceof LeaseLostError)) {
    return false;
  }
  const failed = settled.find((s) => s.status === "rejected");
  if (failed) throw failed.reason;
  return { expiresAt: Math.min(...members.map((m) => m.expiresAt)) };
}

/** Releases members taken by an acquire that failed; their failures go to their own events. */
export async function releaseQuietly(members: readonly Lease[]): Promise<void> {
  await Promise.allSettled(members.map((m) => m.release()));
}
