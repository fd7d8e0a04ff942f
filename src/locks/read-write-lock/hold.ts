/**
 * The hold protocol of either side of a read-write lock (lua/read-write-lock/*.lua): Redisson
 * RedissonReadWriteLock's layout (the lock HASH with `mode`, reader fields `<owner>`, writer
 * fields `<owner>:write`, and one timeout key per read hold), the reentrant lock's replay
 * records, epoch and wake channels.
 * @module
 */

import { keys, type LockContext } from "../../context.js";
import { LockUpgradeError } from "../../errors.js";
import { randomHex } from "../../ids.js";
import type { ReleaseResult } from "../../lease/lease.js";
import {
  readWriteLockAcquire,
  readWriteLockCancel,
  readWriteLockForceUnlock,
  readWriteLockRelease,
  readWriteLockRenew,
  readWriteLockStatus,
} from "../../lua/read-write-lock.gen.js";
import { asIntegers, type RequestCounter, type ScriptCall } from "../../transport/index.js";
import { runAttempt } from "../definite.js";
import { HashHolds, renewHold } from "../hash-holds.js";
import { decodeHolders } from "../lock/inspect.js";
import {
  type AttemptReply,
  type HoldRef,
  type HoldSettings,
  leaveCall,
  reportCall,
  runRelease,
} from "../protocol.js";
import type { ReadWriteLockInspection } from "./inspect.js";

const decode3 = (r: unknown) => asIntegers(r, 3) as [number, number, number] | undefined;

/** Redisson's read-write lock keys beside the name, all in its hash slot. */
export const rwKeys = {
  /** Redisson's channel for both sides: read unlocks publish 0, write unlocks 1. */
  channel: (name: string) => `redisson_rwlock:{${name}}`,
  /** Prefix of the read holds' timeout keys `{<name>}:<owner>:rwlock_timeout:<k>`. */
  prefix: (name: string) => `{${name}}`,
  /**
   * What edgelock keeps of the lock outside Redisson's HASH (whose scripts count its fields):
   * the request id that created this incarnation (its epoch is read from it) and whether a
   * waiter registered. lua/lib/rw.lua builds the key from the prefix.
   */
  epoch: (name: string) => `edgelock_epoch:{${name}}`,
};

/** Which side of a read-write lock. */
export type RwSide = "read" | "write";

/** The HASH field a side keeps an owner's hold count in. */
const sideField = (side: RwSide, owner: string) => (side === "read" ? owner : `${owner}:write`);

/**
 * Renews `side`'s hold of `owner` (see {@link ReadWriteHolds.renew}). A function, so that the
 * `LeaseKeeper` renews read and write holds without bundling the lock.
 */
export function renewSide(
  ctx: LockContext,
  name: string,
  side: RwSide,
  owner: string,
  leaseTime: number,
  by: "call" | "timer",
  timeout?: number,
): Promise<boolean> {
  return renewHold(ctx, name, sideField(side, owner), leaseTime, by, timeout, {
    script: readWriteLockRenew,
    keys: [name, rwKeys.prefix(name)],
  });
}

/** Hold operations on one side of a read-write lock. Internal to the primitive. */
export class ReadWriteHolds extends HashHolds<ReadWriteLockInspection> {
  readonly kind: "read-lock" | "write-lock";
  readonly side: RwSide;
  readonly foreignChannel: string;

  constructor(ctx: LockContext, name: string, side: RwSide) {
    super(ctx, name);
    this.side = side;
    this.kind = side === "read" ? "read-lock" : "write-lock";
    this.foreignChannel = rwKeys.channel(name);
  }

  /** Both sides' waiters share the name's wake channels (lua/lib/wake.lua). */
  get wakeKey(): string {
    return keys.wake(this.name);
  }

  /** The HASH field this side keeps the owner's hold count in. */
  field(owner: string): string {
    return sideField(this.side, owner);
  }

  /**
   * One acquire attempt (acquire.lua), registering `waiter` when busy as the reentrant lock
   * does (`registered`: an earlier attempt of the same wait may have registered it, so an
   * acquiring attempt ends that registration). @throws {LockUpgradeError} for a write attempt
   * by an owner holding the read lock.
   */
  async attempt(
    s: HoldSettings,
    counter: RequestCounter,
    waiter = "",
    _handOff = false,
    registered = true,
  ): Promise<AttemptReply> {
    const id = randomHex();
    const sentAt = Date.now();
    const sentMono = performance.now();
    const [status, value, epoch] = await runAttempt(
      this.ctx,
      {
        script: readWriteLockAcquire,
        name: this.name,
        keys: [...this.replayKeys(), ...this.wakeKeys(), rwKeys.prefix(this.name)],
        args: [this.side, s.leaseTime, ...this.attemptArgs(s, id, waiter), registered ? "1" : "0"],
        signal: s.signal,
      },
      decode3,
      counter,
      () => this.cancel(s.owner, id),
      s.attemptUntil,
      ([status]) => status === 1,
    );
    if (status === 1) return { status: "acquired", grant: { id, sentAt, sentMono, epoch } };
    if (status === 3) throw new LockUpgradeError(this.name);
    // A lock a Redisson client made (no epoch key): its release publishes only on Redisson's
    // channel, which the wait then listens on.
    if (status === 0 && epoch === 1) return { status: "busy", pttl: value, foreign: true };
    return { status: "busy", pttl: status === 0 ? value : 0 };
  }

  /** The request that unregisters a waiter that gave up (lua/lock/leave.lua: same waiter keys). */
  leaveCall(waiter: string): ScriptCall {
    return leaveCall(this.name, waiter);
  }

  /** Makes sure an acquire whose answer never arrived leaves no hold behind (cancel.lua). */
  cancel(owner: string, id: string): void {
    void this.cancelInBackground(readWriteLockCancel, this.#releaseKeys(), [
      this.side,
      owner,
      this.ctx.replayWindow,
      id,
    ]);
  }

  /**
   * The hold's side of the owner gets at least `leaseTime` (renew.lua of this folder): every
   * read hold of the owner, or the writer's field; the hash and the epoch with it.
   */
  override renew(
    owner: string,
    leaseTime: number,
    by: "call" | "timer",
    timeout?: number,
  ): Promise<boolean> {
    return renewSide(this.ctx, this.name, this.side, owner, leaseTime, by, timeout);
  }

  /** Releases one hold of this side (release.lua), replay-safe by the lease id. */
  release(hold: HoldRef): Promise<ReleaseResult> {
    return runRelease(this.ctx, {
      script: readWriteLockRelease,
      name: this.name,
      keys: this.#releaseKeys(),
      args: [this.side, ...this.releaseArgs(hold)],
    });
  }

  /**
   * Deletes the lock if it is in this side's mode (force-unlock.lua), recording its creating
   * acquire as gone so that a late copy of that acquire takes nothing.
   */
  forceUnlock(): Promise<boolean> {
    const name = this.name;
    const scriptKeys = [
      name,
      rwKeys.channel(name),
      ...this.wakeKeys(),
      rwKeys.prefix(name),
      keys.replay(name),
    ];
    return this.runOnce(readWriteLockForceUnlock, scriptKeys, [this.side, this.ctx.replayWindow]);
  }

  /** `[locked 0|1, pttl, hold count of owner on this side]` (status.lua). */
  status(owner: string): Promise<[number, number, number]> {
    const call = {
      script: readWriteLockStatus,
      name: this.name,
      keys: [this.name],
      args: [this.side, owner === "" ? "" : this.field(owner)],
    };
    return reportCall(this.ctx, this.name, "inspect", (counter) =>
      this.ctx.runner.run(call, decode3, counter),
    );
  }

  /** Both sides' holders, the mode and the TTL in one read-only request (lua/lock/holders.lua). */
  async inspect(): Promise<ReadWriteLockInspection> {
    const { ttl, holders } = await this.readHolders([], decodeHolders);
    const all = holders.map(({ owner, holdCount }) =>
      owner.endsWith(":write")
        ? { owner: owner.slice(0, -":write".length), holdCount, side: "write" as const }
        : { owner, holdCount, side: "read" as const },
    );
    const mode = all.some((h) => h.side === "write") ? "write" : all.length ? "read" : null;
    return {
      kind: "read-write-lock",
      name: this.name,
      locked: ttl !== -2,
      ttl,
      mode,
      holders: all,
    };
  }

  #releaseKeys(): string[] {
    return [
      ...this.replayKeys(),
      rwKeys.channel(this.name),
      ...this.wakeKeys(),
      rwKeys.prefix(this.name),
    ];
  }
}
