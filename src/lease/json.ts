/**
 * The serialized form of a lease (`lease.toJSON()`), which another invocation turns back into a
 * lease with `edgelock.restoreLease`.
 * @module
 */

import { checkMs, checkName, checkOwner } from "../validate.js";
import { isLeaseId } from "./renewal.js";

/** Which primitive issued a lease; `restoreLease` dispatches on it. */
export type LeaseKind =
  | "lock"
  | "fair-lock"
  | "fenced-lock"
  | "read-lock"
  | "write-lock"
  | "permit";

/**
 * Which primitive issued a lease: a serializable {@link LeaseKind}, or a lease on several locks
 * (which overrides `toJSON`).
 */
export type HostKind = LeaseKind | "multi-lock" | "redlock";

/** Every {@link LeaseKind}, for validation. */
export const LEASE_KINDS: readonly LeaseKind[] = [
  "lock",
  "fair-lock",
  "fenced-lock",
  "read-lock",
  "write-lock",
  "permit",
];

/** Plain-object form of a lease (`lease.toJSON()`), for `edgelock.restoreLease` elsewhere. */
export interface SerializedLease {
  v: 1;
  /** Which primitive issued the lease. */
  kind: LeaseKind;
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
  /** Permit ids (kind `"permit"`). */
  permitIds?: string[];
}

/**
 * Validates a serialized lease (object or its JSON string).
 * @param where the restoring function, named in the errors.
 * @throws TypeError for anything that is not a serialized lease.
 */
export function parseSerializedLease(input: unknown, where = "restoreLease"): SerializedLease {
  let value = input;
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      throw new TypeError(`${where}: the string is not JSON from lease.toJSON()`);
    }
  }
  if (typeof value !== "object" || value === null) {
    throw new TypeError(`${where}: expected the object returned by lease.toJSON()`);
  }
  const o = value as Partial<SerializedLease>;
  if (o.v !== 1 || !LEASE_KINDS.includes(o.kind as LeaseKind))
    throw new TypeError(`${where}: unknown lease format`);
  checkName(o.name, "lease.name");
  checkOwner(o.owner, "lease.owner");
  if (!isLeaseId(o.id)) throw new TypeError(`${where}: bad \`lease.id\``);
  checkMs(o.leaseTime, "lease.leaseTime", 1);
  if (typeof o.watchdog !== "boolean") throw new TypeError(`${where}: bad \`lease.watchdog\``);
  if (typeof o.expiresAt !== "number" || !Number.isFinite(o.expiresAt))
    throw new TypeError(`${where}: bad \`lease.expiresAt\``);
  if (o.epoch !== undefined && !(Number.isSafeInteger(o.epoch) && o.epoch >= 0))
    throw new TypeError(`${where}: bad \`lease.epoch\``);
  if (o.fencingToken !== undefined && !Number.isSafeInteger(o.fencingToken))
    throw new TypeError(`${where}: bad \`lease.fencingToken\``);
  if (
    o.permitIds !== undefined &&
    !(Array.isArray(o.permitIds) && o.permitIds.length > 0 && o.permitIds.every(isLeaseId))
  )
    throw new TypeError(`${where}: bad \`lease.permitIds\``);
  if (o.kind === "permit" && o.permitIds === undefined)
    throw new TypeError(`${where}: a permit lease needs \`lease.permitIds\``);
  return o as SerializedLease;
}

/**
 * {@link parseSerializedLease} for one primitive's entry, which holds the scripts of its own
 * kinds only: a lease another kind issued is refused too, before any request.
 * @param where the restoring function, named in the errors.
 * @param entry the entry (`edgelock/lock`), named in the errors.
 * @throws TypeError for anything that is not a serialized lease of one of `kinds`.
 */
export function parseLeaseOfKind<K extends LeaseKind>(
  input: unknown,
  kinds: readonly K[],
  where: string,
  entry: string,
): SerializedLease & { kind: K } {
  const s = parseSerializedLease(input, where);
  if (!(kinds as readonly LeaseKind[]).includes(s.kind)) {
    const own = kinds.map((k) => `"${k}"`).join(" and ");
    throw new TypeError(
      `${where}: a "${s.kind}" lease; ${entry} restores ${own} leases only (restore it with its own kind's entry, or EdgeLock#restoreLease)`,
    );
  }
  return s as SerializedLease & { kind: K };
}
