/**
 * Reentrant lock: Redisson's RLock over HTTP. Data layout as Redisson's (a HASH at the lock
 * name, field `<clientId>:<taskId>`, value = hold count, PEXPIRE = lease; plus one epoch field
 * of ours), so a Redisson JVM client and edgelock exclude each other on the same name. The
 * scripts are lua/lock/*.lua; the hold protocol over them is ./hold.ts.
 * @module
 */

import { lockRenew } from "../../lua.gen.js";
import type { RequestCounter } from "../../transport/index.js";
import { asIntegers } from "../../transport/index.js";
import type { LockContext } from "../context.js";
import { type AcquireResult, acquire, type HoldSettings } from "../protocol.js";
import { HashLock } from "./base.js";
import { LockHolds } from "./hold.js";
import type { LockInspection } from "./inspect.js";

export type { AcquireResult } from "../protocol.js";
export type { LockOptions, TryLockOptions } from "./base.js";
export type { LockHolder, LockInspection } from "./inspect.js";
export { MAX_INSPECT_HOLDERS } from "./inspect.js";

/**
 * A reentrant, non-fair distributed lock (Redisson RLock). Get one with `edgelock.getLock(name)`;
 * the object holds no state, so it can be created per request. Redisson RedissonLock#tryLock
 * with its acquire script RedissonLock#tryLockInnerAsync, waking waiters over HTTP instead of
 * pub/sub: a waiter registers with its busy attempt and blocks on the name's wake list (BLPOP),
 * the release that frees the lock pushes one token, and each wait is bounded by the holder's
 * lease and the waiter's deadline; with `wait: "poll"` waiters poll with jittered backoff.
 */
export class ReentrantLock extends HashLock<LockInspection> {
  protected readonly holds: LockHolds;

  /** Internal: use `edgelock.getLock(name)`. */
  constructor(ctx: LockContext, name: string) {
    super(ctx, name);
    this.holds = new LockHolds(ctx, name);
  }

  protected acquireWith(
    settings: HoldSettings,
    waitTime: number | undefined,
  ): Promise<AcquireResult> {
    return acquire(this.ctx, this.holds, settings, waitTime);
  }
}

/** One lease to renew in a batch: see {@link renewLeases}. */
export interface LeaseToRenew {
  name: string;
  owner: string;
  leaseTime: number;
}

/**
 * Renews many leases in one request (Redisson LockRenewalScheduler's batched renewal).
 * @returns per lease, true when renewed, false when no longer held.
 */
export async function renewLeases(
  ctx: LockContext,
  leases: readonly LeaseToRenew[],
  counter: RequestCounter,
): Promise<boolean[]> {
  if (leases.length === 0) return [];
  const reply = await ctx.runner.run(
    {
      script: lockRenew,
      name: leases[0]?.name ?? "",
      keys: leases.map((l) => l.name),
      args: leases.flatMap((l) => [l.leaseTime, l.owner]),
    },
    (r) => asIntegers(r, leases.length),
    counter,
  );
  return reply.map((n) => n === 1);
}
