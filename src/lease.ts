/**
 * The Lease handle every acquire returns: renew, release, a lost-lease signal, serialization for
 * another invocation, and the keep-alive strategies that replace Redisson's watchdog thread.
 * @module
 */
import { LeaseLostError, TransportError } from "./errors.js";
import {
  DEFAULT_KEEPER_INSTANCE,
  type KeeperRegistration,
  type KeeperReply,
  type LeaseKeeperBinding,
  type LeaseKeeperStub,
} from "./keeper.js";
import { checkMs, checkName, checkOptions, checkOwner } from "./validate.js";

/** What `lease.release()` found: see {@link Lease.release}. */
export type ReleaseResult = "released" | "still-held" | "expired" | "not-owner";

/** Renewal through the `LeaseKeeper` Durable Object, across invocations. */
export interface KeeperKeepAlive {
  /** The keeper namespace; defaults to the EdgeLock's `keeper` option. */
  keeper?: LeaseKeeperBinding;
  /**
   * Stop renewing this many ms after the acquire, whatever happens to the owner: a crashed
   * owner's lock is free again within `maxHoldTime + leaseTime`. Integer in [1, 86 400 000].
   */
  maxHoldTime: number;
  /** Keeper instance name. @default "edgelock-lease-keeper" */
  instance?: string;
}

/**
 * How a lease is kept alive:
 * - `"none"`: only explicit `lease.renew()` calls;
 * - `"timer"`: renew every `leaseTime / 3` while this invocation lives (Redisson's watchdog
 *   period); the timer never keeps a Node process alive by itself;
 * - {@link KeeperKeepAlive}: the `LeaseKeeper` Durable Object's alarm renews across invocations;
 *   while the acquiring invocation lives, the lease asks the keeper every `leaseTime / 3` (an
 *   RPC, no Redis request) and its `signal` aborts when the keeper found the lease lost, gave up
 *   at `maxHoldTime`, or no longer knows it.
 *
 * Default: `"timer"` in watchdog mode (`leaseTime` omitted), `"none"` with a fixed lease.
 */
export type KeepAlive = "none" | "timer" | KeeperKeepAlive;

/** Plain-object form of a lease (`lease.toJSON()`), for `edgelock.restoreLease` elsewhere. */
export interface SerializedLease {
  v: 1;
  kind: "lock";
  name: string;
  owner: string;
  /** Lease id: the request id of its acquire, reused by its release so both are replay-safe. */
  id: string;
  /**
   * Incarnation of the lock the hold was made in (0: unknown), so that releasing this lease
   * never takes a newer hold of the same owner. Optional for leases serialized before it existed.
   */
  epoch?: number;
  leaseTime: number;
  watchdog: boolean;
  expiresAt: number;
  fencingToken?: number;
}

/** What a lease needs from the primitive that issued it. Internal. */
export interface LeaseHost {
  /**
   * Makes the TTL at least `leaseTime` if still held, within `timeout` ms when given; false
   * when the owner no longer holds the lock.
   */
  renew(lease: Lease, leaseTime: number, by: "call" | "timer", timeout?: number): Promise<boolean>;
  /** Releases this lease's hold once (replay-safe through the lease id). */
  release(lease: Lease): Promise<ReleaseResult>;
  /** Reports that the lease was found lost. */
  lost(lease: Lease): void;
  /** Reports a background failure. */
  backgroundError(lease: Lease, operation: "renew" | "keeper", error: unknown): void;
}

interface LeaseInit {
  host: LeaseHost;
  name: string;
  owner: string;
  id: string;
  epoch: number;
  leaseTime: number;
  watchdog: boolean;
  expiresAt: number;
  fencingToken?: number | undefined;
}

/** A stop function returned by a started keep-alive. */
type StopKeepAlive = () => Promise<void>;

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
  /** Fencing token (fenced locks only): a safe integer, strictly increasing per lock name. */
  readonly fencingToken: number | undefined;
  /** Aborts with {@link LeaseLostError} when the lease is found lost or is released. */
  readonly signal: AbortSignal;

  readonly #host: LeaseHost;
  readonly #controller = new AbortController();
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
    this.fencingToken = init.fencingToken;
    this.signal = this.#controller.signal;
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
   * a renewal confirming a later one.
   */
  get expiresAt(): number {
    return this.#expiresAt;
  }

  /** True once the lease was released or found lost. */
  get ended(): boolean {
    return this.#controller.signal.aborted;
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
   * Releases this hold. Never throws for an expired lease. One HTTP request.
   * Algorithm: Redisson RedissonLock#unlockInnerAsync with its request-id latch.
   * @returns `"released"` (last hold gone), `"still-held"` (reentrant count still > 0),
   * `"expired"` (the key is gone) or `"not-owner"` (someone else holds it now). Calling it again
   * returns the first answer.
   * @throws {TransportError} when Redis could not be reached; calling again is safe.
   */
  release(): Promise<ReleaseResult> {
    if (!this.#release) {
      const run = async (): Promise<ReleaseResult> => {
        await this.#stop();
        const result = await this.#host.release(this);
        this.#end(new LeaseLostError(this.name, "released"));
        return result;
      };
      this.#release = run();
      this.#release.catch(() => {
        this.#release = undefined;
      });
    }
    return this.#release;
  }

  /** `await using lease = ...` releases the lease at the end of the block. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  /** Serializable form, for `edgelock.restoreLease` in another invocation. Holds the owner id. */
  toJSON(): SerializedLease {
    const out: SerializedLease = {
      v: 1,
      kind: "lock",
      name: this.name,
      owner: this.owner,
      id: this.id,
      epoch: this.epoch,
      leaseTime: this.leaseTime,
      watchdog: this.watchdog,
      expiresAt: this.expiresAt,
    };
    if (this.fencingToken !== undefined) out.fencingToken = this.fencingToken;
    return out;
  }

  /** Internal: starts the keep-alive strategy; on a keeper failure the error propagates. */
  async startKeepAlive(keepAlive: KeepAlive, defaultKeeper: LeaseKeeperBinding | undefined) {
    if (keepAlive === "none") return;
    if (keepAlive === "timer") {
      this.#stopKeepAlive = this.#startTimer();
      return;
    }
    const keeper = keepAlive.keeper ?? defaultKeeper;
    if (!keeper)
      throw new TypeError("`keepAlive.keeper` is required (no default `keeper` was configured)");
    const instance = keepAlive.instance ?? DEFAULT_KEEPER_INSTANCE;
    const ref = { stub: keeper.getByName(instance) };
    const registration: KeeperRegistration = {
      name: this.name,
      owner: this.owner,
      id: this.id,
      leaseTime: this.leaseTime,
      maxHoldTime: keepAlive.maxHoldTime,
    };
    const reply = await ref.stub.register(registration);
    if (!reply.ok)
      throw new TransportError(
        this.name,
        `LeaseKeeper refused the lease: ${reply.error ?? "unknown"}`,
        true,
      );
    const stopPolling = this.#pollKeeper(ref, () => {
      // A stub whose call threw is broken for good: take a fresh one.
      ref.stub = keeper.getByName(instance);
    });
    this.#stopKeepAlive = async () => {
      stopPolling();
      // The release goes ahead even if the keeper cannot be told: its next renewal finds the
      // owner gone (the renewal script checks the owner field) and forgets the lease.
      const out = await ref.stub
        .unregister(this.id)
        .catch((): KeeperReply => ({ ok: false, error: "unregister call failed" }));
      if (!out.ok)
        this.#host.backgroundError(
          this,
          "keeper",
          new TransportError(
            this.name,
            `LeaseKeeper unregister failed: ${out.error ?? "unknown"}`,
            true,
          ),
        );
    };
  }

  /**
   * Asks the keeper every `leaseTime / 3` how the lease is doing (an RPC, no Redis request), so
   * that `signal` aborts in this invocation when the keeper finds the lease lost or gives up at
   * `maxHoldTime`. Returns the function that stops polling.
   */
  #pollKeeper(ref: { stub: LeaseKeeperStub }, renewStub: () => void): () => void {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    const period = Math.max(1, Math.floor(this.leaseTime / 3));
    const schedule = (ms = period) => {
      timer = setTimeout(tick, ms);
      // Node only: polling must never keep a process alive by itself.
      (timer as { unref?: () => void }).unref?.();
    };
    const tick = () => {
      if (stopped) return;
      ref.stub.status(this.id).then(
        (status) => {
          if (stopped) return;
          if (status.state === "renewing") {
            if (typeof status.expiresAt === "number") this.#extendTo(status.expiresAt);
            schedule();
            return;
          }
          // Lost, given up at maxHoldTime, or no longer known: nobody keeps this lease alive.
          stopped = true;
          this.markLost();
        },
        () => {
          if (stopped) return;
          this.#host.backgroundError(
            this,
            "keeper",
            new TransportError(this.name, "LeaseKeeper status call failed", true),
          );
          renewStub();
          // Sooner than a period, as after a failed renewal: the lease is running down.
          schedule(Math.max(1, Math.floor(this.leaseTime / 9)));
        },
      );
    };
    schedule();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }

  /** Internal: marks the lease lost (aborts `signal`) and stops its keep-alive. */
  markLost(): void {
    if (this.ended) return;
    this.#end(new LeaseLostError(this.name));
    this.#host.lost(this);
    this.#stop().catch(() => {});
  }

  async #renewOnce(leaseTime: number, by: "call" | "timer"): Promise<boolean> {
    const sentAt = Date.now();
    // A keep-alive renewal that hangs is abandoned early enough to be retried before the lease
    // runs out; an explicit renew() gets the full requestTimeout.
    const timeout = by === "timer" ? Math.max(1, Math.ceil(leaseTime / 6)) : undefined;
    const renewed = await this.#host.renew(this, leaseTime, by, timeout);
    if (renewed) {
      this.#leaseTime = leaseTime;
      // The TTL is now at least leaseTime from when Redis applied it (it is never shortened).
      this.#extendTo(sentAt + leaseTime);
    } else {
      this.markLost();
    }
    return renewed;
  }

  /** Moves `expiresAt` later (never earlier) and re-arms the expiry timer. */
  #extendTo(expiresAt: number): void {
    if (expiresAt <= this.#expiresAt || this.ended) return;
    this.#expiresAt = expiresAt;
    this.#armExpiry();
  }

  #armExpiry(): void {
    clearTimeout(this.#expiryTimer);
    if (this.ended) return;
    this.#expiryTimer = setTimeout(
      () => {
        // A renewal may have moved expiresAt while this timer was queued.
        if (Date.now() >= this.#expiresAt) this.markLost();
        else this.#armExpiry();
      },
      Math.max(0, this.#expiresAt - Date.now()),
    );
    // Node only: the expiry timer must never keep a process alive on its own.
    (this.#expiryTimer as { unref?: () => void }).unref?.();
  }

  #startTimer(): StopKeepAlive {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    const schedule = (ms: number) => {
      timer = setTimeout(tick, ms);
      // Node only: the renewal timer must never keep a process alive on its own.
      (timer as { unref?: () => void }).unref?.();
    };
    const tick = () => {
      if (stopped) return;
      this.#renewOnce(this.leaseTime, "timer").then(
        (renewed) => {
          if (renewed && !stopped) schedule(Math.max(1, Math.floor(this.leaseTime / 3)));
        },
        (error: unknown) => {
          this.#host.backgroundError(this, "renew", error);
          // Retry sooner than the normal period: the lease is still running down.
          if (!stopped) schedule(Math.max(1, Math.floor(this.leaseTime / 9)));
        },
      );
    };
    schedule(Math.max(1, Math.floor(this.leaseTime / 3)));
    return async () => {
      stopped = true;
      clearTimeout(timer);
    };
  }

  async #stop(): Promise<void> {
    const stop = this.#stopKeepAlive;
    this.#stopKeepAlive = undefined;
    await stop?.();
  }

  #end(reason: LeaseLostError): void {
    clearTimeout(this.#expiryTimer);
    if (!this.#controller.signal.aborted) this.#controller.abort(reason);
  }
}

/** Validates a `keepAlive` option. */
export function checkKeepAlive(value: unknown): KeepAlive | undefined {
  if (value === undefined || value === "none" || value === "timer") return value;
  if (typeof value !== "object" || value === null) {
    throw new TypeError('`keepAlive` must be "none", "timer" or { keeper, maxHoldTime }');
  }
  const o = checkOptions(value as KeeperKeepAlive, "keepAlive", [
    "keeper",
    "maxHoldTime",
    "instance",
  ]);
  checkMs(o.maxHoldTime, "keepAlive.maxHoldTime", 1);
  if (o.keeper !== undefined && typeof (o.keeper as LeaseKeeperBinding).getByName !== "function") {
    throw new TypeError("`keepAlive.keeper` must be a LeaseKeeper Durable Object namespace");
  }
  if (o.instance !== undefined) checkName(o.instance, "keepAlive.instance");
  return value as KeeperKeepAlive;
}

/** Validates a serialized lease (object or its JSON string). */
export function parseSerializedLease(input: unknown): SerializedLease {
  let value = input;
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      throw new TypeError("restoreLease: the string is not JSON from lease.toJSON()");
    }
  }
  if (typeof value !== "object" || value === null) {
    throw new TypeError("restoreLease: expected the object returned by lease.toJSON()");
  }
  const o = value as Partial<SerializedLease>;
  if (o.v !== 1 || o.kind !== "lock") throw new TypeError("restoreLease: unknown lease format");
  checkName(o.name, "lease.name");
  checkOwner(o.owner, "lease.owner");
  if (typeof o.id !== "string" || !/^[0-9a-f]{32}$/.test(o.id))
    throw new TypeError("restoreLease: bad `lease.id`");
  checkMs(o.leaseTime, "lease.leaseTime", 1);
  if (typeof o.watchdog !== "boolean") throw new TypeError("restoreLease: bad `lease.watchdog`");
  if (typeof o.expiresAt !== "number" || !Number.isFinite(o.expiresAt))
    throw new TypeError("restoreLease: bad `lease.expiresAt`");
  if (o.epoch !== undefined && !(Number.isSafeInteger(o.epoch) && o.epoch >= 0))
    throw new TypeError("restoreLease: bad `lease.epoch`");
  if (o.fencingToken !== undefined && !Number.isSafeInteger(o.fencingToken))
    throw new TypeError("restoreLease: bad `lease.fencingToken`");
  return o as SerializedLease;
}
