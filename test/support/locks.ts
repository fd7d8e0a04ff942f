/** Helpers for lock tests: an EdgeLock on the shared bridge that records its events. */
import type { Redis } from "@upstash/redis";
import { expect } from "vitest";
import {
  EdgeLock,
  type EdgeLockOptions,
  type Lease,
  type LockEvent,
  type RedisLike,
} from "../../src/index.js";
import { bridgeRedis } from "./env.js";

/** An EdgeLock plus every event it emitted and every background task it started. */
export interface RecordingEdgeLock {
  edgelock: EdgeLock;
  redis: Redis;
  events: LockEvent[];
  /** Background tasks handed to `waitUntil` (cancellations of unanswered acquires). */
  background: Promise<unknown>[];
  /** Sum of `requests` over the recorded events of `type`. */
  requests(type?: LockEvent["type"]): number;
  /** Resolves with the first event (recorded before or after the call) matching `predicate`. */
  until(predicate: (event: LockEvent, all: readonly LockEvent[]) => boolean): Promise<LockEvent>;
  /** Resolves once `n` `waiting` events were recorded (a waiting call is in its `n`th wait). */
  waited(n: number): Promise<LockEvent>;
}

/** An EdgeLock on `redis` (default: a fresh client on the shared bridge) recording its events. */
export function recordingEdgeLock(
  options: Partial<EdgeLockOptions> = {},
  redis: Redis = bridgeRedis(),
): RecordingEdgeLock {
  const events: LockEvent[] = [];
  const background: Promise<unknown>[] = [];
  const waiters = new Set<(e: LockEvent) => void>();
  const edgelock = new EdgeLock({
    redis,
    onEvent: (e) => {
      events.push(e);
      for (const w of [...waiters]) w(e);
    },
    waitUntil: (p) => background.push(p),
    ...options,
  });
  const until: RecordingEdgeLock["until"] = (predicate) =>
    new Promise((resolve) => {
      const seen = events.find((e) => predicate(e, events));
      if (seen) return resolve(seen);
      const waiter = (e: LockEvent) => {
        if (!predicate(e, events)) return;
        waiters.delete(waiter);
        resolve(e);
      };
      waiters.add(waiter);
    });
  return {
    edgelock,
    redis,
    events,
    background,
    requests: (type) =>
      events
        .filter((e) => type === undefined || e.type === type)
        .reduce((n, e) => n + e.requests, 0),
    until,
    waited: (n) => until((_e, all) => all.filter((e) => e.type === "waiting").length === n),
  };
}

/** Resolves when `signal` aborts, with its reason. */
export function aborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener("abort", () => resolve(signal.reason), { once: true });
  });
}

/**
 * The replay KEYS a script of `name` takes (lua/lib/replay.lua): the records' prefix, and the
 * position kept after it.
 */
export const replayKeys = (name: string) => [
  `edgelock_replay:{${name}}`,
  `edgelock_replay:{${name}}:old`,
];

/** Whether `key` is a replay record of `name` (`edgelock_replay:{<name>}:<request id>`). */
export const isReplayRecord = (name: string, key: string): boolean =>
  key.startsWith(`edgelock_replay:{${name}}:`);

/** Every replay record of `name`: request id → state. */
export async function replayRecords(
  raw: {
    keys(pattern: string): Promise<unknown[]>;
    get(key: string): Promise<unknown>;
  },
  name: string,
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const prefix = `edgelock_replay:{${name}}:`;
  for (const key of (await raw.keys(`edgelock_replay:*`)).map(String)) {
    if (!key.startsWith(prefix)) continue;
    const value = await raw.get(key);
    if (value !== null) out[key.slice(prefix.length)] = String(value);
  }
  return out;
}

/** Resolves with `Date.now()` at the moment `lease.signal` aborts, and the reason. */
export function abortTime(lease: Lease): Promise<{ at: number; reason: unknown }> {
  return new Promise((resolve) => {
    lease.signal.addEventListener(
      "abort",
      () => resolve({ at: Date.now(), reason: lease.signal.reason }),
      { once: true },
    );
  });
}

/**
 * A client on the shared bridge wrapped so that every script call is counted (for "nothing is
 * sent" checks).
 */
export function countingRedis(): { redis: RedisLike; calls: () => number } {
  const real: Redis = bridgeRedis();
  let n = 0;
  return {
    redis: {
      eval: (s, k, a) => {
        n++;
        return real.eval(s, k, a);
      },
      evalsha: (s, k, a) => {
        n++;
        return real.evalsha(s, k, a);
      },
    },
    calls: () => n,
  };
}

/** What {@link expectFirstWaiterLeavingTellsNext} needs of a lock kind. */
interface WaitableLock {
  lock(options: { leaseTime: number }): Promise<Lease>;
  tryLock(options: { waitTime: number; leaseTime: number }): Promise<Lease | null>;
}

/**
 * A holder that never releases (lease 2 s), a first waiter that gives up after 1 s and a second
 * one, registered behind it, that waits up to 15 s, each on its own client and `get`'s lock.
 * A queued waiter behind another is not bounded by the holder's lease (the first one takes an
 * expired lock and hands it on), so when the first one leaves, the next must learn that it is
 * first now: checks that the first call gave up and the second acquired within 6 s of
 * registering, when the holder's lease ran out (without the message it would block until its own
 * bound, 15 s), then releases it.
 */
export async function expectFirstWaiterLeavingTellsNext(
  get: (edgelock: EdgeLock) => WaitableLock,
): Promise<void> {
  await get(recordingEdgeLock().edgelock).lock({ leaseTime: 2_000 });
  const first = recordingEdgeLock();
  const second = recordingEdgeLock();
  const firstCall = get(first.edgelock).tryLock({ waitTime: 1_000, leaseTime: 5_000 });
  // The second busy attempt, made once subscribed, registers for a hand-off.
  await first.waited(2);
  const started = Date.now();
  const secondCall = get(second.edgelock).tryLock({ waitTime: 15_000, leaseTime: 5_000 });
  await second.waited(2);
  const firstLease = await firstCall;
  const secondLease = await secondCall;
  const elapsedMs = Date.now() - started;
  expect(firstLease).toBeNull();
  expect(secondLease).not.toBeNull();
  expect(elapsedMs).toBeLessThan(6_000);
  await secondLease?.release();
}
