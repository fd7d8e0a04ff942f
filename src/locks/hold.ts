/**
 * A hold on a Redisson-layout lock (HASH at the name, field = owner, value = hold count): the
 * machinery shared by every primitive built on it (the reentrant lock, the idempotency key).
 * One acquire attempt with its replay latch and the cancellation of an unanswered one, renewal,
 * release, and turning an acquired hold into a {@link Lease}.
 * @module
 */
import { TransportError } from "../errors.js";
import { randomHex } from "../ids.js";
import {
  checkKeepAlive,
  type KeepAlive,
  Lease,
  type LeaseHost,
  type ReleaseResult,
} from "../lease.js";
import { lockAcquire, lockCancel, lockRelease, lockRenew } from "../lua.gen.js";
import { asInteger, asIntegers, type RequestCounter } from "../transport/index.js";
import { checkLeaseTime, checkOwner, checkSignal } from "../validate.js";
import { keys, type LockContext } from "./context.js";

/** Acquire options every hold-based primitive accepts. */
export interface HoldOptions {
  leaseTime?: number;
  owner?: string;
  signal?: AbortSignal;
  keepAlive?: KeepAlive;
}

/** {@link HoldOptions} validated and resolved against the EdgeLock's configuration. */
export interface HoldSettings {
  owner: string;
  signal: AbortSignal | undefined;
  leaseTime: number;
  watchdog: boolean;
  keepAlive: KeepAlive;
}

/** What one acquire attempt found (lua/lock/acquire.lua). */
export type AttemptReply =
  | { status: "acquired"; id: string; sentAt: number; epoch: number }
  | { status: "busy"; pttl: number }
  | { status: "completed"; pttl: number };

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
const decodeAttempt = (r: unknown) => asIntegers(r, 3) as [number, number, number] | undefined;

/**
 * Completion TTLs requested for leases being completed, read by whichever host releases them:
 * module-wide, so any primitive object of the name can complete any lease on it in one request.
 */
const completions = new WeakMap<Lease, number>();

/** Completion marker of an idempotency key: same hash slot as the name. */
export const doneKey = (name: string) => `edgelock_done:{${name}}`;

/** Hold operations on one name. Internal to the primitives. */
export class Holds {
  readonly name: string;
  /** Lease host for leases on this name: renew and release through these operations. */
  readonly host: LeaseHost;
  readonly #ctx: LockContext;

  constructor(ctx: LockContext, name: string) {
    this.#ctx = ctx;
    this.name = name;
    this.host = {
      renew: (lease, leaseTime, by, timeout) => this.renew(lease.owner, leaseTime, by, timeout),
      release: (lease) => {
        const ttl = completions.get(lease);
        completions.delete(lease);
        return this.release(lease.owner, lease.id, lease.leaseTime, lease.epoch, ttl);
      },
      lost: () => ctx.emit({ type: "lost", name, requests: 0, durationMs: 0 }),
      backgroundError: (_lease, operation, error) => this.reportError(operation, error, 0, 0),
    };
  }

  /** Validates acquire options and fills in owner, lease time and keep-alive defaults. */
  settings(o: Partial<HoldOptions>): HoldSettings {
    const leaseTimeOption = checkLeaseTime(o.leaseTime);
    const owner =
      o.owner === undefined ? `${this.#ctx.clientId}:${randomHex()}` : checkOwner(o.owner);
    const signal = checkSignal(o.signal);
    const watchdog = leaseTimeOption === undefined;
    const keepAlive = checkKeepAlive(o.keepAlive) ?? (watchdog ? "timer" : "none");
    if (typeof keepAlive === "object" && !keepAlive.keeper && !this.#ctx.keeper) {
      throw new TypeError("`keepAlive.keeper` is required (no default `keeper` was configured)");
    }
    return {
      owner,
      signal,
      watchdog,
      keepAlive,
      leaseTime: leaseTimeOption ?? this.#ctx.watchdogTimeout,
    };
  }

  /**
   * One acquire attempt with a fresh request id (one HTTP request when warm). With
   * `completion`, a completion marker on the name answers `"completed"` instead.
   * An attempt whose answer never arrives (aborted in flight, ambiguous failure) is cancelled
   * in the background before the error propagates.
   */
  async attempt(
    s: HoldSettings,
    counter: RequestCounter,
    completion = false,
  ): Promise<AttemptReply> {
    const id = randomHex();
    const sentAt = Date.now();
    const scriptKeys = this.#replayKeys();
    if (completion) scriptKeys.push(doneKey(this.name));
    let status: number;
    let value: number;
    let epoch: number;
    try {
      [status, value, epoch] = await this.#ctx.runner.run(
        {
          script: lockAcquire,
          name: this.name,
          keys: scriptKeys,
          args: [s.leaseTime, s.owner, this.#ctx.replayWindow, id],
          signal: s.signal,
        },
        decodeAttempt,
        counter,
      );
    } catch (error) {
      const unanswered =
        (s.signal?.aborted && error === s.signal.reason) ||
        (error instanceof TransportError && error.ambiguous);
      if (unanswered) this.cancel(s.owner, id);
      throw error;
    }
    if (status === 1) return { status: "acquired", id, sentAt, epoch };
    if (status === 2) return { status: "completed", pttl: value };
    // -1: this attempt's latch was already used; the caller polls again with a new id.
    return { status: "busy", pttl: status === 0 ? value : 0 };
  }

  /**
   * A lease for an acquired hold, with its keep-alive started. If the keep-alive cannot start
   * (the keeper refused), the hold is given back and the error propagates.
   */
  async lease(
    s: HoldSettings,
    acquired: { id: string; sentAt: number; epoch: number },
  ): Promise<Lease> {
    const lease = new Lease({
      host: this.host,
      name: this.name,
      owner: s.owner,
      id: acquired.id,
      epoch: acquired.epoch,
      leaseTime: s.leaseTime,
      watchdog: s.watchdog,
      expiresAt: acquired.sentAt + s.leaseTime,
    });
    try {
      await lease.startKeepAlive(s.keepAlive, this.#ctx.keeper);
    } catch (error) {
      await lease.release().catch(() => {});
      throw error;
    }
    return lease;
  }

  /** Reports an acquire call through `onEvent`. */
  emitAcquire(started: number, counter: RequestCounter, acquired: boolean, attempts: number) {
    this.#ctx.emit({
      type: "acquire",
      name: this.name,
      requests: counter.requests,
      durationMs: Date.now() - started,
      acquired,
      attempts,
    });
  }

  /**
   * Releases `lease` through its own release path (keep-alive stopped, signal ended, replay
   * safe) while recording the completion marker for `ttl` ms in the same request.
   */
  async complete(lease: Lease, ttl: number): Promise<ReleaseResult> {
    completions.set(lease, ttl);
    try {
      const released = await lease.release();
      // Released earlier (the host was not asked again): record the completion on its own.
      if (completions.has(lease))
        return await this.release(lease.owner, lease.id, lease.leaseTime, lease.epoch, ttl);
      return released;
    } finally {
      completions.delete(lease);
    }
  }

  /** Makes sure an acquire whose answer never arrived leaves no hold behind (cancel.lua). */
  cancel(owner: string, id: string): void {
    const counter = { requests: 0 };
    const started = Date.now();
    const task = this.#ctx.runner
      .run(
        {
          script: lockCancel,
          name: this.name,
          keys: [...this.#replayKeys(), keys.channel(this.name)],
          args: [owner, this.#ctx.replayWindow, id],
        },
        asInteger,
        counter,
      )
      .catch((error: unknown) => this.reportError("cancel", error, counter.requests, started));
    this.#ctx.background(task);
  }

  /**
   * Makes the lock's TTL at least `leaseTime` if `owner` still holds it (renew.lua), within
   * `timeout` ms when given (default: the EdgeLock's `requestTimeout`).
   */
  async renew(
    owner: string,
    leaseTime: number,
    by: "call" | "timer",
    timeout?: number,
  ): Promise<boolean> {
    const counter = { requests: 0 };
    const started = Date.now();
    const [renewed] = await this.#ctx.runner.run(
      { script: lockRenew, name: this.name, keys: [this.name], args: [leaseTime, owner], timeout },
      (r) => asIntegers(r, 1),
      counter,
    );
    this.#ctx.emit({
      type: "renew",
      name: this.name,
      requests: counter.requests,
      durationMs: Date.now() - started,
      renewed: renewed === 1,
      by,
    });
    return renewed === 1;
  }

  /**
   * Releases one hold of `owner` under the request id `id` (release.lua): the hold made in
   * incarnation `epoch` of the lock, or any hold of the owner when `epoch` is 0. With
   * `completionTtl`, records the completion marker in the same request.
   */
  async release(
    owner: string,
    id: string,
    leaseTime: number,
    epoch: number,
    completionTtl?: number,
  ): Promise<ReleaseResult> {
    const counter = { requests: 0 };
    const started = Date.now();
    const scriptKeys = [...this.#replayKeys(), keys.channel(this.name)];
    const args: (string | number)[] = [owner, leaseTime, this.#ctx.replayWindow, id, epoch];
    if (completionTtl !== undefined) {
      scriptKeys.push(doneKey(this.name));
      args.push(completionTtl);
    }
    const result = await this.#ctx.runner.run(
      { script: lockRelease, name: this.name, keys: scriptKeys, args },
      decodeRelease,
      counter,
    );
    this.#ctx.emit({
      type: "release",
      name: this.name,
      requests: counter.requests,
      durationMs: Date.now() - started,
      result,
    });
    return result;
  }

  /** The lock and its two replay-record hashes: the first keys of acquire, release, cancel. */
  #replayKeys(): string[] {
    return [this.name, keys.replay(this.name), keys.replayOld(this.name)];
  }

  /** Reports a failed background operation as an `error` event. */
  reportError(
    operation: "cancel" | "renew" | "keeper",
    error: unknown,
    requests: number,
    started: number,
  ): void {
    if (!(error instanceof TransportError)) return;
    this.#ctx.emit({
      type: "error",
      name: this.name,
      requests,
      durationMs: started ? Date.now() - started : 0,
      operation,
      error,
    });
  }
}
