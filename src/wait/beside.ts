/**
 * Listening on Redisson's channel beside a wait's own (the fair lock): while a JVM client holds
 * the lock or waits ahead, a Redisson release tells the next waiter on
 * `redisson_lock__channel:{<name>}:<owner>` (RedissonFairLock#unlockInnerAsync), and an edgelock
 * release on the wait's own channel, so the fair lock's waits listen on both, each message on the
 * foreign one waking the wait as its own would. The other kinds listen on the foreign channel in
 * place of their own (./loop.ts), so only the fair lock's bundle holds this module.
 * @module
 */
import type { WakeSlot } from "./wakes.js";

/** How often a wait polls for a JVM release that it cannot hear, in ms. */
const FOREIGN_POLL_MS = 1_000;

/** A place on the foreign channel: see `WakeHub#joinBroadcast`. */
export type JoinForeign = (ms: number) => Promise<WakeSlot | "unavailable" | "pending">;

/** What a wait round ends with (see `Waker#wait` in ./loop.ts). */
export interface Round {
  again: boolean;
  payload?: string;
}

/** The foreign channel of one wait, beside its own: see {@link listenBeside}. */
export interface Beside {
  /**
   * Before a round that may wait on the wait's own slot `own`: drops a place on the foreign
   * channel whose subscription failed and, when the holder is `foreign` and `own` is
   * subscribed, joins the foreign channel (its messages relayed to `own`). Returns how the
   * round ends when it joined or tried to, `undefined` when the round goes on as usual.
   */
  before(own: WakeSlot | undefined, foreign: boolean, ms: number): Promise<Round | undefined>;
  /**
   * Joins the foreign channel at the same time as the wait's own (`own`, pending) when the
   * holder is `foreign`; relays its messages to the own slot once both are there, gives its
   * place up when the own join did not succeed. Returns the own join's result.
   */
  alongside(
    own: Promise<WakeSlot | "unavailable" | "pending">,
    foreign: boolean,
    ms: number,
  ): Promise<WakeSlot | "unavailable" | "pending">;
  /** Gives the place on the foreign channel up (the wait ended or polls). Idempotent. */
  close(): void;
}

/**
 * The foreign channel beside a wait's own, joined through `join`; a wait on the own slot is
 * aborted by `signal`. Pass it as `foreign.beside` to `waitFor`.
 */
export function listenBeside(join: JoinForeign, signal: AbortSignal | undefined): Beside {
  let slot: WakeSlot | undefined;
  // A foreign stream that ended soon after it opened is not opened again (no spin): the wait
  // goes on with its own channel and its bound.
  let off = false;
  return {
    async before(own, foreign, ms) {
      if (slot?.lost) {
        off ||= !slot.renewable;
        slot.leave();
        slot = undefined;
      }
      if (!foreign || !own || slot || off) return undefined;
      // Subscribe beside the own channel, then the caller attempts again at once (Redisson's
      // order). When it cannot, the wait goes on with its own channel and its bound.
      const joined = await join(ms);
      if (typeof joined === "string") {
        if (joined === "pending") return { again: true };
        // No place there (a name that a REST path cannot carry in Redisson's channel, or every
        // subscription taken): a JVM release is heard by polling, once a second at most.
        const outcome = await own.next(Math.min(ms, FOREIGN_POLL_MS), signal);
        return outcome.woke ? { again: true, payload: outcome.payload } : { again: true };
      }
      joined.relayTo(own);
      slot = joined;
      return { again: true };
    },
    async alongside(own, foreign, ms) {
      const [joined, also] = await Promise.all([own, foreign ? join(ms) : undefined]);
      if (typeof also === "object") {
        if (typeof joined === "string") also.leave();
        else {
          also.relayTo(joined);
          slot = also;
        }
      }
      return joined;
    },
    close() {
      slot?.leave();
      slot = undefined;
    },
  };
}
