/**
 * Semaphore: Redisson's RSemaphore over HTTP. Same layout (the name is a STRING of available
 * permits, `redisson_sc:{<name>}` hears every change), so JVM services and edge functions share
 * one semaphore; every mutating call is replay-safe (a resent release adds once), releases are
 * bounded by the permits set, and each release wakes one waiting edgelock call per permit over
 * pub/sub (wait/wakes.ts) instead of every subscriber. A waiter kept out by permits a Redisson
 * client holds listens on `redisson_sc:{<name>}`, where Redisson's release publishes.
 * @module
 */

import { keys, type LockContext } from "../../context.js";
import { OverReleaseError } from "../../errors.js";
import type { CallOperation, DefiniteOperation, LockEvent } from "../../events.js";
import { randomHex } from "../../ids.js";
import type { Inspectable, Inspection } from "../../inspect.js";
import { LOCK_WAITER_SLOT_MS, MAX_OWNER_LENGTH, MAX_PERMITS } from "../../limits.js";
import type { LuaScript } from "../../lua/script.js";
import {
  semaphoreAcquire,
  semaphoreAddPermits,
  semaphoreCancel,
  semaphoreDelete,
  semaphoreDrain,
  semaphoreInspect,
  semaphoreLeave,
  semaphoreRelease,
  semaphoreTrySetPermits,
} from "../../lua/semaphore.gen.js";
import {
  asInteger,
  asIntegers,
  type RequestCounter,
  type ScriptCall,
} from "../../transport/index.js";
import { checkOptions, checkSignal, checkText, tryWithin, untilAcquired } from "../../validate.js";
import { waitFor } from "../../wait/loop.js";
import { runAttempt, runDefinite } from "../definite.js";
import {
  attemptUntil,
  emitAcquire,
  inBackground,
  leaveCall,
  reportCall,
  waiterExits,
} from "../protocol.js";

/** Options of {@link Semaphore.tryAcquire}. */
export interface SemaphoreAcquireOptions {
  /** Permits to take, all or none. Integer in [1, 2^31). @default 1 */
  permits?: number;
  /** How long to wait for them, in ms. @default 0 (one attempt) */
  waitTime?: number;
  /** Aborts the wait; the call rejects with `signal.reason` and takes nothing. */
  signal?: AbortSignal;
}

/** Options of {@link SemaphorePermits.release}. */
export interface SemaphoreReleaseOptions {
  /**
   * Allow the release to make more permits available than were set (Redisson's unbounded
   * release). @default false: such a release throws {@link OverReleaseError}.
   */
  overRelease?: boolean;
}

/** Options of {@link Semaphore.release}. */
export interface SemaphoreNameReleaseOptions extends SemaphoreReleaseOptions {
  /**
   * Names this release, so that a caller may repeat it: every call with the same key (on this
   * semaphore, within `replayWindow` of the first one applied) gives the permits back once,
   * and answers as a release that applied (with the permits available then). A string of
   * 1–200 characters, e.g. the id of the job whose permits these are.
   * @default none: every call gives permits back
   */
  idempotencyKey?: string;
}

/**
 * What `semaphore.inspect()` reports, e.g.
 * `{ kind: "semaphore", name: "exports", ttl: -1, holders: [], exists: true, available: 1, permits: 3, waiters: 2 }`.
 * A plain semaphore does not know who holds its permits: `holders` is always empty.
 */
export interface SemaphoreInspection extends Inspection {
  kind: "semaphore";
  /** True when the semaphore's key exists (it was set). */
  exists: boolean;
  /** Available permits (0 when not set; may be negative after `addPermits(-n)`). */
  available: number;
  /**
   * Permits set through edgelock (`trySetPermits` + `addPermits`); `null` when none is
   * recorded. A Redisson client's `addPermits`, `reducePermits` or `trySetPermits` does not
   * change it (Redisson keeps no such record).
   */
  permits: number | null;
  /**
   * Calls waiting for permits right now that are registered for an edgelock wake-up (those
   * kept out by permits a Redisson client holds listen on Redisson's channel instead and are
   * not counted).
   */
  waiters: number;
}

const ACQUIRE_KEYS = ["permits", "waitTime", "signal"] as const;

/**
 * A counting semaphore (Redisson RSemaphore). Get one with `edgelock.getSemaphore(name)`; the
 * object holds no state. Permits are not tied to a holder: whoever took them gives them back
 * with `release`, and a holder that crashes keeps them (use
 * `edgelock.getPermitExpirableSemaphore` when holders may vanish). Not fair: a newcomer can
 * take permits before a waiter, and waiters are woken longest-waiting first.
 */
export class Semaphore implements Inspectable<SemaphoreInspection> {
  readonly #ctx: LockContext;
  /** The semaphore's name: its Redis key. */
  readonly name: string;

  /** Internal: use `edgelock.getSemaphore(name)`. */
  constructor(ctx: LockContext, name: string) {
    this.#ctx = ctx;
    this.name = name;
  }

  /**
   * Sets the permits if the semaphore does not exist yet (Redisson
   * RSemaphore#trySetPermits). The count is also recorded as the permits set, which bounds
   * `release`. One request; a resent request answers what the first copy did, so it is resent
   * until Redis answers, within the EdgeLock's `definiteWithin`.
   * @param permits integer in [0, 2^31).
   * @returns true when set, false when the semaphore already existed (nothing changed).
   * @throws TypeError / RangeError for a bad count, before any request.
   * @throws {TransportError} when Redis refused it, or gave no answer within `definiteWithin`
   * (`ambiguous`; resent in the background, see the `settle` event).
   */
  async trySetPermits(permits: number): Promise<boolean> {
    checkPermits(permits, "permits", 0);
    const reply = await this.#runDefinite(
      "trySetPermits",
      semaphoreTrySetPermits,
      [permits, this.#ctx.replayWindow, randomHex()],
      asInteger,
    );
    return reply === 1;
  }

  /**
   * Adds permits, or removes them with a negative count (Redisson RSemaphore#addPermits):
   * available permits and the permits set move together; available permits may go below 0.
   * Creates the semaphore when it does not exist. Wakes waiters the new permits can serve. One
   * request, resent until Redis answers within `definiteWithin` (replay-safe: it adds once).
   * Each call is a new request: a caller repeating a call that threw adds twice.
   * @param permits non-zero integer in (-2^31, 2^31).
   * @returns the available permits after the change.
   * @throws TypeError / RangeError for a bad count, before any request.
   * @throws {TransportError} when Redis refused it, or gave no answer within `definiteWithin`
   * (`ambiguous`; resent in the background, see the `settle` event).
   */
  async addPermits(permits: number): Promise<number> {
    checkDelta(permits);
    return this.#runDefinite(
      "addPermits",
      semaphoreAddPermits,
      [permits, this.#ctx.replayWindow, randomHex()],
      asInteger,
    );
  }

  /**
   * Takes `permits` permits, all or none, waiting up to `waitTime` for them (Redisson
   * RSemaphore#tryAcquire(permits, waitTime)). One request when they are available; a waiter
   * subscribes to its client's wake channel once (one request) and is woken by the edgelock
   * release or `addPermits` that frees permits (one attempt each), or polls with backoff with
   * `wait: "poll"` or on a client that cannot subscribe. While the missing permits are not all
   * held by edgelock callers (a Redisson client holds some, or set the semaphore, which leaves
   * no permits record), it listens on Redisson's channel `redisson_sc:{<name>}` instead, where
   * every release of either side publishes, so a JVM release wakes it within a round trip; there
   * every message wakes every such waiter, as in Redisson. An attempt whose answer never arrives
   * (aborted, timed out) is cancelled in the background and its permits given back.
   * @returns a {@link SemaphorePermits} handle when the permits were taken (give them back with
   * its idempotent `release()`), `null` when `waitTime` ran out first. The handle is truthy and
   * `null` falsy, so `if (await semaphore.tryAcquire())` reads as Redisson's boolean.
   * @throws TypeError / RangeError for bad options, before any request.
   * @throws signal.reason when aborted.
   * @throws {TransportError} when Redis could not be reached.
   */
  async tryAcquire(options?: SemaphoreAcquireOptions): Promise<SemaphorePermits | null> {
    return tryWithin(options, "tryAcquire", ACQUIRE_KEYS, (o, w) => this.#acquire(o, w));
  }

  /**
   * Takes `permits` permits, waiting as long as it takes (until `signal` aborts). Redisson
   * RSemaphore#acquire(permits).
   * @returns the {@link SemaphorePermits} handle of the permits taken.
   * @throws TypeError / RangeError for bad options, before any request.
   * @throws signal.reason when aborted.
   * @throws {TransportError} when Redis could not be reached.
   */
  async acquire(options?: Omit<SemaphoreAcquireOptions, "waitTime">): Promise<SemaphorePermits> {
    return untilAcquired(options, "acquire", ACQUIRE_KEYS, (o, w) => this.#acquire(o, w));
  }

  /**
   * Gives permits back (Redisson RSemaphore#release(permits)) and wakes waiters they can serve.
   * One request, resent until Redis answers within the EdgeLock's `definiteWithin` (replay-safe:
   * it adds once). Unlike Redisson's, a release is refused (nothing changes) unless
   * `overRelease` when it is both more than edgelock callers have taken (acquire, drainPermits)
   * and not given back yet, and would make more permits available than were set. So giving back
   * what was taken always works, even after a Redisson client's `addPermits`, `reducePermits` or
   * `delete` + `trySetPermits` changed the semaphore meanwhile, and the permits come back to
   * whatever semaphore is there, as in Redisson. A semaphore set by a Redisson client has no
   * recorded permits set: its releases are unbounded, as Redisson's are.
   *
   * Without `idempotencyKey` each call is a new request (Redisson parity), so a caller that
   * repeats a call that threw may give the permits back twice: the counts cannot grow
   * (available permits plus those edgelock callers are counted as holding never exceed the
   * permits set), but the second copy returns another holder's permits early, so one more
   * caller than the permits may hold one until that holder's own release, which is then
   * refused. With it, the calls carrying the same key give the permits back once. Or use the
   * handle from `tryAcquire`/`acquire`, whose `release()` can be repeated safely.
   * @param permits integer in [1, 2^31). @default 1
   * @param options `overRelease` (see above); `idempotencyKey`: a string of 1–200 characters
   * naming this release.
   * @returns the available permits after the release.
   * @throws TypeError / RangeError for bad arguments, before any request.
   * @throws {OverReleaseError} when refused (see above).
   * @throws {TransportError} when Redis refused it, or gave no answer within `definiteWithin`
   * (`ambiguous`; resent in the background, see the `settle` event).
   */
  async release(permits = 1, options?: SemaphoreNameReleaseOptions): Promise<number> {
    checkPermits(permits, "permits", 1);
    const o = checkOptions(options, "release", ["overRelease", "idempotencyKey"]);
    const key = o.idempotencyKey;
    // `k:` keeps a key apart from the hex request ids of acquires, whose handles release
    // under them (as the latch's countDown keys).
    const id =
      key === undefined ? randomHex() : `k:${checkText(key, "idempotencyKey", MAX_OWNER_LENGTH)}`;
    return this.#release(permits, checkOverRelease(o), id);
  }

  /**
   * One release under `requestId` (release.lua), resent until Redis answers. A release that
   * gave permits back is reported as a `release` event, which ends the hold its acquire opened
   * (edgelock/otel's hold span); one that was refused or threw gave nothing back (the permits
   * are still held), so its requests are reported by a failed `call` event instead.
   */
  async #release(permits: number, overRelease: boolean, requestId: string): Promise<number> {
    const counter: RequestCounter = { requests: 0 };
    const started = Date.now();
    const call = {
      script: semaphoreRelease,
      name: this.name,
      keys: [...this.#writeKeys(), takenKey(this.name)],
      args: [permits, overRelease ? 1 : 0, this.#ctx.replayWindow, requestId],
    };
    const emit = (released: boolean) =>
      this.#ctx.emit({
        ...(released
          ? { type: "release", result: "released" }
          : { type: "call", operation: "release", failed: true }),
        name: this.name,
        requests: counter.requests,
        billed: counter.billed ?? 0,
        durationMs: Date.now() - started,
      } as LockEvent);
    let reply: number[];
    try {
      reply = await runDefinite(
        this.#ctx,
        "release",
        call,
        (r) => asIntegers(r, 2) ?? asIntegers(r, 3),
        counter,
      );
    } catch (error) {
      emit(false);
      throw error;
    }
    const [status = 0, available = 0, limit = -1] = reply;
    emit(status === 1);
    if (status !== 1) {
      throw new OverReleaseError(this.name, permits, available, limit < 0 ? null : limit);
    }
    return available;
  }

  /**
   * Available permits (Redisson RSemaphore#availablePermits): 0 when the semaphore is not set.
   * One read-only request.
   * @throws {TransportError} when Redis could not be reached.
   */
  async availablePermits(): Promise<number> {
    return (await this.inspect()).available;
  }

  /**
   * Takes every available permit (Redisson RSemaphore#drainPermits). One request; a resent
   * request takes nothing more. A negative count is left alone.
   * @returns the permits taken (0 when none were available).
   * @throws {TransportError} when Redis could not be reached.
   */
  async drainPermits(): Promise<number> {
    return this.#run(
      "drainPermits",
      semaphoreDrain,
      [...this.#replayKeys(), takenKey(this.name)],
      [this.#ctx.replayWindow, randomHex()],
      asInteger,
    );
  }

  /**
   * Deletes the semaphore, its permits set and the count of permits edgelock callers took
   * (Redisson RObject#delete). Waiters keep waiting until it is set again (registered ones are
   * woken once and, finding no permits set, listen on Redisson's channel, where the next
   * `trySetPermits` publishes). Permits taken before are then released like any others: within
   * the next permits set, or with `overRelease`.
   * (A Redisson client's `delete()` removes only the name: releases of what was taken keep
   * working after it.)
   * @returns true when it existed.
   * @throws {TransportError} when Redis could not be reached.
   */
  async delete(): Promise<boolean> {
    const reply = await this.#run(
      "delete",
      semaphoreDelete,
      [
        this.name,
        limitKey(this.name),
        takenKey(this.name),
        keys.waiting(this.name),
        keys.wake(this.name),
      ],
      [],
      asInteger,
    );
    return reply === 1;
  }

  /**
   * Reads the semaphore in one request, changing nothing: see {@link SemaphoreInspection}.
   * @throws {TransportError} when Redis could not be reached.
   */
  async inspect(): Promise<SemaphoreInspection> {
    const [available = 0, permits = -1, ttl = -2, waiters = 0, exists = 0] = await this.#run(
      "inspect",
      semaphoreInspect,
      [this.name, limitKey(this.name), keys.waiting(this.name)],
      [],
      (r) => asIntegers(r, 5),
    );
    return {
      kind: "semaphore",
      name: this.name,
      ttl,
      holders: [],
      exists: exists === 1,
      available,
      permits: permits < 0 ? null : permits,
      waiters,
    };
  }

  async #acquire(o: Partial<SemaphoreAcquireOptions>, waitTime: number | undefined) {
    const permits = o.permits === undefined ? 1 : checkPermits(o.permits, "permits", 1);
    const signal = checkSignal(o.signal);
    signal?.throwIfAborted();
    const started = Date.now();
    const until = attemptUntil(waitTime);
    const counter: RequestCounter = { requests: 0 };
    let attempts = 0;
    let acquired = false;
    // The request id of the last busy attempt: a release may hand this call the permits as
    // that attempt's (lib/permit-hand-off.lua), naming it in its message.
    let registeredAs = "";
    // The request id of the last attempt, cancelled or not: only the next attempt may take
    // over a hand-off made to it (acquire.lua).
    let previous = "";
    try {
      const polled = await waitFor<string>(this.#ctx, {
        ...permitWait(this.#ctx, this.name, counter, (waiter) => this.#leaveCall(waiter)),
        waitTime,
        signal,
        attempt: async (waiter, subscribed) => {
          const outcome = await this.#attempt(
            permits,
            signal,
            waiter,
            subscribed,
            counter,
            until,
            previous,
          );
          if ("taken" in outcome) return { acquired: outcome.taken };
          previous = outcome.sent;
          registeredAs = outcome.undoing === undefined ? outcome.sent : "";
          return {
            pttl: -1,
            foreign: outcome.foreign,
            ...(outcome.undoing && { undoing: outcome.undoing }),
          };
        },
        // Held on the message: the release took them for that attempt. Another id is a
        // message for an attempt this call no longer waits on: the next attempt takes over
        // whatever was handed to it.
        handOff: {
          grant: (payload) => (payload === registeredAs ? payload : undefined),
          // Registered for LOCK_WAITER_SLOT_MS like any plain waiter (acquire.lua).
          blockCap: LOCK_WAITER_SLOT_MS / 2,
        },
      });
      attempts = polled.attempts;
      const requestId = polled.value;
      acquired = requestId !== null;
      return requestId === null
        ? null
        : new SemaphorePermits(this.name, permits, (o) => this.#release(permits, o, requestId));
    } finally {
      emitAcquire(this.#ctx, this.name, started, counter, acquired, attempts);
    }
  }

  /**
   * One attempt with a fresh request id, resent until Redis answers or `until` (runAttempt); an
   * unanswered one is cancelled in the background. `follows`: the request id of the call's
   * previous attempt ('' none), the only one whose hand-off this attempt may take over.
   * @returns the request id when the permits were taken (the handle's release sends it again),
   * else the one `sent`, whether permits are missing that no edgelock caller took (acquire.lua),
   * and the cancel sent after its copies went out, if one was (`undoing`, settling once
   * answered).
   */
  async #attempt(
    permits: number,
    signal: AbortSignal | undefined,
    waiter: string,
    handOff: boolean,
    counter: RequestCounter,
    until: number,
    follows: string,
  ): Promise<
    { taken: string } | { sent: string; foreign: boolean; undoing: Promise<boolean> | undefined }
  > {
    const id = randomHex();
    let undoing: Promise<boolean> | undefined;
    const [status, , foreign = 0] = await runAttempt(
      this.#ctx,
      {
        script: semaphoreAcquire,
        name: this.name,
        keys: [
          ...this.#replayKeys(),
          keys.waiting(this.name),
          keys.wake(this.name),
          takenKey(this.name),
          limitKey(this.name),
        ],
        args: [
          permits,
          this.#ctx.replayWindow,
          id,
          waiter,
          LOCK_WAITER_SLOT_MS,
          handOff ? 1 : 0,
          follows,
        ],
        signal,
      },
      (r) => asIntegers(r, 2) ?? asIntegers(r, 3),
      counter,
      () => {
        undoing = this.#cancel(id);
      },
      until,
      ([status]) => status === 1,
    );
    // -1: this request id was cancelled already; the next attempt uses a new one. A busy
    // attempt cancelled after its copies went out names no attempt a hand-off may be held on:
    // the cancel may give back what a release handed to it, so the next attempt takes over
    // whatever is left of a hand-off instead (acquire.lua).
    return status === 1 ? { taken: id } : { sent: id, foreign: foreign === 1, undoing };
  }

  /**
   * The request that unregisters `waiter`, a waiting call that ends without permits, and gives
   * back permits a release handed it that it never took (leave.lua).
   */
  #leaveCall(waiter: string): ScriptCall {
    return {
      script: semaphoreLeave,
      name: this.name,
      keys: this.#waitKeys(),
      args: [waiter, this.#ctx.replayWindow],
    };
  }

  /** The keys of the scripts that end a wait (leave.lua; cancel.lua adds the permits set). */
  #waitKeys(): string[] {
    return [
      ...this.#replayKeys(),
      channel(this.name),
      keys.waiting(this.name),
      keys.wake(this.name),
      takenKey(this.name),
    ];
  }

  #cancel(id: string): Promise<boolean> {
    return inBackground(this.#ctx, {
      script: semaphoreCancel,
      name: this.name,
      keys: [...this.#waitKeys(), limitKey(this.name)],
      args: [this.#ctx.replayWindow, id],
    });
  }

  #replayKeys(): string[] {
    return [this.name, keys.replay(this.name), keys.replayOld(this.name)];
  }

  /** Keys of the scripts that change the permits: name, permits set, replay, channel, waiters. */
  #writeKeys(): string[] {
    return [
      this.name,
      limitKey(this.name),
      keys.replay(this.name),
      keys.replayOld(this.name),
      channel(this.name),
      keys.waiting(this.name),
      keys.wake(this.name),
    ];
  }

  /** A call that changes the permits, resent until Redis answers (locks/definite.ts). */
  #runDefinite<T>(
    operation: DefiniteOperation,
    script: LuaScript,
    args: (string | number)[],
    decode: (reply: unknown) => T | undefined,
    scriptKeys: string[] = this.#writeKeys(),
  ): Promise<T> {
    const call = { script, name: this.name, keys: scriptKeys, args };
    return reportCall(this.#ctx, this.name, operation, (counter) =>
      runDefinite(this.#ctx, operation, call, decode, counter),
    );
  }

  /** A call sent once, reported as a `call` event for `operation`. */
  #run<T>(
    operation: CallOperation,
    script: LuaScript,
    scriptKeys: string[],
    args: (string | number)[],
    decode: (reply: unknown) => T | undefined,
  ): Promise<T> {
    const call = { script, name: this.name, keys: scriptKeys, args };
    return reportCall(this.#ctx, this.name, operation, (counter) =>
      this.#ctx.runner.run(call, decode, counter),
    );
  }
}

/**
 * What the wait of either semaphore for permits shares (spread into its `waitFor` spec): it is
 * woken on the semaphore's wake channel, and a waiter that gives up leaves the waiters' queue (`leave`: the request that unregisters it; by default lua/lock/leave.lua). Permits a Redisson client holds come back with a PUBLISH on
 * Redisson's channel only (RedissonSemaphore#releaseAsync,
 * RedissonPermitExpirableSemaphore#tryReleaseAsync): while a busy attempt finds such permits
 * missing (`foreign`), the wait listens there. edgelock's own releases publish there too.
 */
export function permitWait(
  ctx: LockContext,
  name: string,
  counter: RequestCounter,
  leave: (waiter: string) => ScriptCall = (waiter) => leaveCall(name, waiter),
) {
  return {
    name,
    wakeKey: keys.wake(name),
    counter,
    foreign: { channel: channel(name) },
    ...waiterExits(ctx, counter, leave),
  };
}

/** Redisson's semaphore channel: every change publishes the available permits. */
export const semaphoreChannel = (name: string) => `redisson_sc:{${name}}`;
const channel = semaphoreChannel;
/** The permits set (trySetPermits + addPermits), which bounds releases. */
export const limitKey = (name: string) => `edgelock_permits:{${name}}`;
/** Permits edgelock callers took and have not given back: a release of those is never refused. */
const takenKey = (name: string) => `edgelock_taken:{${name}}`;

/** A permit count: an integer in [min, MAX_PERMITS]. */
export function checkPermits(value: unknown, label: string, min: number): number {
  if (typeof value !== "number") throw new TypeError(`\`${label}\` must be a number of permits`);
  if (!Number.isInteger(value) || value < min || value > MAX_PERMITS) {
    throw new RangeError(`\`${label}\` must be an integer in [${min}, ${MAX_PERMITS}]`);
  }
  return value;
}

/** A non-zero change of the permits, within ±MAX_PERMITS. */
function checkDelta(value: unknown): number {
  if (typeof value !== "number") throw new TypeError("`permits` must be a number of permits");
  if (!Number.isInteger(value) || value === 0 || Math.abs(value) > MAX_PERMITS) {
    throw new RangeError(
      `\`permits\` must be a non-zero integer in [-${MAX_PERMITS}, ${MAX_PERMITS}]`,
    );
  }
  return value;
}

/**
 * `overRelease` of a release: a boolean, false when omitted. The caller has checked the options'
 * keys (`checkOptions`), which differ between the name-level release and a handle's.
 */
function checkOverRelease(o: SemaphoreReleaseOptions): boolean {
  if (o.overRelease !== undefined && typeof o.overRelease !== "boolean") {
    throw new TypeError("`overRelease` must be a boolean");
  }
  return o.overRelease ?? false;
}

/**
 * Permits taken by `semaphore.tryAcquire()` or `acquire()`. Give them back with
 * {@link SemaphorePermits.release}: its request id is bound to this handle, so calling it again
 * (a retry after a `TransportError`, a second `finally`) never gives them back twice.
 *
 * @example
 * ```ts
 * const slot = await edgelock.getSemaphore("exports").tryAcquire({ waitTime: 5_000 });
 * if (slot) {
 *   try { await runExport(); } finally { await slot.release(); }
 * }
 * ```
 */
export class SemaphorePermits {
  /** The semaphore's name. */
  readonly name: string;
  /** Permits this handle holds. */
  readonly permits: number;
  /**
   * Sends this handle's release. Every call sends the same request id: the acquire's own, so the
   * release turns the acquire's replay record into its own (a late copy of the acquire then
   * takes nothing) instead of writing a second one (release.lua).
   */
  readonly #send: (overRelease: boolean) => Promise<number>;
  #release: Promise<number> | undefined;

  /** Internal: handles come from `tryAcquire` and `acquire`. */
  constructor(name: string, permits: number, send: (overRelease: boolean) => Promise<number>) {
    this.name = name;
    this.permits = permits;
    this.#send = send;
  }

  /** True once a `release()` of this handle succeeded or is under way. */
  get released(): boolean {
    return this.#release !== undefined;
  }

  /**
   * Gives this handle's permits back once and wakes waiters they can serve (Redisson
   * RSemaphore#release(permits)). One request, resent until Redis answers within the EdgeLock's
   * `definiteWithin`. Idempotent: calling it again returns the first answer, and after a failure
   * it resends the same request (replay-safe for `replayWindow`), so a retry never gives the
   * permits back twice.
   * @param options `overRelease`, as `semaphore.release`; the first successful call's counts.
   * @returns the available permits right after the release applied.
   * @throws TypeError for bad options, before any request.
   * @throws {OverReleaseError} when the permits set was lowered below what is held meanwhile
   * (`addPermits` with a negative count): refused, nothing changed.
   * @throws {TransportError} when Redis refused it, or gave no answer within `definiteWithin`
   * (`ambiguous`: still resent in the background; calling again is safe).
   */
  release(options?: SemaphoreReleaseOptions): Promise<number> {
    const overRelease = checkOverRelease(checkOptions(options, "release", ["overRelease"]));
    if (this.#release !== undefined) return this.#release;
    const release = this.#send(overRelease);
    this.#release = release;
    release.catch(() => {
      // A failed release can be tried again, with the same request id.
      if (this.#release === release) this.#release = undefined;
    });
    return release;
  }

  /** `await using slot = …` gives the permits back at the end of the block. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}
