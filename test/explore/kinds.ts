/**
 * What the explorer needs of each kind: how a client acquires, where Redis keeps the holds or
 * the count, what a waiting call can have now (liveness), and which keys may live without a
 * TTL.
 */
import type { EdgeLock, Lease, SemaphorePermits } from "../../src/index.js";
import type { RawRedis } from "../support/env.js";

/** The kinds the explorer drives. */
export const KINDS = [
  "lock",
  "fair-lock",
  "fenced-lock",
  "write-lock",
  "read-write-lock",
  "semaphore",
  "permit-expirable-semaphore",
  "count-down-latch",
] as const;
/** A kind the explorer drives. */
export type KindName = (typeof KINDS)[number];

/**
 * How a kind is modelled: `lock` exclusive holds (read holds shared among themselves) on a
 * HASH; `semaphore` permits without a lease; `permits` permits with leases; `latch` a count.
 */
export type Family = "lock" | "semaphore" | "permits" | "latch";

/** Which side of a read-write lock a hold is on (`write` for every other lock). */
export type Mode = "read" | "write";

/** Options of one acquire. */
export interface AcquireOptions {
  waitTime: number;
  leaseTime: number;
  /** Permits to take (semaphores). */
  permits: number;
  mode: Mode;
  owner?: string | undefined;
  signal: AbortSignal;
}

/** What an acquire gives: a lease, or a plain semaphore's permit handle. */
export type Held = Lease | SemaphorePermits;

/** The holds Redis has on the name now, read behind the bridge's back. */
export interface RedisHolds {
  /** HASH field (`<owner>`, a writer's `<owner>:write`) → hold count. */
  holds: Map<string, number>;
  /** When the holds' key expires, epoch ms (`PEXPIRETIME`); -2 when absent, -1 without TTL. */
  expiresAt: number;
}

/** One kind, as the explorer drives and reads it. */
export interface KindSpec {
  readonly name: KindName;
  readonly family: Family;
  /** Whether leases carry fencing tokens that must grow. */
  readonly fenced: boolean;
  /** The sides a client may acquire (a read-write lock: both). */
  readonly modes: readonly Mode[];
  /** Permits set, or the latch's count, when a run starts (0: nothing set). */
  readonly initial: number;
  acquire(edgelock: EdgeLock, name: string, options: AcquireOptions): Promise<Held | null>;
  /** The HASH field that keeps `owner`'s holds of `mode` (lock family). */
  field(owner: string, mode: Mode): string;
  /** The holds on `name` in Redis (lock family). */
  holds(raw: RawRedis, name: string): Promise<RedisHolds>;
  /** The keys of `name` documented to live without a TTL. */
  persistent(name: string): string[];
  /** The first registered waiter's entry, or `undefined` when none is registered. */
  firstWaiter(raw: RawRedis, name: string): Promise<string | undefined>;
  /**
   * What a waiting call could have now, for liveness: permits available (a lapsed permit
   * lease counts), or for a lock or latch 1 when free (no key) and 0 otherwise.
   */
  free(raw: RawRedis, name: string, now: number): Promise<number>;
}

export const text = (value: unknown): string =>
  Buffer.isBuffer(value) ? value.toString("utf8") : String(value);

/** The hold fields of a lock HASH (Redisson's layout): every field but edgelock's own. */
async function hashHolds(raw: RawRedis, key: string): Promise<RedisHolds> {
  const [fields, expiresAt] = await Promise.all([
    raw.hGetAll(key) as Promise<Record<string, unknown>>,
    raw.sendCommand(["PEXPIRETIME", key]) as Promise<number>,
  ]);
  const holds = new Map<string, number>();
  for (const [field, value] of Object.entries(fields)) {
    if (field.startsWith("edgelock:") || field === "mode") continue;
    const count = Number(text(value));
    if (Number.isFinite(count)) holds.set(field, count);
  }
  return { holds, expiresAt: Number(expiresAt) };
}

async function firstOfZset(raw: RawRedis, key: string): Promise<string | undefined> {
  const [first] = (await raw.zRange(key, 0, 0)) as unknown[];
  return first === undefined ? undefined : text(first);
}

/** A number kept as a STRING (a semaphore's available permits, a latch's count); 0 absent. */
export async function counter(raw: RawRedis, key: string): Promise<number> {
  const value = (await raw.get(key)) as unknown;
  return value === null ? 0 : Number(text(value));
}

const waiting = (name: string) => `edgelock_waiting:{${name}}`;
const absent = async (raw: RawRedis, name: string) => ((await raw.exists(name)) === 1 ? 0 : 1);

const lockLike = (
  name: KindName,
  acquire: KindSpec["acquire"],
  extra: Partial<KindSpec> = {},
): KindSpec => ({
  name,
  family: "lock",
  fenced: false,
  modes: ["write"],
  initial: 0,
  acquire,
  field: (owner) => owner,
  holds: (raw, lock) => hashHolds(raw, lock),
  persistent: () => [],
  firstWaiter: (raw, lock) => firstOfZset(raw, waiting(lock)),
  free: absent,
  ...extra,
});

const noHolds: KindSpec["holds"] = async () => ({ holds: new Map(), expiresAt: -2 });

/** The options of a lock's `tryLock`. */
const lockOptions = ({ waitTime, leaseTime, owner, signal }: AcquireOptions) => ({
  waitTime,
  leaseTime,
  owner,
  signal,
});

/** Every kind, by name. */
export const SPECS: Record<KindName, KindSpec> = {
  lock: lockLike("lock", (e, n, o) => e.getLock(n).tryLock(lockOptions(o))),
  "fair-lock": lockLike("fair-lock", (e, n, o) => e.getFairLock(n).tryLock(lockOptions(o)), {
    firstWaiter: async (raw, lock) => {
      const first = (await raw.lIndex(`redisson_lock_queue:{${lock}}`, 0)) as unknown;
      return first === null ? undefined : text(first);
    },
  }),
  "fenced-lock": lockLike("fenced-lock", (e, n, o) => e.getFencedLock(n).tryLock(lockOptions(o)), {
    fenced: true,
    persistent: (lock) => [`redisson_lock_token:{${lock}}`],
  }),
  // Write holds only: the read-write lock's write side as an exclusive lock. A write hold is
  // kept as `<owner>:write` in the read-write HASH.
  "write-lock": lockLike(
    "write-lock",
    (e, n, o) => e.getReadWriteLock(n).writeLock().tryLock(lockOptions(o)),
    {
      field: (owner) => `${owner}:write`,
    },
  ),
  // Readers and writers: readers share, a writer excludes every other owner.
  "read-write-lock": lockLike(
    "read-write-lock",
    (e, n, o) => {
      const rw = e.getReadWriteLock(n);
      return (o.mode === "read" ? rw.readLock() : rw.writeLock()).tryLock(lockOptions(o));
    },
    {
      modes: ["read", "write"],
      field: (owner, mode) => (mode === "read" ? owner : `${owner}:write`),
    },
  ),
  semaphore: {
    name: "semaphore",
    family: "semaphore",
    fenced: false,
    modes: ["write"],
    initial: 2,
    acquire: (e, n, o) =>
      e.getSemaphore(n).tryAcquire({ waitTime: o.waitTime, permits: o.permits, signal: o.signal }),
    field: (owner) => owner,
    holds: noHolds,
    // The permits (Redisson's STRING), the permits set and edgelock's taken count, all kept
    // for as long as the semaphore is (docs/semaphores-and-latch.md).
    persistent: (n) => [n, `edgelock_permits:{${n}}`, `edgelock_taken:{${n}}`],
    firstWaiter: (raw, n) => firstOfZset(raw, waiting(n)),
    free: (raw, n) => counter(raw, n),
  },
  "permit-expirable-semaphore": {
    name: "permit-expirable-semaphore",
    family: "permits",
    fenced: false,
    modes: ["write"],
    initial: 2,
    acquire: (e, n, o) =>
      e.getPermitExpirableSemaphore(n).tryAcquire({
        waitTime: o.waitTime,
        leaseTime: o.leaseTime,
        permits: o.permits,
        owner: o.owner,
        signal: o.signal,
      }),
    field: (owner) => owner,
    holds: noHolds,
    // The available permits, the permit leases (Redisson's layout, no TTL) and the permits set.
    persistent: (n) => [n, `{${n}}:timeout`, `edgelock_permits:{${n}}`],
    firstWaiter: (raw, n) => firstOfZset(raw, waiting(n)),
    free: async (raw, n, now) => {
      const [available, lapsed] = await Promise.all([
        counter(raw, n),
        raw.zCount(`{${n}}:timeout`, "-inf", now) as Promise<number>,
      ]);
      return available + Number(lapsed);
    },
  },
  "count-down-latch": {
    name: "count-down-latch",
    family: "latch",
    fenced: false,
    modes: ["write"],
    initial: 2,
    acquire: async () => null,
    field: (owner) => owner,
    holds: noHolds,
    // The count is Redisson's STRING, without a TTL.
    persistent: (n) => [n],
    firstWaiter: (raw, n) => firstOfZset(raw, waiting(n)),
    free: absent,
  },
};
