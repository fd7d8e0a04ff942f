/**
 * `guardScheduled()`: a lock around a Cron Trigger handler. Cloudflare promises neither mutual
 * exclusion nor exactly-once delivery for cron invocations (a run longer than its interval
 * overlaps the next one, a retried invocation repeats one), so the guard skips a run while
 * another run of the same cron holds the lock, and skips a second delivery of the same
 * scheduled time.
 * @module
 */
import { type EdgeLockClient, reportEvent } from "../src/core.js";
import { noCost } from "../src/events.js";
import { checkOnLeaseLost, type OnLeaseLost, runGuarded } from "../src/lease/guarded.js";
import type { KeepAlive, Lease } from "../src/lease/lease.js";
import { checkKeepAlive } from "../src/lease/lease.js";
import { tryLockOnce } from "../src/locks/lock/once.js";
import { endQuietly } from "../src/settle.js";
import {
  checkFunction,
  checkLeaseTime,
  checkMs,
  checkName,
  checkOptions,
} from "../src/validate.js";

/** Options of {@link guardScheduled}. Times in integer ms. */
export interface GuardScheduledOptions<Env> {
  /**
   * The EdgeLock (or the core `EdgeLockClient` of `edgelock/lock`, which bundles the lock alone)
   * of one invocation, built from its `env` (Workers hand credentials to each invocation), e.g.
   * `(env) => new EdgeLock({ redis: Redis.fromEnv(env) })`. Its `onEvent`
   * receives a `skip` event for every skipped run. Required.
   */
  edgelock: (env: Env) => EdgeLockClient;
  /**
   * Lock name, or a function of the controller and env returning it. Runs that share a name
   * exclude each other. @default `cron:<controller.cron>`, one lock per cron expression
   */
  name?: string | ((controller: ScheduledController, env: Env) => string);
  /**
   * Fixed lease in ms (integer in [1, 86 400 000]), not renewed. Omitted: watchdog mode, TTL =
   * the EdgeLock's `watchdogTimeout`, kept alive by `keepAlive`.
   */
  leaseTime?: number;
  /**
   * Keep-alive of the run's lease, or a function of `env` returning it, e.g.
   * `(env) => ({ keeper: env.LEASE_KEEPER, maxHoldTime: 15 * 60_000 })`.
   * @default "timer" in watchdog mode, "none" with a fixed `leaseTime`
   */
  keepAlive?: KeepAlive | ((env: Env) => KeepAlive);
  /**
   * How long a delivery of one scheduled time stays marked as run, in ms (integer in
   * [0, 86 400 000]): a second delivery of the same `controller.scheduledTime` within this window
   * skips, even after the first run finished. A run that throws clears its mark so that a retry
   * can run. 0 turns this off (one request less per run). @default 600000
   */
  dedupeWindow?: number;
  /**
   * What to do when the run's lease was lost while the handler ran (another run may have
   * overlapped it): `"throw"` rejects with `LeaseLostError` after the release (the run shows as
   * failed; the handler's error, if it threw, is `error.cause`, and its scheduled time stays
   * marked when it returned); `"return"` ends the run as if the lease had held.
   * @default "throw"
   */
  onLeaseLost?: OnLeaseLost;
}

/** What a guarded run did: the result of {@link ScheduledGuard.run}. */
export type ScheduledOutcome =
  | { ran: true }
  | {
      ran: false;
      /** `"overlap"`: another run holds the lock; `"duplicate"`: this scheduled time already ran. */
      reason: "overlap" | "duplicate";
      /**
       * In ms (PTTL, as the attempt saw it): with `"overlap"`, the holder's remaining lease; with
       * `"duplicate"`, how much longer this scheduled time stays marked as run.
       */
      holderTtl: number;
    };

/**
 * What {@link guardScheduled} returns: a Cron Trigger handler, usable as it is as `scheduled`
 * in a Worker's default export (`satisfies ExportedHandler<Env>` holds), plus `run`, the same
 * guarded run resolving to what it did (for tests and wrappers).
 */
export interface ScheduledGuard<Env> {
  /** Runs the guarded handler, or skips; resolves once the lease is released. */
  (controller: ScheduledController, env: Env, ctx: ExecutionContext): Promise<void>;
  /** Same as calling the guard, resolving to a {@link ScheduledOutcome}. */
  run(controller: ScheduledController, env: Env, ctx: ExecutionContext): Promise<ScheduledOutcome>;
}

/** A `scheduled` handler that also receives the run's lease (its `signal` aborts if lost). */
export type GuardedScheduledHandler<Env> = (
  controller: ScheduledController,
  env: Env,
  ctx: ExecutionContext,
  lease: Lease,
) => void | Promise<void>;

/** Default {@link GuardScheduledOptions.dedupeWindow}: ten minutes. */
export const DEFAULT_DEDUPE_WINDOW_MS = 600_000;

const OPTION_KEYS = ["edgelock", "name", "leaseTime", "keepAlive", "dedupeWindow", "onLeaseLost"];

/**
 * Wraps a `scheduled(controller, env, ctx)` handler so that at most one run of a cron holds its
 * lock at a time: a run that finds the lock taken (or its scheduled time already run) skips and
 * reports a `skip` event (`reason: "overlap" | "duplicate"`, `name` = the lock name) through the
 * EdgeLock's `onEvent`; `guard.run(...)` then resolves `{ ran: false, reason }`. The
 * lock is released when the handler settles (awaited: the runtime awaits a scheduled handler's
 * promise, so no `waitUntil` is needed); a failed release is reported as an `error` event and
 * the lock then expires after its lease. An error thrown by the handler propagates after the
 * release, so the run still shows as failed. A lease lost while the handler ran (its signal
 * aborted for a loss, or the release found the hold gone) makes the run reject with
 * `LeaseLostError` after the release, unless `onLeaseLost: "return"`.
 *
 * Requests per run on a warm client: one acquire, one dedupe mark (unless `dedupeWindow: 0`),
 * one release, plus the keep-alive's renewals.
 *
 * @example
 * ```ts
 * export default {
 *   scheduled: guardScheduled(
 *     {
 *       edgelock: (env) => new EdgeLock({ redis: Redis.fromEnv(env) }),
 *       keepAlive: (env) => ({ keeper: env.LEASE_KEEPER, maxHoldTime: 10 * 60_000 }),
 *     },
 *     async (controller, env, ctx, lease) => { await rebuildIndex(env, lease.signal); },
 *   ),
 * } satisfies ExportedHandler<Env>;
 * ```
 * @throws TypeError / RangeError for bad options, when called (not per run).
 */
export function guardScheduled<Env>(
  options: GuardScheduledOptions<Env>,
  handler: GuardedScheduledHandler<Env>,
): ScheduledGuard<Env> {
  const o = checkOptions(options, "guardScheduled", OPTION_KEYS);
  const edgelockOf = checkFunction<(env: Env) => EdgeLockClient>(o.edgelock, "edgelock");
  if (!edgelockOf) throw new TypeError("guardScheduled: `edgelock` is required");
  if (typeof handler !== "function")
    throw new TypeError("guardScheduled: `handler` must be a function");
  if (typeof o.name !== "function" && o.name !== undefined) checkName(o.name);
  const leaseTime = checkLeaseTime(o.leaseTime);
  if (typeof o.keepAlive !== "function") checkKeepAlive(o.keepAlive);
  const dedupeWindow =
    o.dedupeWindow === undefined
      ? DEFAULT_DEDUPE_WINDOW_MS
      : checkMs(o.dedupeWindow, "dedupeWindow", 0);
  const onLeaseLost = checkOnLeaseLost(o.onLeaseLost);

  const run = async (
    controller: ScheduledController,
    env: Env,
    ctx: ExecutionContext,
  ): Promise<ScheduledOutcome> => {
    const started = Date.now();
    const edgelock = edgelockOf(env);
    const name = checkName(
      typeof o.name === "function"
        ? o.name(controller, env)
        : (o.name ?? `cron:${controller.cron}`),
    );
    const keepAlive = typeof o.keepAlive === "function" ? o.keepAlive(env) : o.keepAlive;
    const skip = (reason: "overlap" | "duplicate", holderTtl: number) => {
      reportEvent(edgelock, {
        type: "skip",
        // The user's lock name, also for a duplicate (whose mark is an internal key).
        name,
        reason,
        // The acquire event already counted the request; summing events stays exact.
        ...noCost(Date.now() - started),
        ...(reason === "overlap" ? { holderTtl } : {}),
      });
      return { ran: false, reason, holderTtl } as const;
    };

    const attempt = await tryLockOnce(edgelock, name, { leaseTime, keepAlive });
    if (!attempt.lease) return skip("overlap", attempt.holderTtl);
    const lease = attempt.lease;
    const release = () => endQuietly(edgelock, name, () => lease.release());
    let mark: Lease | null = null;
    if (dedupeWindow > 0) {
      const markName = `${name}#${controller.scheduledTime}`;
      const marked = await tryLockOnce(edgelock, markName, {
        leaseTime: dedupeWindow,
        keepAlive: "none",
      }).catch(async (error: unknown) => {
        await release();
        throw error;
      });
      if (!marked.lease) {
        await release();
        return skip("duplicate", marked.holderTtl);
      }
      mark = marked.lease;
    }
    const held = mark;
    await runGuarded({
      client: edgelock,
      name,
      lease,
      onLeaseLost,
      fn: () => handler(controller, env, ctx, lease),
      end: async (settled) => {
        // On success the mark stays until it expires: that is what makes a redelivery skip. A
        // failed run clears it before the lock is freed, so that a retry holding the lock runs.
        if (settled.outcome === "threw" && held) {
          await endQuietly(edgelock, held.name, () => held.release());
        }
        return lease.release();
      },
    });
    return { ran: true } as const;
  };
  const guard = async (controller: ScheduledController, env: Env, ctx: ExecutionContext) => {
    await run(controller, env, ctx);
  };
  return Object.assign(guard, { run });
}
