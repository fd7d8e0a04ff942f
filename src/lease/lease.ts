/**
 * The Lease handle every acquire returns: renew, release, and a signal that aborts when the lease
 * is lost, released, or runs out without a confirmed renewal. Keep-alive strategies live in
 * keep-alive.ts, the serialized form in lease-json.ts.
 * @module
 */
import { LeaseLostError, ServiceLimitError } from "../errors.js";
import type { LeaseKeeperBinding } from "../keeper.js";
import { checkMs } from "../validate.js";
import type { HostKind, LeaseKind, SerializedLease } from "./json.js";
import {
  type KeepAlive,
  type KeptLease,
  type StopKeepAlive,
  startKeepAlive,
} from "./keep-alive.js";
import { renewalTimeout } from "./renewal.js";

export { type LeaseKind, parseSerializedLease, type SerializedLease } from "./json.js";
export { checkKeepAlive, type KeepAlive, type KeeperKeepAlive } from "./keep-alive.js";

/** What `lease.release()` found: see {@link Lease.release}. */
export type ReleaseResult = "released" | "still-held" | "expired" | "not-owner";

/** What a lease needs from the primitive that issued it (see locks/protocol.ts). Internal. */
export interface LeaseHost {
  /** Which primitive issued the lease (serialized with it). */
  readonly kind: HostKind;
  /**
   * Makes the TTL at least `leaseTime` if still held, within `timeout` ms when given; false
   * when the owner no longer holds it. A host whose hold runs shorter than `leaseTime` from
   * when the renewal was sent (a RedLock's validity) answers the expiry instead of true, with
   * both clocks when it began measuring it (`sent`) when that was before the answer came.
   */
  renew(
    lease: Lease,
    leaseTime: number,
    by: "call" | "timer",
    timeout?: number,
  ): Promise<boolean | { expiresAt: number; sent?: { wall: number; mono: number } }>;
  /** Releases this lease's hold once (replay-safe through the lease id). */
  release(lease: Lease): Promise<ReleaseResult>;
  /** Reports that the lease was found lost. */
  lost(lease: Lease): void;
  /** Reports a background failure. */
  backgroundError(lease: Lease, operation: "renew" | "keeper", error: unknown): void;
}

/** What a new lease starts from. Internal. */
export interface LeaseInit {
  host: LeaseHost;
  name: string;
  owner: string;
  id: string;
  epoch: number;
  leaseTime: number;
  watchdog: boolean;
  expiresAt: number;
  fencingToken?: number | undefined;
  permitIds?: readonly string[] | undefined;
  /**
   * Both clocks when the request that set `expiresAt` was sent, when known: a wall-clock step
   * while it was in flight is then seen too.
   */
  sent?: { wall: number; mono: number } | undefined;
}

/**
 * One hold on a lock. Created by `tryLock`/`lock`/`withLock` or `edgelock.restoreLease`.
 * Releasing the same lease twice (or from a restored copy) has the effect of once.
 */
export class Lease {
  /** Lock name. */
  readonly name: string;
  /** Owner: exactly the HASH field stored in Redis. Pass it as `owner` to re-enter. */
  readonly owner: string;
  /** Lease id (request id of the acquire). */
  readonly id: string;
  /** Incarnation of the lock this hold was made in (0: unknown). Internal; serialized. */
  readonly epoch: number;
  #leaseTime: number;
  /** True when acquired without `leaseTime` (Redisson watchdog mode). */
  readonly watchdog: boolean;
  #expiresAt: number;
  /**
   * `expiresAt` on the monotonic clock (`performance.now()`), and both clocks when it was set:
   * the wall clock can be stepped (NTP, a resumed VM), and a step back must not make the lease
   * look valid, or its expiry timer wait, past the lock's expiry in Redis.
   */
  #deadline: number;
  #setWall: number;
  #setMono: number;
  /** Fencing token (fenced locks only): a safe integer, strictly increasing per lock name. */
  readonly fencingToken: number | undefined;
  /**
   * Permit ids (permit-expirable semaphores only): the permits this lease holds, 32 hex
   * characters each, as `semaphore.release(id)` and `updateLeaseTime(id, ms)` take them.
   */
  readonly permitIds: readonly string[] | undefined;
  readonly #host: LeaseHost;
  /**
   * Made when `signal` is first read: most leases are released without anyone reading it, and
   * a controller plus the error it aborts with (a stack trace) cost a cycle tens of µs.
   */
  #controller: AbortController | undefined;
  /** How the lease ended (released, or found lost); `undefined` while it has not. */
  #endedAs: LeaseLostError["reason"] | undefined;
  /** The service limit that refused a keep-alive renewal, when that is why it ended. */
  #refused: ServiceLimitError | undefined;
  #release: Promise<ReleaseResult> | undefined;
  #stopKeepAlive: StopKeepAlive | undefined;
  /** Fires at `expiresAt`: a lease nobody renewed in time is lost, whatever the network did. */
  #expiryTimer: ReturnType<typeof setTimeout> | undefined;

  /** Internal: leases come from acquire methods and `restoreLease`. */
  constructor(init: LeaseInit) {
    this.#host = init.host;
    this.name = init.name;
    this.owner = init.owner;
    this.id = init.id;
    this.epoch = init.epoch;
    this.#leaseTime = init.leaseTime;
    this.watchdog = init.watchdog;
    this.#expiresAt = init.expiresAt;
    this.#setWall = init.sent?.wall ?? Date.now();
    this.#setMono = init.sent?.mono ?? performance.now();
    this.#deadline = this.#setMono + (init.expiresAt - this.#setWall);
    this.fencingToken = init.fencingToken;
    this.permitIds = init.permitIds;
    this.#armExpiry();
  }

  /** TTL in ms applied by the last acquire or renewal. */
  get leaseTime(): number {
    return this.#leaseTime;
  }

  /**
   * Local, conservative estimate of expiry: epoch ms (`Date.now()` clock) measured from when the
   * acquire or the last confirmed renewal was *sent*. Never later than the lock's real expiry
   * in Redis (edgelock never shortens a lock's TTL), and `signal` aborts when it passes without
   * a renewal confirming a later one. If the local clock was stepped back (by
   * {@link CLOCK_STEP_MS} or more) since it was set, it is moved back with it: a lease never looks
   * valid longer because the clock went back. A step forward leaves it, so the lease looks
   * expired sooner (safe).
   */
  get expiresAt(): number {
    const back = performance.now() - this.#setMono - (Date.now() - this.#setWall);
    return back >= CLOCK_STEP_MS ? Math.floor(this.#expiresAt - back) : this.#expiresAt;
  }

  /** Aborts with {@link LeaseLostError} when the lease is found lost or is released. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#endedAs !== undefined) this.#controller.abort(this.#reason(this.#endedAs));
    }
    return this.#controller.signal;
  }

  /** True once the lease was released or found lost. */
  get ended(): boolean {
    return this.#endedAs !== undefined;
  }

  /**
   * Makes the lock's TTL at least `leaseTime` (default: this lease's `leaseTime`) if this owner
   * still holds it. One HTTP request. Algorithm: Redisson's renewal script (HEXISTS → PEXPIRE),
   * except that a TTL is never shortened (so no other lease of the owner is cut short): a
   * renewal shorter than what the lock has left changes nothing in Redis.
   * @param leaseTime TTL in ms, integer in [1, 86 400 000].
   * @throws {LeaseLostError} when the lease was released or found lost (no request is sent), or
   * when the lock is no longer held by this owner (the signal aborts).
   * @throws {TransportError} when Redis could not be reached; the lease may still be held.
   */
  async renew(leaseTime?: number): Promise<void> {
    const ms = leaseTime === undefined ? this.leaseTime : checkMs(leaseTime, "leaseTime", 1);
    if (this.#release !== undefined) throw new LeaseLostError(this.name, "released");
    if (this.ended) throw this.signal.reason;
    const renewed = await this.#renewOnce(ms, "call");
    if (!renewed) throw this.signal.reason;
  }

  /**
   * Releases this hold. Never throws for an expired lease. One HTTP request on a healthy link;
   * a lost answer is resent (same request id: it applies once) until Redis answers, within the
   * EdgeLock's `definiteWithin`. Algorithm: Redisson RedissonLock#unlockInnerAsync with its
   * request-id latch.
   * @returns `"released"` (last hold gone), `"still-held"` (reentrant count still > 0),
   * `"expired"` (the key is gone) or `"not-owner"` (someone else holds it now). Calling it again
   * returns the first answer.
   * @throws {TransportError} when Redis refused it, or gave no answer within `definiteWithin`
   * (`ambiguous`: still resent in the background, see the `settle` event); calling again is
   * safe.
   */
  release(): Promise<ReleaseResult> {
    return this.releaseVia((lease) => this.#host.release(lease)).result;
  }

  /**
   * Internal: the once-only release path (keep-alive stopped, signal ended) with `run` as the
   * request, e.g. a release that records a completion in the same step. `started` is false when
   * a release had already begun, and `result` is then that release's.
   */
  releaseVia(run: (lease: Lease) => Promise<ReleaseResult>): {
    started: boolean;
    result: Promise<ReleaseResult>;
  } {
    if (this.#release !== undefined) return { started: false, result: this.#release };
    const release = (async () => {
      // Most leases have no keep-alive to stop: no await (and its ticks) for nothing.
      if (this.#stopKeepAlive !== undefined) await this.#stop();
      const result = await run(this);
      this.#end("released");
      return result;
    })();
    this.#release = release;
    release.catch(() => {
      // A failed release can be tried again.
      if (this.#release === release) this.#release = undefined;
    });
    return { started: true, result: release };
  }

  /** `await using lease = ...` releases the lease at the end of the block. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  /** Serializable form, for `edgelock.restoreLease` in another invocation. Holds the owner id. */
  toJSON(): SerializedLease {
    const out: SerializedLease = {
      v: 1,
      // Composite kinds override toJSON.
      kind: this.#host.kind as LeaseKind,
      name: this.name,
      owner: this.owner,
      id: this.id,
      epoch: this.epoch,
      leaseTime: this.leaseTime,
      watchdog: this.watchdog,
      expiresAt: this.expiresAt,
    };
    if (this.fencingToken !== undefined) out.fencingToken = this.fencingToken;
    if (this.permitIds !== undefined) out.permitIds = [...this.permitIds];
    return out;
  }

  /** Internal: starts the keep-alive strategy; on a keeper failure the error propagates. */
  async startKeepAlive(keepAlive: KeepAlive, defaultKeeper: LeaseKeeperBinding | undefined) {
    if (keepAlive === "none") return;
    const kept: KeptLease = {
      kind: this.#host.kind,
      permitIds: this.permitIds,
      name: this.name,
      owner: this.owner,
      id: this.id,
      leaseTime: this.leaseTime,
      renewByTimer: () => this.#renewOnce(this.leaseTime, "timer"),
      confirm: (expiresAt) => this.#extendTo(expiresAt),
      markLost: (refused) => this.markLost(refused),
      backgroundError: (operation, error) => this.#host.backgroundError(this, operation, error),
    };
    this.#stopKeepAlive = await startKeepAlive(kept, keepAlive, defaultKeeper);
  }

  /**
   * Internal: the hold's TTL in Redis is shorter than `leaseTime` until `deadline` (a hand-off,
   * held for the claim window): renew to the full lease when a third of the time to `deadline`
   * is left, and again if that fails, until the lease ends. One request, sent that late so that
   * a hold shorter than two thirds of the claim window ends with its release and sends none
   * (its release confirms nothing: it ends the hold). Each try is abandoned after half of what is
   * then left, so that a retry still fits.
   */
  confirmBefore(deadline: number): void {
    const attempt = () => {
      if (this.ended || this.#release !== undefined) return;
      const left = deadline - Date.now();
      this.#renewOnce(this.leaseTime, "timer", Math.max(1, Math.floor(left / 2))).catch(
        (error: unknown) => {
          this.#host.backgroundError(this, "renew", error);
          // Resending into a limit of the service only adds load: nobody renews it any more.
          if (error instanceof ServiceLimitError) {
            this.markLost(error);
            return;
          }
          const rest = deadline - Date.now();
          if (rest > 0) later(attempt, Math.max(1, Math.floor(rest / 3)));
        },
      );
    };
    later(attempt, Math.max(0, Math.floor(((deadline - Date.now()) * 2) / 3)));
  }

  /**
   * Internal: marks the lease lost (aborts `signal`) and stops its keep-alive. `refused`: the
   * service limit that refused its renewal, the signal's reason's `cause`.
   */
  markLost(refused?: ServiceLimitError): void {
    if (this.ended) return;
    this.#refused = refused;
    this.#end("lost");
    this.#host.lost(this);
    this.#stop().catch(() => {});
  }

  async #renewOnce(leaseTime: number, by: "call" | "timer", within?: number): Promise<boolean> {
    const sentAt = Date.now();
    const sentMono = performance.now();
    // A keep-alive renewal that hangs is abandoned early enough to be retried before the lease
    // runs out; an explicit renew() gets the full requestTimeout.
    const timeout =
      by === "timer" ? Math.min(renewalTimeout(leaseTime), within ?? Infinity) : undefined;
    const renewed = await this.#host.renew(this, leaseTime, by, timeout);
    if (renewed) {
      this.#leaseTime = leaseTime;
      // The TTL is now at least leaseTime from when Redis applied it (it is never shortened),
      // unless the host knows a shorter validity.
      if (renewed === true) {
        this.#extendTo(sentAt + leaseTime, { wall: sentAt, mono: sentMono });
      } else this.#extendTo(renewed.expiresAt, renewed.sent);
    } else {
      this.markLost();
    }
    return renewed !== false;
  }

  /**
   * Moves the expiry later (never earlier) and re-arms the expiry timer. `sent`: both clocks
   * when what `expiresAt` is measured from began (a renewal's send), when known: a step of the
   * wall clock since then is then seen, by the monotonic deadline and by `expiresAt`.
   */
  #extendTo(expiresAt: number, sent?: { wall: number; mono: number }): void {
    const wall = sent?.wall ?? Date.now();
    const mono = sent?.mono ?? performance.now();
    const at = mono + (expiresAt - wall);
    // Compared on the monotonic clock: after a step back, a later expiry has a smaller epoch.
    if (at <= this.#deadline || this.ended) return;
    this.#expiresAt = expiresAt;
    this.#deadline = at;
    this.#setWall = wall;
    this.#setMono = mono;
    this.#armExpiry();
  }

  #armExpiry(): void {
    clearTimeout(this.#expiryTimer);
    if (this.ended) return;
    // One static handler given the lease, not two closures made for every lease.
    this.#expiryTimer = setTimeout(Lease.#onExpiry, Math.max(0, Math.ceil(this.#left())), this);
    // Node only: the expiry timer must never keep a process alive on its own.
    (this.#expiryTimer as { unref?: () => void }).unref?.();
  }

  /**
   * Time left in ms. Timers run on the monotonic clock; a wall clock stepped forward ends the
   * lease sooner.
   */
  #left(): number {
    return Math.min(this.#deadline - performance.now(), this.#expiresAt - Date.now());
  }

  static #onExpiry(lease: Lease): void {
    // A renewal may have moved the expiry while this timer was queued.
    if (lease.#left() <= 0) lease.markLost();
    else lease.#armExpiry();
  }

  async #stop(): Promise<void> {
    const stop = this.#stopKeepAlive;
    this.#stopKeepAlive = undefined;
    await stop?.();
  }

  #end(how: LeaseLostError["reason"]): void {
    clearTimeout(this.#expiryTimer);
    if (this.#endedAs !== undefined) return;
    this.#endedAs = how;
    this.#controller?.abort(this.#reason(how));
  }

  #reason(how: LeaseLostError["reason"]): LeaseLostError {
    const refused = this.#refused;
    return new LeaseLostError(this.name, how, refused && { refused });
  }
}

/**
 * A wall-clock step back this large or larger moves {@link Lease.expiresAt} back with it. Smaller
 * differences between the two clocks are read noise (Date.now() truncates to whole ms, and a
 * pause between the two reads counts as a step): `expiresAt` stays what was confirmed, while
 * `signal` aborts on the monotonic clock whatever the step.
 */
const CLOCK_STEP_MS = 1_000;

/** A timer that never keeps a Node process alive on its own. */
function later(run: () => void, ms: number): void {
  const timer = setTimeout(run, ms);
  (timer as { unref?: () => void }).unref?.();
}
