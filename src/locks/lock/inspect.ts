/**
 * What inspecting a Redisson-layout lock reports, and the decoder of lua/lock/holders.lua.
 * @module
 */
import type { Holder, Inspection } from "../../inspect.js";
import { asInteger } from "../../transport/index.js";

/** One holder of a reentrant lock: its owner id and how many times it holds the lock. */
export interface LockHolder extends Holder {
  /** Reentrant hold count (≥ 1 while held; each `release()` of one lease takes one away). */
  holdCount: number;
}

/**
 * What `lock.inspect()` reports, e.g.
 * `{ kind: "lock", name: "invoice:42", locked: true, ttl: 8_734, holders: [{ owner, holdCount: 2 }] }`.
 */
export interface LockInspection extends Inspection {
  kind: "lock";
  /** True when the lock's key exists (someone holds it). */
  locked: boolean;
  /** The holders: at most one for a reentrant lock. */
  holders: LockHolder[];
}

/**
 * What `fencedLock.inspect()` reports: the holder as for a lock, and the last fencing token
 * issued on the name (0: none yet, or Redis lost it), e.g.
 * `{ kind: "fenced-lock", name, locked: true, ttl: 9_120, holders: [...], fencingToken: 1_764_000_000_000_042 }`.
 */
export interface FencedLockInspection extends Omit<LockInspection, "kind"> {
  kind: "fenced-lock";
  /** The last token issued (Redisson RFencedLock#getToken). */
  fencingToken: number;
}

/** Most holders `inspect()` returns (a reentrant lock has one; this bounds a wrong key). */
export const MAX_INSPECT_HOLDERS = 100;

/** Decodes lua/lock/holders.lua: `[pttl, "=owner", count, ...]`. */
export function decodeHolders(reply: unknown): { ttl: number; holders: LockHolder[] } | undefined {
  if (!Array.isArray(reply) || reply.length % 2 !== 1) return undefined;
  const ttl = asInteger(reply[0]);
  if (ttl === undefined) return undefined;
  const holders: LockHolder[] = [];
  for (let i = 1; i < reply.length; i += 2) {
    const owner: unknown = reply[i];
    const holdCount = asInteger(reply[i + 1]);
    if (typeof owner !== "string" || !owner.startsWith("=") || holdCount === undefined) {
      return undefined;
    }
    holders.push({ owner: owner.slice(1), holdCount });
  }
  return { ttl, holders };
}
