/**
 * The client side of the `LeaseKeeper` Durable Object (exported from `edgelock/cloudflare`),
 * typed structurally so this runtime-neutral module needs no Cloudflare types. A Durable Object
 * namespace bound to `LeaseKeeper` fits {@link LeaseKeeperBinding} as it is.
 * @module
 */
import type { ServiceLimit } from "./errors.js";

/** What the keeper needs to renew one lease until release, loss or `maxHoldTime`. */
export interface KeeperRegistration {
  /** Lock name. */
  name: string;
  /** Owner field stored in Redis. */
  owner: string;
  /** Lease id (replay latch id). */
  id: string;
  /** TTL applied at every renewal, in ms; renewals run every `leaseTime / 3`. */
  leaseTime: number;
  /** Give up renewing this long after registration, in ms. */
  maxHoldTime: number;
  /**
   * What the lease holds when it is not a reentrant, fair or fenced lock's hold (those share one
   * batched renewal): a read or write hold of a read-write lock, or permits of a
   * permit-expirable semaphore (`permitIds`). Renewed with one request each.
   */
  kind?: KeeperLeaseKind;
  /** With `kind: "permit"`: the permit ids (32 hex characters each, 1 to 1 000). */
  permitIds?: string[];
}

/** Lease kinds a keeper renews with a request of their own (see {@link KeeperRegistration}). */
export type KeeperLeaseKind = "read-lock" | "write-lock" | "permit";

/** Plain result of a keeper RPC call (classes do not cross the Durable Object boundary). */
export interface KeeperReply {
  ok: boolean;
  /** Scrubbed reason when `ok` is false. */
  error?: string;
}

/**
 * What the keeper knows about one lease, from `status(id)`:
 * - `"renewing"`: registered; its alarm renews the lease every `leaseTime / 3`;
 * - `"lost"`: a renewal found the owner no longer holding the lock; renewals stopped;
 * - `"max-hold"`: `maxHoldTime` ran out; renewals stopped, the lock expires within `leaseTime`;
 * - `"refused"`: a limit of the service refused a renewal (`limit`, and its text in `error`);
 *   renewals stopped, the lock expires within `leaseTime`;
 * - `"unknown"`: not registered (never, unregistered, or forgotten a while after it ended).
 */
export interface KeeperStatus {
  state: "renewing" | "lost" | "max-hold" | "refused" | "unknown";
  /** `"refused"` only: which limit of the service refused the renewal. */
  limit?: ServiceLimit;
  /** `"refused"` only: the service's error text (scrubbed). */
  error?: string;
  /**
   * `"renewing"` only, once the keeper renewed the lease: conservative expiry of the lock
   * (epoch ms), measured from when its last successful renewal was sent.
   */
  expiresAt?: number;
  /** `"renewing"` only: renewals that failed in a row (e.g. Redis unreachable); 0 when healthy. */
  failures?: number;
}

/** RPC surface of a `LeaseKeeper` stub. Every method resolves to a plain object. */
export interface LeaseKeeperStub {
  /** Starts renewing a lease; `{ ok: false, error }` for a bad registration. */
  register(registration: KeeperRegistration): Promise<KeeperReply>;
  /** Stops renewing the lease with this id (idempotent). */
  unregister(id: string): Promise<KeeperReply>;
  /** What the keeper knows about the lease with this id; no Redis request. */
  status(id: string): Promise<KeeperStatus>;
}

/** A Durable Object namespace bound to `LeaseKeeper` (e.g. `env.LEASE_KEEPER`). */
export interface LeaseKeeperBinding {
  getByName(name: string): LeaseKeeperStub;
}

/** Name of the keeper instance leases register with unless `keepAlive.instance` says otherwise. */
export const DEFAULT_KEEPER_INSTANCE = "edgelock-lease-keeper";
