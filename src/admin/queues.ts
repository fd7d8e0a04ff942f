/**
 * Who waits on a primitive, for `edgelock inspect` and the lock console (`edgelock/console`):
 * the fair lock's queue (Redisson's layout plus edgelock's registry of its own queued owners,
 * lua/lib/fair.lua), the registry of waiters of the locks kept in a HASH and of the latch
 * (lua/lib/wake.lua, lua/lib/reentrant.lua), and the semaphores' registry with the permits each
 * waiter asked to be handed (lua/lib/permit-hand-off.lua). Each is read in one MULTI/EXEC with
 * the server's clock, so the order and the times belong to one instant. Everything read here was
 * written by scripts that change over time, or by Redisson clients: an entry that does not parse
 * is shown as it is, never an error. Runtime-neutral: the console runs it in Workers.
 * @module
 */

/** The read-only commands sent in one MULTI/EXEC (see `AdminRedis.snapshot`). */
export type SnapshotRead =
  | readonly ["lrange", string, number, number]
  | readonly ["llen", string]
  | readonly ["zrange-withscores", string, number, number]
  | readonly ["zcard", string]
  | readonly ["hgetall", string]
  | readonly ["time"];

/** Runs `reads` in one MULTI/EXEC; their replies, in order. */
export type Snapshot = (reads: readonly SnapshotRead[]) => Promise<unknown[]>;

/** Most waiters `inspect` (and the console) lists of one name; it says how many more there are. */
export const MAX_LISTED_WAITERS = 100;

/** One owner in a fair lock's queue, in the order the lock goes to them. */
export interface QueuedWaiter {
  /** The owner id that waits (`<clientId>:<taskId>`, or a Redisson client's `<uuid>:<threadId>`). */
  owner: string;
  /** The edgelock wait it belongs to (`<client>:<wait>`); null for a Redisson client's waiter. */
  waiter: string | null;
  /** True when no edgelock client queued it: a Redisson client, woken on Redisson's channel. */
  redisson: boolean;
  /**
   * Ms until its place lapses unless it comes back (≤ 0: lapsed, dropped by the next attempt on
   * the lock); null when no time is recorded for it.
   */
  ttl: number | null;
}

/** One registered waiter of a lock kept in a HASH, in the order releases wake them. */
export interface RegisteredWaiter {
  /** The edgelock wait (`<client>:<wait>`). */
  waiter: string;
  /** The owner a release hands the lock to; null when the waiter asked only to be woken. */
  owner: string | null;
  /** The lease in ms a hand-off gives it; null when it asked only to be woken. */
  leaseTime: number | null;
  /** Ms until its registration lapses unless it comes back; null when none is recorded. */
  ttl: number | null;
  /** The entry as stored, when its format is not one known here. */
  entry?: string;
}

/** A list of waiters as `inspect` prints it: the first {@link MAX_LISTED_WAITERS}, and the count. */
export interface Waiters<T> {
  /** How many there are. */
  count: number;
  /** The first ones, in order. */
  entries: T[];
}

/**
 * The fair lock's queue in the order the lock goes to it: Redisson's LIST of owners, each with
 * its slot from edgelock's HASH of its own queued owners (value `<waiter>:<ms its slot lapses>`,
 * or a bare waiter id whose slot is its score in Redisson's ZSET) or, for an owner edgelock did
 * not queue (a Redisson client), its score in Redisson's ZSET.
 */
export async function readFairQueue(
  snapshot: Snapshot,
  name: string,
  limit = MAX_LISTED_WAITERS,
): Promise<Waiters<QueuedWaiter>> {
  const [list, length, slots, ours, time] = await snapshot([
    ["lrange", `redisson_lock_queue:{${name}}`, 0, limit - 1],
    ["llen", `redisson_lock_queue:{${name}}`],
    // The ZSET holds only queued owners: bounded by the LIST (Redisson's scripts keep them equal).
    ["zrange-withscores", `redisson_lock_timeout:{${name}}`, 0, -1],
    ["hgetall", `edgelock_waiters:{${name}}`],
    ["time"],
  ]);
  const now = serverMs(time);
  const scores = pairs(slots);
  const registry = pairs(ours);
  const entries = strings(list).map((owner): QueuedWaiter => {
    const mine = registry.get(owner);
    if (mine === undefined) {
      return { owner, waiter: null, redisson: true, ttl: until(scores.get(owner), now) };
    }
    // `<waiter>:<lapses>`; a waiter id holds colons itself, so the time is the last field.
    const recorded = /^(.*):(\d+)$/.exec(mine);
    const waiter = recorded?.[1] ?? mine;
    const lapses = recorded?.[2] ?? scores.get(owner);
    return { owner, waiter, redisson: false, ttl: until(lapses, now) };
  });
  return { count: Number(length), entries };
}

/**
 * The registered waiters of a lock kept in a HASH (lock, fenced lock, read-write lock), in the
 * order releases wake them or hand them the lock: the ZSET `edgelock_waiting:{<name>}`, scored
 * by the server time (ms) each registration lapses. The one place that knows the registry's
 * layout: {@link parseRegistration} reads each entry.
 */
export async function readLockWaiters(
  snapshot: Snapshot,
  name: string,
  limit = MAX_LISTED_WAITERS,
): Promise<Waiters<RegisteredWaiter>> {
  const [members, total, time] = await snapshot([
    ["zrange-withscores", `edgelock_waiting:{${name}}`, 0, limit - 1],
    ["zcard", `edgelock_waiting:{${name}}`],
    ["time"],
  ]);
  const now = serverMs(time);
  const entries = [...pairs(members)].map(([member, score]) =>
    parseRegistration(member, score, now),
  );
  return { count: Number(total), entries };
}

/**
 * One registry entry: `<waiter>` (a waiter that asked only to be woken) or
 * `<waiter>|<leaseMs>|<owner>` (one a release hands the lock to; the owner may hold `|`), as
 * lua/lib/wake.lua writes them; `score`: the server time in ms the registration lapses.
 * Anything else is kept whole in `entry`, with the part before its first `|` as the waiter, as
 * the scripts read it.
 */
export function parseRegistration(member: string, score: string, nowMs: number): RegisteredWaiter {
  const ttl = until(score, nowMs);
  const grant = /^([^|]+)\|(\d+)\|(.+)$/.exec(member);
  if (grant) {
    const [, waiter = "", lease = "", owner = ""] = grant;
    return { waiter, owner, leaseTime: Number(lease), ttl };
  }
  if (/^[^|]+$/.test(member)) return { waiter: member, owner: null, leaseTime: null, ttl };
  return { waiter: member.split("|")[0] ?? "", owner: null, leaseTime: null, ttl, entry: member };
}

/** One registered waiter of a semaphore, in the order releases serve them. */
export interface SemaphoreWaiter {
  /** The edgelock wait (`<client>:<wait>`). */
  waiter: string;
  /**
   * The permits a release hands it at once; null when it asked only to be woken (its client
   * cannot hear a hand-off) or its grant is not in a format known here.
   */
  permits: number | null;
  /**
   * A permit-expirable semaphore's waiter: the lease in ms handed permits start with (at most
   * the claim window; the waiter then holds them for its own lease); else null.
   */
  leaseTime: number | null;
  /** Ms until its registration lapses unless it comes back; null when none is recorded. */
  ttl: number | null;
}

/**
 * The registered waiters of a semaphore (either kind), in the order releases serve them: the
 * ZSET `edgelock_waiting:{<name>}` (scored by the server time in ms each registration lapses)
 * and, beside it, the grants of those that asked for a hand-off, HASH
 * `edgelock_waiting:{<name>}:grant`, waiter -> `<permits>|<request id>[|<lease ms>]`.
 */
export async function readSemaphoreWaiters(
  snapshot: Snapshot,
  name: string,
  limit = MAX_LISTED_WAITERS,
): Promise<Waiters<SemaphoreWaiter>> {
  const [members, total, grants, time] = await snapshot([
    ["zrange-withscores", `edgelock_waiting:{${name}}`, 0, limit - 1],
    ["zcard", `edgelock_waiting:{${name}}`],
    // Bounded by the ZSET: a release removes a waiter's grant with its registration.
    ["hgetall", `edgelock_waiting:{${name}}:grant`],
    ["time"],
  ]);
  const now = serverMs(time);
  const asked = pairs(grants);
  const entries = [...pairs(members)].map(([waiter, score]): SemaphoreWaiter => {
    const grant = /^(\d+)\|[^|]+(?:\|(\d+))?$/.exec(asked.get(waiter) ?? "");
    return {
      waiter,
      permits: grant ? Number(grant[1]) : null,
      leaseTime: grant?.[2] === undefined ? null : Number(grant[2]),
      ttl: until(score, now),
    };
  });
  return { count: Number(total), entries };
}

/** The server time in ms from TIME's `[seconds, microseconds]` (NaN when unreadable). */
function serverMs(time: unknown): number {
  const [s, us] = Array.isArray(time) ? time.map(Number) : [];
  return (s ?? Number.NaN) * 1000 + Math.floor((us ?? Number.NaN) / 1000);
}

/** Ms from `now` to `at` (a server time in ms, as stored); null when either is not a number. */
function until(at: string | undefined, now: number): number | null {
  const ms = Number(at ?? Number.NaN) - now;
  return Number.isFinite(ms) ? Math.round(ms) : null;
}

/** A reply that is a list of strings (LRANGE), as strings. */
function strings(reply: unknown): string[] {
  return Array.isArray(reply) ? reply.map(String) : [];
}

/**
 * A reply of pairs (HGETALL, ZRANGE WITHSCORES) as a Map: flat `[k1, v1, k2, v2, ...]` as Redis
 * sends it, or the object `@upstash/redis` makes of an HGETALL when it decodes replies.
 */
function pairs(reply: unknown): Map<string, string> {
  const map = new Map<string, string>();
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) map.set(String(reply[i]), String(reply[i + 1]));
  } else if (reply !== null && typeof reply === "object") {
    for (const [k, v] of Object.entries(reply)) map.set(k, String(v));
  }
  return map;
}
