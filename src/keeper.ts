/**
 * The client side of the `LeaseKeeper` Durable Object (exported from `edgelock/cloudflare`),
 * typed structurally so this runtime-neutral module needs no Cloudflare types. A Durable Object
 * namespace bound to `LeaseKeeper` fits {@link LeaseKeeperBinding} as it is.
 * @module
 */

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
}

/** Plain result of a keeper RPC call (classes do not cross the Durable Object boundary). */
export interface KeeperReply {
  ok: boolean;
  /** Scrubbed reason when `ok` is false. */
  error?: string;
}

/** RPC surface of a `LeaseKeeper` stub. */
export interface LeaseKeeperStub {
  register(registration: KeeperRegistration): Promise<KeeperReply>;
  unregister(id: string): Promise<KeeperReply>;
}

/** A Durable Object namespace bound to `LeaseKeeper` (e.g. `env.LEASE_KEEPER`). */
export interface LeaseKeeperBinding {
  getByName(name: string): LeaseKeeperStub;
}

/** Name of the keeper instance leases register with unless `keepAlive.instance` says otherwise. */
export const DEFAULT_KEEPER_INSTANCE = "edgelock-lease-keeper";
