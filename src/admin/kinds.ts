/**
 * What kind of primitive a name holds, read from its Redis layout, for the `edgelock` CLI and
 * the lock console (`edgelock/console`): each kind leaves a recognisable key type or helper key
 * (see each primitive's TSDoc for its keys). Detection is a handful of read-only commands, sent
 * together (one pipelined request with an auto-pipelining client), then one read of the value
 * for a hash or a string. Runtime-neutral: the console runs it in Workers. Each kind is read
 * and deleted through its own entry (`getLock` of `edgelock/lock`, ...), over the core client.
 * @module
 */

import type { EdgeLockClient } from "../core.js";
import type { Holder, Inspection } from "../inspect.js";
import { getCountDownLatch } from "../locks/count-down-latch/entry.js";
import { getFairLock } from "../locks/fair-lock/entry.js";
import { getFencedLock } from "../locks/fenced-lock/entry.js";
import { getLock } from "../locks/lock/entry.js";
import { getPermitExpirableSemaphore } from "../locks/permit-expirable-semaphore/entry.js";
import { getReadWriteLock } from "../locks/read-write-lock/entry.js";
import { getSemaphore } from "../locks/semaphore/entry.js";
import type { RedisLike } from "../transport/redis.js";
import {
  type QueuedWaiter,
  type RegisteredWaiter,
  readFairQueue,
  readLockWaiters,
  type Snapshot,
  type Waiters,
} from "./queues.js";

/**
 * The kinds the CLI tells apart, named as the package's entries and the primitives' own
 * `inspect()` name them (`edgelock/fair-lock`, `kind: "fair-lock"`), so `--kind` takes what
 * `inspect` reports. `cron-mark`: the lock the cron guard takes per scheduled time
 * (`<name>#<scheduledTime>`) to skip redeliveries; `webhook-mark`: the completion record of an
 * idempotency key (`lockWebhook`), `edgelock_done:{<key>}`.
 */
export const KINDS = [
  "lock",
  "fair-lock",
  "fenced-lock",
  "read-write-lock",
  "semaphore",
  "permit-expirable-semaphore",
  "count-down-latch",
  "cron-mark",
  "webhook-mark",
] as const;

/** One of {@link KINDS}. */
export type Kind = (typeof KINDS)[number];

/** Kinds that `unlock` deletes without `--kind`: the locks (a cron mark is a lock). */
export const LOCK_KINDS: readonly Kind[] = [
  "lock",
  "fair-lock",
  "fenced-lock",
  "read-write-lock",
  "cron-mark",
];

/**
 * Kinds whose keys can look exactly like those of the kind detected (the key): a fair lock
 * nobody waits on is stored as a lock, a permit-expirable semaphore with no permit taken as a
 * semaphore, a semaphore set by a Redisson client (no permits record) as a latch's count, and a
 * cron mark is a lock. `--kind` naming one of these is taken at its word.
 */
const LOOKS_LIKE: Partial<Record<Kind, readonly Kind[]>> = {
  lock: ["fair-lock"],
  "cron-mark": ["lock", "fair-lock"],
  semaphore: ["permit-expirable-semaphore"],
  "count-down-latch": ["semaphore", "permit-expirable-semaphore"],
};

/** True when a name detected as `stored` may be handled as `asked`. */
export function mayBe(stored: Kind, asked: Kind): boolean {
  return stored === asked || (LOOKS_LIKE[stored]?.includes(asked) ?? false);
}

/** Kinds `list` leaves out unless `--all`: the integrations' bookkeeping, not user locks. */
export const MARK_KINDS: readonly Kind[] = ["cron-mark", "webhook-mark"];

/**
 * What the CLI and the console read through: edgelock's scripts plus a few plain commands, made
 * from an `@upstash/redis` client by `adminRedis` (./redis.ts).
 */
export interface AdminRedis extends RedisLike {
  scan(
    cursor: string | number,
    options: { match: string; count: number },
  ): Promise<[string | number, unknown[]]>;
  type(key: string): Promise<string>;
  exists(key: string): Promise<number>;
  hget(key: string, field: string): Promise<unknown>;
  pttl(key: string): Promise<number>;
  del(key: string): Promise<number>;
  get(key: string): Promise<unknown>;
  /** The values of `fields` of the HASH `key`, in that order (null for a missing one). */
  hmget(key: string, fields: readonly string[]): Promise<unknown[]>;
  /** Read-only commands in one MULTI/EXEC: who waits on a lock (./queues.ts). */
  snapshot: Snapshot;
  /** The client edgelock's scripts go through, when not this object itself. */
  scripts?: RedisLike;
}

/** The name holds something no edgelock primitive stores (another Redis type, a non-count). */
export class ForeignKeyError extends Error {
  override readonly name = "ForeignKeyError";
}

/**
 * What the CLI prints (and the console shows) for one name: the primitive's own inspection, its `kind` in the CLI's
 * vocabulary (the same, but for the marks). A permit-expirable semaphore's holders are permits,
 * not owners: each is `{ id, ttl }`. `inspect` adds who waits: a fair lock's `queue`, and the
 * registered waiters (`waiting`) of the other locks.
 */
export type Found = Omit<Inspection, "kind" | "holders"> & {
  kind: Kind;
  holders: (Holder | { id: string; ttl: number })[];
  queue?: Waiters<QueuedWaiter>;
  waiting?: Waiters<RegisteredWaiter>;
} & Record<string, unknown>;

/** The completion record of an idempotency key (see `doneKey` in src/locks/idempotency/hold.ts). */
export const doneKey = (name: string) => `edgelock_done:{${name}}`;

/** The cron guard's mark names: `<name>#<scheduledTime in ms>`. */
const CRON_MARK = /#\d{10,}$/;

/**
 * The kind of primitive stored at `name`, or `null` when nothing is stored there.
 * A fair lock with no waiter queued, and a permit-expirable semaphore with no permit held, have
 * exactly the layout of a lock and of a semaphore: they are reported as such (and inspected
 * correctly as such). A Redisson semaphore never set through edgelock reads as a latch.
 */
export async function detectKind(redis: AdminRedis, name: string): Promise<Kind | null> {
  const [type, token, queue, waiters, timeouts, permits, done] = await Promise.all([
    redis.type(name),
    redis.exists(`redisson_lock_token:{${name}}`),
    redis.exists(`redisson_lock_queue:{${name}}`),
    redis.exists(`edgelock_waiters:{${name}}`),
    redis.exists(`{${name}}:timeout`),
    redis.exists(`edgelock_permits:{${name}}`),
    redis.exists(doneKey(name)),
  ]);
  if (type === "hash") {
    // A second request: HGET on a key of another type would fail the whole batch.
    const mode = await redis.hget(name, "mode");
    if (mode === "read" || mode === "write") return "read-write-lock";
    if (token) return "fenced-lock";
    if (queue || waiters) return "fair-lock";
    return CRON_MARK.test(name) ? "cron-mark" : "lock";
  }
  if (type === "string") {
    if (timeouts) return "permit-expirable-semaphore";
    if (permits) return "semaphore";
    // Redisson's latch layout: a bare integer count. Any other string is not ours.
    if (/^-?\d{1,16}$/.test(String(await redis.get(name)))) return "count-down-latch";
    throw new ForeignKeyError(`"${name}" holds a string that is not a count: not an edgelock key`);
  }
  if (type === "none") {
    if (done) return "webhook-mark";
    if (timeouts) return "permit-expirable-semaphore";
    if (token) return "fenced-lock";
    return null;
  }
  throw new ForeignKeyError(`"${name}" holds a Redis ${type}, which no edgelock primitive uses`);
}

/**
 * Inspects `name` as `kind`, in one request (two for a webhook mark); with `waiters`, a lock's
 * waiters too, in one more request sent at the same time.
 */
export async function inspectAs(
  edgelock: EdgeLockClient,
  redis: AdminRedis,
  name: string,
  kind: Kind,
  waiters = false,
): Promise<Found> {
  const [inspected, waiting] = await Promise.all([
    inspection(edgelock, redis, name, kind),
    waiters ? waitersOf(redis, name, kind) : {},
  ]);
  const seen = inspected as Inspection & Record<string, unknown>;
  const holders =
    kind === "permit-expirable-semaphore"
      ? (seen.holders as unknown as { id: string; ttl: number }[]).map(({ id, ttl }) => ({
          id,
          ttl,
        }))
      : seen.holders;
  return { ...seen, kind, holders, ...waiting };
}

/** Who waits on `name` as `kind`: nothing for the kinds whose inspection counts its waiters. */
async function waitersOf(
  redis: AdminRedis,
  name: string,
  kind: Kind,
): Promise<Pick<Found, "queue" | "waiting">> {
  switch (kind) {
    case "fair-lock":
      return { queue: await readFairQueue(redis.snapshot, name) };
    case "lock":
    case "fenced-lock":
    case "read-write-lock":
    case "cron-mark":
      return { waiting: await readLockWaiters(redis.snapshot, name) };
    default:
      return {};
  }
}

function inspection(
  edgelock: EdgeLockClient,
  redis: AdminRedis,
  name: string,
  kind: Kind,
): Promise<Inspection> {
  switch (kind) {
    case "lock":
    case "cron-mark":
      return getLock(edgelock, name).inspect();
    case "fair-lock":
      return getFairLock(edgelock, name).inspect();
    case "fenced-lock":
      return getFencedLock(edgelock, name).inspect();
    case "read-write-lock":
      return getReadWriteLock(edgelock, name).inspect();
    case "semaphore":
      return getSemaphore(edgelock, name).inspect();
    case "permit-expirable-semaphore":
      return getPermitExpirableSemaphore(edgelock, name).inspect();
    case "count-down-latch":
      return getCountDownLatch(edgelock, name).inspect();
    case "webhook-mark":
      return redis
        .pttl(doneKey(name))
        .then((ttl): Inspection => ({ kind: "webhook-mark", name, ttl, holders: [] }));
  }
}

/** True when the primitive holds state worth listing (held, set, or a mark that lives). */
export function inUse(found: Found): boolean {
  if (found.holders.length > 0) return true;
  if (found.kind === "semaphore" || found.kind === "permit-expirable-semaphore") {
    return found.exists === true;
  }
  if (found.kind === "count-down-latch") return found.ttl !== -2;
  if (found.kind === "webhook-mark") return found.ttl !== -2;
  return false;
}

/**
 * Deletes `name` as `kind` whatever its holders or waiters (Redisson's forceUnlock / delete;
 * waiters are woken as by a release). One request.
 * @returns true when something was deleted.
 */
export async function deleteAs(
  edgelock: EdgeLockClient,
  redis: AdminRedis,
  name: string,
  kind: Kind,
): Promise<boolean> {
  switch (kind) {
    case "lock":
    case "cron-mark":
      return getLock(edgelock, name).forceUnlock();
    case "fair-lock":
      return getFairLock(edgelock, name).forceUnlock();
    case "fenced-lock":
      return getFencedLock(edgelock, name).forceUnlock();
    case "read-write-lock": {
      const rw = getReadWriteLock(edgelock, name);
      const { mode } = await rw.inspect();
      if (mode === null) return false;
      return (mode === "read" ? rw.readLock() : rw.writeLock()).forceUnlock();
    }
    case "semaphore":
      return getSemaphore(edgelock, name).delete();
    case "permit-expirable-semaphore":
      return getPermitExpirableSemaphore(edgelock, name).delete();
    case "count-down-latch":
      return getCountDownLatch(edgelock, name).delete();
    case "webhook-mark":
      return (await redis.del(doneKey(name))) > 0;
  }
}

/**
 * True for a key that may be a primitive's name: a valid name (no `{`/`}`, which also leaves
 * out Redisson's `redisson_*:{name}` and edgelock's `edgelock_*:{name}` helper keys) that is no
 * helper key of either.
 */
export function isCandidate(name: string): boolean {
  return (
    name.length > 0 &&
    name.length <= 512 &&
    !/[{}]/.test(name) &&
    !name.startsWith("edgelock_") &&
    !name.startsWith("redisson_")
  );
}

/** How the kinds read in text output. */
export const KIND_LABEL: Record<Kind, string> = {
  lock: "lock",
  "fair-lock": "fair lock",
  "fenced-lock": "fenced lock",
  "read-write-lock": "read-write lock",
  semaphore: "semaphore",
  "permit-expirable-semaphore": "permit-expirable semaphore",
  "count-down-latch": "count-down latch",
  "cron-mark": "cron mark",
  "webhook-mark": "webhook mark",
};
