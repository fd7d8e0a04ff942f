import type { LockEvent } from "./events.js";
import type { LeaseKeeperBinding } from "./keeper.js";
import type { ScriptRunner } from "./transport/index.js";
import type { BackoffPolicy } from "./wait/backoff.js";

/** What every primitive gets from its EdgeLock. Internal. */
export interface LockContext {
  readonly runner: ScriptRunner;
  readonly clientId: string;
  readonly watchdogTimeout: number;
  /** How long replay records live, in ms. */
  readonly replayWindow: number;
  /**
   * How long a call that cannot be repeated safely resends its request until Redis answers, in
   * ms (src/locks/definite.ts); at most half of `replayWindow`.
   */
  readonly definiteWithin: number;
  readonly backoff: BackoffPolicy;
  /** How waiters wait: for a release's message where the client subscribes, or polling. */
  readonly wait: "auto" | "subscribe" | "poll";
  /** Most subscriptions open at once. */
  readonly maxSubscriptions: number;
  readonly keeper: LeaseKeeperBinding | undefined;
  /**
   * The Redis behind the REST API is a Redis Cluster: a request touching several names (the
   * batched renewal) is split into one request per hash slot. Absent: false.
   */
  readonly cluster?: boolean;
  /** Delivers an event to `onEvent`, ignoring listener errors. */
  emit(event: LockEvent): void;
  /**
   * False when nobody receives events (no `onEvent`): the hot paths then skip building them.
   * Absent: true.
   */
  readonly observed?: boolean;
  /** Keeps a background task (e.g. cancelling an unanswered acquire) alive: `waitUntil`. */
  background(task: Promise<unknown>): void;
}

/** Redisson's key names, shared by every primitive that uses them. */
export const keys = {
  /** Pub/sub channel Redisson waiters listen on; unlocks publish 0 there. */
  channel: (name: string) => `redisson_lock__channel:{${name}}`,
  /**
   * Prefix of a name's replay records (`<prefix>:<request id>`, lua/lib/replay.lua): same hash
   * slot as the lock.
   */
  replay: (name: string) => `edgelock_replay:{${name}}`,
  /**
   * The key scripts take after {@link replay}: a position kept so that every script's keys stay
   * where they were; no script reads or writes it.
   */
  replayOld: (name: string) => `edgelock_replay:{${name}}:old`,
  /** Registered waiters of a primitive (ZSET waiter id -> when it lapses): lua/lib/wake.lua. */
  waiting: (name: string) => `edgelock_waiting:{${name}}`,
  /** Prefix of the clients' wake channels (`<prefix>:<client>`): lua/lib/wake.lua. */
  wake: (name: string) => `edgelock_wake:{${name}}`,
};
