/**
 * The internal hold protocol: what every lock kind implements (in its folder beside
 * `lua/<kind>/`) and what the lease and the wait loop consume, so that a new kind brings its
 * scripts and nothing else.
 *
 * A kind implements {@link HoldProtocol}:
 * - `attempt`: one acquire attempt with a fresh request id (one HTTP request when warm); an
 *   attempt whose answer never arrives (aborted, timed out, ambiguous failure) is cancelled in
 *   the background before the error propagates. A kind whose releases wake waiters names the
 *   prefix of their wake channels (`wakeKey`) and registers the `waiter` id of a busy attempt;
 * - `renew`: make the TTL at least `leaseTime` while the owner holds it (never shortening);
 * - `release`: one hold, replay-safe by the lease id, leaving newer holds of the owner alone;
 * - `cancel`: undo an unanswered attempt, whichever order the two requests land in;
 * - `inspect`: one read-only request describing the holders;
 * - `kind`: serialized with every lease, so `restoreLease` finds the kind again.
 * The shared code here turns options into {@link HoldSettings}, runs the wait loop over
 * `attempt` ({@link acquire}), and turns a grant into a {@link Lease} whose host calls `renew`
 * and `release` ({@link hostFor}).
 * @module
 */

import { keys, type LockContext } from "../context.js";
import { TransportError } from "../errors.js";
import { type CallOperation, cost, noCost } from "../events.js";
import { randomHex } from "../ids.js";
import type { Inspection } from "../inspect.js";
import {
  checkKeepAlive,
  type KeepAlive,
  Lease,
  type LeaseHost,
  type LeaseKind,
  type ReleaseResult,
  type SerializedLease,
} from "../lease/lease.js";
import { HAND_OFF_CLAIM_WINDOW_MS, LOCK_HAND_OFF_SLOT_MS } from "../limits.js";
import { lockLeave } from "../lua/lock.gen.js";
import type { RequestCounter, ScriptCall } from "../transport/index.js";
import { asInteger } from "../transport/index.js";
import { checkLeaseTime, checkOwner, checkSignal } from "../validate.js";
import type { AttemptOutcome } from "../wait/backoff.js";
import {
  type ForeignChannel,
  type HandOff,
  keepOpenWhile,
  type WaiterExit,
  type WaitSpec,
  waitFor,
} from "../wait/loop.js";
import { resendUntilAnswered, runDefinite } from "./definite.js";

/**
 * The lease options of every call that grants a lease (`tryLock`, `lock`, `withLock`, `claim`,
 * a permit-expirable semaphore's `tryAcquire`, a MultiLock's and a RedLock's). Times in integer
 * ms.
 */
export interface LeaseOptions {
  /**
   * Fixed lease in ms, integer in [1, 86 400 000]; no automatic renewal. Omitted: watchdog
   * mode, TTL = `watchdogTimeout`, kept alive by `keepAlive` (default `"timer"`).
   */
  leaseTime?: number;
  /**
   * Owner to acquire as (1–200 characters). Omitted: a fresh `<clientId>:<taskId>`, so two
   * calls exclude each other. Pass `lease.owner` to re-enter a lock (hold count + 1).
   */
  owner?: string;
  /** Aborts the call; it rejects with `signal.reason` and leaves no hold behind. */
  signal?: AbortSignal;
  /**
   * Keep-alive strategy; see {@link KeepAlive}. @default "timer" without `leaseTime`, else
   * "none"
   */
  keepAlive?: KeepAlive;
}

/** The keys of {@link LeaseOptions}, for `checkOptions`. */
export const LEASE_OPTION_KEYS = ["leaseTime", "owner", "signal", "keepAlive"] as const;
/** The keys of {@link LeaseOptions} and `waitTime` (`tryLock`'s options), for `checkOptions`. */
export const TRY_LOCK_KEYS = ["waitTime", ...LEASE_OPTION_KEYS] as const;

/** {@link LeaseOptions} validated and resolved against the EdgeLock's configuration. */
export interface HoldSettings {
  owner: string;
  signal: AbortSignal | undefined;
  leaseTime: number;
  watchdog: boolean;
  keepAlive: KeepAlive;
  /**
   * Until when (epoch ms) an attempt keeps resending its request while no answer comes: the end
   * of the call's wait budget (`Infinity`: no deadline). `undefined`: one `requestTimeout`
   * (locks/definite.ts, runAttempt). Set by {@link holdSettings} for the calls that wait.
   */
  attemptUntil: number | undefined;
  /**
   * 8 hex digits that every attempt of one waiting call ends its request id with, so that a hold
   * a late copy of one of the call's earlier attempts made is known as the call's own
   * (lua/lock/acquire.lua). Set by the wait ({@link acquire}); absent for a single attempt.
   */
  tag?: string;
}

/** Until when the attempts of a call waiting `waitTime` ms from now resend (HoldSettings). */
export function attemptUntil(waitTime: number | undefined): number {
  return waitTime === undefined ? Number.POSITIVE_INFINITY : Date.now() + waitTime;
}

/** A hold an attempt was granted: the request id (the lease id), when it was sent, the epoch. */
export interface Grant {
  id: string;
  sentAt: number;
  /** `sentAt` on the monotonic clock (`performance.now()`), when the attempt measured it. */
  sentMono?: number;
  epoch: number;
  /**
   * The TTL the hold has in Redis from `sentAt` when shorter than the lease (a fair lock's
   * hand-off taken from its wake token): the lease confirms its full lease time well before.
   */
  ttl?: number;
  /** The fencing token of this grant (fenced locks). */
  fencingToken?: number | undefined;
}

/** What one acquire attempt found. */
export type AttemptReply =
  | { status: "acquired"; grant: Grant }
  | {
      status: "busy";
      pttl: number;
      /** The holder is not an edgelock client (a Redisson client): its release wakes nobody. */
      foreign?: boolean;
      /** Server time in ms when the attempt registered its waiter (see `AttemptOutcome`). */
      serverTime?: number;
      /** How many registered waiters are ahead of this one (see `AttemptOutcome`). */
      ahead?: number;
      /** The cancel this attempt sent, until Redis answers it (see `AttemptOutcome`). */
      undoing?: Promise<boolean>;
    }
  | { status: "completed"; pttl: number };

/** The hold a release is for: a lease, or `unlock(owner)`'s "any hold of the owner" (epoch 0). */
export interface HoldRef {
  owner: string;
  id: string;
  leaseTime: number;
  epoch: number;
}

/** See the module documentation. */
export interface HoldProtocol {
  readonly kind: LeaseKind;
  readonly name: string;
  /** Prefix of the wake channels registered waiters listen on; absent when they can only poll. */
  readonly wakeKey?: string;
  /**
   * Whether a release hands the lock straight to a registered waiter, which then holds it on the
   * release's message (lib/wake.lua, hand_off_one).
   */
  readonly handsOff?: boolean;
  /**
   * Redisson's unlock channel of the name, where a JVM holder's release publishes (a busy
   * attempt that reports such a holder waits there); default `redisson_lock__channel:{<name>}`.
   */
  readonly foreignChannel?: string;
  /**
   * The request that unregisters `waiter`, a waiting call of `owner` that ends without the lock
   * (it gives up, is aborted or fails); with `wakeKey`. `leaseTime` (ms) is the call's, which a
   * reentrant lock's registration carries (lib/reentrant-args.lua). Default {@link leaveCall}.
   */
  leaveCall?(waiter: string, owner: string, leaseTime: number): ScriptCall;
  /**
   * One attempt; `handOff`: the waiter hears its messages, so a release may hand it the lock
   * (kinds with {@link handsOff}); `registered`: an earlier attempt of the same wait may have
   * registered `waiter` (false on a wait's first attempt, whose success then has no
   * registration to end: one call less on the bill).
   */
  attempt(
    s: HoldSettings,
    counter: RequestCounter,
    waiter?: string,
    handOff?: boolean,
    registered?: boolean,
  ): Promise<AttemptReply>;
  renew(owner: string, leaseTime: number, by: "call" | "timer", timeout?: number): Promise<boolean>;
  release(hold: HoldRef): Promise<ReleaseResult>;
  cancel(owner: string, id: string): void;
  inspect(): Promise<Inspection>;
}

/**
 * Result of an acquire call: the lease, or why there is none. `holderTtl` is the holder's
 * remaining lease in ms as the last attempt saw it (PTTL: -1 when the key has no TTL), e.g. for
 * an HTTP `Retry-After`.
 */
export type AcquireResult =
  | { lease: Lease; attempts: number }
  | { lease: null; attempts: number; holderTtl: number };

/**
 * Validates acquire options and fills in owner, lease time and keep-alive defaults; `until`:
 * the call's {@link HoldSettings.attemptUntil} ({@link attemptUntil}), made here so that no
 * caller copies or completes the settings afterwards.
 */
export function holdSettings(ctx: LockContext, o: LeaseOptions, until?: number): HoldSettings {
  const leaseTimeOption = checkLeaseTime(o.leaseTime);
  const owner = o.owner === undefined ? `${ctx.clientId}:${randomHex()}` : checkOwner(o.owner);
  const signal = checkSignal(o.signal);
  const watchdog = leaseTimeOption === undefined;
  const keepAlive = checkKeepAlive(o.keepAlive) ?? (watchdog ? "timer" : "none");
  if (typeof keepAlive === "object" && !keepAlive.keeper && !ctx.keeper) {
    throw new TypeError("`keepAlive.keeper` is required (no default `keeper` was configured)");
  }
  return {
    owner,
    signal,
    watchdog,
    keepAlive,
    leaseTime: leaseTimeOption ?? ctx.watchdogTimeout,
    attemptUntil: until,
  };
}

/**
 * Tries `protocol.attempt` until it acquires or `waitTime` is spent (`undefined`: until the
 * signal aborts), and turns the grant into a lease. Between attempts it waits for a message on
 * its client's wake channel, registered as a waiter by each busy attempt, so the release that
 * frees the lock wakes it at once (wait/loop.ts); with `wait: "poll"`, a client that cannot
 * subscribe, a kind without wake-ups, or a failed subscription, it sleeps with the PTTL-bounded
 * backoff of wait.ts instead. Emits `waiting` and `wait` events and one `acquire` event.
 */
export async function acquire(
  ctx: LockContext,
  protocol: HoldProtocol,
  settings: HoldSettings,
  waitTime: number | undefined,
): Promise<AcquireResult> {
  if (waitTime === 0) return acquireOnce(ctx, protocol, settings);
  const result = await leaseOnGrant(ctx, protocol, settings, (counter) =>
    waitFor(ctx, new HoldWait(ctx, protocol, settings, waitTime, counter)),
  );
  if (result.lease && protocol.wakeKey) {
    keepOpenWhile(ctx, protocol.wakeKey, result.lease);
  }
  return result;
}

/**
 * What {@link acquire}'s wait loop is given for `protocol` (wait/loop.ts WaitSpec): the attempts,
 * and, as the same object, how a waiter that ends without the lock leaves (`protocol.leaveCall`),
 * Redisson's channel of the name and the hand-offs of a kind that makes them. One object with
 * methods, not a closure per part: a wait on a free lock never uses any of the rest.
 */
class HoldWait implements WaitSpec<Grant>, WaiterExit, ForeignChannel, HandOff<Grant> {
  readonly name: string;
  readonly wakeKey: string | undefined;
  readonly waitTime: number | undefined;
  readonly signal: AbortSignal | undefined;
  readonly counter: RequestCounter;
  /** Longest single wait for a wake-up (HandOff): a third of a hand-off's registration. */
  readonly blockCap = LOCK_HAND_OFF_SLOT_MS / 3;
  readonly #ctx: LockContext;
  readonly #protocol: HoldProtocol;
  readonly #s: HoldSettings;

  constructor(
    ctx: LockContext,
    protocol: HoldProtocol,
    s: HoldSettings,
    waitTime: number | undefined,
    counter: RequestCounter,
  ) {
    this.#ctx = ctx;
    this.#protocol = protocol;
    // A settings object of the wait's own: its attempts share a request id tag.
    this.#s = { ...s, tag: randomHex(4) };
    this.name = protocol.name;
    this.wakeKey = protocol.wakeKey;
    this.waitTime = waitTime;
    this.signal = s.signal;
    this.counter = counter;
  }

  async attempt(
    waiter: string,
    subscribed: boolean,
    _waitId: string,
    registered: boolean,
  ): Promise<AttemptOutcome<Grant>> {
    const reply = await this.#protocol.attempt(
      this.#s,
      this.counter,
      waiter,
      subscribed,
      registered,
    );
    if (reply.status === "acquired") return { acquired: reply.grant };
    if (reply.status !== "busy") return { pttl: reply.pttl };
    const { pttl, foreign, serverTime, ahead, undoing } = reply;
    return {
      pttl,
      ...(foreign && { foreign }),
      ...(serverTime !== undefined && { serverTime }),
      ...(ahead && { ahead }),
      ...(undoing && { undoing }),
    };
  }

  /** How a waiter leaves (WaiterExit): this object, for a kind with a leave request. */
  get exit(): WaiterExit | undefined {
    return this.#protocol.leaveCall ? this : undefined;
  }

  /** Redisson's channel of the name (ForeignChannel): this object. */
  get foreign(): ForeignChannel {
    return this;
  }

  get channel(): string {
    return this.#protocol.foreignChannel ?? keys.channel(this.name);
  }

  /** The hand-offs (HandOff): this object, for a kind whose releases make them. */
  get handOff(): HandOff<Grant> | undefined {
    return this.#protocol.handsOff ? this : undefined;
  }

  later(waiter: string): void {
    void inBackground(this.#ctx, this.#leave(waiter));
  }

  now(waiter: string): Promise<void> {
    return leaveNow(this.#ctx, this.#leave(waiter), this.counter);
  }

  #leave(waiter: string): ScriptCall {
    const { owner, leaseTime } = this.#s;
    return (this.#protocol.leaveCall as NonNullable<HoldProtocol["leaveCall"]>)(
      waiter,
      owner,
      leaseTime,
    );
  }

  /** The expiry a notice that this waiter became the first carries (HandOff): {@link noticeOf}. */
  notice(payload: string): number | undefined {
    return noticeOf(payload);
  }

  /**
   * The grant of a hand-off message. A lease shorter than the claim window is handed over for
   * itself: dated from the server clock it loses the attempt's one-way delay, which on a loaded
   * client can be most of a lease of a few hundred ms by the time the lease is made, so it is
   * dated from the attempt alone (confirmed with an attempt unless that was very recent).
   */
  grant(payload: string, sentAt: number, sentMono: number, serverTime: number): Grant | undefined {
    const { leaseTime } = this.#s;
    return grantFromHandOff(
      payload,
      sentAt,
      sentMono,
      leaseTime >= HAND_OFF_CLAIM_WINDOW_MS ? serverTime : 0,
      leaseTime,
    );
  }
}

/**
 * One attempt, no waiting: {@link acquire} with `waitTime` 0, kept apart from the wait loop so
 * that code which never waits (the cron guard) does not bundle it. A busy attempt registers no
 * waiter. Emits one `acquire` event.
 */
export function acquireOnce(
  ctx: LockContext,
  protocol: HoldProtocol,
  settings: HoldSettings,
): Promise<AcquireResult> {
  return leaseOnGrant(ctx, protocol, settings, async (counter) => {
    const reply = await protocol.attempt(settings, counter, "", false);
    return reply.status === "acquired"
      ? { value: reply.grant, attempts: 1 }
      : { value: null, attempts: 1, pttl: reply.pttl };
  });
}

/** What {@link acquire}'s attempts found: the grant, or `null` and the holder's last pttl. */
type Found = { value: Grant; attempts: number } | { value: null; attempts: number; pttl: number };

/**
 * Runs `find` (the attempts of one acquire call, counted in its counter) and turns the grant into
 * a lease; emits the call's `acquire` event however it ends.
 */
async function leaseOnGrant(
  ctx: LockContext,
  protocol: HoldProtocol,
  settings: HoldSettings,
  find: (counter: RequestCounter) => Promise<Found>,
): Promise<AcquireResult> {
  settings.signal?.throwIfAborted();
  const started = Date.now();
  const counter: RequestCounter = { requests: 0 };
  let attempts = 0;
  let acquired = false;
  try {
    const found = await find(counter);
    attempts = found.attempts;
    if (found.value === null) return { lease: null, attempts, holderTtl: found.pttl };
    const lease = await leaseFor(ctx, protocol, settings, found.value);
    acquired = true;
    return { lease, attempts };
  } finally {
    emitAcquire(ctx, protocol.name, started, counter, acquired, attempts);
  }
}

/**
 * The grant a hand-off message carries (`<epoch>`): the lock is held from the hand-off for
 * ttl = min(leaseTime, claim window), and the lease confirms its full lease time (its first
 * renewal, or its release) before that runs out. `undefined` (confirm with an attempt) when too
 * little of it is known to be left.
 *
 * When the lock expires, on this client's clock: the hand-off set it to expire at exactly
 * E = floor(epoch / 1000) + ttl on the server's clock (the epoch is the server time of the
 * hand-off in µs; lib/wake.lua and lib/fair.lua use PEXPIREAT). The server clock's offset to
 * this one is unknown, but the busy attempt sent at `sentAt` (this clock; `sentMono` on the
 * monotonic clock, which a step of the wall clock does not move) registered the waiter at
 * `serverTime` (server clock, ms, floored), and that happened after it was sent: the offset is at
 * most serverTime + 1 − sentAt, so E is no earlier here than sentAt + (E − serverTime) − 1. That
 * holds however long ago the attempt was, and whenever the message arrives (a message late by
 * any delay only leaves less of the lease, never a lease longer than Redis keeps the lock); it
 * assumes, as every lease does, that the two clocks advance at the same rate. Without
 * `serverTime` (0) the hand-off is only known to have come after `sentAt`: the lock is held
 * until at least sentAt + ttl.
 */
export function grantFromHandOff(
  payload: string,
  sentAt: number,
  sentMono: number,
  serverTime: number,
  leaseTime: number,
): Grant | undefined {
  const epoch = Number(payload);
  if (!Number.isSafeInteger(epoch) || epoch <= 0) return undefined;
  const ttl = Math.min(leaseTime, HAND_OFF_CLAIM_WINDOW_MS);
  // From the attempt's send to the lock's expiry, on any clock that runs at the server's rate.
  const span = serverTime > 0 ? Math.floor(epoch / 1000) + ttl - serverTime - 1 : ttl;
  // The lease's own timer then confirms it when a third of what is left remains
  // (Lease#confirmBefore).
  if (sentMono + span - performance.now() <= ttl / 4) return undefined;
  // The lease counts `ttl` from the grant's send times: moved by span − ttl on both clocks, it
  // ends where the lock does.
  return {
    id: randomHex(),
    sentAt: sentAt + span - ttl,
    sentMono: sentMono + span - ttl,
    epoch,
    ttl,
  };
}

/**
 * The server time in ms at which the lock expires, from a notice that the waiter it names became
 * the first registered one (`@<ms>`, lua/lib/wake.lua notify_first); `undefined` for any other
 * payload (a hand-off's epoch, or nothing).
 */
export function noticeOf(payload: string): number | undefined {
  if (payload.charCodeAt(0) !== 64) return undefined;
  const at = Number(payload.slice(1));
  return Number.isSafeInteger(at) && at > 0 ? at : undefined;
}

/** Reports an acquire call through `onEvent`. */
export function emitAcquire(
  ctx: LockContext,
  name: string,
  started: number,
  counter: RequestCounter,
  acquired: boolean,
  attempts: number,
): void {
  if (ctx.observed === false) return;
  ctx.emit({
    type: "acquire",
    name,
    ...cost(counter, started),
    acquired,
    attempts,
  });
}

/**
 * A lease for a granted hold, with its keep-alive started. If the keep-alive cannot start (the
 * keeper refused), the hold is given back and the error propagates.
 */
export async function leaseFor(
  ctx: LockContext,
  protocol: HoldProtocol,
  s: HoldSettings,
  grant: Grant,
): Promise<Lease> {
  const lease = new Lease({
    host: hostFor(ctx, protocol),
    name: protocol.name,
    owner: s.owner,
    id: grant.id,
    epoch: grant.epoch,
    fencingToken: grant.fencingToken,
    leaseTime: s.leaseTime,
    watchdog: s.watchdog,
    expiresAt: grant.sentAt + Math.min(s.leaseTime, grant.ttl ?? s.leaseTime),
    sent: grant.sentMono === undefined ? undefined : { wall: grant.sentAt, mono: grant.sentMono },
  });
  if (grant.ttl !== undefined && grant.ttl < s.leaseTime) lease.confirmBefore(lease.expiresAt);
  // A fixed lease (most of them) has no keep-alive: no call and no await for nothing.
  if (s.keepAlive !== "none") await keepAliveOrGiveBack(ctx, lease, s.keepAlive);
  return lease;
}

/** The lease a serialized lease (`lease.toJSON()`) of `protocol`'s name stands for; no keep-alive. */
export function restoredLease(ctx: LockContext, protocol: HoldProtocol, s: SerializedLease): Lease {
  return new Lease({
    host: hostFor(ctx, protocol),
    name: protocol.name,
    owner: s.owner,
    id: s.id,
    epoch: s.epoch ?? 0,
    fencingToken: s.fencingToken,
    leaseTime: s.leaseTime,
    watchdog: s.watchdog,
    expiresAt: s.expiresAt,
  });
}

/**
 * Starts `lease`'s keep-alive (`keepAlive`, the EdgeLock's `keeper` by default). If it cannot
 * start (the keeper refused), the hold is given back and the error propagates.
 */
export async function keepAliveOrGiveBack(
  ctx: LockContext,
  lease: Lease,
  keepAlive: KeepAlive,
): Promise<void> {
  if (keepAlive === "none") return;
  try {
    await lease.startKeepAlive(keepAlive, ctx.keeper);
  } catch (error) {
    await lease.release().catch(() => {});
    throw error;
  }
}

/** The lease host of a protocol: renewals and releases through it, events through `ctx`. */
export function hostFor(ctx: LockContext, protocol: HoldProtocol): LeaseHost {
  return new ProtocolHost(ctx, protocol);
}

/** {@link hostFor}'s host: methods over the protocol, no closures per lease. */
class ProtocolHost implements LeaseHost {
  readonly kind: LeaseKind;
  readonly #ctx: LockContext;
  readonly #protocol: HoldProtocol;

  constructor(ctx: LockContext, protocol: HoldProtocol) {
    this.kind = protocol.kind;
    this.#ctx = ctx;
    this.#protocol = protocol;
  }

  renew(lease: Lease, leaseTime: number, by: "call" | "timer", timeout?: number): Promise<boolean> {
    return this.#protocol.renew(lease.owner, leaseTime, by, timeout);
  }

  release(lease: Lease): Promise<ReleaseResult> {
    return this.#protocol.release(lease);
  }

  lost(): void {
    this.#ctx.emit({ type: "lost", name: this.#protocol.name, ...noCost() });
  }

  backgroundError(_lease: Lease, operation: "renew" | "keeper", error: unknown): void {
    reportError(this.#ctx, this.#protocol.name, operation, error, { requests: 0 }, 0);
  }
}

const RELEASE_CODES: Record<number, ReleaseResult> = {
  0: "expired",
  1: "released",
  2: "still-held",
  3: "not-owner",
};
const decodeRelease = (r: unknown) => {
  const n = asInteger(r);
  return n === undefined ? undefined : RELEASE_CODES[n];
};

/**
 * Runs a release request until Redis answers (see locks/definite.ts) and reports a `release`
 * event. `decode` turns the answer into the result; by default the 0–3 of lua/lock/release.lua.
 */
export async function runRelease(
  ctx: LockContext,
  call: ScriptCall,
  decode: (reply: unknown) => ReleaseResult | undefined = decodeRelease,
): Promise<ReleaseResult> {
  const counter: RequestCounter = { requests: 0 };
  const started = Date.now();
  const result = await runDefinite(ctx, "release", call, decode, counter);
  if (ctx.observed === false) return result;
  ctx.emit({
    type: "release",
    name: call.name,
    ...cost(counter, started),
    result,
  });
  return result;
}

/**
 * Runs one renewal (`renew`, which counts its HTTP requests in the counter it is given) and
 * reports it as a `renew` event.
 */
export async function reportRenew(
  ctx: LockContext,
  name: string,
  by: "call" | "timer",
  renew: (counter: RequestCounter) => Promise<boolean>,
): Promise<boolean> {
  const counter: RequestCounter = { requests: 0 };
  const started = Date.now();
  const renewed = await renew(counter);
  ctx.emit({
    type: "renew",
    name,
    ...cost(counter, started),
    renewed,
    by,
  });
  return renewed;
}

/**
 * Runs `run` (which counts its HTTP requests in the counter it is given) and reports it as a
 * `call` event, whether it answered or threw.
 */
export async function reportCall<T>(
  ctx: LockContext,
  name: string,
  operation: CallOperation,
  run: (counter: RequestCounter) => Promise<T>,
): Promise<T> {
  const counter: RequestCounter = { requests: 0 };
  const started = Date.now();
  let failed = true;
  try {
    const result = await run(counter);
    failed = false;
    return result;
  } finally {
    ctx.emit({
      type: "call",
      name,
      ...cost(counter, started),
      operation,
      failed,
    });
  }
}

/**
 * Runs `call` (one replay-safe script, answering an integer) in the background, kept alive by
 * `waitUntil`, sending it again while it fails ambiguously (locks/definite.ts), and reports a
 * failure as an `error` event for "cancel": clean-ups nobody awaits.
 * @returns settles true once Redis answered it, false when it gave up (never rejects).
 */
export function inBackground(ctx: LockContext, call: ScriptCall): Promise<boolean> {
  const counter: RequestCounter = { requests: 0 };
  const started = Date.now();
  const done = resendUntilAnswered(ctx, (hedge) =>
    ctx.runner.run(call, asInteger, counter, undefined, hedge),
  ).then(
    () => true,
    (error: unknown) => {
      reportError(ctx, call.name, "cancel", error, counter, started);
      return false;
    },
  );
  ctx.background(done);
  return done;
}

/**
 * The request that unregisters a waiter that gave up or was aborted (lua/lock/leave.lua): every
 * primitive with waiters keeps them under the same keys (`keys.waiting`, `keys.wake`).
 */
export function leaveCall(name: string, waiter: string): ScriptCall {
  return { script: lockLeave, name, keys: [keys.waiting(name), keys.wake(name)], args: [waiter] };
}

/**
 * The `exit` of a wait whose waiters register (`{ exit }`, spread into its `waitFor` spec): it
 * unregisters a waiter whose call ends without what it waited for by sending `call(waiter)`, one
 * request (sent again after an ambiguous failure, it changes no hold, count or token; at most it
 * wakes one more waiter, which then attempts once):
 * - `later`, in the background (kept alive by `waitUntil`, resent while it fails ambiguously):
 *   left alone, the registration would lapse by itself after waking nobody at most once;
 * - `now`, awaited (counted in `counter`) before a call whose wait budget ran out answers `null`,
 *   so that a release after that answer can no longer hand it anything; when that request fails,
 *   it is resent in the background.
 */
export function waiterExits(
  ctx: LockContext,
  counter: RequestCounter,
  call: (waiter: string) => ScriptCall,
): { exit: WaiterExit } {
  return {
    exit: {
      later: (waiter) => inBackground(ctx, call(waiter)),
      now: (waiter) => leaveNow(ctx, call(waiter), counter),
    },
  };
}

/**
 * Sends a waiter's leave request (`call`, counted in `counter`) and awaits it; when it fails, it
 * is resent in the background ({@link inBackground}). Never throws.
 */
export async function leaveNow(
  ctx: LockContext,
  call: ScriptCall,
  counter: RequestCounter,
): Promise<void> {
  try {
    await ctx.runner.run(call, asInteger, counter);
  } catch {
    void inBackground(ctx, call);
  }
}

/** Reports a failed background operation as an `error` event. */
export function reportError(
  ctx: LockContext,
  name: string,
  operation: "cancel" | "renew" | "keeper",
  error: unknown,
  counter: RequestCounter,
  started: number,
): void {
  if (!(error instanceof TransportError)) return;
  ctx.emit({
    type: "error",
    name,
    ...cost(counter, started),
    operation,
    error,
  });
}
