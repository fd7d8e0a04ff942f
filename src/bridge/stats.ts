/**
 * Request and command counters of a bridge.
 *
 * @module
 */

import type { BlockingPoolStats } from "./redis.js";

/** Counters since the bridge started or since the last reset. Control endpoints never count. */
export interface BridgeStats {
  /**
   * Authenticated data requests (`POST /`, `/pipeline`, `/multi-exec`, `/subscribe`,
   * `/psubscribe`, `/publish`), faulted ones included.
   */
  requests: number;
  /** {@link BridgeStats.requests} split by route. */
  byRoute: {
    single: number;
    pipeline: number;
    multiExec: number;
    subscribe: number;
    psubscribe: number;
    publish: number;
  };
  /** Commands in data requests whose body was valid (a pipeline of 3 counts 3). */
  commands: number;
  /** {@link BridgeStats.commands} by lower-cased command name, e.g. `{ "evalsha": 2 }`. */
  byCommand: Record<string, number>;
  /** Requests affected by a fault rule. */
  faultsInjected: number;
  /**
   * The connections that serve blocking commands: `inUse` and `open` now, `max` configured,
   * `refused` requests answered 503 because all `max` were in use (reset with the counters).
   */
  blocking: BlockingPoolStats;
  /** Pub/sub subscriptions (`/subscribe`, `/psubscribe`) open now, and the most allowed. */
  subscriptions: { open: number; max: number };
}

/** The data routes of the REST protocol. */
export type Route = keyof BridgeStats["byRoute"];

/** Mutable counters behind {@link BridgeStats}. */
export class StatsRecorder {
  #requests = 0;
  #byRoute: BridgeStats["byRoute"] = emptyRoutes();
  #commands = 0;
  #byCommand = new Map<string, number>();

  /** Counts one authenticated data request on `route`. */
  request(route: Route): void {
    this.#requests += 1;
    this.#byRoute[route] += 1;
  }

  /** Counts the commands of a valid request by their lower-cased names. */
  commands(names: readonly string[]): void {
    this.#commands += names.length;
    for (const name of names) this.#byCommand.set(name, (this.#byCommand.get(name) ?? 0) + 1);
  }

  /**
   * A snapshot; `faultsInjected`, `blocking` and `subscriptions` are supplied by the caller
   * (they live with the fault rules, the blocking pool and the subscriptions).
   */
  snapshot(
    faultsInjected: number,
    blocking: BlockingPoolStats,
    subscriptions: BridgeStats["subscriptions"],
  ): BridgeStats {
    return {
      requests: this.#requests,
      byRoute: { ...this.#byRoute },
      commands: this.#commands,
      byCommand: Object.fromEntries(this.#byCommand),
      faultsInjected,
      blocking,
      subscriptions,
    };
  }

  /** Sets every counter back to zero. */
  reset(): void {
    this.#requests = 0;
    this.#byRoute = emptyRoutes();
    this.#commands = 0;
    this.#byCommand.clear();
  }
}

function emptyRoutes(): BridgeStats["byRoute"] {
  return { single: 0, pipeline: 0, multiExec: 0, subscribe: 0, psubscribe: 0, publish: 0 };
}
