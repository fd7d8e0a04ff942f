/**
 * Count-down latch: Redisson's RCountDownLatch over HTTP. Data layout as Redisson's (a STRING
 * count at the latch name, no TTL; the key is gone once the count reaches zero) and Redisson's
 * messages on its channel, so a Redisson JVM client and edgelock can set, count down and wait on
 * the same latch. Redisson's waiters wait for a pub/sub message; an edgelock waiter registers
 * with its check and blocks on its own wake list (BLPOP), to which the count-down that opens the
 * latch pushes a token for every registered waiter (lua/lib/wake.lua `wake_all`); with
 * `wait: "poll"` it polls with backoff. Every mutating script is replay-safe by a request id
 * (lua/lib/replay.lua). The scripts are lua/count-down-latch/*.lua.
 * @module
 */

import { keys, type LockContext } from "../../context.js";
import { randomHex } from "../../ids.js";
import type { Inspectable, Inspection } from "../../inspect.js";
import { LOCK_WAITER_SLOT_MS, MAX_OWNER_LENGTH } from "../../limits.js";
import {
  countDownLatchAwait,
  countDownLatchCountDown,
  countDownLatchDelete,
  countDownLatchInspect,
  countDownLatchTrySetCount,
} from "../../lua/count-down-latch.gen.js";
import { asInteger, asIntegers, type RequestCounter } from "../../transport/index.js";
import { checkOptions, checkSignal, checkText, checkWaitTime } from "../../validate.js";
import type { AttemptOutcome } from "../../wait/backoff.js";
import { waitFor } from "../../wait/loop.js";
import { runAttempt, runDefinite } from "../definite.js";
import { attemptUntil, leaveCall, reportCall, waiterExits } from "../protocol.js";

/** Options of {@link CountDownLatch.await}. Times in integer ms. */
export interface CountDownLatchAwaitOptions {
  /**
   * How long to wait for the count to reach zero, in ms, integer in [0, 86 400 000]. 0: one
   * check. Omitted: wait until the count reaches zero or `signal` aborts.
   */
  waitTime?: number;
  /**
   * Aborts the wait: the call rejects with `signal.reason` and leaves no waiter registered (one
   * request in the background).
   */
  signal?: AbortSignal;
}

/** Options of {@link CountDownLatch.countDown}. */
export interface CountDownOptions {
  /**
   * Names this count-down, 1–200 characters: calls with the same key on one latch count down
   * once (within `replayWindow` of the first one applied), so a retry never counts twice.
   * @default none: every call counts down
   */
  idempotencyKey?: string;
}

/**
 * What `latch.inspect()` reports, e.g.
 * `{ kind: "count-down-latch", name: "batch:7", ttl: -1, holders: [], count: 3, waiters: 2 }`.
 */
export interface CountDownLatchInspection extends Inspection {
  kind: "count-down-latch";
  /** A latch has no holders: always empty. */
  holders: [];
  /** The current count; 0 when the latch is open (its key is absent). */
  count: number;
  /** edgelock waiters registered now (blocked in `await` with `wait: "block"`). */
  waiters: number;
}

/** Redisson's channel of a latch: always `{<name>}`, even when the name has braces. */
export const latchChannel = (name: string) => `redisson_countdownlatch__channel__{${name}}`;

const AWAIT_KEYS = ["waitTime", "signal"] as const;
const decodeFlag = (r: unknown) => {
  const n = asInteger(r);
  return n === 0 || n === 1 ? n === 1 : undefined;
};
const decodeCount = (r: unknown) => {
  const n = asInteger(r);
  return n !== undefined && n >= 0 ? n : undefined;
};
const decodeAttempt = (r: unknown) => asIntegers(r, 2) as [number, number] | undefined;
const decodeInspect = (r: unknown) => asIntegers(r, 3) as [number, number, number] | undefined;

/** A latch count: a positive safe integer (0 would be an open latch, which has no key). */
function checkCount(value: unknown): number {
  if (typeof value !== "number") throw new TypeError("`count` must be a number");
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(
      `\`count\` must be an integer in [1, ${Number.MAX_SAFE_INTEGER}] (a latch at 0 is open: it has no key)`,
    );
  }
  return value;
}

/**
 * A distributed count-down latch (Redisson RCountDownLatch). Get one with
 * `edgelock.getCountDownLatch(name)`; the object holds no state, so it can be created per
 * request. One party sets the count (`trySetCount`), others count it down (`countDown`), and
 * `await` returns once the count is zero.
 *
 * Keys (all in the hash slot of `name`): the count at `name` (a STRING, Redisson's layout;
 * deleted when the count reaches zero), Redisson's channel
 * `redisson_countdownlatch__channel__{<name>}` (NEW_COUNT "1" on `trySetCount`, ZERO_COUNT "0"
 * when the count reaches zero), the waiters' `edgelock_waiting:{<name>}` and
 * `edgelock_wake:{<name>}` (gone once the last waiter returns), and the short-lived replay records
 * `edgelock_replay:{<name>}:<request id>`.
 *
 * Departures from Redisson: the count must be at least 1 (Redisson stores `trySetCount(0)` as
 * "0"); `delete()` opens the latch for edgelock waiters (Redisson's leaves its waiters waiting);
 * `countDown()` resolves to the count left. An edgelock waiter blocked when a Redisson client
 * opens the latch (no wake token) notices at its next attempt: within 15 s, or within
 * `backoff.maxDelay` with `wait: "poll"`.
 *
 * @example
 * ```ts
 * const latch = edgelock.getCountDownLatch(`batch:${id}`);
 * await latch.trySetCount(parts.length);
 * // …each worker, when its part is done:
 * await latch.countDown();
 * // …the party that waits for all of them:
 * const done = await latch.await({ waitTime: 60_000 });
 * ```
 */
export class CountDownLatch implements Inspectable<CountDownLatchInspection> {
  /** Latch name (the Redis key of the count). */
  readonly name: string;
  readonly #ctx: LockContext;

  /** Internal: use `edgelock.getCountDownLatch(name)`. */
  constructor(ctx: LockContext, name: string) {
    this.#ctx = ctx;
    this.name = name;
  }

  /**
   * Sets the count if the latch does not exist (it is open), and publishes Redisson's NEW_COUNT
   * message so JVM waiters see it closed. One HTTP request on a warm client. Redisson
   * RedissonCountDownLatch#trySetCount, with a replay record: a resent copy (an HTTP retry after
   * a lost answer) answers what the first copy did, so it is resent until Redis answers within
   * the EdgeLock's `definiteWithin`.
   * @param count the count, an integer in [1, 2^53 − 1]. Redisson also accepts 0; here it is a
   * RangeError, since a latch at 0 is open and has no key.
   * @returns true when the count was set, false when the latch already exists (its count is left
   * as it is).
   * @throws TypeError / RangeError for a bad count, before any request.
   * @throws {TransportError} when Redis refused it, or gave no answer within `definiteWithin`
   * (`ambiguous`: resent in the background, see the `settle` event).
   */
  async trySetCount(count: number): Promise<boolean> {
    checkCount(count);
    const call = {
      script: countDownLatchTrySetCount,
      name: this.name,
      keys: [this.name, latchChannel(this.name), ...this.#replayKeys()],
      args: [count, this.#ctx.replayWindow, randomHex()],
    };
    return reportCall(this.#ctx, this.name, "trySetCount", (counter) =>
      runDefinite(this.#ctx, "trySetCount", call, decodeFlag, counter),
    );
  }

  /**
   * Counts the latch down by one. At zero the key is deleted, Redisson's ZERO_COUNT message is
   * published and every waiting `await` is woken. On a latch that does not exist it changes
   * nothing. One HTTP request on a warm client, resent until Redis answers within the EdgeLock's
   * `definiteWithin`. Redisson RedissonCountDownLatch#countDown, with a replay record: a resent
   * copy never counts twice.
   *
   * Without `idempotencyKey` each call is a new request, so a caller that repeats a call that
   * threw may count down twice. With it, every call carrying the same key (on this latch,
   * within `replayWindow` of the first one applied) counts down once and answers what the first
   * did: pass one key per party, e.g. the id of the part of the work it finished.
   * @param options `idempotencyKey`: a string of 1–200 characters naming this count-down.
   * @returns the count left: 0 when the latch is open (this call opened it, or it did not
   * exist). Redisson's countDown returns nothing.
   * @throws TypeError / RangeError for a bad option, before any request.
   * @throws {TransportError} when Redis refused it (the key is not a latch), or gave no answer
   * within `definiteWithin` (`ambiguous`: still resent in the background, see the `settle`
   * event; calling again with the same `idempotencyKey` is safe).
   * @example
   * ```ts
   * // Each worker names its part: a retry after a TransportError never counts twice.
   * await latch.countDown({ idempotencyKey: `part:${partId}` });
   * ```
   */
  async countDown(options?: CountDownOptions): Promise<number> {
    const o = checkOptions(options, "countDown", ["idempotencyKey"]);
    const requestId =
      o.idempotencyKey === undefined
        ? randomHex()
        : `k:${checkText(o.idempotencyKey, "idempotencyKey", MAX_OWNER_LENGTH)}`;
    const call = {
      script: countDownLatchCountDown,
      name: this.name,
      keys: [this.name, latchChannel(this.name), ...this.#replayKeys(), ...this.#wakeKeys()],
      args: [this.#ctx.replayWindow, requestId],
    };
    return reportCall(this.#ctx, this.name, "countDown", (counter) =>
      runDefinite(this.#ctx, "countDown", call, decodeCount, counter),
    );
  }

  /**
   * The current count: 0 when the latch is open (its key is absent). One read-only HTTP
   * request. Redisson RedissonCountDownLatch#getCount (GET, a missing key counting as 0).
   * @throws {TransportError} when Redis could not be reached, or the key is not a latch.
   */
  async getCount(): Promise<number> {
    return (await this.#inspect())[0];
  }

  /**
   * Waits until the count is zero (the latch's key is absent). Returns at once when it already
   * is. Otherwise (with `wait: "block"`, the default) the check registers this call and it
   * blocks on its own wake list (BLPOP, at most 15 s at a time), to which the count-down that
   * opens the latch pushes a token: 3 HTTP requests for a wait that ends within 15 s (check, BLPOP,
   * check), 2 more per further 15 s, and one in the background when it gives up or is aborted
   * while registered. With `wait: "poll"` (or a client without `exec`) it polls with the
   * EdgeLock's backoff instead. Emits a `waiting` event before each block or sleep and a `wait`
   * event after it. Redisson RedissonCountDownLatch#await(timeout) (pub/sub there).
   * A latch deleted with `delete()`, or whose key expired, counts as open. A latch set again
   * before a woken waiter checks keeps it waiting, as in Redisson (it re-checks getCount()).
   * @param options `waitTime` (ms; 0: one check; omitted: no deadline) and `signal`.
   * @returns true once the count is zero; false when `waitTime` ran out first (the last check
   * starts no later than the deadline: the call settles within `waitTime + requestTimeout`).
   * @throws TypeError / RangeError for bad options, before any request.
   * @throws signal.reason when aborted (also when already aborted, before any request).
   * @throws {TransportError} when a check failed, or the key is not a latch.
   */
  async await(options?: CountDownLatchAwaitOptions): Promise<boolean> {
    const o = checkOptions(options, "await", AWAIT_KEYS);
    const waitTime = checkWaitTime(o.waitTime);
    const signal = checkSignal(o.signal);
    signal?.throwIfAborted();
    const ctx = this.#ctx;
    return reportCall(ctx, this.name, "await", (counter) => this.#await(waitTime, signal, counter));
  }

  async #await(
    waitTime: number | undefined,
    signal: AbortSignal | undefined,
    counter: RequestCounter,
  ): Promise<boolean> {
    const ctx = this.#ctx;
    const until = attemptUntil(waitTime);
    const polled = await waitFor(ctx, {
      name: this.name,
      wakeKey: keys.wake(this.name),
      // Every count-down that opens the latch, edgelock's or a JVM client's, publishes "0" on
      // Redisson's channel, and an open latch lets every waiter through: waiters listen there
      // (one subscription per client and name). They still register, so that `inspect` counts
      // them.
      foreign: { channel: latchChannel(this.name) },
      waitTime,
      signal,
      counter,
      attempt: async (waiter): Promise<AttemptOutcome<true>> => {
        const [count, pttl] = await runAttempt(
          ctx,
          {
            script: countDownLatchAwait,
            name: this.name,
            keys: [this.name, ...this.#wakeKeys()],
            args: [waiter, LOCK_WAITER_SLOT_MS],
            signal,
          },
          decodeAttempt,
          counter,
          // A read that registers the waiter: a copy applied late changes nothing to undo.
          undefined,
          until,
        );
        return count > 0 ? { pttl, foreign: true } : { acquired: true };
      },
      ...waiterExits(ctx, counter, (waiter) => leaveCall(this.name, waiter)),
    });
    return polled.value !== null;
  }

  /**
   * Deletes the latch. One HTTP request on a warm client. Redisson
   * RedissonCountDownLatch#delete (DEL, then its "1" message when a latch was deleted), with a
   * replay record so a resent copy cannot delete a latch set after it. Departure: a deleted
   * latch has count 0, so every waiting edgelock `await` is woken and returns true (Redisson's
   * delete leaves its waiters waiting, and JVM waiters still do); the waiter keys go with the
   * last waiter. The name's replay records stay until they expire.
   * @returns true when a latch was deleted, false when there was none.
   * @throws {TransportError} when Redis could not be reached.
   */
  async delete(): Promise<boolean> {
    const call = {
      script: countDownLatchDelete,
      name: this.name,
      keys: [this.name, latchChannel(this.name), ...this.#replayKeys(), ...this.#wakeKeys()],
      args: [this.#ctx.replayWindow, randomHex()],
    };
    return reportCall(this.#ctx, this.name, "delete", (counter) =>
      this.#ctx.runner.run(call, decodeFlag, counter),
    );
  }

  /**
   * The latch's count, TTL and registered waiters, read in one request (read-only script
   * lua/count-down-latch/inspect.lua): `{ kind: "count-down-latch", name, ttl, holders: [],
   * count, waiters }` with `ttl` in ms (PTTL semantics: -2 open, -1 no TTL, which is how
   * Redisson and edgelock set a latch) and `waiters` the live edgelock waiters (JVM waiters
   * subscribe to the channel instead and are not counted).
   * @throws {TransportError} when Redis could not be reached, or the key is not a latch.
   */
  async inspect(): Promise<CountDownLatchInspection> {
    const [count, ttl, waiters] = await this.#inspect();
    return { kind: "count-down-latch", name: this.name, ttl, holders: [], count, waiters };
  }

  /** `[count, pttl, live waiters]` in one read-only request (inspect.lua). */
  #inspect(): Promise<[number, number, number]> {
    const call = {
      script: countDownLatchInspect,
      name: this.name,
      keys: [this.name, keys.waiting(this.name)],
      args: [],
    };
    return reportCall(this.#ctx, this.name, "inspect", (counter) =>
      this.#ctx.runner.run(call, decodeInspect, counter),
    );
  }

  /** The registered waiters and the prefix of their own wake lists. */
  #wakeKeys(): string[] {
    return [keys.waiting(this.name), keys.wake(this.name)];
  }

  /** The latch's two replay-record hashes. */
  #replayKeys(): string[] {
    return [keys.replay(this.name), keys.replayOld(this.name)];
  }
}
