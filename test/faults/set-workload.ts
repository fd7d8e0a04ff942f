/**
 * The lock-protected set, as Jepsen tests etcd's lock: clients repeatedly take one lock, read a
 * set, hold the lock a random time (up to seconds), add one element and acknowledge it only once
 * the write has returned, then release. The set is a Redis string on the resource redis-server
 * (no nemesis touches it), written with a plain SET, or (fenced variant) through a fenced store:
 * a Lua check-and-set that refuses a write whose token is lower than the highest it has accepted,
 * and logs every attempt in the order it decided them.
 *
 * Runs the same in the test process and in a child process (client-process.ts): a client only
 * produces {@link CycleRecord}s, with times on a clock every process shares ({@link sharedNow}:
 * monotonic, and untouched by a preload that moves `Date.now()`). The checkers read the records, the store's log and the final set.
 */
import { setTimeout as delay } from "node:timers/promises";
import type { Redis } from "@upstash/redis";
import { type EdgeLock, type Lease, TransportError } from "../../src/index.js";
import { checkOverlaps, type OverlapReport } from "./checkers.js";
import type { Hold } from "./history.js";
import type { RawClient } from "./nodes.js";

/**
 * Now on the clock all processes share: CLOCK_MONOTONIC in ms (`process.hrtime`), one clock for
 * the whole machine. `performance.timeOrigin + performance.now()` would not do: each process
 * reads its time origin from the wall clock at start, and a start preempted between its two
 * reads skews it by as much as the pause.
 */
export function sharedNow(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** What one client needs to know (serialisable: it is handed to child processes). */
export interface SetClientConfig {
  client: string;
  kind: "lock" | "fenced";
  /** Negative control: a lock that grants everyone, and (fenced) a token fetched when writing. */
  broken?: boolean;
  lockName: string;
  /** Keys on the resource node: the set, the store's highest token and its log. */
  setKey: string;
  cycles: number;
  /** Most random time between reading the set and writing it (the hold). */
  holdMaxMs: number;
  /** Fixed lease; omitted: watchdog mode (timer keep-alive). */
  leaseTime?: number;
  waitTime: number;
}

/** One acquire attempt and, when granted, its critical section. */
export interface CycleRecord {
  client: string;
  cycle: number;
  acquireInvoke: number;
  acquireComplete: number;
  /** "granted", "busy" or the error code. */
  acquire: string;
  owner?: string;
  token?: number;
  /** The lease's expiry on the shared clock, read when the hold ended. */
  expiresAt?: number;
  /** When `lease.signal` aborted. */
  lostAt?: number;
  readInvoke?: number;
  element?: string;
  /** The careful check before the write found the lease over: no write. */
  tooLate?: boolean;
  writeInvoke?: number;
  writeComplete?: number;
  /** The write was applied (plain SET; fenced: accepted) and the add acknowledged. */
  acked?: boolean;
  /** Fenced: the store refused the write (stale token). */
  refused?: boolean;
  releaseInvoke?: number;
  releaseResult?: string;
}

/** A usable lease must have at least this much left before the write (as the README says). */
export const MIN_USABLE_MS = 25;

const STORE = `
local highest = tonumber(redis.call('GET', KEYS[2]) or '-1')
local token = tonumber(ARGV[1])
local accepted = token >= highest
redis.call('RPUSH', KEYS[3], ARGV[3] .. (accepted and ' 1' or ' 0'))
if not accepted then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[1], ARGV[2])
return 1`;

/** The set on the resource node, written plainly or through the fenced check-and-set. */
export class SetResource {
  constructor(
    readonly raw: RawClient,
    readonly key: string,
  ) {}

  async read(): Promise<string[]> {
    const value = (await this.raw.send(["GET", this.key])) as string | null;
    return value ? value.split(",") : [];
  }

  async write(elements: readonly string[]): Promise<void> {
    await this.raw.send(["SET", this.key, elements.join(",")]);
  }

  /** Writes if `token` is not lower than the highest accepted; logs `writer` and the verdict. */
  async fencedWrite(token: number, elements: readonly string[], writer: string): Promise<boolean> {
    const keys = [this.key, `${this.key}:highest`, `${this.key}:log`];
    const reply = await this.raw.send([
      "EVAL",
      STORE,
      "3",
      ...keys,
      String(token),
      elements.join(","),
      writer,
    ]);
    return Number(reply) === 1;
  }

  /** The store's decisions in order: writer (`client/cycle`) and whether it was accepted. */
  async log(): Promise<{ writer: string; accepted: boolean }[]> {
    const entries = (await this.raw.send(["LRANGE", `${this.key}:log`, "0", "-1"])) as string[];
    return entries.map((entry) => {
      const [writer = "", verdict] = String(entry).split(" ");
      return { writer, accepted: verdict === "1" };
    });
  }
}

/** What a client holds while in its critical section. */
export interface Held {
  owner: string;
  token?: number;
  /** The token a fenced write carries (the grant's, or the broken lock's write-time one). */
  writeToken(): Promise<number>;
  expiresAt(): number;
  signal: AbortSignal;
  release(): Promise<string>;
  /** The lease itself (real locks), for what the pause scenario asks of it. */
  lease?: Lease;
}

/** How a client acquires: the real lock (or fenced lock), or the broken stand-in. */
export function acquirer(
  config: SetClientConfig,
  edgelock: EdgeLock,
  redis: Redis,
  resource: RawClient,
): () => Promise<Held | null> {
  const lease = config.leaseTime ?? 3_000;
  if (config.broken) {
    return async () => {
      // Grants whoever asks (a request to the bridge, so faults still apply), with no TTL in
      // Redis and nothing to release: no exclusion at all.
      await redis.set(`${config.lockName}:broken`, config.client).catch(() => undefined);
      const expiresAt = Date.now() + lease;
      return {
        owner: `broken:${config.client}:${Math.random().toString(36).slice(2)}`,
        // Write-time tokens grow in write order, not grant order: the store takes stale writes.
        writeToken: async () => Number(await resource.send(["INCR", `${config.setKey}:broken`])),
        expiresAt: () => expiresAt,
        signal: AbortSignal.timeout(lease),
        release: async () => "released",
      };
    };
  }
  const options = {
    waitTime: config.waitTime,
    ...(config.leaseTime === undefined ? {} : { leaseTime: config.leaseTime }),
  };
  const lock =
    config.kind === "fenced"
      ? edgelock.getFencedLock(config.lockName)
      : edgelock.getLock(config.lockName);
  return async () => {
    const granted = await lock.tryLock(options);
    if (!granted) return null;
    const held: Held = {
      owner: granted.owner,
      writeToken: async () => granted.fencingToken ?? Number.NaN,
      expiresAt: () => granted.expiresAt,
      signal: granted.signal,
      release: () => granted.release(),
      lease: granted,
    };
    if (granted.fencingToken !== undefined) held.token = granted.fencingToken;
    return held;
  };
}

/** Hooks the pause scenario uses to stop a client inside its critical section. */
export interface CycleHooks {
  /** Called after the careful check, before the write (a pause here outlives the check). */
  beforeWrite?: (record: CycleRecord, held: Held) => Promise<void>;
  /** Called before the release. */
  beforeRelease?: (record: CycleRecord, held: Held) => Promise<void>;
}

/** One acquire → read → hold → check → write → release. Never throws for transport errors. */
export async function runCycle(
  config: SetClientConfig,
  cycle: number,
  acquire: () => Promise<Held | null>,
  set: SetResource,
  hooks: CycleHooks = {},
): Promise<CycleRecord> {
  const record: CycleRecord = {
    client: config.client,
    cycle,
    acquireInvoke: sharedNow(),
    acquireComplete: 0,
    acquire: "",
  };
  let held: Held | null;
  try {
    held = await acquire();
  } catch (error) {
    if (!(error instanceof TransportError)) throw error;
    record.acquireComplete = sharedNow();
    record.acquire = error.ambiguous ? "transport?" : "transport";
    // A client's retry pacing after an error (not a synchronisation).
    await delay(10 + Math.random() * 40);
    return record;
  }
  record.acquireComplete = sharedNow();
  if (!held) {
    record.acquire = "busy";
    return record;
  }
  record.acquire = "granted";
  record.owner = held.owner;
  if (held.token !== undefined) record.token = held.token;
  if (held.signal.aborted) record.lostAt = record.acquireComplete;
  else held.signal.addEventListener("abort", () => (record.lostAt ??= sharedNow()), { once: true });

  record.readInvoke = sharedNow();
  const elements = await set.read();
  record.element = `${config.client}.${cycle}`;
  // The hold: a random time inside the critical section (Jepsen's etcd lock test holds up to
  // seconds), so that leases, renewals and waiting clients all come into play.
  await delay(Math.random() * config.holdMaxMs);
  // A careful user checks the lease right before writing.
  if (held.signal.aborted || held.expiresAt() - Date.now() < MIN_USABLE_MS) record.tooLate = true;
  await hooks.beforeWrite?.(record, held);
  if (!record.tooLate) {
    const next = [...elements, record.element];
    record.writeInvoke = sharedNow();
    if (config.kind === "fenced") {
      const token = await held.writeToken();
      record.token ??= token;
      const accepted = await set.fencedWrite(token, next, `${config.client}/${cycle}`);
      record.acked = accepted;
      record.refused = !accepted;
    } else {
      await set.write(next);
      record.acked = true;
    }
    record.writeComplete = sharedNow();
  }
  await hooks.beforeRelease?.(record, held);
  // The latest confirmed expiry (renewals move it), on the shared clock, 1 ms early because
  // Date.now() truncates.
  record.expiresAt = sharedNow() + (held.expiresAt() - Date.now()) - 1;
  record.releaseInvoke = sharedNow();
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      record.releaseResult = await held.release();
      break;
    } catch (error) {
      if (!(error instanceof TransportError)) throw error;
      record.releaseResult = error.ambiguous ? "transport?" : "transport";
    }
  }
  return record;
}

/** What the set checkers found over a run. */
export interface SetReport {
  attempts: number;
  granted: number;
  /** Grants whose lease was over at the careful check (no write). */
  tooLate: number;
  acked: number;
  refused: number;
  /** Final set size. */
  final: number;
  /** Acknowledged adds missing from the final set. */
  lost: number;
  /** Definite hold windows of different owners that overlap (checkers.ts's checker). */
  overlaps: OverlapReport;
  /** Critical sections ([read, write returned]) of applied writes that overlap another. */
  sections: number;
  /** Fenced: writes accepted after the store had seen a write of a newer grant. */
  stale?: number;
}

/** The window checker's view of a record (granted ones only). */
export function holdOf(record: CycleRecord, id: number): Hold {
  const hold: Hold = {
    id,
    process: 0,
    owner: record.owner ?? `${record.client}/${record.cycle}`,
    invoke: record.acquireInvoke,
    complete: record.acquireComplete,
    expiresAt: record.expiresAt ?? Number.POSITIVE_INFINITY,
  };
  if (record.lostAt !== undefined) hold.lostAt = record.lostAt;
  if (record.releaseInvoke !== undefined) hold.releaseInvoke = record.releaseInvoke;
  if (record.token !== undefined) hold.token = record.token;
  return hold;
}

/** Overlapping critical sections of applied writes (each starts at its read, ends at the write). */
export function overlappingSections(records: readonly CycleRecord[]): number {
  const sections = records
    .filter((r) => r.acked && r.readInvoke !== undefined && r.writeComplete !== undefined)
    .map((r) => ({ start: r.readInvoke ?? 0, end: r.writeComplete ?? 0 }))
    .sort((a, b) => a.start - b.start);
  let violations = 0;
  let latestEnd = Number.NEGATIVE_INFINITY;
  for (const s of sections) {
    if (s.start < latestEnd) violations += 1;
    latestEnd = Math.max(latestEnd, s.end);
  }
  return violations;
}

/**
 * Fenced writes the store accepted after it had decided on a write of a grant requested after
 * the accepted writer's grant completed (real-time order): an older holder's write taken after a
 * newer holder wrote. Correct tokens make it 0; write-time tokens do not.
 */
export function staleAccepted(
  records: readonly CycleRecord[],
  log: readonly { writer: string; accepted: boolean }[],
): number {
  const byWriter = new Map(records.map((r) => [`${r.client}/${r.cycle}`, r]));
  let newestRequest = Number.NEGATIVE_INFINITY;
  let stale = 0;
  for (const entry of log) {
    const record = byWriter.get(entry.writer);
    if (!record) throw new Error(`store log names an unknown writer ${entry.writer}`);
    if (entry.accepted && newestRequest > record.acquireComplete) stale += 1;
    newestRequest = Math.max(newestRequest, record.acquireInvoke);
  }
  return stale;
}

/** Runs every checker over a finished run. */
export async function checkSet(
  records: readonly CycleRecord[],
  set: SetResource,
  fenced: boolean,
): Promise<SetReport> {
  const granted = records.filter((r) => r.acquire === "granted");
  const final = new Set(await set.read());
  const acked = records.filter((r) => r.acked);
  const report: SetReport = {
    attempts: records.length,
    granted: granted.length,
    tooLate: granted.filter((r) => r.tooLate).length,
    acked: acked.length,
    refused: records.filter((r) => r.refused).length,
    final: final.size,
    lost: acked.filter((r) => !final.has(r.element ?? "")).length,
    overlaps: checkOverlaps(granted.map(holdOf)),
    sections: overlappingSections(records),
  };
  if (fenced) report.stale = staleAccepted(records, await set.log());
  return report;
}

/** A client's cycles, one after another. */
export async function runClient(
  config: SetClientConfig,
  acquire: () => Promise<Held | null>,
  set: SetResource,
  emit: (record: CycleRecord) => void,
  stop?: () => boolean,
): Promise<void> {
  for (let cycle = 0; cycle < config.cycles && !stop?.(); cycle++) {
    emit(await runCycle(config, cycle, acquire, set));
  }
}
