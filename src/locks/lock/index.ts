/**
 * Reentrant lock: Redisson's RLock over HTTP. Data layout as Redisson's (a HASH at the lock
 * name, field `<clientId>:<taskId>`, value = hold count, PEXPIRE = lease; plus one epoch field
 * of ours), so a Redisson JVM client and edgelock exclude each other on the same name. The
 * scripts are lua/lock/*.lua; the hold protocol over them is ./hold.ts.
 * @module
 */

import type { LockContext } from "../../context.js";
import { lockRenew } from "../../lua/lock.gen.js";
import { keySlot } from "../../slot.js";
import type { RequestCounter } from "../../transport/index.js";
import { asIntegers } from "../../transport/index.js";
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
 * with its acquire script RedissonLock#tryLockInnerAsync and its pub/sub wake-ups over the REST
 * API's SSE: a waiter registers with its busy attempt and waits for a message on its client's
 * wake channel, the release that frees the lock publishes to one registered waiter, and each
 * wait is bounded by the holder's lease and the waiter's deadline; with `wait: "poll"` waiters
 * poll with jittered backoff.
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

/** How many slot groups of one batched renewal on a cluster are renewed at once. */
const SLOT_GROUPS_IN_FLIGHT = 8;

/**
 * Renews many leases in one request (Redisson LockRenewalScheduler's batched renewal). On a
 * Redis Cluster (`ctx.cluster`) the leases are grouped by the hash slot of their name, one
 * request per group (at most {@link SLOT_GROUPS_IN_FLIGHT} at once): a script may only touch
 * keys of one slot. Every group is tried even when another fails.
 * @returns per lease, in the order given, true when renewed, false when no longer held.
 * @throws {TransportError} when a request failed (the first such error, after every group
 * settled; the other groups' leases may have been renewed).
 */
export async function renewLeases(
  ctx: LockContext,
  leases: readonly LeaseToRenew[],
  counter: RequestCounter,
): Promise<boolean[]> {
  if (leases.length === 0) return [];
  if (!ctx.cluster) return renewBatch(ctx, leases, counter);
  const bySlot = new Map<number, number[]>();
  for (const [index, lease] of leases.entries()) {
    const slot = keySlot(lease.name);
    const group = bySlot.get(slot);
    if (group) group.push(index);
    else bySlot.set(slot, [index]);
  }
  if (bySlot.size === 1) return renewBatch(ctx, leases, counter);
  const groups = [...bySlot.values()];
  const renewed = new Array<boolean>(leases.length).fill(false);
  const failures: unknown[] = [];
  let next = 0;
  const worker = async () => {
    for (let group = groups[next++]; group; group = groups[next++]) {
      try {
        const members = group.map((i) => leases[i] as LeaseToRenew);
        const reply = await renewBatch(ctx, members, counter);
        for (const [k, i] of group.entries()) renewed[i] = reply[k] === true;
      } catch (error) {
        failures.push(error);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(SLOT_GROUPS_IN_FLIGHT, groups.length) }, worker));
  if (failures.length > 0) throw failures[0];
  return renewed;
}

/** One renewal request (renew.lua) for leases whose names share a hash slot, or any Redis. */
async function renewBatch(
  ctx: LockContext,
  leases: readonly LeaseToRenew[],
  counter: RequestCounter,
): Promise<boolean[]> {
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
