/**
 * The wait loop every primitive with waiters shares (locks, semaphores, latches): attempts until
 * one succeeds or the wait budget is spent, and between attempts waits for a wake-up published by
 * the script that frees what it waits for (./wakes.ts: SUBSCRIBE over SSE, one subscription per
 * client and name), where the busy attempt registered this call as a waiter; with `wait: "poll"`,
 * a client that cannot subscribe, a primitive without wake-ups, or a failed subscription, it
 * sleeps with the PTTL-bounded backoff of wait.ts. Between two requests of one wait there is
 * always a wake-up that arrived or a sleep: it never spins. Redisson waits on pub/sub the same
 * way (RedissonLock#tryLock, RedissonSemaphore#tryAcquire, RedissonCountDownLatch#await).
 * @module
 */

import type { LockContext } from "../context.js";
import { LOCK_WAITER_SLOT_MS } from "../limits.js";
import type { RequestCounter } from "../transport/index.js";
import { type AttemptOutcome, pollUntil, SLEEP_FLOOR_MS } from "./backoff.js";
import type { Beside, JoinForeign, Round } from "./beside.js";
import { type WakeHub, type WakeSlot, wakeHubOf } from "./wakes.js";

/** What {@link waitFor} waits on. */
export interface WaitSpec<T> {
  /** Name of the primitive, for errors and events. */
  name: string;
  /**
   * Prefix of the waiters' wake channels (lua/lib/wake.lua): `<wakeKey>:<client>`. Absent when
   * waiters can only poll.
   */
  wakeKey: string | undefined;
  /** Wait budget in ms; `undefined` waits until `signal` aborts; 0 makes one attempt. */
  waitTime: number | undefined;
  signal: AbortSignal | undefined;
  /** Every request of the wait (attempts and the subscription) is added to it. */
  counter: RequestCounter;
  /**
   * One attempt. `waiter` is this call's waiter id ('' when it is not subscribed): a busy attempt
   * registers it and an attempt that succeeds unregisters it. Returns `{ pttl }` when busy: how
   * long until what it waits for frees itself at the latest (-1: unknown or never), which bounds
   * the wait.
   */
  attempt(
    waiter: string,
    subscribed: boolean,
    waitId: string,
    registered: boolean,
  ): Promise<AttemptOutcome<T>>;
  /** How a wait that ends without the value gives its place up; absent: it does not. */
  exit?: WaiterExit;
  /** Redisson's channel, for a kind a JVM client's release may free; absent: none. */
  foreign?: ForeignChannel;
  /** For a kind whose releases hand over to a registered waiter; absent: none. */
  handOff?: HandOff<T>;
}

/**
 * How a wait that ends without the value gives up its place, so that a release no longer wakes
 * it or hands it anything: `now` awaited before the wait answers `null` for a spent budget (a
 * release after that answer can no longer hand it anything, and one that just did is passed on),
 * `later` in the background otherwise. `id` is the wait's id (the `waitId` of
 * {@link WaitSpec.attempt}, which is also the waiter id it registers).
 */
export interface WaiterExit {
  /**
   * What holds the place:
   * - absent: the waiter id that busy attempts register while subscribed (lua/lib/wake.lua).
   *   Given up only while registered: `later` when the wait turns to polling (nothing would wake
   *   that registration), is aborted or fails, `now` when its budget runs out.
   * - `true`: a place in a queue that every attempt keeps under the wait's id, polling or not
   *   (the fair lock's): `now` whenever the budget runs out, `later` when the wait is aborted or
   *   fails.
   */
  queue?: true;
  now(id: string): Promise<void>;
  later(id: string): void;
}

/**
 * Redisson's unlock channel of a kind whose busy attempts report a JVM holder
 * (`{ foreign: true }`): the wait listens there while such a holder keeps it out, since a JVM
 * release publishes only there.
 */
export interface ForeignChannel {
  channel: string;
  /**
   * Listen there beside the wait's own channel rather than in its place (the fair lock: either
   * side's release may tell the waiter): `listenBeside` of ./beside.ts.
   */
  beside?(join: JoinForeign, signal: AbortSignal | undefined): Beside;
}

/**
 * The waiter side of a hand-off (the protocol: docs/waiting.md, "The hand-off"): a release gives
 * the lock to a registered waiter and publishes its grant to it (lua/lib/wake.lua,
 * hand_off_one), which the wait takes as its value without another request.
 */
export interface HandOff<T> {
  /**
   * The value a hand-off message's payload grants, or `undefined` to confirm it with an attempt
   * instead. `sentAt` is when the last busy attempt was sent (the hand-off came after it;
   * `sentMono`: the same on the monotonic clock), `serverTime` the server time at which that
   * attempt registered the waiter (0: not known). Not asked while a cancel of the wait's
   * attempts is unanswered ({@link AttemptOutcome}'s `undoing`).
   */
  grant(payload: string, sentAt: number, sentMono: number, serverTime: number): T | undefined;
  /**
   * The server time in ms (Redis clock) at which the holder's lock expires, when `payload` is a
   * notice that this waiter is now the first registered one (lua/lib/wake.lua, notify_first);
   * `undefined` for any other payload. The wait is then back by that expiry, without a request.
   */
  notice?(payload: string): number | undefined;
  /**
   * Longest single wait for a wake-up, in ms: a waiter that asks for hand-offs registers for
   * longer (so that it keeps its place behind long holds), and comes back well before that
   * registration lapses. Without a hand-off: `LOCK_WAITER_SLOT_MS / 2`.
   */
  blockCap: number;
}

/**
 * How a wait waits for wake-ups: subscribes on its first busy attempt (or uses an open
 * subscription of its client from the start), falls back to polling for good when it cannot.
 */
class Waker {
  readonly #ctx: LockContext;
  /** The client's wake-up subscriptions. */
  readonly #hub: WakeHub;
  readonly #name: string;
  readonly #prefix: string | undefined;
  readonly #counter: RequestCounter;
  readonly #signal: AbortSignal | undefined;
  /** This wait's id (`<client>:<wait>`), which a subscribed wait's attempts register. */
  readonly id: string;
  #slot: WakeSlot | undefined;
  /** Where a JVM holder's unlock publishes, and this wait's place there (see {@link wait}). */
  readonly #foreignChannel: string | undefined;
  #foreignSlot: WakeSlot | undefined;
  /**
   * The foreign channel when it is listened on beside this wait's own (the fair lock: either
   * side's release may tell this waiter) instead of in its place.
   */
  readonly #beside: Beside | undefined;
  /** No subscription from now on (tried, failed, or not wanted). */
  #polling: boolean;
  /** The last {@link wait} subscribed (again). */
  #joined = false;

  constructor(
    ctx: LockContext,
    name: string,
    prefix: string | undefined,
    counter: RequestCounter,
    signal: AbortSignal | undefined,
    foreign: ForeignChannel | undefined,
    id?: string,
  ) {
    this.#foreignChannel = foreign?.channel;
    this.#ctx = ctx;
    this.#name = name;
    this.#prefix = prefix;
    this.#counter = counter;
    this.#signal = signal;
    this.#hub = wakeHubOf(ctx);
    this.id = id ?? this.#hub.waitId();
    this.#polling = pollsOnly(ctx, this.#hub, prefix);
    this.#slot =
      this.#polling || prefix === undefined ? undefined : this.#hub.joinOpen(prefix, this.id);
    this.#beside = foreign?.beside?.((ms) => this.#joinForeign(ms), signal);
  }

  /**
   * The id the next attempt registers ('' when polling). The first attempt registers it before
   * the subscription exists: a release meanwhile finds nobody listening and wakes the next
   * waiter instead, and the attempt after subscribing registers it again.
   */
  get waiter(): string {
    return this.#polling ? "" : this.id;
  }

  /**
   * Whether this wait's subscription is confirmed, so that a message to it will be heard: only
   * then may a release hand it the lock (a hand-off to a waiter that cannot hear it would keep
   * the lock from everyone for the claim window).
   */
  get subscribed(): boolean {
    return this.#slot !== undefined && !this.#slot.lost;
  }

  /** Whether the wait polls (sleeps with backoff) instead of waiting for messages. */
  get polling(): boolean {
    return this.#polling;
  }

  /**
   * Waits after a busy attempt for at most `ms`: for a wake-up when subscribed; subscribing
   * first when not yet (then the caller attempts again at once, so a release between its last
   * attempt and the subscription is not missed).
   * @returns `{ again: true, payload? }` to attempt at once (woken, timed out, just subscribed,
   * subscribed again after its stream ended, or the stream ended too soon to subscribe again: a
   * wake-up may have gone with it), `{ again: false }` when the caller must sleep its backoff
   * instead (polling). `behind`: other waiters are ahead of this one in a kind whose releases
   * hand over in order, so after subscribing again it waits on rather than attempting.
   * @throws signal.reason when aborted.
   */
  async wait(ms: number, foreign = false, behind = false): Promise<Round> {
    this.#joined = false;
    if (this.#polling || this.#prefix === undefined) return { again: false };
    const started = Date.now();
    if (this.#beside) {
      const round = await this.#beside.before(this.#slot, foreign, ms);
      if (round) return round;
    } else if (foreign && this.#foreignChannel !== undefined) {
      return this.#waitForeign(ms);
    } else {
      this.#foreignSlot?.leave();
      this.#foreignSlot = undefined;
    }
    if (!this.#slot) {
      // Bounded by this wait's bound, so a slow confirmation never holds the wait past it. A
      // foreign channel to listen on as well is subscribed to at the same time.
      const own = this.#hub.join(
        this.#name,
        this.#prefix,
        this.id,
        this.#counter,
        this.#signal,
        ms,
      );
      const joined = await (this.#beside ? this.#beside.alongside(own, foreign, ms) : own);
      if (typeof joined === "string") {
        if (joined === "pending") return { again: true };
        const full = this.#hub.open >= this.#ctx.maxSubscriptions;
        return this.#poll(full ? "limit" : "failed");
      }
      this.#slot = joined;
      this.#emit("subscribe");
      this.#joined = true;
      return { again: true };
    }
    const outcome = await this.#slot.next(ms, this.#signal);
    if (outcome.woke) return { again: true, payload: outcome.payload };
    if (!outcome.lost) return { again: true };
    // The stream ended or failed (hosts end long responses): nothing wakes this wait until it
    // subscribes again, and a release meanwhile reached nobody here. Subscribe again, in
    // Redisson's order (the attempt after the confirmation finds a release of the gap); after a
    // stream that ended soon after it opened, attempt at once and poll from then on.
    const renewable = this.#slot.renewable;
    this.#slot.leave();
    this.#slot = undefined;
    if (!renewable) {
      this.#poll("lost");
      return { again: true };
    }
    const round = await this.wait(Math.max(0, ms - (Date.now() - started)), foreign);
    if (!behind || !this.#joined) return round;
    // Subscribed again behind other waiters of a kind that hands over in order: a release in the
    // gap handed the lock to the first of them, not to this wait, and kept this registration in
    // its place; what the gap may have taken is a notice that this wait became first, whose
    // bound its own (a claim window per waiter ahead of the holder's expiry) still covers. So it
    // waits on, rather than attempting: a request less per stream end.
    return this.wait(Math.max(0, ms - (Date.now() - started)), foreign, behind);
  }

  /**
   * The holder is a JVM client, whose unlock publishes only on Redisson's channel (and wakes
   * nobody registered on ours): wait on that channel instead, in Redisson's order (subscribe,
   * then attempt, then wait for its message), polling this round when it cannot.
   */
  async #waitForeign(ms: number): Promise<Round> {
    if (!this.#foreignSlot) {
      const joined = await this.#joinForeign(ms);
      if (joined === "pending") return { again: true };
      if (joined === "unavailable") return { again: false };
      this.#foreignSlot = joined;
      return { again: true };
    }
    const outcome = await this.#foreignSlot.next(ms, this.#signal);
    if (!outcome.woke && outcome.lost) {
      // Subscribed again at the next round; after a stream that ended soon after it opened,
      // only once this round's backoff sleep is over.
      const renewable = this.#foreignSlot.renewable;
      this.#foreignSlot.leave();
      this.#foreignSlot = undefined;
      return { again: renewable };
    }
    return { again: true };
  }

  /** A place on the foreign channel (see `WakeHub#joinBroadcast`). */
  #joinForeign(ms: number): ReturnType<JoinForeign> {
    return this.#hub.joinBroadcast(
      this.#name,
      this.#foreignChannel as string,
      this.id,
      this.#counter,
      this.#signal,
      ms,
    );
  }

  /** Gives the subscriptions up (the wait ended). Idempotent. */
  close(): void {
    this.#slot?.leave();
    this.#slot = undefined;
    this.#foreignSlot?.leave();
    this.#foreignSlot = undefined;
    this.#beside?.close();
  }

  #poll(reason: "limit" | "failed" | "lost"): { again: false } {
    this.close();
    this.#polling = true;
    this.#emit("poll", reason);
    return { again: false };
  }

  #emit(strategy: "subscribe" | "poll", reason?: "limit" | "failed" | "lost"): void {
    this.#ctx.emit({
      type: "wait-strategy",
      name: this.#name,
      requests: 0,
      billed: 0,
      durationMs: 0,
      strategy,
      ...(reason ? { reason } : {}),
    });
  }
}

/**
 * Runs `spec.attempt` until it succeeds or the wait budget is spent (see the module
 * documentation). A wait that gives up, is aborted or fails gives its place up (`spec.exit`).
 * @returns the value and attempts, or `null`, the attempts and the last busy attempt's pttl.
 * @throws signal.reason when aborted (an attempt in flight is the caller's to clean up).
 * @throws {TransportError} when an attempt fails.
 */
export async function waitFor<T>(
  ctx: LockContext,
  spec: WaitSpec<T>,
): Promise<{ value: T; attempts: number } | { value: null; attempts: number; pttl: number }> {
  const { signal, counter, exit } = spec;
  const startedAt = Date.now();
  const prefix = spec.waitTime === 0 ? undefined : spec.wakeKey;
  const hub = wakeHubOf(ctx);
  // The id the last busy attempt registered ('' = none): a successful attempt ends the
  // registration, and so does giving up or aborting (one background request).
  let registered = "";
  let sentAt = 0;
  let sentMono = 0;
  let id: string | undefined;
  let first: Exclude<AttemptOutcome<T>, { acquired: T }> | undefined;
  // Cancels of this wait's attempts that Redis has not answered yet. While one is out, a late
  // copy of its attempt may still reach Redis after a release handed this wait the lock or
  // permits, take the hand-off as that attempt's, and the cancel then undo it under a caller
  // that holds it on the message: so none is held on its message meanwhile, and the attempt
  // the message brings on confirms or takes it over instead (one request).
  let unanswered = 0;
  const track = (outcome: AttemptOutcome<T>): void => {
    if ("acquired" in outcome || !outcome.undoing) return;
    unanswered += 1;
    void outcome.undoing.then((answered) => {
      if (answered) unanswered -= 1;
    });
  };
  // With no subscription of this client open to join (whose attempts may take hand-offs), and
  // for a kind that neither keeps a queue place nor listens beside Redisson's channel from its
  // first attempt (the fair lock), the first attempt goes out before anything of the wait is set
  // up: on a free lock it is the whole call, which then costs about what `waitTime: 0` costs. It
  // is the attempt the loop would make first (the waiter id when the wait will subscribe, not
  // subscribed, not yet registered); a busy one hands the loop its outcome and its registration.
  if (!exit?.queue && !spec.foreign?.beside && !(prefix && hub.isOpen(prefix))) {
    id = hub.waitId();
    const waiter = pollsOnly(ctx, hub, prefix) ? "" : id;
    sentAt = Date.now();
    sentMono = performance.now();
    let outcome: AttemptOutcome<T>;
    try {
      outcome = await spec.attempt(waiter, false, id, false);
    } catch (error) {
      if (waiter) exit?.later(waiter);
      throw error;
    }
    if ("acquired" in outcome) return { value: outcome.acquired, attempts: 1 };
    track(outcome);
    first = outcome;
    registered = waiter;
  }
  const waker = new Waker(ctx, spec.name, prefix, counter, signal, spec.foreign, id);
  // How a registration is given up (see WaiterExit); a queue's place is given up below.
  const unregister = exit?.queue ? undefined : exit;
  // A hand-off the last wait received: the next "attempt" takes it without a request.
  let granted: T | undefined;
  let serverTime = first?.serverTime ?? 0;
  // Registered waiters ahead of this one, of a kind that hands over in order (0: first, or not
  // such a kind); a notice that it became first sets it to 0.
  let ahead = spec.handOff ? (first?.ahead ?? 0) : 0;
  let settled = false;
  try {
    const result = await pollUntil(
      async (): Promise<AttemptOutcome<T>> => {
        if (granted !== undefined) {
          // The release that handed it over also unregistered this waiter.
          registered = "";
          return { acquired: granted };
        }
        const waiter = waker.waiter;
        if (waiter === "" && registered !== "") {
          // Polling from now on: nothing will wake the registration an earlier attempt made.
          unregister?.later(registered);
          registered = "";
        }
        sentAt = Date.now();
        sentMono = performance.now();
        // An attempt that fails after Redis applied it (its answer lost) may have registered the
        // waiter: count it registered until an answer says otherwise, so that the wait's end
        // unregisters it rather than leaving a registration a release would hand the lock to.
        const mayBeRegistered = waiter !== "" && registered === waiter;
        if (waiter !== "") registered = waiter;
        const outcome = await spec.attempt(waiter, waker.subscribed, waker.id, mayBeRegistered);
        track(outcome);
        registered = "acquired" in outcome ? "" : waiter;
        serverTime = "acquired" in outcome ? 0 : (outcome.serverTime ?? 0);
        ahead = "acquired" in outcome || !spec.handOff ? 0 : (outcome.ahead ?? 0);
        return outcome;
      },
      {
        waitTime: spec.waitTime,
        signal,
        policy: ctx.backoff,
        block: waker.polling
          ? undefined
          : async (ms, foreign, limit) => {
              const started = performance.now();
              let until = started + ms;
              for (;;) {
                const left = Math.max(0, Math.ceil(until - performance.now()));
                const { again, payload } = await waker.wait(left, foreign, ahead > 0);
                const at = payload ? spec.handOff?.notice?.(payload) : undefined;
                if (at !== undefined) ahead = 0;
                if (at !== undefined && serverTime > 0) {
                  // This waiter became the first: back by the new holder's expiry (dated on the
                  // server clock like a hand-off: grantFromHandOff), not by what its last attempt
                  // saw. The earliest that expiry can be here, on the monotonic clock.
                  const expires = sentMono + (at - serverTime) + SLEEP_FLOOR_MS;
                  until = Math.min(started + limit, Math.max(expires, performance.now()));
                  continue;
                }
                if (payload && at === undefined && unanswered === 0) {
                  granted = spec.handOff?.grant(payload, sentAt, sentMono, serverTime);
                }
                return again;
              }
            },
        blockCap: spec.handOff?.blockCap ?? LOCK_WAITER_SLOT_MS / 2,
        // Every sleep or block is reported as a `waiting` event before it starts (with its
        // longest length) and as a `wait` event when it ends (with the time it took).
        onWait: (type, durationMs, attempt, maxMs) =>
          ctx.emit({ type, name: spec.name, requests: 0, billed: 0, durationMs, attempt, maxMs }),
        startedAt,
      },
      first,
    );
    settled = true;
    if (result.value === null) {
      if (exit?.queue) await exit.now(waker.id);
      if (registered !== "" && unregister) {
        const waiter = registered;
        registered = "";
        await unregister.now(waiter);
      }
    }
    return result;
  } finally {
    waker.close();
    if (registered !== "") unregister?.later(registered);
    if (!settled && exit?.queue) exit.later(waker.id);
  }
}

/**
 * Whether a wait with wake channel prefix `prefix` (`undefined`: none, or a single attempt)
 * polls from the start rather than waiting for wake-ups: `wait: "poll"`, or a client that
 * cannot subscribe.
 */
function pollsOnly(ctx: LockContext, hub: WakeHub, prefix: string | undefined): boolean {
  return prefix === undefined || ctx.wait === "poll" || !hub.enabled;
}

/**
 * Keeps the client's open subscription on `<prefix>:<client>` open until `lease` ends (released,
 * expired or lost), so that a client that waits again after
 * its hold registers with its first attempt instead of subscribing again. It opens nothing: a
 * subscription that is not open stays so, and a wait on another name that finds
 * `maxSubscriptions` open closes one kept open only for holds (or idle).
 */
export function keepOpenWhile(
  ctx: LockContext,
  prefix: string,
  lease: { readonly ended: boolean; readonly signal: AbortSignal },
): void {
  if (lease.ended) return;
  const hub = wakeHubOf(ctx);
  if (!hub.isOpen(prefix)) return;
  const slot = hub.joinOpen(prefix, hub.waitId(), true);
  // The signal is read only when a subscription is kept open: a lease whose signal nobody reads
  // makes no AbortController.
  if (slot) lease.signal.addEventListener("abort", () => slot.leave(), { once: true });
}
