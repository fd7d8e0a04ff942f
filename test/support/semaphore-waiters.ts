/**
 * Waiters of the wake-up tests shared by both semaphore kinds: a waiting call on its own
 * recording EdgeLock, how soon a release wakes it, and the no-herd check (with only edgelock
 * holders, each release wakes one waiter per permit).
 */
import { expect } from "vitest";
import type { EdgeLock } from "../../src/index.js";
import type { RawRedis } from "./env.js";
import { type RecordingEdgeLock, recordingEdgeLock } from "./locks.js";
import { redissonSubscribers } from "./redisson-channel.js";

/**
 * Most ms from a release to the woken waiter's answer: one round trip and the wake message,
 * where a waiter nobody woke waits seconds (its lease or wait bound).
 */
const WOKEN_WITHIN_MS = 400;

/**
 * The call `start` makes on a fresh recording EdgeLock, once it is in its `waits`th wait
 * (default 2: busy, subscribed, busy again, so waiting for a message).
 */
export async function waiting<T>(
  start: (edgelock: EdgeLock) => Promise<T>,
  waits = 2,
): Promise<{ waiter: RecordingEdgeLock; pending: Promise<T> }> {
  const waiter = recordingEdgeLock();
  const pending = start(waiter.edgelock);
  await waiter.waited(waits);
  return { waiter, pending };
}

/** Runs `release`, then resolves with `pending`'s answer, which came soon after: it was woken. */
export async function wokenBy<T>(pending: Promise<T>, release: () => Promise<unknown>): Promise<T> {
  const released = Date.now();
  await release();
  const answer = await pending;
  expect(Date.now() - released).toBeLessThan(WOKEN_WITHIN_MS);
  return answer;
}

/** What the no-herd check needs of a semaphore kind. */
export interface NoHerdCase<H, T> {
  raw: RawRedis;
  name: string;
  /** The semaphore `name`, as its holders' client sees it. */
  owner: { inspect(): Promise<{ waiters: number }>; availablePermits(): Promise<number> };
  /** The holds of every permit, one permit each, all edgelock's. */
  held: readonly H[];
  /** Releases one hold (asserting its answer). */
  release(hold: H): Promise<void>;
  /** One waiter's call for one permit, with a wait bound. */
  wait(edgelock: EdgeLock): Promise<T | null>;
  /**
   * Whether the release hands the permit to the waiter, which then holds it on the message
   * (no attempt after the wake-up).
   */
  handsOff: boolean;
}

/**
 * As many waiters as holds, behind edgelock holders only: they stay off Redisson's channel and
 * register; each release, one at a time, wakes exactly one (it leaves the registered ones), which
 * takes the permit; nobody attempts in vain (four attempts and two waits each).
 * @returns each waiter's answer, none null.
 */
export async function expectOneWakePerRelease<H, T>(c: NoHerdCase<H, T>): Promise<T[]> {
  const waiters = c.held.map(() => recordingEdgeLock());
  const pending = waiters.map((w) => c.wait(w.edgelock));
  // Each subscribed to its own wake channel and registered (its second wait).
  await Promise.all(waiters.map((w) => w.waited(2)));
  expect(await redissonSubscribers(c.raw, c.name)).toBe(0);
  expect((await c.owner.inspect()).waiters).toBe(waiters.length);
  const done = () => waiters.filter((w) => w.events.some((e) => e.type === "acquire")).length;
  // Resolves on the acquire event that makes `n` waiters done.
  const acquired = (n: number) => Promise.race(waiters.map((w) => w.until(() => done() >= n)));
  for (const [i, hold] of c.held.entries()) {
    await c.release(hold);
    expect((await c.owner.inspect()).waiters).toBe(waiters.length - 1 - i);
    await acquired(i + 1);
    expect(await c.owner.availablePermits()).toBe(0);
  }
  const answers = await Promise.all(pending);
  // An attempt, the subscription, an attempt, and the wake-up's attempt unless the release
  // handed the permit over.
  for (const w of waiters) expect(w.requests("acquire")).toBe(c.handsOff ? 3 : 4);
  for (const w of waiters) expect(w.events.filter((e) => e.type === "waiting")).toHaveLength(2);
  return answers.map((answer) => {
    expect(answer).not.toBeNull();
    return answer as T;
  });
}
