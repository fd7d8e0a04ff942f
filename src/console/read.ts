/**
 * What one refresh of the lock console reads: the names it was given and those a bounded SCAN
 * finds, each detected and inspected through the admin readers the CLI uses (src/admin/), with
 * every command it sends counted as billed. Runtime-neutral.
 * @module
 */

import {
  type AdminRedis,
  detectKind,
  ForeignKeyError,
  type Found,
  inspectAs,
  isCandidate,
  type Kind,
  MARK_KINDS,
} from "../admin/kinds.js";
import {
  readLockWaiters,
  readSemaphoreWaiters,
  type SemaphoreWaiter,
  type Waiters,
} from "../admin/queues.js";
import type { EdgeLockClient } from "../core.js";

/** The scan a refresh makes, its bounds resolved. */
export interface ScanBounds {
  /** The SCAN `MATCH` glob. */
  match: string;
  /** Keys asked of Redis per SCAN call (`COUNT`). */
  count: number;
  /** Most SCAN calls per refresh. */
  maxCalls: number;
  /** Most keys the scan reads (detects the kind of) per refresh. */
  maxKeys: number;
}

/** How far the scan of one refresh went. */
export interface ScanReport extends ScanBounds {
  /** SCAN calls made. */
  calls: number;
  /** Keys the calls returned. */
  keys: number;
  /** Keys read: their kind detected (7 or 8 billed commands each). */
  read: number;
  /** True when the whole keyspace was walked (the cursor came back to 0). */
  complete: boolean;
  /** What stopped it before the end: the bound on calls or on keys read. */
  stoppedBy: "calls" | "keys" | null;
  /** Keys that matched but hold no edgelock primitive (another type, a non-count string). */
  foreign: number;
  /** Marks left out: the cron guard's per-run locks (`<name>#<time>`). */
  marks: number;
  /** The error that ended the scan, when one did. */
  error: string | null;
}

/** One name as the page shows it. */
export interface NameView {
  name: string;
  /** Where the name came from. */
  source: "given" | "scan";
  /** The kind its keys show; null when nothing is stored under it. */
  kind: Kind | null;
  /** The primitive's inspection, with who waits on a lock; absent when nothing is stored. */
  found?: Found;
  /**
   * The incarnation of a lock (`lease.epoch` of the leases taken in it, as a decimal string);
   * null when unknown (a lock a Redisson client made, or none).
   */
  epoch?: string | null;
  /** The fencing token the fenced lock's holder was granted (null: none recorded). */
  token?: number | null;
  /** A semaphore's or a latch's registered waiters, in the order they are served. */
  registered?: Waiters<SemaphoreWaiter>;
  /** Why the name could not be read (a transport error's message, or not an edgelock key). */
  error?: string;
}

/** What one refresh read, and what it cost. */
export interface Refresh {
  names: NameView[];
  /** The scan's report; null when the console scans nothing. */
  scan: ScanReport | null;
  /** Commands billed for the refresh, as Redis counts them (scripts: every call inside). */
  billed: number;
  /** Wall-clock ms the refresh took. */
  durationMs: number;
}

/** Names read at the same time (as `edgelock list` does). */
const CONCURRENCY = 8;

/** A read-through for one request: the admin reads and the core client, counted together. */
export interface Reader {
  redis: AdminRedis;
  client: EdgeLockClient;
  /** Commands billed so far through both. */
  billed(): number;
}

/** Reads `given` and the names `scan` finds, `CONCURRENCY` at a time. */
export async function refresh(
  reader: Reader,
  given: readonly string[],
  scan: ScanBounds | null,
): Promise<Refresh> {
  const started = Date.now();
  const found = scan ? await scanNames(reader.redis, scan, new Set(given)) : null;
  // A scanned name's kind is known from the scan: it is not detected twice. Scanned names are
  // shown in name order, not in the keyspace's.
  const scanned = [...(found?.names ?? [])].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const work: [string, Kind | undefined][] = [
    ...given.map((name): [string, undefined] => [name, undefined]),
    ...scanned,
  ];
  const names: NameView[] = [];
  for (let i = 0; i < work.length; i += CONCURRENCY) {
    const batch = work.slice(i, i + CONCURRENCY);
    names.push(...(await Promise.all(batch.map(([name, kind]) => view(reader, name, kind)))));
  }
  return {
    names,
    scan: found?.report ?? null,
    billed: reader.billed(),
    durationMs: Date.now() - started,
  };
}

/**
 * Walks the keyspace with SCAN within `maxCalls` calls, reading (detecting the kind of) at most
 * `maxKeys` of the keys it returns: names already given and helper keys (told by their name)
 * are left out unread; a key that holds no primitive, and the cron guard's marks, are read and
 * counted but not shown.
 */
async function scanNames(
  redis: AdminRedis,
  bounds: ScanBounds,
  given: ReadonlySet<string>,
): Promise<{ names: [string, Kind][]; report: ScanReport }> {
  const report: ScanReport = {
    ...bounds,
    calls: 0,
    keys: 0,
    read: 0,
    complete: false,
    stoppedBy: null,
    foreign: 0,
    marks: 0,
    error: null,
  };
  const names: [string, Kind][] = [];
  const seen = new Set<string>();
  let cursor = "0";
  try {
    while (report.calls < bounds.maxCalls) {
      if (report.read === bounds.maxKeys) {
        report.stoppedBy = "keys";
        return { names, report };
      }
      const [next, keys] = await redis.scan(cursor, { match: bounds.match, count: bounds.count });
      report.calls++;
      report.keys += keys.length;
      cursor = String(next);
      const candidates = keys
        .map(String)
        // SCAN may return a key twice.
        .filter((key) => isCandidate(key) && !given.has(key) && !seen.has(key));
      for (const key of candidates) seen.add(key);
      const room = bounds.maxKeys - report.read;
      const reading = candidates.slice(0, room);
      for (let i = 0; i < reading.length; i += CONCURRENCY) {
        const batch = reading.slice(i, i + CONCURRENCY);
        const kinds = await Promise.all(batch.map((key) => kindOf(redis, key)));
        report.read += batch.length;
        for (const [j, kind] of kinds.entries()) {
          if (kind === "foreign") report.foreign++;
          else if (kind !== null && MARK_KINDS.includes(kind)) report.marks++;
          else if (kind !== null) names.push([batch[j] ?? "", kind]);
        }
      }
      if (candidates.length > room) {
        report.stoppedBy = "keys";
        return { names, report };
      }
      if (cursor === "0") {
        report.complete = true;
        return { names, report };
      }
    }
    report.stoppedBy = "calls";
  } catch (error) {
    report.error = message(error);
  }
  return { names, report };
}

async function kindOf(redis: AdminRedis, name: string): Promise<Kind | null | "foreign"> {
  try {
    return await detectKind(redis, name);
  } catch (error) {
    if (error instanceof ForeignKeyError) return "foreign";
    throw error;
  }
}

/**
 * One name's view: its kind (`known` from the scan, else detected), inspection, and what the
 * page adds (epoch, token, waiters).
 */
async function view(reader: Reader, name: string, known: Kind | undefined): Promise<NameView> {
  const { redis, client } = reader;
  const source = known === undefined ? "given" : "scan";
  try {
    const kind = known ?? (await detectKind(redis, name));
    if (kind === null) return { name, source, kind };
    const [found, extra] = await Promise.all([
      inspectAs(client, redis, name, kind, true),
      details(redis, name, kind),
    ]);
    return { name, source, kind, found, ...extra };
  } catch (error) {
    return { name, source, kind: null, error: message(error) };
  }
}

/** The HASH fields a lock keeps beside its owners (lua/lib/hold-fields.lua). */
const EPOCH = "edgelock:epoch";
const TOKEN = "edgelock:token";

/** What the page shows beyond `inspectAs`: a lock's epoch and token, a synchronizer's waiters. */
async function details(
  redis: AdminRedis,
  name: string,
  kind: Kind,
): Promise<Pick<NameView, "epoch" | "token" | "registered">> {
  switch (kind) {
    case "lock":
    case "fair-lock":
    case "fenced-lock":
    case "cron-mark": {
      const [epoch, token] = await redis.hmget(name, [EPOCH, TOKEN]);
      return {
        epoch: decimal(epoch),
        token: kind === "fenced-lock" ? Number(decimal(token) ?? Number.NaN) || null : null,
      };
    }
    case "read-write-lock":
      return { epoch: rwEpoch(await redis.get(`edgelock_epoch:{${name}}`)), token: null };
    case "semaphore":
    case "permit-expirable-semaphore":
      return { registered: await readSemaphoreWaiters(redis.snapshot, name) };
    case "count-down-latch": {
      const waiting = await readLockWaiters(redis.snapshot, name);
      return {
        registered: {
          count: waiting.count,
          entries: waiting.entries.map(({ waiter, ttl }) => ({
            waiter,
            permits: null,
            leaseTime: null,
            ttl,
          })),
        },
      };
    }
    case "webhook-mark":
      return {};
  }
}

/** A stored decimal (a decoded reply may be a number already); null when there is none. */
function decimal(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  const text = String(value);
  return /^\d+$/.test(text) ? text : null;
}

/**
 * A read-write lock's epoch from its key `edgelock_epoch:{<name>}` (lua/lib/rw.lua rw_parse):
 * the creating request id (32 hex digits, `+` after it once a waiter registered) names the
 * epoch, its first 13 hex digits plus 1 (lua/lib/hold-fields.lua id_epoch); an older key holds
 * the decimal epoch itself.
 */
function rwEpoch(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  const text = String(value);
  const id = /^([0-9a-f]{32})\+?$/i.exec(text)?.[1];
  if (id) return String(Number.parseInt(id.slice(0, 13), 16) + 1);
  return decimal(text);
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
