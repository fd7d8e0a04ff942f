/**
 * Permit-expirable semaphore: Redisson's RPermitExpirableSemaphore over HTTP. Same layout (the
 * name holds the available permits, `{<name>}:timeout` each taken permit's id and expiry), so JVM
 * services and edge functions share one semaphore. Every permit has a lease: a holder that
 * crashes loses its permits when the lease runs out, and the next attempt (a waiter is back by
 * then) returns them to the pool. Permits are taken as a {@link Lease}, so they are renewed and
 * released like lock leases (`renew()`, the in-invocation timer, `release()`).
 * @module
 */

import { keys, type LockContext } from "../../context.js";
import { PermitNotHeldError } from "../../errors.js";
import { randomHex } from "../../ids.js";
import type { Holder, Inspectable, Inspection } from "../../inspect.js";
import { Lease, type LeaseHost, type SerializedLease } from "../../lease/lease.js";
import { isLeaseId } from "../../lease/renewal.js";
import { HAND_OFF_CLAIM_WINDOW_MS, LOCK_WAITER_SLOT_MS } from "../../limits.js";
import {
  permitExpirableSemaphoreAcquire,
  permitExpirableSemaphoreCancel,
  permitExpirableSemaphoreDelete,
  permitExpirableSemaphoreInspect,
  permitExpirableSemaphoreLeave,
  permitExpirableSemaphoreRelease,
  permitExpirableSemaphoreRenew,
} from "../../lua/permit-expirable-semaphore.gen.js";
import {
  asInteger,
  asIntegers,
  type RequestCounter,
  type ScriptCall,
} from "../../transport/index.js";
import { checkMs, tryWithin, untilAcquired } from "../../validate.js";
import { waitFor } from "../../wait/loop.js";
import { runAttempt, runDefinite } from "../definite.js";
import {
  attemptUntil,
  emitAcquire,
  holdSettings,
  inBackground,
  keepAliveOrGiveBack,
  type LeaseOptions,
  reportCall,
  reportError,
  reportRenew,
  runRelease,
} from "../protocol.js";
import {
  checkPermits,
  limitKey,
  permitWait,
  Semaphore,
  semaphoreChannel,
} from "../semaphore/index.js";

/**
 * Options of {@link PermitExpirableSemaphore.tryAcquire}: the {@link LeaseOptions} of each permit
 * (`owner` is kept in the lease only: Redis stores permit ids), `permits` and `waitTime`.
 */
export interface PermitAcquireOptions extends LeaseOptions {
  /** Permits to take, all or none, in [1, 1000]. @default 1 */
  permits?: number;
  /** How long to wait for them, in ms. @default 0 (one attempt) */
  waitTime?: number;
}

/** A lease on permits of a permit-expirable semaphore: `permitIds` is always set. */
export type PermitLease = Lease & { readonly permitIds: readonly string[] };

/** One taken permit, as `inspect()` lists it. */
export interface PermitHolder extends Holder {
  /** The permit id (32 hex characters); also in `owner`, as the id is all Redis stores. */
  id: string;
  /** Remaining lease in ms (-1: the permit has no lease, e.g. taken by a Redisson client). */
  ttl: number;
}

/**
 * What `semaphore.inspect()` reports for a permit-expirable semaphore, e.g.
 * `{ kind: "permit-expirable-semaphore", name, ttl: -1, exists: true, available: 1, acquired: 2, permits: 3, waiters: 0, holders: [{ owner, id, ttl: 8_120 }, …] }`.
 */
export interface PermitExpirableSemaphoreInspection extends Inspection {
  kind: "permit-expirable-semaphore";
  exists: boolean;
  /** Available permits, counting those whose lease ran out. */
  available: number;
  /** Permits taken whose lease has not run out. */
  acquired: number;
  /** Permits set (`trySetPermits` + `addPermits`); `null` when none is recorded. */
  permits: number | null;
  /**
   * Calls waiting for permits that are registered for an edgelock wake-up (those kept out while
   * a Redisson client holds a permit listen on Redisson's channel instead and are not counted).
   */
  waiters: number;
  /** The taken permits (at most {@link MAX_INSPECT_PERMITS}). */
  holders: PermitHolder[];
}

/** Most permits one acquire takes (each is an id in the request). */
export const MAX_PERMITS_PER_ACQUIRE = 1_000;
/** Most permits `inspect()` lists. */
export const MAX_INSPECT_PERMITS = 100;

const ACQUIRE_KEYS = ["permits", "waitTime", "leaseTime", "keepAlive", "owner", "signal"] as const;

/**
 * A semaphore whose permits have leases (Redisson RPermitExpirableSemaphore). Get one with
 * `edgelock.getPermitExpirableSemaphore(name)`; the object holds no state. Not fair: a newcomer
 * can take permits before a waiter; waiters are woken in registration order.
 */
export class PermitExpirableSemaphore implements Inspectable<PermitExpirableSemaphoreInspection> {
  readonly #ctx: LockContext;
  readonly #counts: Semaphore;
  /** The semaphore's name: its Redis key. */
  readonly name: string;

  /** Internal: use `edgelock.getPermitExpirableSemaphore(name)`. */
  constructor(ctx: LockContext, name: string) {
    this.#ctx = ctx;
    this.name = name;
    this.#counts = new Semaphore(ctx, name);
  }

  /**
   * Sets the permits if the semaphore does not exist yet (Redisson
   * RPermitExpirableSemaphore#trySetPermits). One request, replay-safe.
   * @param permits integer in [0, 2^31).
   * @returns true when set, false when it already existed.
   * @throws TypeError / RangeError for a bad count, before any request.
   * @throws {TransportError} when Redis could not be reached.
   */
  trySetPermits(permits: number): Promise<boolean> {
    return this.#counts.trySetPermits(permits);
  }

  /**
   * Adds permits, or removes available ones with a negative count (Redisson
   * RPermitExpirableSemaphore#addPermits, with INCRBY so a TTL survives). One request,
   * replay-safe; wakes waiters the new permits can serve.
   * @param permits non-zero integer in (-2^31, 2^31).
   * @returns the available permits after the change.
   * @throws TypeError / RangeError for a bad count, before any request.
   * @throws {TransportError} when Redis could not be reached.
   */
  addPermits(permits: number): Promise<number> {
    return this.#counts.addPermits(permits);
  }

  /**
   * Takes `permits` permits with a lease each, waiting up to `waitTime` for them (Redisson
   * RPermitExpirableSemaphore#tryAcquire(permits, waitTime, leaseTime)). When too few are
   * available, permits whose lease ran out are returned to the pool first. One request when permits are available; a waiter subscribes to
   * its client's wake channel once (one request) and is woken by the edgelock release that
   * frees permits, or comes back when the next lease runs out. While a Redisson client holds a
   * live permit, it listens on Redisson's channel `redisson_sc:{<name>}` instead, where every
   * release of either side publishes, so a JVM release wakes it within a round trip (there
   * every message wakes every such waiter, as in Redisson). An attempt whose answer never
   * arrives is cancelled in the background and its permits given back.
   * @returns a lease holding the permits (`lease.permitIds`), or `null` when `waitTime` ran out.
   * @throws TypeError / RangeError for bad options, before any request.
   * @throws signal.reason when aborted.
   * @throws {TransportError} when Redis could not be reached.
   */
  async tryAcquire(options?: PermitAcquireOptions): Promise<PermitLease | null> {
    return tryWithin(options, "tryAcquire", ACQUIRE_KEYS, (o, w) => this.#acquire(o, w));
  }

  /**
   * {@link tryAcquire} waiting as long as it takes (until `signal` aborts). Redisson
   * RPermitExpirableSemaphore#acquire(permits, leaseTime).
   * @throws TypeError / RangeError for bad options, before any request.
   * @throws signal.reason when aborted.
   * @throws {TransportError} when Redis could not be reached.
   */
  async acquire(options?: Omit<PermitAcquireOptions, "waitTime">): Promise<PermitLease> {
    return untilAcquired(options, "acquire", ACQUIRE_KEYS, (o, w) => this.#acquire(o, w));
  }

  /**
   * Gives one permit back by id (Redisson RPermitExpirableSemaphore#tryRelease). One request;
   * a resent request answers what the first copy did.
   * @param id a permit id from `lease.permitIds`.
   * @returns true when the permit was held and is back in the pool; false when it was not held
   * (already released, never taken, or its lease ran out: then it is back in the pool).
   * @throws TypeError for a malformed id, before any request.
   * @throws {TransportError} when Redis could not be reached.
   */
  async tryRelease(id: string): Promise<boolean> {
    const call = this.#releaseCall(randomHex(), [checkPermitId(id)], true);
    const released = await reportCall(this.#ctx, this.name, "release", (counter) =>
      runDefinite(this.#ctx, "release", call, asInteger, counter),
    );
    return released === 1;
  }

  /**
   * {@link tryRelease} that throws when the permit was not held (Redisson
   * RPermitExpirableSemaphore#release(id)).
   * @throws {PermitNotHeldError} when the permit was not held.
   * @throws TypeError for a malformed id, before any request.
   * @throws {TransportError} when Redis could not be reached.
   */
  async release(id: string): Promise<void> {
    if (!(await this.tryRelease(id))) throw new PermitNotHeldError(this.name);
  }

  /**
   * Makes a permit's lease at least `leaseTime` ms from now (Redisson
   * RPermitExpirableSemaphore#updateLeaseTime), never shortening it, so no lease object believes
   * it holds longer than Redis keeps the permit. One request.
   * @returns true when the permit is held (and renewed); false when it is not.
   * @throws TypeError / RangeError for a malformed id or lease, before any request.
   * @throws {TransportError} when Redis could not be reached.
   */
  async updateLeaseTime(id: string, leaseTime: number): Promise<boolean> {
    const permit = checkPermitId(id);
    const ms = checkMs(leaseTime, "leaseTime", 1);
    return reportRenew(
      this.#ctx,
      this.name,
      "call",
      async (counter) => (await this.#renew([permit], ms, undefined, counter)) === 1,
    );
  }

  /**
   * Available permits, counting those whose lease ran out (Redisson
   * RPermitExpirableSemaphore#availablePermits). One read-only request.
   * @throws {TransportError} when Redis could not be reached.
   */
  async availablePermits(): Promise<number> {
    return (await this.#inspect(0)).available;
  }

  /**
   * Permits taken whose lease has not run out (Redisson
   * RPermitExpirableSemaphore#acquiredPermits). One read-only request.
   * @throws {TransportError} when Redis could not be reached.
   */
  async acquiredPermits(): Promise<number> {
    return (await this.#inspect(0)).acquired;
  }

  /**
   * Deletes the semaphore, its permit leases and its permits set. Leases on its permits are
   * found lost at their next renewal.
   * @returns true when it existed.
   * @throws {TransportError} when Redis could not be reached.
   */
  async delete(): Promise<boolean> {
    const call = {
      script: permitExpirableSemaphoreDelete,
      name: this.name,
      keys: [this.name, timeoutsKey(this.name), limitKey(this.name), keys.replay(this.name)],
      args: [this.#ctx.replayWindow],
    };
    const existed = await reportCall(this.#ctx, this.name, "delete", (counter) =>
      this.#ctx.runner.run(call, asInteger, counter),
    );
    return existed === 1;
  }

  /**
   * Reads the semaphore in one request, changing nothing: see
   * {@link PermitExpirableSemaphoreInspection}.
   * @throws {TransportError} when Redis could not be reached.
   */
  inspect(): Promise<PermitExpirableSemaphoreInspection> {
    return this.#inspect(MAX_INSPECT_PERMITS);
  }

  /**
   * Internal (the `LeaseKeeper` alarm): renews the permits of one lease, within `timeout` ms.
   * @returns true when every permit was still held (and is renewed).
   */
  async renewPermits(
    permitIds: readonly string[],
    leaseTime: number,
    timeout?: number,
  ): Promise<boolean> {
    return (await this.#renew(permitIds, leaseTime, timeout)) === permitIds.length;
  }

  /** Internal: a lease object for a serialized permit lease of this semaphore. */
  restore(s: SerializedLease): PermitLease {
    return this.#lease({
      id: s.id,
      owner: s.owner,
      permitIds: s.permitIds ?? [],
      leaseTime: s.leaseTime,
      watchdog: s.watchdog,
      expiresAt: s.expiresAt,
    });
  }

  async #acquire(
    o: Partial<PermitAcquireOptions>,
    waitTime: number | undefined,
  ): Promise<PermitLease | null> {
    const count = o.permits === undefined ? 1 : checkPermits(o.permits, "permits", 1);
    if (count > MAX_PERMITS_PER_ACQUIRE) {
      throw new RangeError(`\`permits\` must be at most ${MAX_PERMITS_PER_ACQUIRE} per acquire`);
    }
    const s = holdSettings(this.#ctx, o);
    s.signal?.throwIfAborted();
    const started = Date.now();
    const until = attemptUntil(waitTime);
    const counter: RequestCounter = { requests: 0 };
    let attempts = 0;
    let acquired = false;
    // A release hands a listening waiter the permits of its last busy attempt, with a lease of
    // at most the claim window (lib/permits.lua, handed_as_leased), which its lease confirms.
    const handOffMs = Math.min(s.leaseTime, HAND_OFF_CLAIM_WINDOW_MS);
    let registeredAs: PermitGrant | undefined;
    // The request id of the last attempt, cancelled or not: only the next attempt may take
    // over a hand-off made to it (acquire.lua).
    let previous = "";
    try {
      const polled = await waitFor<PermitGrant>(this.#ctx, {
        ...permitWait(this.#ctx, this.name, counter, (waiter) => this.#leaveCall(waiter)),
        waitTime,
        signal: s.signal,
        attempt: async (waiter, subscribed) => {
          const grant = await this.#attempt(
            count,
            s.leaseTime,
            s.signal,
            waiter,
            subscribed ? handOffMs : 0,
            counter,
            until,
            previous,
          );
          if ("pttl" in grant) {
            previous = grant.sent;
            registeredAs = grant.asked;
            return {
              pttl: grant.pttl,
              foreign: grant.foreign,
              ...(grant.undoing && { undoing: grant.undoing }),
            };
          }
          return { acquired: grant };
        },
        handOff: {
          grant: (payload) => handedGrant(payload, registeredAs),
          // Registered for LOCK_WAITER_SLOT_MS like any plain waiter (acquire.lua).
          blockCap: LOCK_WAITER_SLOT_MS / 2,
        },
      });
      attempts = polled.attempts;
      if (polled.value === null) return null;
      const { ttl = s.leaseTime, ...grant } = polled.value;
      const lease = this.#lease({
        ...grant,
        owner: s.owner,
        leaseTime: s.leaseTime,
        watchdog: s.watchdog,
        // Held from the hand-off, which came after the busy attempt was sent, for `ttl`.
        expiresAt: grant.sentAt + Math.min(s.leaseTime, ttl),
        sent: { wall: grant.sentAt, mono: grant.sentMono },
      });
      if (ttl < s.leaseTime) lease.confirmBefore(lease.expiresAt);
      await keepAliveOrGiveBack(this.#ctx, lease, s.keepAlive);
      acquired = true;
      return lease;
    } finally {
      emitAcquire(this.#ctx, this.name, started, counter, acquired, attempts);
    }
  }

  /**
   * One attempt with a fresh request id and permit ids, resent until Redis answers or `until`
   * (runAttempt); an unanswered one is cancelled. `handOffMs`: the lease a release may hand
   * this waiter the permits with (0: only woken). A busy answer says what it asked for
   * (`asked`), for the hand-off's message; none when the attempt was cancelled after its copies
   * went out (the cancel may give back what a release handed to it: the next attempt takes
   * over whatever of a hand-off is left, acquire.lua), but the cancel (`undoing`, settling once
   * answered). `follows`: the request id of the call's previous attempt ('' none), the only one
   * whose hand-off this attempt may take over; a busy answer says its own (`sent`).
   */
  async #attempt(
    count: number,
    leaseTime: number,
    signal: AbortSignal | undefined,
    waiter: string,
    handOffMs: number,
    counter: RequestCounter,
    until: number,
    follows: string,
  ): Promise<
    | PermitGrant
    | {
        pttl: number;
        foreign: boolean;
        sent: string;
        asked?: PermitGrant;
        undoing?: Promise<boolean>;
      }
  > {
    const id = permitRequestId();
    const permitIds = permitIdsOf(id, count);
    const sentAt = Date.now();
    const sentMono = performance.now();
    let undoing: Promise<boolean> | undefined;
    const [status = 0, value = -1, foreign = 0] = await runAttempt(
      this.#ctx,
      {
        script: permitExpirableSemaphoreAcquire,
        name: this.name,
        keys: this.#writeKeys(),
        args: [
          leaseTime,
          this.#ctx.replayWindow,
          id,
          waiter,
          LOCK_WAITER_SLOT_MS,
          handOffMs,
          follows,
          ...permitIds,
        ],
        signal,
      },
      (r) => asIntegers(r, 2) ?? asIntegers(r, 3),
      counter,
      () => {
        undoing = this.#cancel(id, permitIds);
      },
      until,
      ([status]) => status === 1,
    );
    if (status === 1) return { id, permitIds, sentAt, sentMono };
    // -1: this request id was cancelled, or its permits are gone; attempt again with new ids.
    return {
      pttl: status === 0 ? value : 0,
      foreign: foreign === 1,
      sent: id,
      ...(undoing !== undefined
        ? { undoing }
        : { asked: { id, permitIds, sentAt, sentMono, ttl: handOffMs } }),
    };
  }

  /**
   * The request that unregisters `waiter`, a waiting call that ends without permits, and gives
   * back permits a release handed it that it never took (leave.lua).
   */
  #leaveCall(waiter: string): ScriptCall {
    return {
      script: permitExpirableSemaphoreLeave,
      name: this.name,
      keys: this.#writeKeys(),
      args: [waiter, this.#ctx.replayWindow],
    };
  }

  #lease(init: {
    id: string;
    owner: string;
    permitIds: readonly string[];
    leaseTime: number;
    watchdog: boolean;
    expiresAt: number;
    sent?: { wall: number; mono: number };
  }): PermitLease {
    const ids = [...init.permitIds];
    const host: LeaseHost = {
      kind: "permit",
      renew: (_lease, leaseTime, by, timeout) =>
        reportRenew(
          this.#ctx,
          this.name,
          by,
          async (counter) => (await this.#renew(ids, leaseTime, timeout, counter)) === ids.length,
        ),
      // Every permit given back: released; fewer: their leases had run out. Until the lease's
      // own expiresAt (never after Redis's expiry) a permit still taken is held, so only a
      // lease past it has Redis read each permit's expiry.
      release: (lease) =>
        runRelease(
          this.#ctx,
          this.#releaseCall(lease.id, ids, Date.now() >= lease.expiresAt),
          (r) => {
            const released = asInteger(r);
            if (released === undefined) return undefined;
            return released === ids.length ? "released" : "expired";
          },
        ),
      lost: () =>
        this.#ctx.emit({ type: "lost", name: this.name, requests: 0, billed: 0, durationMs: 0 }),
      backgroundError: (_lease, operation, error) =>
        reportError(this.#ctx, this.name, operation, error, { requests: 0 }, 0),
    };
    return new Lease({
      host,
      name: this.name,
      owner: init.owner,
      id: init.id,
      epoch: 0,
      permitIds: Object.freeze(ids),
      leaseTime: init.leaseTime,
      watchdog: init.watchdog,
      expiresAt: init.expiresAt,
      ...(init.sent === undefined ? {} : { sent: init.sent }),
    }) as PermitLease;
  }

  /**
   * The release of `permitIds` (release.lua) under `requestId`; `check`: Redis reads each
   * permit's expiry (a permit whose lease ran out counts as not held).
   */
  #releaseCall(requestId: string, permitIds: readonly string[], check: boolean): ScriptCall {
    return {
      script: permitExpirableSemaphoreRelease,
      name: this.name,
      keys: this.#writeKeys(),
      args: [this.#ctx.replayWindow, requestId, check ? 1 : 0, ...permitIds],
    };
  }

  #renew(
    permitIds: readonly string[],
    leaseTime: number,
    timeout?: number,
    counter: RequestCounter = { requests: 0 },
  ): Promise<number> {
    return renewPermitHolds(this.#ctx, this.name, permitIds, leaseTime, timeout, counter);
  }

  #cancel(id: string, permitIds: readonly string[]): Promise<boolean> {
    return inBackground(this.#ctx, {
      script: permitExpirableSemaphoreCancel,
      name: this.name,
      keys: this.#writeKeys(),
      args: [this.#ctx.replayWindow, id, ...permitIds],
    });
  }

  async #inspect(listed: number): Promise<PermitExpirableSemaphoreInspection> {
    const call = {
      script: permitExpirableSemaphoreInspect,
      name: this.name,
      keys: [this.name, timeoutsKey(this.name), limitKey(this.name), keys.waiting(this.name)],
      args: [listed],
    };
    const reply = await reportCall(this.#ctx, this.name, "inspect", (counter) =>
      this.#ctx.runner.run(call, decodeInspect, counter),
    );
    return { kind: "permit-expirable-semaphore", name: this.name, ...reply };
  }

  #writeKeys(): string[] {
    return [
      this.name,
      timeoutsKey(this.name),
      keys.replay(this.name),
      keys.replayOld(this.name),
      semaphoreChannel(this.name),
      keys.waiting(this.name),
      keys.wake(this.name),
      waitersMarkerKey(this.name),
    ];
  }
}

/**
 * Permits an attempt took, or a release handed its waiter as that attempt's: its request id
 * (the lease id), the permit ids, when it was sent, and for a hand-off the lease in ms they were
 * handed with (at most the claim window, from the hand-off, which came after `sentAt`).
 */
interface PermitGrant {
  id: string;
  permitIds: string[];
  sentAt: number;
  /** `sentAt` on the monotonic clock (`performance.now()`), which a wall-clock step does not move. */
  sentMono: number;
  ttl?: number;
}

/**
 * The grant a hand-off message carries ("<request id>|<lease ms>", lib/permit-hand-off.lua) for
 * the busy attempt `asked`; `undefined` (an attempt confirms it instead) for a message about
 * another attempt, or when too little of the lease is known to be left.
 */
function handedGrant(payload: string, asked: PermitGrant | undefined): PermitGrant | undefined {
  const [id, ms] = payload.split("|");
  const ttl = Number(ms);
  if (asked === undefined || id !== asked.id || !Number.isSafeInteger(ttl) || ttl <= 0) {
    return undefined;
  }
  if (asked.sentMono + ttl - performance.now() <= ttl / 4) return undefined;
  return { ...asked, ttl };
}

/** Redisson's permit leases: ZSET permit id (16 bytes) -> expiry ms, same hash slot. */
export const timeoutsKey = (name: string) => `{${name}}:timeout`;
/**
 * Lives at least as long as the last waiter registration (lua/lib/permits.lua): a release that
 * finds it absent leaves the waiter registry alone.
 */
const waitersMarkerKey = (name: string) => `edgelock_waiting:{${name}}:any`;

/**
 * edgelock's permit ids end with this tag (3 bytes), so a live permit without it is a Redisson
 * client's (lua/lib/permits.lua).
 */
const PERMIT_TAG = "ed9e10";

/**
 * A fresh acquire request id (also the lease id): 22 random hex characters, index 0000, the
 * permit tag. Its permits' ids (permitIdsOf) differ only in the index, so a script holding a
 * permit id knows the acquire that took it.
 */
function permitRequestId(): string {
  return `${randomHex(11)}0000${PERMIT_TAG}`;
}

/** The ids of the `count` permits that acquire `id` takes (indices 0001…). */
function permitIdsOf(id: string, count: number): string[] {
  const stem = id.slice(0, 22);
  return Array.from(
    { length: count },
    (_, i) => `${stem}${(i + 1).toString(16).padStart(4, "0")}${PERMIT_TAG}`,
  );
}

function checkPermitId(id: unknown): string {
  if (typeof id !== "string") throw new TypeError("`id` must be a permit id string");
  if (!isLeaseId(id)) throw new TypeError("`id` must be a permit id: 32 lowercase hex characters");
  return id;
}

function decodeInspect(
  reply: unknown,
): Omit<PermitExpirableSemaphoreInspection, "kind" | "name"> | undefined {
  if (!Array.isArray(reply) || reply.length < 6 || reply.length % 2 !== 0) return undefined;
  const head = asIntegers(reply.slice(0, 6), 6);
  if (!head) return undefined;
  const [available = 0, permits = -1, ttl = -2, waiters = 0, exists = 0, acquired = 0] = head;
  const holders: PermitHolder[] = [];
  for (let i = 6; i < reply.length; i += 2) {
    const id: unknown = reply[i];
    const left = asInteger(reply[i + 1]);
    if (!isLeaseId(id) || left === undefined) return undefined;
    holders.push({ owner: id, id, ttl: left });
  }
  return {
    ttl,
    exists: exists === 1,
    available,
    acquired,
    permits: permits < 0 ? null : permits,
    waiters,
    holders,
  };
}

/**
 * Makes the leases of `permitIds` of semaphore `name` at least `leaseTime` ms (renew.lua),
 * within `timeout` ms when given. A function, not a method, so that the `LeaseKeeper` renews
 * permits without bundling the semaphore.
 * @returns how many of the permits were still held (and renewed).
 */
export function renewPermitHolds(
  ctx: LockContext,
  name: string,
  permitIds: readonly string[],
  leaseTime: number,
  timeout?: number,
  counter: RequestCounter = { requests: 0 },
): Promise<number> {
  return ctx.runner.run(
    {
      script: permitExpirableSemaphoreRenew,
      name,
      keys: [
        name,
        timeoutsKey(name),
        semaphoreChannel(name),
        keys.waiting(name),
        keys.wake(name),
        waitersMarkerKey(name),
      ],
      args: [leaseTime, ...permitIds],
      timeout,
    },
    asInteger,
    counter,
  );
}
