/**
 * The `LeaseKeeper` Durable Object: Redisson's lock watchdog for code whose invocation ends
 * before its lock should. Leases register over RPC (`keepAlive: { keeper, maxHoldTime }` on any
 * acquire); the object's alarm renews every due lease in one Redis request (Redisson's
 * LockRenewalScheduler batch) every `leaseTime / 3`, and forgets a lease when it is released
 * (`unregister`), found lost (the renewal script saw the owner gone) or `maxHoldTime` after its
 * registration, so a crashed owner's lock is free again within `maxHoldTime + leaseTime`, or
 * when a limit of the service refuses its renewal (`ServiceLimitError`: resending into it only
 * adds load; `status(id)` then says `"refused"` with the limit, and the lease's signal aborts).
 *
 * Durable Object facts this relies on: alarms are at-least-once and retried only when the handler
 * throws (6 times at most), so the handler catches everything and re-arms itself; state lives in
 * Durable Object storage and survives eviction; other RPCs can interleave while the alarm awaits
 * Redis, so storage is re-read after every such await.
 * @module
 */

import { DurableObject } from "cloudflare:workers";
import { Redis } from "@upstash/redis/cloudflare";
import { EdgeLockClient } from "../src/core.js";
import { type ServiceLimit, ServiceLimitError } from "../src/errors.js";
import type {
  KeeperLeaseKind,
  KeeperRegistration,
  KeeperReply,
  KeeperStatus,
} from "../src/keeper.js";
import {
  isClusterFlag,
  isLeaseId,
  renewalPeriod,
  renewalTimeout,
  retryDelay,
} from "../src/lease/renewal.js";
import { DEFAULT_REQUEST_TIMEOUT_MS, MIN_REQUEST_TIMEOUT_MS } from "../src/limits.js";
import { renewLeaseOf, renewLeasesOf } from "../src/renewers.js";
import { checkMs, checkName, checkOwner } from "../src/validate.js";

/** The bindings `LeaseKeeper` reads from its environment. */
export interface LeaseKeeperEnv {
  /** REST URL of the Upstash database (or any Upstash-compatible bridge). */
  UPSTASH_REDIS_REST_URL?: string;
  /** Its REST token: store it as a secret (`wrangler secret put`). */
  UPSTASH_REDIS_REST_TOKEN?: string;
  /**
   * `"true"` when that Redis is a Redis Cluster: the alarm's batched renewal then sends one
   * request per hash slot of the leases' names (EdgeLock's `cluster` option). Default: not.
   */
  EDGELOCK_REDIS_CLUSTER?: string;
}

/** Smallest `leaseTime` the keeper accepts, in ms: alarms are not meant to fire every few ms. */
export const KEEPER_MIN_LEASE_TIME_MS = 30;
/** Most leases renewed by one Redis request; more due leases take more requests. */
export const KEEPER_MAX_BATCH = 500;
/** Renewals of read/write holds and permits (one request each) in flight at once. */
export const KEEPER_PARALLEL_RENEWALS = 16;
/** How long the keeper remembers that a lease was lost or gave up, for `status(id)`, in ms. */
export const KEEPER_TOMBSTONE_MS = 60_000;
/** Re-arm delay after an unexpected failure (e.g. storage), when no lease says otherwise. */
const FALLBACK_RETRY_MS = 1_000;

/** One registered lease, as stored under `lease:<id>`. Times are epoch ms. */
interface Entry {
  name: string;
  owner: string;
  id: string;
  leaseTime: number;
  /** Registration time + maxHoldTime: no renewal after this. */
  deadline: number;
  /** When the last successful renewal was sent; null before the first one. */
  renewedAt: number | null;
  nextRenewAt: number;
  /** Failed renewals in a row. */
  failures: number;
  /** Absent for a reentrant, fair or fenced lock's hold (renewed in the batch). */
  kind?: KeeperLeaseKind;
  permitIds?: string[];
}

/** A lease the keeper stopped renewing for a reason the holder must hear, under `ended:<id>`. */
interface Tombstone {
  state: "lost" | "max-hold" | "refused";
  purgeAt: number;
  /** `"refused"`: the limit of the service, and its text. */
  limit?: ServiceLimit;
  error?: string;
}

const LEASE = "lease:";
const ENDED = "ended:";
const REGISTRATION_KEYS = ["name", "owner", "id", "leaseTime", "maxHoldTime", "kind", "permitIds"];
const KINDS: readonly KeeperLeaseKind[] = ["read-lock", "write-lock", "permit"];
/** Most permit ids one registration carries (a permit acquire takes at most 1 000). */
const MAX_PERMIT_IDS = 1_000;

/**
 * The LeaseKeeper Durable Object. Export it from your Worker's entry module and bind it (see
 * docs/cloudflare.md); leases use one instance (`"edgelock-lease-keeper"`) unless
 * `keepAlive.instance` names another, e.g. to spread many leases over several objects.
 *
 * RPC methods resolve to plain objects and never throw for bad input.
 */
export class LeaseKeeper extends DurableObject<LeaseKeeperEnv> {
  #running: Promise<void> | undefined;

  /**
   * Starts renewing a lease. Registering the same lease id again keeps its first registration
   * time (so `maxHoldTime` cannot be extended that way).
   * @returns `{ ok: true }`, or `{ ok: false, error }` for a bad registration (an option out of
   * range, `leaseTime` below 30 ms), missing Redis credentials, or a storage failure.
   */
  async register(registration: KeeperRegistration): Promise<KeeperReply> {
    const now = Date.now();
    let entry: Entry;
    try {
      entry = parseRegistration(registration, now);
    } catch (error) {
      return { ok: false, error: error instanceof Error ? error.message : "bad registration" };
    }
    if (!this.env.UPSTASH_REDIS_REST_URL || !this.env.UPSTASH_REDIS_REST_TOKEN) {
      return {
        ok: false,
        error:
          "UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN must be set for the LeaseKeeper",
      };
    }
    try {
      const storage = this.ctx.storage;
      const existing = await storage.get<Entry>(LEASE + entry.id);
      if (existing) entry.deadline = existing.deadline;
      await storage.delete(ENDED + entry.id);
      await storage.put(LEASE + entry.id, entry);
      const alarm = await storage.getAlarm();
      if (alarm === null || alarm > entry.nextRenewAt) {
        await storage.setAlarm(Math.max(entry.nextRenewAt, Date.now() + 1));
      }
      return { ok: true };
    } catch {
      return { ok: false, error: "LeaseKeeper storage failure" };
    }
  }

  /**
   * Stops renewing the lease with this id. Idempotent. A renewal already on its way to Redis
   * cannot revive a released lock: the renewal script only extends a lock whose owner field
   * still exists, and `lease.release()` unregisters before it releases.
   */
  async unregister(id: string): Promise<KeeperReply> {
    if (typeof id !== "string") return { ok: false, error: "`id` must be a string" };
    try {
      await this.ctx.storage.delete([LEASE + id, ENDED + id]);
      return { ok: true };
    } catch {
      return { ok: false, error: "LeaseKeeper storage failure" };
    }
  }

  /** What the keeper knows about the lease with this id. No Redis request. */
  async status(id: string): Promise<KeeperStatus> {
    if (typeof id !== "string") return { state: "unknown" };
    const storage = this.ctx.storage;
    const entry = await storage.get<Entry>(LEASE + id);
    if (entry) {
      const status: KeeperStatus = { state: "renewing", failures: entry.failures };
      if (entry.renewedAt !== null) status.expiresAt = entry.renewedAt + entry.leaseTime;
      return status;
    }
    const ended = await storage.get<Tombstone>(ENDED + id);
    if (!ended) return { state: "unknown" };
    const { purgeAt: _, ...status } = ended;
    return status;
  }

  /**
   * Renews the due leases, forgets the finished ones and re-arms for the earliest next renewal.
   * Never throws unless it cannot even re-arm (then the platform's retry is the last resort).
   * Two runs back to back (at-least-once delivery) renew once: the second finds nothing due.
   */
  override async alarm(): Promise<void> {
    const previous = this.#running;
    const run = (async () => {
      await previous?.catch(() => {});
      await this.#tick();
    })();
    this.#running = run;
    try {
      await run;
    } finally {
      if (this.#running === run) this.#running = undefined;
    }
  }

  async #tick(): Promise<void> {
    let retryIn = FALLBACK_RETRY_MS;
    try {
      const leases = await this.#leases();
      for (const entry of leases) retryIn = Math.min(retryIn, retryDelay(entry.leaseTime));
      await this.#renewDue(leases);
      await this.#rearm();
    } catch {
      await this.ctx.storage.setAlarm(Date.now() + retryIn);
    }
  }

  async #leases(): Promise<Entry[]> {
    return [...(await this.ctx.storage.list<Entry>({ prefix: LEASE })).values()];
  }

  async #renewDue(leases: Entry[]): Promise<void> {
    const now = Date.now();
    const due: Entry[] = [];
    for (const entry of leases) {
      if (now >= entry.deadline) await this.#end(entry.id, "max-hold", entry.leaseTime);
      // Leases due within half a period ride along: one request renews them all.
      else if (entry.nextRenewAt - now <= renewalPeriod(entry.leaseTime) / 2) due.push(entry);
    }
    // Locks sharing the reentrant lock's layout go in batches; other kinds one request each.
    const batched = due.filter((e) => e.kind === undefined);
    for (let i = 0; i < batched.length; i += KEEPER_MAX_BATCH) {
      await this.#renewBatch(batched.slice(i, i + KEEPER_MAX_BATCH));
    }
    const single = due.filter((e) => e.kind !== undefined);
    for (let i = 0; i < single.length; i += KEEPER_PARALLEL_RENEWALS) {
      await Promise.all(
        single.slice(i, i + KEEPER_PARALLEL_RENEWALS).map((e) => this.#renewOne(e)),
      );
    }
  }

  async #renewOne(sent: Entry): Promise<void> {
    const { kind, name, owner, leaseTime, permitIds } = sent;
    if (kind === undefined) return;
    await this.#record([sent], Date.now(), async () => [
      await renewLeaseOf(this.#edgelock(renewalTimeout(leaseTime)), {
        kind,
        name,
        owner,
        leaseTime,
        permitIds,
      }),
    ]);
  }

  async #renewBatch(batch: Entry[]): Promise<void> {
    // A hung renewal is abandoned at a sixth of the shortest lease, so it is retried in time.
    const timeout = Math.min(...batch.map((e) => renewalTimeout(e.leaseTime)));
    await this.#record(batch, Date.now(), () =>
      renewLeasesOf(
        this.#edgelock(timeout),
        batch.map(({ name, owner, leaseTime }) => ({ name, owner, leaseTime })),
      ),
    );
  }

  /**
   * Runs one renewal request for `batch` and records its outcome per lease: a limit of the
   * service ends every lease of the batch (resending into it only adds load).
   */
  async #record(batch: Entry[], sentAt: number, renew: () => Promise<boolean[]>): Promise<void> {
    let renewed: boolean[] | undefined;
    let refused: ServiceLimitError | undefined;
    try {
      renewed = await renew();
    } catch (error) {
      renewed = undefined;
      if (error instanceof ServiceLimitError) refused = error;
    }
    const storage = this.ctx.storage;
    for (const [i, sent] of batch.entries()) {
      // Re-read: an unregister may have landed while the request was in flight.
      const entry = await storage.get<Entry>(LEASE + sent.id);
      if (!entry) continue;
      if (refused) {
        await this.#end(entry.id, "refused", entry.leaseTime, {
          limit: refused.limit,
          error: refused.reply,
        });
      } else if (renewed === undefined) {
        entry.failures += 1;
        entry.nextRenewAt = Date.now() + retryDelay(entry.leaseTime);
        await storage.put(LEASE + entry.id, entry);
      } else if (renewed[i]) {
        entry.failures = 0;
        entry.renewedAt = sentAt;
        entry.nextRenewAt = sentAt + renewalPeriod(entry.leaseTime);
        await storage.put(LEASE + entry.id, entry);
      } else {
        await this.#end(entry.id, "lost", entry.leaseTime);
      }
    }
  }

  async #end(
    id: string,
    state: Tombstone["state"],
    leaseTime: number,
    refused?: { limit: ServiceLimit; error: string },
  ): Promise<void> {
    const storage = this.ctx.storage;
    const purgeAt = Date.now() + Math.max(KEEPER_TOMBSTONE_MS, leaseTime);
    await storage.put(ENDED + id, { state, purgeAt, ...refused } satisfies Tombstone);
    await storage.delete(LEASE + id);
  }

  /** Arms the alarm for the earliest renewal, deadline or tombstone purge; none: no alarm. */
  async #rearm(): Promise<void> {
    const storage = this.ctx.storage;
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    for (const entry of await this.#leases()) {
      next = Math.min(next, entry.nextRenewAt, entry.deadline);
    }
    const ended = await storage.list<Tombstone>({ prefix: ENDED });
    const purge: string[] = [];
    for (const [key, tombstone] of ended) {
      if (tombstone.purgeAt <= now) purge.push(key);
      else next = Math.min(next, tombstone.purgeAt);
    }
    if (purge.length > 0) await storage.delete(purge);
    // Re-arming at the current time from inside alarm() can stall: always strictly later.
    if (Number.isFinite(next)) await storage.setAlarm(Math.max(next, Date.now() + 1));
    else await storage.deleteAlarm();
  }

  /**
   * A client per renewal batch, with requests limited to `timeout` ms (at most the default):
   * credentials come from this object's environment.
   */
  #edgelock(timeout: number): EdgeLockClient {
    const redis = new Redis({
      url: this.env.UPSTASH_REDIS_REST_URL,
      token: this.env.UPSTASH_REDIS_REST_TOKEN,
      // Renewals are idempotent; the alarm retries a failed one itself, sooner than a period.
      retry: { retries: 1 },
      enableAutoPipelining: false,
    });
    return new EdgeLockClient({
      redis,
      cluster: isClusterFlag(this.env.EDGELOCK_REDIS_CLUSTER),
      requestTimeout: Math.max(
        MIN_REQUEST_TIMEOUT_MS,
        Math.min(DEFAULT_REQUEST_TIMEOUT_MS, timeout),
      ),
    });
  }
}

/** Validates a registration (it crossed an RPC boundary: trust nothing). */
function parseRegistration(input: unknown, now: number): Entry {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw new TypeError("registration must be an object");
  }
  const r = input as Record<string, unknown>;
  for (const key of Object.keys(r)) {
    if (!REGISTRATION_KEYS.includes(key))
      throw new TypeError(`unknown registration key \`${key}\``);
  }
  const name = checkName(r.name, "name");
  const owner = checkOwner(r.owner, "owner");
  if (!isLeaseId(r.id)) {
    throw new TypeError("`id` must be a lease id (32 hex characters)");
  }
  const leaseTime = checkMs(r.leaseTime, "leaseTime", KEEPER_MIN_LEASE_TIME_MS);
  const maxHoldTime = checkMs(r.maxHoldTime, "maxHoldTime", 1);
  const entry: Entry = {
    name,
    owner,
    id: r.id,
    leaseTime,
    deadline: now + maxHoldTime,
    renewedAt: null,
    nextRenewAt: now + renewalPeriod(leaseTime),
    failures: 0,
  };
  if (r.kind !== undefined) {
    if (!KINDS.includes(r.kind as KeeperLeaseKind)) {
      throw new TypeError(`\`kind\` must be one of ${KINDS.join(", ")}`);
    }
    entry.kind = r.kind as KeeperLeaseKind;
  }
  if (r.permitIds !== undefined || entry.kind === "permit") {
    const ids = r.permitIds;
    if (
      entry.kind !== "permit" ||
      !Array.isArray(ids) ||
      ids.length === 0 ||
      ids.length > MAX_PERMIT_IDS ||
      !ids.every(isLeaseId)
    ) {
      throw new TypeError(
        `\`permitIds\` (with \`kind: "permit"\` only) must be 1 to ${MAX_PERMIT_IDS} permit ids of 32 hex characters`,
      );
    }
    entry.permitIds = [...ids];
  }
  return entry;
}
