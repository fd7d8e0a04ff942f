/**
 * Fair lock: Redisson's RFairLock over HTTP. FIFO and reentrant, with the reentrant lock's
 * methods and Lease. Redisson's layout (the lock HASH, `redisson_lock_queue:{<name>}` LIST,
 * `redisson_lock_timeout:{<name>}` ZSET) with server time instead of client clocks, and the
 * hand-off inside the release script: the lock goes straight to the first live waiter, and a
 * message on its client's wake channel (pub/sub over SSE) carries the grant's epoch, so the
 * waiter holds the lock on arrival, without polling. Scripts: lua/fair-lock/*.lua.
 * @module
 */
import { sleep } from "../../abort.js";
import { randomHex } from "../../ids.js";
import { FAIR_CLAIM_WINDOW_MS, FAIR_SLOT_MS } from "../../limits.js";
import type { RequestCounter } from "../../transport/index.js";
import { backoffDelay, blockBound } from "../../wait.js";
import { keys, type LockContext } from "../context.js";
import { HashLock } from "../lock/base.js";
import { type AcquireResult, emitAcquire, type HoldSettings, leaseFor } from "../protocol.js";
import { Waker } from "../waiting.js";
import { FairLockHolds, type FairLockInspection } from "./hold.js";

export type { FairLockInspection } from "./hold.js";

/**
 * A FIFO reentrant lock (Redisson RFairLock). Get one with `edgelock.getFairLock(name)`; the
 * object holds no state. Same methods as the reentrant lock. A waiter joins the queue with its
 * first attempt, then waits for the release's message (or sleeps, with `wait: "poll"` or a
 * client without `subscribe`) for at most min(time left, the holder's remaining lease, half its
 * queue slot): the message hands it the lock; otherwise it attempts again, which confirms a
 * hand-off it missed. A waiter that gives up or aborts leaves the queue; one that dies is skipped once its
 * slot lapses (30 s); a hand-off its waiter never confirms costs the next waiter at most about
 * two claim windows (2 s each: the waiter second in line comes back at least that often).
 * A hand-off holds the lock for the waiter during the claim window (`FAIR_CLAIM_WINDOW_MS`,
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
    const deadline = waitTime === undefined ? Number.POSITIVE_INFINITY : started + waitTime;
    const queued = waitTime !== 0;
    const counter: RequestCounter = { requests: 0 };
    // Marks this call's place in the queue and the hand-off made to it; wake-ups come as
    // "<waiter>|<epoch>" on its client's wake channel (lua/lib/fair.lua).
    // While a Redisson client holds the lock or waits ahead, the waiter also listens where a
    // Redisson release tells the next waiter: its own channel `redisson_lock__channel:{<name>}:
    // <owner>` (RedissonFairLock#unlockInnerAsync).
    const waker = new Waker(
      this.ctx,
      this.name,
      queued ? keys.wake(this.name) : undefined,
      counter,
      s.signal,
      `${keys.channel(this.name)}:${s.owner}`,
      true,
    );
    const waiter = waker.id;
    let attempts = 0;
    let acquired = false;
    let lastId: string | undefined;
    try {
      for (;;) {
        const sentAt = Date.now();
        const reply = await this.holds.attempt(
          s,
          counter,
          waiter,
          false,
          queued ? FAIR_SLOT_MS : 0,
        );
        attempts += 1;
        lastId = reply.id;
        if (reply.status === "acquired") {
          const lease = await leaseFor(this.ctx, this.holds, s, reply.grant);
          acquired = true;
          return { lease, attempts };
        }
        const pttl = reply.status === "busy" ? reply.pttl : 0;
        const remaining = deadline - Date.now();
        if (remaining <= 0) {
          // Give the place up (and a hand-off that may have just arrived) before saying no.
          if (queued) await this.holds.leave(s.owner, reply.id, waiter, counter);
          return { lease: null, attempts, holderTtl: pttl };
        }
        // Back well before the slot lapses, and when second in line within a claim window, in
        // case the hand-off to the first waiter finds it dead (nobody else would wake this one
        // before the holder's lease runs out).
        const cap =
          reply.position === 1
            ? Math.min(FAIR_SLOT_MS / 2, FAIR_CLAIM_WINDOW_MS)
            : FAIR_SLOT_MS / 2;
        const bound = blockBound(pttl, remaining, cap);
        this.ctx.emit({
          type: "wait",
          name: this.name,
          requests: 0,
          durationMs: Math.ceil(bound),
          attempt: attempts,
        });
        // A polling waker answers `again: false` at once: the backoff sleep follows.
        const { again, payload } = await waker.wait(
          bound,
          reply.status === "busy" && reply.foreign === true,
        );
        if (!again) {
          const delay = backoffDelay(this.ctx.backoff, attempts - 1, pttl, bound);
          await sleep(Math.min(delay, bound), s.signal);
          continue;
        }
        // The payload is the epoch of a hand-off to this waiter: the lock is ours, held for the
        // claim window from the hand-off, which came after this loop's last busy attempt. A
        // lease shorter than the window confirms with an attempt instead, which makes the TTL
        // exactly the lease (the lock is not held for the rest of the window).
        const epoch = Number(payload);
        const claimEnds = sentAt + FAIR_CLAIM_WINDOW_MS;
        if (payload && Number.isSafeInteger(epoch) && epoch > 0) {
          if (
            s.leaseTime >= FAIR_CLAIM_WINDOW_MS &&
            claimEnds - Date.now() > FAIR_CLAIM_WINDOW_MS / 4
          ) {
            const grant = { id: randomHex(), sentAt, epoch, ttl: FAIR_CLAIM_WINDOW_MS };
            const lease = await leaseFor(this.ctx, this.holds, s, grant);
            acquired = true;
            return { lease, attempts };
          }
          // A short lease, or too little of the claim window is known to be left: the next
          // attempt confirms.
        }
      }
    } catch (error) {
      // Aborted (or failed) while queued: leave the queue in the background.
      if (queued && lastId !== undefined && !acquired) {
        this.holds.cancelWait(s.owner, lastId, waiter);
      }
      throw error;
    } finally {
      waker.close();
      emitAcquire(this.ctx, this.name, started, counter, acquired, attempts);
    }
  }
}
