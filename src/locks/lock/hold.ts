/**
 * The hold protocol of the reentrant lock (lua/lock/*.lua): Redisson's lock HASH (field =
 * owner, value = hold count, plus our epoch field) with a replay record per request and wake
 * channels. {@link LockScriptHolds} is what the fenced lock and the idempotency key reuse of it:
 * they bring their own acquire script or keys and keep the release, cancel and force-unlock
 * scripts.
 * @module
 */

import { keys } from "../../context.js";
import { randomHex } from "../../ids.js";
import type { Inspection } from "../../inspect.js";
import type { ReleaseResult } from "../../lease/lease.js";
import {
  HAND_OFF_CLAIM_WINDOW_MS,
  LOCK_HAND_OFF_SLOT_MS,
  LOCK_WAITER_SLOT_MS,
} from "../../limits.js";
import {
  lockAcquire,
  lockCancel,
  lockConfirm,
  lockDecline,
  lockForceUnlock,
  lockRelease,
} from "../../lua/lock.gen.js";
import type { LuaScript } from "../../lua/script.js";
import { asIntegers, type RequestCounter, type ScriptCall } from "../../transport/index.js";
import { runAttempt } from "../definite.js";
import { HashHolds, renewHold } from "../hash-holds.js";
import {
  type AttemptReply,
  type HoldRef,
  type HoldSettings,
  leaveCall,
  runRelease,
} from "../protocol.js";
import { decodeHolders, type LockInspection } from "./inspect.js";

/**
 * Hold operations on a name through the reentrant lock's scripts (lua/lock/*.lua). A kind
 * built on it may replace the acquire script ({@link acquireScript}, answering
 * {@link replyLength} integers), add keys after its own ({@link acquireKeys}), and record a
 * marker with a release ({@link releaseCall}). Internal base.
 */
export abstract class LockScriptHolds<I extends Inspection> extends HashHolds<I> {
  /** The acquire script: acquire.lua, or one with its keys and arguments and a longer reply. */
  protected readonly acquireScript: LuaScript = lockAcquire;
  /** How many integers the acquire script answers (acquire.lua: 3). */
  protected readonly replyLength: number = 3;

  /**
   * Whether a release hands the lock straight to a registered waiter (lib/wake.lua,
   * hand_off_one), which holds it on the release's message; otherwise waiters are only woken.
   */
  get handsOff(): boolean {
    return false;
  }

  /** Prefix of the wake channels a waiter registered by {@link attempt} listens on. */
  get wakeKey(): string {
    return keys.wake(this.name);
  }

  /**
   * One acquire attempt with a fresh request id (one HTTP request when warm). With a `waiter`
   * id, a busy attempt registers it (for {@link LOCK_WAITER_SLOT_MS}) so that the release that
   * frees the lock pushes a token to {@link wakeKey}, and an acquiring one unregisters it (when
   * `registered`: an earlier attempt may have registered it). An attempt whose answer never
   * arrives is cancelled in the background.
   */
  async attempt(
    s: HoldSettings,
    counter: RequestCounter,
    waiter = "",
    handOff = false,
    registered = true,
  ): Promise<AttemptReply> {
    const id = s.tag === undefined ? randomHex() : randomHex(12) + s.tag;
    const sentAt = Date.now();
    const sentMono = performance.now();
    let undoing: Promise<boolean> | undefined;
    const reply = await runAttempt(
      this.ctx,
      {
        script: this.acquireScript,
        name: this.name,
        keys: this.acquireKeys(),
        args: [
          s.leaseTime,
          ...this.attemptArgs(s, id, waiter),
          this.handsOff && handOff ? "1" : "0",
          registered ? "1" : "0",
        ],
        signal: s.signal,
      },
      (r) => {
        // A busy attempt that registered its waiter answers two more (acquire.lua).
        const v = asIntegers(r);
        return v && (v.length === this.replyLength || v.length === this.replyLength + 2)
          ? v
          : undefined;
      },
      counter,
      () => {
        undoing = this.cancel(s.owner, id);
      },
      s.attemptUntil,
      ([status]) => status === 1,
    );
    const [status = 0, value = 0, epoch = 0] = reply;
    if (status === 1) {
      const grant = { id, sentAt, sentMono, epoch, fencingToken: reply[3] };
      return { status: "acquired", grant };
    }
    if (status === 2) return { status: "completed", pttl: value };
    let busy: Extract<AttemptReply, { status: "busy" }>;
    if (status === 0 && reply.length === this.replyLength + 2) {
      // The two after the kind's own: the server time of the registration and how many are
      // registered ahead (acquire.lua). Only a kind that hands off lets the first catch expiries.
      const serverTime = reply[this.replyLength] ?? 0;
      const ahead = this.handsOff ? (reply[this.replyLength + 1] ?? 0) : 0;
      busy = { status: "busy", pttl: value, serverTime, ...(ahead > 0 && { ahead }) };
    } else if (status === 0 && epoch === 1) {
      busy = { status: "busy", pttl: value, foreign: true };
    } else {
      // -1: this attempt's request id was already used; the caller polls again with a new id.
      busy = { status: "busy", pttl: status === 0 ? value : 0 };
    }
    return undoing === undefined ? busy : { ...busy, undoing };
  }

  /** The keys of the acquire script: the replay records and the waiters (acquire.lua). */
  protected acquireKeys(): string[] {
    return [...this.replayKeys(), ...this.wakeKeys()];
  }

  /** The request that unregisters `waiter`, a call that ends without the lock (leave.lua). */
  leaveCall(waiter: string, _owner: string, _leaseTime: number): ScriptCall {
    return leaveCall(this.name, waiter);
  }

  /**
   * Makes sure an acquire whose answer never arrived leaves no hold behind (cancel.lua).
   * @returns settles true once Redis answered the cancel.
   */
  cancel(owner: string, id: string): Promise<boolean> {
    return this.cancelInBackground(
      lockCancel,
      [...this.replayKeys(), keys.channel(this.name), ...this.wakeKeys()],
      [owner, this.ctx.replayWindow, id],
    );
  }

  /**
   * Releases one hold (release.lua): the hold made in incarnation `hold.epoch` of the lock, or
   * any hold of the owner when it is 0, under the request id `hold.id`.
   */
  release(hold: HoldRef): Promise<ReleaseResult> {
    return runRelease(this.ctx, this.releaseCall(hold));
  }

  /**
   * The release request of `hold` (release.lua); `marker`: its optional seventh key, set for
   * `ttl` ms in the same step.
   */
  protected releaseCall(hold: HoldRef, marker?: { key: string; ttl: number }): ScriptCall {
    const scriptKeys = [...this.replayKeys(), keys.channel(this.name), ...this.wakeKeys()];
    if (marker) scriptKeys.push(marker.key);
    return {
      script: lockRelease,
      name: this.name,
      keys: scriptKeys,
      args: [...this.releaseArgs(hold), marker?.ttl ?? 0, HAND_OFF_CLAIM_WINDOW_MS],
    };
  }

  /** Deletes the lock whoever holds it (force-unlock.lua). Redisson RLock#forceUnlock. */
  forceUnlock(): Promise<boolean> {
    return this.runOnce(
      lockForceUnlock,
      [this.name, keys.channel(this.name), ...this.wakeKeys(), keys.replay(this.name)],
      [this.ctx.replayWindow],
    );
  }
}

/** Hold operations on one reentrant lock. Internal to the primitive. */
export class LockHolds extends LockScriptHolds<LockInspection> {
  readonly kind = "lock" as const;

  /**
   * A release hands the lock straight to a registered waiter, which holds it on the release's
   * message (lib/wake.lua, hand_off_one).
   */
  override get handsOff(): boolean {
    return true;
  }

  /**
   * Renews through lua/lock/confirm.lua: the renewal that confirms a hand-off also tells the
   * waiter then first that the lock now lasts the whole lease, so that it is not back at the
   * claim window's end for nothing.
   */
  override renew(
    owner: string,
    leaseTime: number,
    by: "call" | "timer",
    timeout?: number,
  ): Promise<boolean> {
    return renewHold(this.ctx, this.name, owner, leaseTime, by, timeout, {
      script: lockConfirm,
      keys: [this.name, ...this.wakeKeys()],
    });
  }

  /** A waiter asking for hand-offs keeps its place longer ({@link LOCK_HAND_OFF_SLOT_MS}). */
  protected override get waiterSlot(): number {
    return this.handsOff ? LOCK_HAND_OFF_SLOT_MS : LOCK_WAITER_SLOT_MS;
  }

  /**
   * The request that unregisters `waiter`, a call of `owner` that ends without the lock: where
   * releases hand off ({@link handsOff}), decline.lua, which also gives back a hand-off that
   * reached the call after it ended.
   */
  override leaveCall(waiter: string, owner: string, leaseTime: number): ScriptCall {
    if (!this.handsOff) return super.leaveCall(waiter, owner, leaseTime);
    return {
      script: lockDecline,
      name: this.name,
      keys: [this.name, keys.channel(this.name), ...this.wakeKeys()],
      args: [waiter, owner, HAND_OFF_CLAIM_WINDOW_MS, leaseTime],
    };
  }

  /** Holders, hold counts and TTL in one read-only request (holders.lua). */
  async inspect(): Promise<LockInspection> {
    const { ttl, holders } = await this.readHolders([], decodeHolders);
    return { kind: "lock", name: this.name, locked: ttl !== -2, ttl, holders };
  }
}
