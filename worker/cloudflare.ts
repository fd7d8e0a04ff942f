/**
 * `edgelock/cloudflare`: the Cloudflare Workers side of edgelock.
 *
 * - {@link LeaseKeeper}: the Durable Object that renews leases across invocations (re-export it
 *   from your Worker's entry module and bind it in `wrangler.toml`);
 * - {@link guardScheduled}: a lock around a Cron Trigger handler.
 *
 * See docs/cloudflare.md for the `wrangler.toml` entries.
 * @module
 */

export type {
  KeeperRegistration,
  KeeperReply,
  KeeperStatus,
  LeaseKeeperBinding,
  LeaseKeeperStub,
} from "../src/keeper.js";
export {
  KEEPER_MAX_BATCH,
  KEEPER_MIN_LEASE_TIME_MS,
  KEEPER_TOMBSTONE_MS,
  LeaseKeeper,
  type LeaseKeeperEnv,
} from "./lease-keeper.js";
export {
  DEFAULT_DEDUPE_WINDOW_MS,
  type GuardedScheduledHandler,
  type GuardScheduledOptions,
  guardScheduled,
  type ScheduledGuard,
  type ScheduledOutcome,
} from "./scheduled.js";
