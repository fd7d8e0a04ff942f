/**
 * What the explorer needs of each lock kind: how a client acquires, where Redis keeps the
 * holds, and which keys may live without a TTL.
 */
import type { EdgeLock, Lease } from "../../src/index.js";
import type { RawRedis } from "../support/env.js";

/** The kinds the explorer drives. */
export const KINDS = ["lock", "fair-lock", "fenced-lock", "write-lock"] as const;
/** A kind the explorer drives. */
export type KindName = (typeof KINDS)[number];

/** Options of one acquire. */
export interface AcquireOptions {
  waitTime: number;
  leaseTime: number;
  owner?: string | undefined;
  signal: AbortSignal;
}

/** The holds Redis has on the name now, read behind the bridge's back. */
export interface RedisHolds {
  /** Owner → hold count. */
  holds: Map<string, number>;
  /** When the holds' key expires, epoch ms (`PEXPIRETIME`); -2 when absent, -1 without TTL. */
  expiresAt: number;
}

/** One kind, as the explorer drives and reads it. */
export interface KindSpec {
  readonly name: KindName;
  /** Whether leases carry fencing tokens that must grow. */
  readonly fenced: boolean;
  acquire(edgelock: EdgeLock, name: string, options: AcquireOptions): Promise<Lease | null>;
  /** The holds on `name` in Redis. */
  holds(raw: RawRedis, name: string): Promise<RedisHolds>;
  /** The keys of `name` documented to live without a TTL. */
  persistent(name: string): string[];
  /** The first registered waiter's entry, or `undefined` when none is registered. */
  firstWaiter(raw: RawRedis, name: string): Promise<string | undefined>;
}

const text = (value: unknown): string =>
  Buffer.isBuffer(value) ? value.toString("utf8") : String(value);

/** The owners of a lock HASH (Redisson's layout): every field but edgelock's own. */
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

const lockLike = (
  name: KindName,
  acquire: KindSpec["acquire"],
  extra: Partial<KindSpec> = {},
): KindSpec => ({
  name,
  fenced: false,
  acquire,
  holds: (raw, lock) => hashHolds(raw, lock),
  persistent: () => [],
  firstWaiter: (raw, lock) => firstOfZset(raw, `edgelock_waiting:{${lock}}`),
  ...extra,
});

/** Every kind, by name. */
export const SPECS: Record<KindName, KindSpec> = {
  lock: lockLike("lock", (e, n, o) => e.getLock(n).tryLock(o)),
  "fair-lock": lockLike("fair-lock", (e, n, o) => e.getFairLock(n).tryLock(o), {
    firstWaiter: async (raw, lock) => {
      const first = (await raw.lIndex(`redisson_lock_queue:{${lock}}`, 0)) as unknown;
      return first === null ? undefined : text(first);
    },
  }),
  "fenced-lock": lockLike("fenced-lock", (e, n, o) => e.getFencedLock(n).tryLock(o), {
    fenced: true,
    persistent: (lock) => [`redisson_lock_token:{${lock}}`],
  }),
  "write-lock": lockLike("write-lock", (e, n, o) => e.getReadWriteLock(n).writeLock().tryLock(o), {
    // A write hold is kept as `<owner>:write` in the read-write HASH.
    holds: async (raw, lock) => {
      const read = await hashHolds(raw, lock);
      const holds = new Map<string, number>();
      for (const [field, count] of read.holds) {
        holds.set(field.endsWith(":write") ? field.slice(0, -":write".length) : field, count);
      }
      return { holds, expiresAt: read.expiresAt };
    },
  }),
};
