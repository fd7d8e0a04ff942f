/**
 * The neutral base of the holds kept in Redisson's lock HASH (field = owner, value = hold count,
 * plus our epoch field): what the reentrant, fenced and fair locks, the idempotency key and the
 * read-write lock's sides share. It renews with lua/lock/renew.lua and reads the holders with
 * lua/lock/holders.lua; each kind brings its own acquire, release, cancel and force-unlock.
 * @module
 */

import { keys, type LockContext } from "../context.js";
import type { Inspection } from "../inspect.js";
import type { LeaseKind, ReleaseResult } from "../lease/lease.js";
import { LOCK_WAITER_SLOT_MS } from "../limits.js";
import { lockHolders, lockRenew } from "../lua/lock.gen.js";
import type { LuaScript } from "../lua/script.js";
import { asInteger, asIntegers, type RequestCounter } from "../transport/index.js";
import { MAX_INSPECT_HOLDERS } from "./lock/inspect.js";
import {
  type AttemptReply,
  type HoldProtocol,
  type HoldRef,
  type HoldSettings,
  inBackground,
  reportCall,
  reportRenew,
} from "./protocol.js";

/**
 * Makes the TTL of lock HASH `name` at least `leaseTime` if `owner` still holds it (renew.lua),
 * within `timeout` ms when given (default: the EdgeLock's `requestTimeout`), and reports it as a
 * `renew` event. `script` replaces renew.lua by a script with the same arguments and reply (a
 * read-write lock's side).
 */
export function renewHold(
  ctx: LockContext,
  name: string,
  owner: string,
  leaseTime: number,
  by: "call" | "timer",
  timeout?: number,
  script: { script: LuaScript; keys: string[]; args?: (string | number)[] } = {
    script: lockRenew,
    keys: [name],
  },
): Promise<boolean> {
  return reportRenew(ctx, name, by, async (counter) => {
    const args = [leaseTime, owner, ...(script.args ?? [])];
    const [renewed] = await ctx.runner.run(
      { script: script.script, name, keys: script.keys, args, timeout },
      (r) => asIntegers(r, 1),
      counter,
    );
    return renewed === 1;
  });
}

/** Hold operations on one name kept in the lock HASH. Internal base of each kind's holds. */
export abstract class HashHolds<I extends Inspection> implements HoldProtocol {
  abstract readonly kind: LeaseKind;
  readonly name: string;
  protected readonly ctx: LockContext;

  constructor(ctx: LockContext, name: string) {
    this.ctx = ctx;
    this.name = name;
  }

  abstract attempt(
    s: HoldSettings,
    counter: RequestCounter,
    waiter?: string,
    handOff?: boolean,
  ): Promise<AttemptReply>;
  abstract release(hold: HoldRef): Promise<ReleaseResult>;
  abstract cancel(owner: string, id: string): void;
  /** Deletes the lock whoever holds it (the kind's force-unlock.lua). */
  abstract forceUnlock(): Promise<boolean>;
  abstract inspect(): Promise<I>;

  /**
   * Makes the lock's TTL at least `leaseTime` if `owner` still holds it (lua/lock/renew.lua),
   * within `timeout` ms when given (default: the EdgeLock's `requestTimeout`).
   */
  renew(
    owner: string,
    leaseTime: number,
    by: "call" | "timer",
    timeout?: number,
  ): Promise<boolean> {
    return renewHold(this.ctx, this.name, owner, leaseTime, by, timeout);
  }

  /**
   * The holders, hold counts and TTL in one read-only request (lua/lock/holders.lua, decoded
   * by `decode`); `more`: keys after the name whose values the script also returns.
   */
  protected readHolders<T>(more: string[], decode: (reply: unknown) => T | undefined): Promise<T> {
    const call = {
      script: lockHolders,
      name: this.name,
      keys: [this.name, ...more],
      args: [MAX_INSPECT_HOLDERS],
    };
    return reportCall(this.ctx, this.name, "inspect", (counter) =>
      this.ctx.runner.run(call, decode, counter),
    );
  }

  /** Runs `script` on this name once: whether it answered 1 (a force-unlock: a lock was deleted). */
  protected async runOnce(
    script: LuaScript,
    scriptKeys: string[],
    args: (string | number)[],
  ): Promise<boolean> {
    const call = { script, name: this.name, keys: scriptKeys, args };
    const deleted = await reportCall(this.ctx, this.name, "forceUnlock", (counter) =>
      this.ctx.runner.run(call, asInteger, counter),
    );
    return deleted === 1;
  }

  /**
   * Runs a cancel script (replay-safe by the attempt's request id) in the background, sent again
   * until Redis answers (see `inBackground`).
   * @returns settles true once Redis answered it.
   */
  protected cancelInBackground(
    script: LuaScript,
    scriptKeys: string[],
    args: (string | number)[],
  ): Promise<boolean> {
    return inBackground(this.ctx, { script, name: this.name, keys: scriptKeys, args });
  }

  /** The lock and its two replay-record hashes: the first keys of acquire, release, cancel. */
  protected replayKeys(): string[] {
    return [this.name, keys.replay(this.name), keys.replayOld(this.name)];
  }

  /**
   * The first arguments of every release script of the HASH locks: owner, the lease time, the
   * replay window, the lease id (request id of its acquire) and its epoch.
   */
  protected releaseArgs(hold: HoldRef): (string | number)[] {
    return [hold.owner, hold.leaseTime, this.ctx.replayWindow, hold.id, hold.epoch];
  }

  /**
   * The arguments every acquire script of the HASH locks takes after its own leading ones:
   * owner, the replay window, the request id, the waiter id and how long its registration lasts.
   */
  protected attemptArgs(s: HoldSettings, id: string, waiter: string): (string | number)[] {
    return [s.owner, this.ctx.replayWindow, id, waiter, this.waiterSlot];
  }

  /** How long a waiter's registration lasts, in ms (lib/wake.lua). */
  protected get waiterSlot(): number {
    return LOCK_WAITER_SLOT_MS;
  }

  /** The registered waiters and their wake channels: keys of every script that can free it. */
  protected wakeKeys(): string[] {
    return [keys.waiting(this.name), keys.wake(this.name)];
  }
}
