/**
 * `edgelock/lock`: the reentrant lock (Redisson RLock) alone, over the core client, with its
 * own scripts only. `EdgeLock#getLock` and `EdgeLock#withLock` are these functions.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { LockTimeoutError } from "../../errors.js";
import { checkOnLeaseLost, type OnLeaseLost, runGuarded } from "../../lease/guarded.js";
import { parseLeaseOfKind, type SerializedLease } from "../../lease/json.js";
import type { Lease } from "../../lease/lease.js";
import { DEFAULT_WITH_LOCK_WAIT_MS } from "../../limits.js";
import { checkName, checkOptions, checkWaitTime } from "../../validate.js";
import { ReentrantLock, type TryLockOptions } from "./index.js";

export * from "../shared-exports.js";
export * from "./exports.js";

/**
 * A reentrant lock (Redisson RLock, `RedissonClient#getLock`) on `name`.
 * @param client an {@link EdgeLockClient} (an `EdgeLock` is one too).
 * @param name lock name = Redis key, 1–512 characters, no `{` or `}`.
 * @throws TypeError / RangeError for a bad name, or when `client` is not an EdgeLockClient.
 *
 * @example
 * ```ts
 * import { Redis } from "@upstash/redis";
 * import { EdgeLockClient, getLock } from "edgelock/lock";
 * const client = new EdgeLockClient({ redis: Redis.fromEnv() });
 * const lease = await getLock(client, "invoice:42").tryLock({ waitTime: 2_000, leaseTime: 10_000 });
 * if (lease) {
 *   try { await work(); } finally { await lease.release(); }
 * }
 * ```
 */
export function getLock(client: EdgeLockClient, name: string): ReentrantLock {
  return new ReentrantLock(contextOf(client), checkName(name));
}

/**
 * Rebuilds a lease of a reentrant lock (kind `"lock"`, also an idempotency key's claim) from
 * `lease.toJSON()` (or its JSON string), so another invocation can renew or release it:
 * `EdgeLock#restoreLease` for `"lock"` leases only, without bundling the other kinds.
 * Synchronous; no keep-alive is started; no request is sent.
 * @param client an {@link EdgeLockClient} (an `EdgeLock` is one too), on the lease's database.
 * @param serialized what `lease.toJSON()` returned, or its JSON string.
 * @throws TypeError for anything that is not a serialized lease, for a lease another kind issued
 * (a fair lock's is restored by `restoreFairLockLease` of `edgelock/fair-lock`, and so on), or
 * when `client` is not an EdgeLockClient; RangeError for a bad name or owner in it.
 *
 * @example
 * ```ts
 * import { restoreLockLease } from "edgelock/lock";
 * // One invocation hands `JSON.stringify(lease)` on; another releases the hold:
 * const lease = restoreLockLease(client, json);
 * await lease.release();
 * ```
 */
export function restoreLockLease(
  client: EdgeLockClient,
  serialized: SerializedLease | string,
): Lease {
  const ctx = contextOf(client);
  const s = parseLeaseOfKind(serialized, ["lock"], "restoreLockLease", "edgelock/lock");
  return new ReentrantLock(ctx, s.name).restore(s);
}

/** Options of {@link withLock}: those of `tryLock`, waiting 10 s by default. */
export interface WithLockOptions extends TryLockOptions {
  /** How long to wait for the lock, in ms, integer in [0, 86 400 000]. @default 10000 */
  waitTime?: number;
  /**
   * What to do when the lease was lost while `fn` ran (another owner may have held the lock
   * meanwhile): `"throw"` rejects with {@link LeaseLostError} once `fn` has settled, its value
   * in `error.result` or its error in `error.cause` (`error.outcome` says which); `"return"`
   * returns `fn`'s value (or rethrows its error) as if the lease had held. @default "throw"
   */
  onLeaseLost?: OnLeaseLost;
}

/**
 * Runs `fn` while holding the lock `name`, then releases it (also when `fn` throws).
 * `fn` receives the lease; its `signal` aborts if the lease is lost. A failed release is
 * reported as an `error` event, not thrown: the lock then expires after its lease.
 *
 * The lease counts as lost while `fn` ran when its signal aborted for a loss before the release
 * (a renewal found the hold gone, or its `expiresAt` passed unrenewed) or the release found the
 * hold gone (`"expired"`, `"not-owner"`): Redisson's `unlock()` throws
 * `IllegalMonitorStateException` then. A release that failed (transport) tells nothing.
 * @returns what `fn` returns.
 * @throws {LeaseLostError} (`code` `"LEASE_LOST"`, `outcome`, `result` or `cause`) after `fn`
 * settled, when the lease was lost meanwhile, unless `onLeaseLost: "return"`.
 * @throws {LockTimeoutError} when the lock stayed busy for `waitTime` (default 10 000 ms).
 * @throws signal.reason when aborted while waiting.
 * @throws what `fn` throws, when the lease held (or with `onLeaseLost: "return"`).
 * @throws TypeError / RangeError for a bad name, function or option, before any request.
 */
export async function withLock<T>(
  client: EdgeLockClient,
  name: string,
  fn: (lease: Lease) => T | Promise<T>,
  options?: WithLockOptions,
): Promise<T> {
  const lock = getLock(client, name);
  if (typeof fn !== "function") throw new TypeError("withLock: `fn` must be a function");
  const o = checkOptions(options, "withLock", [
    "waitTime",
    "leaseTime",
    "keepAlive",
    "signal",
    "owner",
    "onLeaseLost",
  ]);
  const onLeaseLost = checkOnLeaseLost(o.onLeaseLost);
  const waitTime = checkWaitTime(o.waitTime) ?? DEFAULT_WITH_LOCK_WAIT_MS;
  const { onLeaseLost: _, ...acquire } = o;
  const { lease, attempts } = await lock.tryAcquire({ ...acquire, waitTime });
  if (!lease) throw new LockTimeoutError(name, waitTime, attempts);
  return runGuarded({ client, name, lease, onLeaseLost, fn: () => fn(lease) });
}
