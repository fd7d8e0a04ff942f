/**
 * Fair lock: Redisson's RFairLock over HTTP. FIFO and reentrant, with the reentrant lock's
 * methods and Lease. Redisson's layout (the lock HASH, `redisson_lock_queue:{<name>}` LIST,
 * `redisson_lock_timeout:{<name>}` ZSET) with server time instead of client clocks, and the
 * hand-off inside the release script: the lock goes straight to the first live waiter, and a
 * message on its client's wake channel (pub/sub over SSE) carries the grant's epoch, so the
 * waiter holds the lock on arrival, without polling. Scripts: lua/fair-lock/*.lua.
 * @module
 */

import { keys, type LockContext } from "../../context.js";
import { FAIR_SLOT_MS, HAND_OFF_CLAIM_WINDOW_MS } from "../../limits.js";
import type { RequestCounter } from "../../transport/index.js";
import type { AttemptOutcome } from "../../wait/backoff.js";
import { listenBeside } from "../../wait/beside.js";
import { keepOpenWhile, waitFor } from "../../wait/loop.js";
import { HashLock } from "../lock/base.js";
import {
  type AcquireResult,
  emitAcquire,
  type Grant,
  grantFromHandOff,
  type HoldSettings,
  leaseFor,
  noticeOf,
} from "../protocol.js";
import { FairLockHolds, type FairLockInspection } from "./hold.js";

export type { FairLockInspection } from "./hold.js";

/**
 * A FIFO reentrant lock (Redisson RFairLock). Get one with `edgelock.getFairLock(name)`; the
 * object holds no state. Same methods as the reentrant lock. A waiter joins the queue with its
 * first attempt, then waits for the release's message (or sleeps, with `wait: "poll"` or a
 * client without `subscribe`) for at most min(time left, the holder's remaining lease (the first
 * in the queue only), a third of its queue slot): the message hands it the lock; otherwise it attempts again, which confirms a
 * hand-off it missed. A waiter that gives up or aborts leaves the queue; one that dies is skipped once its
 * slot lapses (30 s); a hand-off its waiter never confirms costs the next waiter at most about
 * two claim windows (2 s each: when nobody heard the hand-off, the next waiter is woken too).
 * A hand-off holds the lock for the waiter during the claim window (`HAND_OFF_CLAIM_WINDOW_MS`,
 * 2 000 ms) until it confirms; the waiter's lease starts at that confirmation and lasts exactly
 * its `leaseTime`, also when shorter than the window (then it confirms with one more request).
 * A waiter that died before confirming keeps the lock for the window, then it passes on.
 * The queue is Redisson's: JVM clients queue in the same order (see docs/redisson-interop.md).
 */
export class FairLock extends HashLock<FairLockInspection> {
  protected readonly holds: FairLockHolds;

  /** Internal: use `edgelock.getFairLock(name)`. */
  constructor(ctx: LockContext, name: string) {
    super(ctx, name);
    this.holds = new FairLockHolds(ctx, name);
  }

  /**
   * Deletes the lock whoever holds it (Redisson RFairLock#forceUnlock) and, like a release,
   * hands it straight to the first waiter in the queue whose slot has not lapsed: an edgelock
   * waiter holds it from then for the claim window (2 000 ms) even if it has just died, before
   * it passes on; a Redisson waiter is told on its channel and takes it with its next attempt.
   * With nobody queued the lock is simply free. One request.
   * @returns true when a lock was deleted.
   * @throws {TransportError} when Redis could not be reached.
   */
  override async forceUnlock(): Promise<boolean> {
    return super.forceUnlock();
  }

  protected async acquireWith(
    s: HoldSettings,
    waitTime: number | undefined,
  ): Promise<AcquireResult> {
    s.signal?.throwIfAborted();
    const started = Date.now();
    const queued = waitTime !== 0;
    const counter: RequestCounter = { requests: 0 };
    let attempts = 0;
    let acquired = false;
    // The request id of the last attempt, which leaving the queue passes on (cancel.lua).
    let lastId: string | undefined;
    try {
      const polled = await waitFor(this.ctx, {
        name: this.name,
        // Wake-ups come as "<wait id>|<epoch>" on the client's wake channel (lua/lib/fair.lua).
        wakeKey: queued ? keys.wake(this.name) : undefined,
        waitTime,
        signal: s.signal,
        counter,
        // The wait's id marks its place in the queue and the hand-off made to it, polling or not.
        attempt: async (_waiter, _subscribed, waitId): Promise<AttemptOutcome<Grant>> => {
          const reply = await this.holds.attempt(
            s,
            counter,
            waitId,
            false,
            true,
            queued ? FAIR_SLOT_MS : 0,
          );
          lastId = reply.id;
          if (reply.status === "acquired") return { acquired: reply.grant };
          // Back well before the slot lapses. Only the first in the queue is back when the
          // holder's lease runs out (it takes the expired lock, and its release hands it on),
          // and the second a claim window later, in case the first one's client is gone (its
          // attempt then hands the lock to that first waiter, and the hand-off that nobody
          // hears wakes it: lib/fair.lua); the ones further behind wait for their message.
          const cap = FAIR_SLOT_MS / 3;
          if (reply.status !== "busy") return { pttl: 0, cap };
          return {
            pttl: reply.pttl,
            cap,
            ...(reply.foreign && { foreign: true }),
            ...(reply.serverTime !== undefined && { serverTime: reply.serverTime }),
            ...(reply.position > 0 && { ahead: reply.position }),
          };
        },
        // While a Redisson client holds the lock or waits ahead, the waiter also listens where a
        // Redisson release tells the next waiter: `redisson_lock__channel:{<name>}:<owner>`
        // (RedissonFairLock#unlockInnerAsync).
        foreign: { channel: `${keys.channel(this.name)}:${s.owner}`, beside: listenBeside },
        handOff: {
          // The lock is ours, held for the claim window from the hand-off. A lease shorter than
          // the window confirms with an attempt instead, which makes the TTL exactly the lease.
          grant: (payload, sentAt, sentMono, serverTime) =>
            s.leaseTime >= HAND_OFF_CLAIM_WINDOW_MS
              ? grantFromHandOff(payload, sentAt, sentMono, serverTime, s.leaseTime)
              : undefined,
          notice: noticeOf,
          blockCap: FAIR_SLOT_MS / 3,
        },
        exit: {
          queue: true,
          // Give the place up (and a hand-off that may have just arrived) before saying no.
          now: async (waitId) => {
            if (queued && lastId !== undefined) {
              await this.holds.leave(s.owner, lastId, waitId, counter);
            }
          },
          later: (waitId) => {
            if (queued && lastId !== undefined) this.holds.cancelWait(s.owner, lastId, waitId);
          },
        },
      });
      attempts = polled.attempts;
      if (polled.value === null) return { lease: null, attempts, holderTtl: polled.pttl };
      const lease = await leaseFor(this.ctx, this.holds, s, polled.value);
      if (queued) keepOpenWhile(this.ctx, keys.wake(this.name), lease);
      acquired = true;
      return { lease, attempts };
    } finally {
      emitAcquire(this.ctx, this.name, started, counter, acquired, attempts);
    }
  }
}
