/**
 * The hold protocol of a Redisson-layout lock (HASH at the name, field = owner, value = hold
 * count, plus our epoch field): lua/lock/*.lua. Used by the reentrant lock and, with the
 * completion marker, by the idempotency key.
 * @module
 */
import { randomHex } from "../../ids.js";
import type { ReleaseResult } from "../../lease/lease.js";
import { FAIR_CLAIM_WINDOW_MS, LOCK_WAITER_SLOT_MS } from "../../limits.js";
import {
  lockAcquire,
  lockCancel,
  lockForceUnlock,
  lockHolders,
  lockRelease,
  lockRenew,
} from "../../lua/lock.gen.js";
import type { LuaScript } from "../../lua/script.js";
import { asInteger, asIntegers, type RequestCounter } from "../../transport/index.js";
import { keys, type LockContext } from "../context.js";
import { runAttempt } from "../definite.js";
import {
  type AttemptReply,
  type HoldProtocol,
  type HoldRef,
  type HoldSettings,
  inBackground,
  reportRenew,
  runRelease,
  unregisterWaiter,
} from "../protocol.js";
import {
  decodeHolders,
  type FencedLockInspection,
  type LockInspection,
  MAX_INSPECT_HOLDERS,
} from "./inspect.js";

const decodeAttempt = (r: unknown) => asIntegers(r, 3) as [number, number, number] | undefined;
const decodeFencedAttempt = (r: unknown) =>
  asIntegers(r, 4) as [number, number, number, number] | undefined;

/**
 * Makes the TTL of lock HASH `name` at least `leaseTime` if `owner` still holds it (renew.lua),
 * within `timeout` ms when given (default: the EdgeLock's `requestTimeout`), and reports it as a
 * `renew` event. Shared by every kind on Redisson's lock layout; `script` replaces renew.lua by a
 * script with the same arguments and reply (a read lock's).
 */
export async function renewHold(
  ctx: LockContext,
  name: string,
  owner: string,
  leaseTime: number,
  by: "call" | "timer",
  timeout?: number,
  script: { script: LuaScript; keys: string[] } = { script: lockRenew, keys: [name] },
): Promise<boolean> {
  return reportRenew(ctx, name, by, async (counter) => {
    const [renewed] = await ctx.runner.run(
      { script: script.script, name, keys: script.keys, args: [leaseTime, owner], timeout },
      (r) => asIntegers(r, 1),
      counter,
    );
    return renewed === 1;
  });
}

/** Completion marker of an idempotency key: same hash slot as the name. */
export const doneKey = (name: string) => `edgelock_done:{${name}}`;

/** A fenced lock's token counter (Redisson RedissonFencedLock's key): same hash slot. */
export const tokenKey = (name: string) => `redisson_lock_token:{${name}}`;

/**
 * Hold operations on one lock name. Internal to the primitives. With `fenced` (the fenced lock's
 * acquire script, lua/fenced-lock/acquire.lua, passed in so that the plain lock's entry does not
 * bundle it), every grant also takes a fencing token; the other scripts are the same.
 */
export class LockHolds implements HoldProtocol {
  readonly kind: "lock" | "fenced-lock";
  readonly name: string;
  readonly #ctx: LockContext;
  /** Whether attempts check the completion marker (idempotency keys). */
  readonly #completion: boolean;
  readonly #acquire: LuaScript;

  constructor(
    ctx: LockContext,
    name: string,
    options: { completion?: boolean; fenced?: LuaScript } = {},
  ) {
    this.#ctx = ctx;
    this.name = name;
    this.#completion = options.completion ?? false;
    this.kind = options.fenced ? "fenced-lock" : "lock";
    this.#acquire = options.fenced ?? lockAcquire;
  }

  /**
   * Whether a release hands the lock straight to a registered waiter (lib/wake.lua,
   * hand_off_one), which holds it on the release's message: the plain reentrant lock. A fenced
   * lock's grant must take a token, and an idempotency key's waiter must see the completion
   * marker, so their waiters are only woken.
   */
  get handsOff(): boolean {
    return this.kind === "lock" && !this.#completion;
  }

  /** Prefix of the wake channels a waiter registered by {@link attempt} listens on. */
  get wakeKey(): string {
    return keys.wake(this.name);
  }

  /**
   * One acquire attempt with a fresh request id (acquire.lua; one HTTP request when warm). With
   * the completion marker, a completed name answers `"completed"` instead. With a `waiter` id, a
   * busy attempt registers it (for {@link LOCK_WAITER_SLOT_MS}) so that the release that frees
   * the lock pushes a token to {@link wakeKey}, and an acquiring one unregisters it.
   */
  async attempt(
    s: HoldSettings,
    counter: RequestCounter,
    waiter = "",
    handOff = false,
  ): Promise<AttemptReply> {
    const id = randomHex();
    const sentAt = Date.now();
    const fenced = this.kind === "fenced-lock";
    const scriptKeys = [...this.#replayKeys(), ...this.#wakeKeys()];
    if (this.#completion) scriptKeys.push(doneKey(this.name));
    if (fenced) scriptKeys.push(tokenKey(this.name));
    let status: number;
    let value: number;
    let epoch: number;
    let fencingToken: number | undefined;
    const call = {
      script: this.#acquire,
      name: this.name,
      keys: scriptKeys,
      args: [
        s.leaseTime,
        s.owner,
        this.#ctx.replayWindow,
        id,
        waiter,
        LOCK_WAITER_SLOT_MS,
        this.handsOff && handOff ? "1" : "0",
      ],
      signal: s.signal,
    };
    const undo = () => this.cancel(s.owner, id);
    if (fenced) {
      [status, value, epoch, fencingToken] = await runAttempt(
        this.#ctx,
        call,
        decodeFencedAttempt,
        counter,
        undo,
      );
    } else {
      [status, value, epoch] = await runAttempt(this.#ctx, call, decodeAttempt, counter, undo);
    }
    if (status === 1) return { status: "acquired", grant: { id, sentAt, epoch, fencingToken } };
    if (status === 2) return { status: "completed", pttl: value };
    // -1: this attempt's request id was already used; the caller polls again with a new id.
    if (status === 0 && epoch === 1) return { status: "busy", pttl: value, foreign: true };
    return { status: "busy", pttl: status === 0 ? value : 0 };
  }

  /**
   * Unregisters a waiter that gave up or was aborted (leave.lua), in the background: left alone,
   * its registration would lapse by itself, after waking nobody at most once.
   */
  unregister(waiter: string): void {
    unregisterWaiter(this.#ctx, this.name, waiter);
  }

  /** Makes sure an acquire whose answer never arrived leaves no hold behind (cancel.lua). */
  cancel(owner: string, id: string): void {
    inBackground(this.#ctx, this.name, "cancel", (counter) =>
      this.#ctx.runner.run(
        {
          script: lockCancel,
          name: this.name,
          keys: [...this.#replayKeys(), keys.channel(this.name), ...this.#wakeKeys()],
          args: [owner, this.#ctx.replayWindow, id],
        },
        asInteger,
        counter,
      ),
    );
  }

  /**
   * Makes the lock's TTL at least `leaseTime` if `owner` still holds it (renew.lua), within
   * `timeout` ms when given (default: the EdgeLock's `requestTimeout`).
   */
  renew(owner: string, leaseTime: number, by: "call" | "timer", timeout?: number) {
    return renewHold(this.#ctx, this.name, owner, leaseTime, by, timeout);
  }

  /**
   * Releases one hold (release.lua): the hold made in incarnation `hold.epoch` of the lock, or
   * any hold of the owner when it is 0, under the request id `hold.id`. With `completionTtl`,
   * records the completion marker in the same request.
   */
  release(hold: HoldRef, completionTtl?: number): Promise<ReleaseResult> {
    const scriptKeys = [...this.#replayKeys(), keys.channel(this.name), ...this.#wakeKeys()];
    const args: (string | number)[] = [
      hold.owner,
      hold.leaseTime,
      this.#ctx.replayWindow,
      hold.id,
      hold.epoch,
      completionTtl ?? 0,
      FAIR_CLAIM_WINDOW_MS,
    ];
    if (completionTtl !== undefined) scriptKeys.push(doneKey(this.name));
    return runRelease(this.#ctx, { script: lockRelease, name: this.name, keys: scriptKeys, args });
  }

  /** Deletes the lock whoever holds it (force-unlock.lua). Redisson RLock#forceUnlock. */
  async forceUnlock(): Promise<boolean> {
    const n = await this.#ctx.runner.run(
      {
        script: lockForceUnlock,
        name: this.name,
        keys: [this.name, keys.channel(this.name), ...this.#wakeKeys()],
        args: [],
      },
      asInteger,
      { requests: 0 },
    );
    return n === 1;
  }

  /** Holders, hold counts and TTL in one read-only request (holders.lua). */
  async inspect(): Promise<LockInspection> {
    const { ttl, holders } = await this.#ctx.runner.run(
      { script: lockHolders, name: this.name, keys: [this.name], args: [MAX_INSPECT_HOLDERS] },
      decodeHolders,
      { requests: 0 },
    );
    return { kind: "lock", name: this.name, locked: ttl !== -2, ttl, holders };
  }

  /** {@link inspect} of a fenced lock: also the last fencing token issued (0: none). */
  async inspectFenced(): Promise<FencedLockInspection> {
    const { ttl, token, holders } = await this.#ctx.runner.run(
      {
        script: lockHolders,
        name: this.name,
        keys: [this.name, tokenKey(this.name)],
        args: [MAX_INSPECT_HOLDERS],
      },
      (reply) => {
        if (!Array.isArray(reply) || reply.length < 2) return undefined;
        const token = asInteger(reply[1]);
        const rest = decodeHolders([reply[0], ...reply.slice(2)]);
        return token === undefined || !rest ? undefined : { ...rest, token };
      },
      { requests: 0 },
    );
    return {
      kind: "fenced-lock",
      name: this.name,
      locked: ttl !== -2,
      ttl,
      holders,
      fencingToken: token,
    };
  }

  /** The registered waiters and their wake channels: keys of every script that can free it. */
  #wakeKeys(): string[] {
    return [keys.waiting(this.name), keys.wake(this.name)];
  }

  /** The lock and its two replay-record hashes: the first keys of acquire, release, cancel. */
  #replayKeys(): string[] {
    return [this.name, keys.replay(this.name), keys.replayOld(this.name)];
  }
}
