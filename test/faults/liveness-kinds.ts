/**
 * The kinds the liveness campaign (liveness.campaign.ts) measures, and how each one's holder and
 * waiters acquire. Shared by the campaign's own process and its forked clients
 * (liveness-client.ts), so it imports neither vitest nor Node's process APIs.
 */
import type { EdgeLock, Lease } from "../../src/index.js";

/** Every kind that waits. */
export const KINDS = [
  "lock",
  "fair",
  "write",
  "read",
  "fenced",
  "pes",
  "semaphore",
  "latch",
] as const;
export type Kind = (typeof KINDS)[number];

/** The kinds whose holds have a lease, so that a holder that dies frees them by itself. */
export const LEASED_KINDS = ["lock", "fair", "write", "read", "fenced", "pes"] as const;
export type LeasedKind = (typeof LEASED_KINDS)[number];

/** How each kind is called, for the report. */
export const KIND_LABELS: Record<Kind, string> = {
  lock: "lock (getLock)",
  fair: "fair lock (getFairLock)",
  write: "write lock",
  read: "read lock behind a writer",
  fenced: "fenced lock",
  pes: "permit-expirable semaphore (1 permit)",
  semaphore: "semaphore",
  latch: "latch awaiters",
};

/**
 * Who acquires: the holder whose lease runs out, or a waiter behind it. They differ only for
 * the read lock, whose waiters (readers) wait behind a writer.
 */
export type Role = "holder" | "waiter";

export interface AcquireOptions {
  waitTime: number;
  leaseTime: number;
}

export function isLeasedKind(kind: string): kind is LeasedKind {
  return (LEASED_KINDS as readonly string[]).includes(kind);
}

/** One acquire of `kind` as `role`: its lease, or null when `waitTime` ran out first. */
export function acquire(
  edgelock: EdgeLock,
  kind: LeasedKind,
  role: Role,
  name: string,
  options: AcquireOptions,
): Promise<Lease | null> {
  switch (kind) {
    case "lock":
      return edgelock.getLock(name).tryLock(options);
    case "fair":
      return edgelock.getFairLock(name).tryLock(options);
    case "write":
      return edgelock.getReadWriteLock(name).writeLock().tryLock(options);
    case "read": {
      const rw = edgelock.getReadWriteLock(name);
      return (role === "holder" ? rw.writeLock() : rw.readLock()).tryLock(options);
    }
    case "fenced":
      return edgelock.getFencedLock(name).tryLock(options);
    case "pes":
      return edgelock.getPermitExpirableSemaphore(name).tryAcquire(options);
  }
}

/** Sets a name up before its first acquire: a semaphore's permits (one, so it excludes). */
export async function prepare(
  edgelock: EdgeLock,
  kind: Kind,
  name: string,
  permits = 1,
): Promise<void> {
  let set = true;
  if (kind === "pes") set = await edgelock.getPermitExpirableSemaphore(name).trySetPermits(permits);
  if (kind === "semaphore") set = await edgelock.getSemaphore(name).trySetPermits(permits);
  if (!set) throw new Error(`${name}: its permits were already set`);
}
