/**
 * The hold protocol of a fenced lock: the reentrant lock's scripts (lua/lock/*.lua) but for the
 * acquire, lua/fenced-lock/acquire.lua, whose every grant also takes a fencing token from
 * Redisson RedissonFencedLock's counter.
 * @module
 */
import { fencedLockAcquire } from "../../lua/fenced-lock.gen.js";
import { asInteger } from "../../transport/index.js";
import { LockScriptHolds } from "../lock/hold.js";
import { decodeHolders, type FencedLockInspection } from "../lock/inspect.js";

/** A fenced lock's token counter (Redisson RedissonFencedLock's key): same hash slot. */
export const tokenKey = (name: string) => `redisson_lock_token:{${name}}`;

/**
 * Hold operations on one fenced lock. Internal to the primitive. A grant must take a token, so
 * a release only wakes a waiter (no hand-off, the base's default).
 */
export class FencedLockHolds extends LockScriptHolds<FencedLockInspection> {
  readonly kind = "fenced-lock" as const;
  /** lua/fenced-lock/acquire.lua: the reentrant acquire that also takes a token. */
  protected override readonly acquireScript = fencedLockAcquire;
  /** It answers the grant's token fourth. */
  protected override readonly replyLength = 4;

  /** The reentrant lock's acquire keys, then the token counter. */
  protected override acquireKeys(): string[] {
    return [...super.acquireKeys(), tokenKey(this.name)];
  }

  /** Holders, TTL and the last fencing token issued (0: none) in one read-only request. */
  async inspect(): Promise<FencedLockInspection> {
    const { ttl, token, holders } = await this.readHolders([tokenKey(this.name)], (reply) => {
      if (!Array.isArray(reply) || reply.length < 2) return undefined;
      const token = asInteger(reply[1]);
      const rest = decodeHolders([reply[0], ...reply.slice(2)]);
      return token === undefined || !rest ? undefined : { ...rest, token };
    });
    return {
      kind: "fenced-lock",
      name: this.name,
      locked: ttl !== -2,
      ttl,
      holders,
      fencingToken: token,
    };
  }
}
