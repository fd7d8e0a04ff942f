/**
 * The hold protocol of a fair lock (lua/fair-lock/*.lua): the reentrant lock's HASH plus
 * Redisson RedissonFairLock's queue (LIST) and slot (ZSET) keys, with the hand-off to the first
 * waiter inside the release script, which publishes it to the waiter (lua/lib/fair.lua).
 * @module
 */

import { keys } from "../../context.js";
import { randomHex } from "../../ids.js";
import type { Inspection } from "../../inspect.js";
import type { ReleaseResult } from "../../lease/lease.js";
import { HAND_OFF_CLAIM_WINDOW_MS } from "../../limits.js";
import {
  fairLockAcquire,
  fairLockCancel,
  fairLockConfirm,
  fairLockForceUnlock,
  fairLockRelease,
} from "../../lua/fair-lock.gen.js";
import {
  asInteger,
  asIntegers,
  type RequestCounter,
  type ScriptCall,
} from "../../transport/index.js";
import { runAttempt } from "../definite.js";
import { HashHolds, renewHold } from "../hash-holds.js";
import { decodeHolders, type LockHolder } from "../lock/inspect.js";
import {
  type AttemptReply,
  type HoldRef,
  type HoldSettings,
  inBackground,
  runRelease,
} from "../protocol.js";

/** {status, value, epoch or position, jvm} and, when this attempt queued the owner, the time. */
const decodeAttempt = (r: unknown) => {
  const v = asIntegers(r);
  return v && (v.length === 4 || v.length === 5)
    ? (v as [number, number, number, number, number?])
    : undefined;
};

/** Redisson's fair-lock keys and ours, all in the name's hash slot. */
export const fairKeys = {
  queue: (name: string) => `redisson_lock_queue:{${name}}`,
  slots: (name: string) => `redisson_lock_timeout:{${name}}`,
  waiters: (name: string) => `edgelock_waiters:{${name}}`,
};

/** What `fairLock.inspect()` reports: the holder as for a lock, and the waiting owners. */
export interface FairLockInspection extends Inspection {
  kind: "fair-lock";
  locked: boolean;
  holders: LockHolder[];
}

/**
 * Hold operations on one fair lock: renewals and the holders as for any lock in the HASH
 * (lua/lock/renew.lua, holders.lua), the rest through lua/fair-lock/. Internal to the primitive.
 */
export class FairLockHolds extends HashHolds<FairLockInspection> {
  readonly kind = "fair-lock" as const;

  /**
   * One attempt (acquire.lua): acquires, re-enters, confirms a hand-off, or (with `slotMs` > 0)
   * queues the owner or refreshes its place. The reply's `id` is the attempt's request id, which
   * a waiter that gives up passes to {@link leave}.
   */
  async attempt(
    s: HoldSettings,
    counter: RequestCounter,
    waiter = "",
    _handOff = false,
    _registered = true,
    slotMs = 0,
  ): Promise<AttemptReply & { id: string; position: number }> {
    const id = randomHex();
    const sentAt = Date.now();
    const sentMono = performance.now();
    const [status, value, epoch, jvm, serverTime] = await runAttempt(
      this.ctx,
      {
        script: fairLockAcquire,
        name: this.name,
        keys: this.#keys(),
        args: [
          s.leaseTime,
          s.owner,
          this.ctx.replayWindow,
          id,
          slotMs,
          HAND_OFF_CLAIM_WINDOW_MS,
          waiter,
        ],
        signal: s.signal,
      },
      decodeAttempt,
      counter,
      () => this.cancelWait(s.owner, id, waiter),
      // A busy answer is recorded ("Q", "B"): a later copy replays it, and nothing to undo.
      s.attemptUntil,
    );
    if (status === 1)
      return { status: "acquired", grant: { id, sentAt, sentMono, epoch }, id, position: -1 };
    // For a busy reply the third value is the owner's place in the queue, the fourth whether a
    // Redisson client holds the lock or waits ahead of it.
    return {
      status: "busy",
      pttl: status === 0 ? value : 0,
      id,
      position: status === 0 ? epoch : -1,
      ...(status === 0 && jvm === 1 ? { foreign: true } : {}),
      ...(serverTime !== undefined && { serverTime }),
    };
  }

  /**
   * Takes `owner` out of the queue (cancel.lua), passing on a hand-off it never confirmed and
   * undoing a hold its attempt `id` made if that attempt's answer never arrived.
   */
  async leave(owner: string, id: string, waiter: string, counter: RequestCounter): Promise<void> {
    await this.ctx.runner.run(this.#leaveCall(owner, id, waiter), asInteger, counter);
  }

  /** The request of {@link leave}. */
  #leaveCall(owner: string, id: string, waiter: string): ScriptCall {
    return {
      script: fairLockCancel,
      name: this.name,
      keys: this.#keys(),
      args: [owner, this.ctx.replayWindow, id, HAND_OFF_CLAIM_WINDOW_MS, waiter],
    };
  }

  /** {@link leave} in the background, for an unanswered attempt outside a wait. */
  cancel(owner: string, id: string): void {
    this.cancelWait(owner, id, "");
  }

  /** {@link leave} in the background (an aborted wait or an unanswered attempt). */
  cancelWait(owner: string, id: string, waiter: string): void {
    void inBackground(this.ctx, this.#leaveCall(owner, id, waiter));
  }

  /** Releases one hold and, on the last, hands the lock to the first live waiter (release.lua). */
  release(hold: HoldRef): Promise<ReleaseResult> {
    return runRelease(this.ctx, {
      script: fairLockRelease,
      name: this.name,
      keys: this.#keys(),
      args: [...this.releaseArgs(hold), HAND_OFF_CLAIM_WINDOW_MS],
    });
  }

  /** Deletes the lock whoever holds it and hands it on (force-unlock.lua). */
  forceUnlock(): Promise<boolean> {
    return this.runOnce(fairLockForceUnlock, this.#keys().slice(0, 6), [
      HAND_OFF_CLAIM_WINDOW_MS,
      this.ctx.replayWindow,
    ]);
  }

  /** The holder and its hold count in one read-only request (lua/lock/holders.lua). */
  /**
   * Renews through lua/fair-lock/confirm.lua: the renewal that confirms a hand-off also tells the
   * waiter then first that the lock now lasts the whole lease, so that it is not back at the
   * claim window's end for nothing.
   */
  override renew(
    owner: string,
    leaseTime: number,
    by: "call" | "timer",
    timeout?: number,
  ): Promise<boolean> {
    const n = this.name;
    return renewHold(this.ctx, n, owner, leaseTime, by, timeout, {
      script: fairLockConfirm,
      keys: [n, fairKeys.queue(n), fairKeys.slots(n), fairKeys.waiters(n), keys.channel(n)],
      args: [HAND_OFF_CLAIM_WINDOW_MS],
    });
  }

  async inspect(): Promise<FairLockInspection> {
    const { ttl, holders } = await this.readHolders([], decodeHolders);
    return { kind: "fair-lock", name: this.name, locked: ttl !== -2, ttl, holders };
  }

  /** KEYS of acquire, release and cancel (lua/fair-lock/acquire.lua). */
  #keys(): string[] {
    const n = this.name;
    return [
      n,
      fairKeys.queue(n),
      fairKeys.slots(n),
      fairKeys.waiters(n),
      keys.channel(n),
      keys.replay(n),
      keys.replayOld(n),
    ];
  }
}
