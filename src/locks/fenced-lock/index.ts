/**
 * Fenced lock: Redisson's RFencedLock over HTTP. The reentrant lock (same HASH, same release,
 * renew, cancel and wake-up scripts) whose every grant, re-entries included, also takes a
 * fencing token from `redisson_lock_token:{<name>}` (lua/fenced-lock/acquire.lua), returned as
 * `lease.fencingToken`. Tokens follow the rule max(last + 1, Redis server time in µs), so they
 * keep rising even after Redis loses the counter (see the script's header).
 * @module
 */

import type { LockContext } from "../../context.js";
import type { Lease } from "../../lease/lease.js";
import { fencedLockToken } from "../../lua/fenced-lock.gen.js";
import { asInteger } from "../../transport/index.js";
import { HashLock, type LockOptions, type TryLockOptions } from "../lock/base.js";
import type { FencedLockInspection } from "../lock/inspect.js";
import { type AcquireResult, acquire, type HoldSettings, reportCall } from "../protocol.js";
import { FencedLockHolds, tokenKey } from "./hold.js";

export type { FencedLockInspection } from "../lock/inspect.js";

/** A lease of a fenced lock: `fencingToken` is always set (a positive safe integer). */
export type FencedLease = Lease & { readonly fencingToken: number };

/**
 * A reentrant lock with fencing tokens (Redisson RFencedLock). Get one with
 * `edgelock.getFencedLock(name)`; the object holds no state. Same methods and waiting as
 * `getLock`; every lease it grants carries `lease.fencingToken`, a safe integer strictly greater
 * than every token granted before on this name (across owners, re-entries and Redis restarts
 * without persistence, as long as Redis's clock does not go back further than Redis was down).
 * Pass the token with every write to the guarded resource, and have the resource reject a
 * token lower than the highest it has seen: that, not the lock, stops a holder paused past its
 * lease. A replayed grant (HTTP retry) returns the same token.
 */
export class FencedLock extends HashLock<FencedLockInspection> {
  protected readonly holds: FencedLockHolds;

  /** Internal: use `edgelock.getFencedLock(name)`. */
  constructor(ctx: LockContext, name: string) {
    super(ctx, name);
    this.holds = new FencedLockHolds(ctx, name);
  }

  /**
   * `HashLock#tryLock` (same options, requests and errors) typed with the token every grant of a
   * fenced lock carries.
   * @returns the lease with its `fencingToken`, or `null` when the lock stayed busy for `waitTime`.
   */
  override async tryLock(options?: TryLockOptions): Promise<FencedLease | null> {
    // The fenced acquire script returns a token with every grant (FencedLockHolds).
    return (await super.tryLock(options)) as FencedLease | null;
  }

  /** `HashLock#lock` (same options, requests and errors) typed with the lease's token. */
  override async lock(options?: LockOptions): Promise<FencedLease> {
    return (await super.lock(options)) as FencedLease;
  }

  protected acquireWith(
    settings: HoldSettings,
    waitTime: number | undefined,
  ): Promise<AcquireResult> {
    return acquire(this.ctx, this.holds, settings, waitTime);
  }

  /**
   * The last fencing token issued on this name, 0 when none was (Redisson
   * RFencedLock#getToken). One read-only request.
   * @throws {TransportError} when Redis could not be reached.
   */
  async getToken(): Promise<number> {
    const call = {
      script: fencedLockToken,
      name: this.name,
      keys: [tokenKey(this.name)],
      args: [],
    };
    return reportCall(this.ctx, this.name, "inspect", (counter) =>
      this.ctx.runner.run(call, asInteger, counter),
    );
  }
}
