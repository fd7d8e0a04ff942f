/**
 * Helpers for the Worker tests (they run inside workerd: no node:* modules). Two bridges on the
 * same redis-server: the shared one (test code's own clients) and the worker bridge, which the
 * reference Worker and its LeaseKeeper use (`env.UPSTASH_REDIS_REST_URL`) and whose faults and
 * stats only these tests touch (the workers project runs one file at a time).
 */

import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Redis } from "@upstash/redis/cloudflare";
import { afterEach, beforeEach, inject } from "vitest";
import type { BridgeStats, FaultConfig } from "../../src/bridge/index.js";
import { EdgeLock, type EdgeLockOptions, type LockEvent } from "../../src/index.js";
import type { KeeperStatus } from "../../src/keeper.js";

/** Where a bridge listens and the token it wants. */
export interface Endpoint {
  url: string;
  token: string;
}

/** The bridge the Node tests share (no faults ever). */
export const sharedBridge: Endpoint = { url: inject("bridgeUrl"), token: inject("bridgeToken") };
/** The bridge of the reference Worker and the LeaseKeeper in these tests. */
export const workerBridge: Endpoint = {
  url: inject("faultBridgeUrl"),
  token: inject("bridgeToken"),
};

/** A real `@upstash/redis` (Cloudflare entry) client on `endpoint`. */
export function redisOn(endpoint: Endpoint = sharedBridge): Redis {
  return new Redis({ url: endpoint.url, token: endpoint.token });
}

/** A fresh random key prefix such as `wt:3f9a1c2b:`, one per test file. */
export function keyPrefix(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(4));
  return `wt:${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}:`;
}

/**
 * A keeper instance for each test of the file, under a random name so that no two tests share
 * one (alarms outlive tests): registers the hooks that name it before each test, and wipe it and
 * clear the worker bridge's faults after.
 * @returns the current test's instance; read `name` inside a test or hook.
 */
export function useKeeperInstance(): { readonly name: string } {
  let name = "";
  beforeEach(() => {
    name = `keeper-${crypto.randomUUID()}`;
  });
  afterEach(async () => {
    await workerBridgeControl.clearFaults();
    await wipeKeeper(name);
  });
  return {
    get name() {
      return name;
    },
  };
}

/** An EdgeLock on the shared bridge with the LeaseKeeper binding, recording its events. */
export function recordingEdgeLock(options: Partial<EdgeLockOptions> = {}) {
  const events: LockEvent[] = [];
  const waiters = new Set<() => void>();
  const edgelock = new EdgeLock({
    redis: redisOn(),
    keeper: env.LEASE_KEEPER,
    onEvent: (e) => {
      events.push(e);
      for (const w of [...waiters]) w();
    },
    ...options,
  });
  return {
    edgelock,
    events,
    /** Sum of `requests` over the recorded events of `type`. */
    requests(type: LockEvent["type"]): number {
      return events.filter((e) => e.type === type).reduce((n, e) => n + e.requests, 0);
    },
    /** Resolves with the first event matching `predicate`, recorded before or after the call. */
    until(predicate: (e: LockEvent, all: readonly LockEvent[]) => boolean): Promise<LockEvent> {
      return new Promise((resolve) => {
        const check = () => {
          const found = events.find((e) => predicate(e, events));
          if (!found) return;
          waiters.delete(check);
          resolve(found);
        };
        waiters.add(check);
        check();
      });
    },
  };
}

/** Control of the worker bridge: faults and request counters. */
export const workerBridgeControl = {
  async setFaults(faults: FaultConfig): Promise<void> {
    await control("POST", "/__bridge/faults", faults);
  },
  async clearFaults(): Promise<void> {
    await control("DELETE", "/__bridge/faults");
  },
  async stats(): Promise<BridgeStats> {
    return (await control("GET", "/__bridge/stats")) as BridgeStats;
  },
  async resetStats(): Promise<void> {
    await control("POST", "/__bridge/stats/reset");
  },
};

async function control(method: string, path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${workerBridge.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${workerBridge.token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const parsed: unknown = await response.json();
  if (!response.ok) throw new Error(`${method} ${path} failed with ${response.status}`);
  return parsed;
}

/** Resolves after `ms`: only where time itself is what the test waits for. */
export function elapse(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Polls `probe` every `everyMs` until it returns a value other than `undefined`, for conditions
 * that live in another process (Redis, a Durable Object) and have no event to await.
 * @throws Error after `timeoutMs`.
 */
export async function eventually<T>(
  probe: () => Promise<T | undefined>,
  { timeoutMs = 10_000, everyMs = 10 } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await elapse(everyMs);
  }
}

/** A stub of the keeper instance `name`. */
export function keeperStub(name: string) {
  return env.LEASE_KEEPER.getByName(name);
}

/** The keeper's status of lease `id`. */
export function keeperStatus(name: string, id: string): Promise<KeeperStatus> {
  return keeperStub(name).status(id);
}

/** The keeper instance's scheduled alarm (epoch ms) or null. */
export function keeperAlarm(name: string): Promise<number | null> {
  return runInDurableObject(keeperStub(name), (_, state) => state.storage.getAlarm());
}

/**
 * Moves the keeper's own alarm an hour away, for a test that runs the alarm by hand: called in
 * the same `runInDurableObject` as that run, so the alarm it re-arms never fires by itself.
 */
export function parkAlarm(state: DurableObjectState): Promise<void> {
  return state.storage.setAlarm(Date.now() + 3_600_000);
}

/** Wipes a keeper instance (storage and alarm), so nothing it holds outlives the test. */
export async function wipeKeeper(name: string): Promise<void> {
  await runInDurableObject(keeperStub(name), async (_, state) => {
    await state.storage.deleteAlarm();
    await state.storage.deleteAll();
  });
}

/** Stored keys of a keeper instance (`lease:<id>`, `ended:<id>`). */
export function keeperKeys(name: string): Promise<string[]> {
  return runInDurableObject(keeperStub(name), async (_, state) => [
    ...(await state.storage.list()).keys(),
  ]);
}
