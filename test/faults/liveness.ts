/**
 * The liveness campaign's workloads and checks (issue 50: a crashed holder never stalls the
 * line). The campaign has a redis-server and bridge of its own (nodes.ts), every run a fresh
 * name and independent `EdgeLock` clients, each with its own `@upstash/redis` client; the
 * holders that die are clients of the test process that never release, or processes of their
 * own (liveness-client.ts) killed with SIGKILL.
 *
 * Times. A hold's expiry is read on the server clock, right after its acquisition, with one
 * script on a raw connection (`PEXPIRETIME` of the lock's key, or the permit's score in the
 * permit-expirable semaphore's `{<name>}:timeout`), and read again after each renewal its client
 * reports (a hand-off's claim window confirmed as the full lease) and after its process was
 * killed (a renewal in flight). An acquisition is dated by the acquiring process's `Date.now()`
 * when its call resolved. The server and the clients share the host's clock (loopback only);
 * the same script reads Redis's `TIME`, and the offset between the two clocks (server minus
 * the midpoint of the run's probe with the shortest round trip) maps each expiry onto the
 * host's clock, so a delay is `acquiredAt - (expiry - offset)`: when the caller holds the lock,
 * not when Redis gave it.
 */
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { dirname } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { seededRandom } from "../../src/bridge/faults.js";
import { EdgeLock, type Lease, type LockEvent } from "../../src/index.js";
import type { FromLivenessChild, LivenessChildConfig, ToLivenessChild } from "./liveness-client.js";
import {
  type AcquireOptions,
  acquire,
  type Kind,
  type LeasedKind,
  prepare,
  type Role,
} from "./liveness-kinds.js";
import { type Pair, type RawClient, rawClient, startPair } from "./nodes.js";

export { KINDS, type Kind } from "./liveness-kinds.js";

const here = dirname(fileURLToPath(import.meta.url));

/** CI sizes (`FAULTS_QUICK=1`) or full ones. */
export const QUICK = process.env.FAULTS_QUICK === "1";

/** The issue's bound: a live waiter holds the lock within this of the holder's expiry. */
export const TARGET_MS = 250;
/** What the campaign asserts: the target with room for a loaded 2-core machine. */
export const ASSERT_MS = 400;
/** The hand-off's claim window (HAND_OFF_CLAIM_WINDOW_MS). */
export const CLAIM_WINDOW_MS = 2_000;
/** Requests per acquisition with stream ends, at most this times without (the issue's target). */
export const TARGET_RATIO = 1.5;
/**
 * What the campaign asserts of that ratio. Each stream end costs a subscription and the attempt
 * after it, so the ratio moves with how many streams end during a wait: at CI sizes (a few
 * waits) it swings by ±0.3 between runs. Pathological growth (a wait that polls, or registers
 * again and again) is several times the target.
 */
export const ASSERT_RATIO = 2;

/** A clock difference no two readings of one host's clock exceed (the probe's rounding). */
const CLOCK_SLACK_MS = 5;
/** The longest a probe, a child's start or a child's answer may take. */
const PROBE_TIMEOUT_MS = 5_000;
const CHILD_START_MS = 60_000;

export const SCENARIOS = ["herd", "rotation", "sigkill", "dead-first", "streams"] as const;
export type Scenario = (typeof SCENARIOS)[number];

/** The kinds each scenario measures. */
export const SCENARIO_KINDS: Record<Scenario, readonly Kind[]> = {
  herd: ["lock", "fair", "write", "read", "fenced", "pes"],
  // A reader never waits for a reader: the read lock's waiters are measured behind writers.
  rotation: ["lock", "fair", "write", "fenced", "pes"],
  sigkill: ["lock", "fair", "write", "read", "fenced", "pes"],
  "dead-first": ["lock", "fair", "write", "read", "fenced", "pes"],
  // The plain semaphore's permits have no lease (as in Redisson), and a latch has no holder:
  // for them only the stream ends apply.
  streams: ["lock", "semaphore", "pes", "latch"],
};

export const SCENARIO_TITLES: Record<Scenario, string> = {
  herd: "a herd arrives, no holder ever releases",
  rotation: "a healthy rotation, one holder dies holding",
  sigkill: "holders killed with SIGKILL at half their lease",
  "dead-first": "the first waiter's process is gone",
  streams: "subscription streams ended every 1-5 s",
};

/** `LIVENESS_KINDS=lock,fair` / `LIVENESS_SCENARIOS=herd,sigkill`: what to run (default all). */
export function selection<T extends string>(variable: string, all: readonly T[]): readonly T[] {
  const raw = process.env[variable];
  if (raw === undefined || raw.trim() === "") return all;
  const picked = raw.split(",").map((s) => s.trim());
  const unknown = picked.filter((s) => !(all as readonly string[]).includes(s));
  if (unknown.length > 0) {
    throw new Error(`${variable}: unknown ${unknown.join(", ")} (known: ${all.join(", ")})`);
  }
  return all.filter((k) => picked.includes(k));
}

// Sizes --------------------------------------------------------------------------------------

export interface HerdConfig {
  clients: number;
  apartMs: number;
  /** Client i's lease is `leases[i % leases.length]` (for the read lock: the writer's first). */
  leases: readonly number[];
  /** Every waiter's budget covers every hold ahead of it, whatever the order, with 400 ms each. */
  expectAll: boolean;
}

export interface RotationConfig {
  clients: number;
  cycles: number;
  /** The acquisitions (1-based, counted over all clients) whose holder dies holding. */
  deaths: readonly number[];
}

export interface SigkillConfig {
  clients: number;
  leaseTime: number;
}

export interface DeadFirstConfig {
  holderLease: number;
  live: number;
}

const WAIT_TIME = 10_000;

export const SIZES = QUICK
  ? {
      herd: [
        { clients: 8, apartMs: 100, leases: [1_000], expectAll: true },
        { clients: 4, apartMs: 1, leases: [500], expectAll: true },
      ] as HerdConfig[],
      rotation: [{ clients: 8, cycles: 3, deaths: [6] }] as RotationConfig[],
      sigkill: [{ clients: 4, leaseTime: 1_000 }] as SigkillConfig[],
      deadFirst: [{ holderLease: 2_000, live: 3 }] as DeadFirstConfig[],
      streamCycles: 1,
      latchRounds: 1,
    }
  : {
      herd: [
        // Redisson's RedissonFairLockTest#testLeaseTimeout.
        { clients: 8, apartMs: 100, leases: [1_000], expectAll: true },
        { clients: 2, apartMs: 1, leases: [500], expectAll: true },
        { clients: 10, apartMs: 1, leases: [500], expectAll: true },
        { clients: 3, apartMs: 50, leases: [3_000], expectAll: true },
        { clients: 5, apartMs: 20, leases: [500, 1_000, 3_000], expectAll: true },
        { clients: 16, apartMs: 10, leases: [500], expectAll: false },
        { clients: 16, apartMs: 1, leases: [500, 1_000, 3_000], expectAll: false },
      ] as HerdConfig[],
      rotation: [
        { clients: 8, cycles: 10, deaths: [6, 40] },
        { clients: 16, cycles: 5, deaths: [9, 50] },
      ] as RotationConfig[],
      sigkill: [
        { clients: 8, leaseTime: 1_000 },
        { clients: 3, leaseTime: 3_000 },
      ] as SigkillConfig[],
      deadFirst: [
        { holderLease: 2_000, live: 3 },
        { holderLease: 3_000, live: 6 },
      ] as DeadFirstConfig[],
      streamCycles: 3,
      latchRounds: 3,
    };

// Results ------------------------------------------------------------------------------------

/** One run of a holder scenario, as the table shows it. */
export interface HolderRow {
  scenario: Scenario;
  kind: Kind;
  run: string;
  /** Calls that acquired, of all calls that wanted the lock. */
  acquired: number;
  calls: number;
  /** ms from a lease's expiry (no release) to the next waiter's acquisition, while one waited. */
  delays: number[];
  /** Expiries after which nobody acquired although a waiter was still waiting. */
  unserved: number;
  /** Waiters that gave up after the lock had sat free past the bound during their wait. */
  stalled: number;
  /** For the rotation: ms from a release to the next acquisition (informational). */
  handOffs?: number[];
  /** The fair lock: acquisitions in arrival order. */
  inOrder?: boolean;
  /** Clock offset (server minus host), ms, median over the run's probes. */
  offsetMs: number;
  notes: string[];
  problems: string[];
}

/** One run of the stream-end scenario. */
export interface StreamRow {
  kind: Kind;
  ends: boolean;
  run: string;
  acquisitions: number;
  timeouts: number;
  /** Longest stretch with something free (a permit, the lock) while a waiter waited, ms. */
  longestFree: number;
  /** Stretches free longer than a claim window while someone waited. */
  freeStretches: number;
  /** Latch: ms from the count-down that opened it to each awaiter's answer. */
  latencies?: number[];
  requests: number;
  /** `wait-strategy` events (undefined: the kind emits none, as a latch's await). */
  subscriptions: number | undefined;
  polls: number;
  /** With stream ends: requests per acquisition over those without. */
  ratio?: number;
  /** With stream ends: the requests they added per subscription they added. */
  perEnd?: number;
  problems: string[];
}

// Shared helpers ------------------------------------------------------------------------------

/** `promise`, or a rejection naming `what` after `ms`. */
async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

let names = 0;
const fresh = (scenario: string, kind: Kind) => {
  names += 1;
  return `live:${scenario}:${kind}:${names}:${Math.random().toString(36).slice(2, 8)}`;
};

/** Nearest-rank percentile (`p` in 0–100) of `values`; NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

const median = (values: readonly number[]) => percentile(values, 50);

/** The offsets between Redis's clock and the host's over `rows`, for the report. */
export function offsetRange(rows: readonly HolderRow[]): string {
  const offsets = rows.map((r) => r.offsetMs).filter(Number.isFinite);
  if (offsets.length === 0) return "no probe";
  return `${Math.min(...offsets).toFixed(1)} to ${Math.max(...offsets).toFixed(1)} ms`;
}

/** A redis-server and bridge of the run's own, with a raw connection beside them. */
export interface Stage {
  pair: Pair;
  raw: RawClient;
}

export async function openStage(): Promise<Stage> {
  const pair = await startPair();
  try {
    return { pair, raw: await rawClient(pair.node.url) };
  } catch (error) {
    await pair.close();
    throw error;
  }
}

export async function closeStage(stage: Stage): Promise<void> {
  await stage.raw.close();
  await stage.pair.close();
}

// The server clock ----------------------------------------------------------------------------

/**
 * Reads Redis's clock and a hold's expiry in one script: `PEXPIRETIME` of the key, or the score
 * (expiry, epoch ms) of a permit stored as the 16 bytes its 32 hex characters encode.
 */
const PROBE = `local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] == '' then
  return {now, redis.call('pexpiretime', KEYS[1])}
end
local member = (string.gsub(ARGV[1], '..', function(cc) return string.char(tonumber(cc, 16)) end))
local score = redis.call('zscore', KEYS[2], member)
if not score then return {now, -2} end
return {now, tonumber(score)}`;

/** Expiries on the server clock, and the offset between that clock and the host's. */
class ServerClock {
  readonly #raw: RawClient;
  readonly #samples: { offset: number; rtt: number }[] = [];

  constructor(raw: RawClient) {
    this.#raw = raw;
  }

  /**
   * The expiry (server clock, ms) of the hold `permitId` (a permit-expirable semaphore's) or
   * the key `name` (every other kind) has now; undefined when the key has no expiry or is gone.
   */
  async expiry(name: string, permitId = ""): Promise<number | undefined> {
    const before = Date.now();
    const reply = (await within(
      PROBE_TIMEOUT_MS,
      this.#raw.send(["EVAL", PROBE, "2", name, `{${name}}:timeout`, permitId]),
      "expiry probe",
    )) as [number, number];
    const after = Date.now();
    this.#samples.push({ offset: Number(reply[0]) - (before + after) / 2, rtt: after - before });
    const at = Number(reply[1]);
    return at < 0 ? undefined : at;
  }

  /**
   * Server minus host, ms, from the probe with the shortest round trip: a probe whose send or
   * answer waited behind the test process's other work (most do, in a herd) reads the clock
   * off-centre by up to that wait.
   */
  offset(): number {
    const best = [...this.#samples].sort((a, b) => a.rtt - b.rtt)[0];
    return best ? best.offset : Number.NaN;
  }

  /** Maps the holds' expiries read on the server clock onto the host's (`expiresAt`). */
  toHost(holds: readonly (Hold | undefined)[]): void {
    const offset = this.offset();
    for (const hold of holds) {
      if (hold?.serverExpiry !== undefined) hold.expiresAt = hold.serverExpiry - offset;
    }
  }
}

// Clients -------------------------------------------------------------------------------------

/** An in-process client and what its events told. */
interface Client {
  edgelock: EdgeLock;
  /** Requests of every event so far. */
  requests(): number;
  /** `wait-strategy` events: subscriptions made, and turns to polling. */
  subscriptions(): number;
  polls(): number;
  /** Called on each renewal of this client's leases that Redis confirmed. */
  onRenewed?: () => void;
  /** Resolves once this client has emitted `n` `waiting` events. */
  waited(n: number): Promise<void>;
}

function makeClient(pair: Pair, background: Promise<unknown>[]): Client {
  let requests = 0;
  let subscriptions = 0;
  let polls = 0;
  let waitings = 0;
  const waiters: { n: number; resolve: () => void }[] = [];
  const client: Client = {
    edgelock: new EdgeLock({
      redis: pair.redis(),
      waitUntil: (task) => background.push(task),
      onEvent: (e: LockEvent) => {
        requests += e.requests;
        if (e.type === "wait-strategy") {
          if (e.strategy === "subscribe") subscriptions += 1;
          else polls += 1;
        }
        if (e.type === "renew" && e.renewed) client.onRenewed?.();
        if (e.type === "waiting") {
          waitings += 1;
          for (const w of waiters.filter((w) => w.n <= waitings)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve();
          }
        }
      },
    }),
    requests: () => requests,
    subscriptions: () => subscriptions,
    polls: () => polls,
    waited: (n) =>
      n <= waitings ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve })),
  };
  return client;
}

/** A forked liveness-client.ts. */
class Child {
  readonly process: ChildProcess;
  readonly exited: Promise<unknown>;
  /** Resolves once the child's client is made; rejects if it exits or takes too long first. */
  readonly ready: Promise<void>;
  readonly #handlers = new Set<(m: FromLivenessChild) => void>();
  #gone = false;

  constructor(config: LivenessChildConfig) {
    this.process = fork(`${here}/liveness-client.ts`, [], {
      execArgv: ["--import", "tsx"],
      env: { ...process.env, EDGELOCK_LIVENESS_CLIENT: JSON.stringify(config) },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.exited = once(this.process, "exit").then(() => {
      this.#gone = true;
    });
    this.process.on("message", (m: FromLivenessChild) => {
      for (const handler of [...this.#handlers]) handler(m);
    });
    this.ready = this.until((m) => m.type === "ready", CHILD_START_MS, "start").then(() => {});
  }

  on(handler: (m: FromLivenessChild) => void): void {
    this.#handlers.add(handler);
  }

  /** The first message from now on that `matches`, within `ms`. */
  until(
    matches: (m: FromLivenessChild) => boolean,
    ms: number,
    what: string,
  ): Promise<FromLivenessChild> {
    return within(
      ms,
      new Promise<FromLivenessChild>((resolve, reject) => {
        const handler = (m: FromLivenessChild) => {
          if (!matches(m)) return;
          this.#handlers.delete(handler);
          resolve(m);
        };
        this.#handlers.add(handler);
        void this.exited.then(() => {
          this.#handlers.delete(handler);
          reject(new Error(`client process exited before its ${what}`));
        });
      }),
      `client process ${what}`,
    );
  }

  go(): void {
    this.process.send({ type: "go" } satisfies ToLivenessChild);
  }

  /** SIGKILL; resolves once the process is gone. */
  async kill(): Promise<void> {
    if (!this.#gone && this.process.exitCode === null && this.process.signalCode === null) {
      this.process.kill("SIGKILL");
    }
    await this.exited;
  }
}

async function forkAll(configs: readonly LivenessChildConfig[]): Promise<Child[]> {
  const children = configs.map((c) => new Child(c));
  try {
    await Promise.all(children.map((c) => c.ready));
  } catch (error) {
    await Promise.all(children.map((c) => c.kill()));
    throw error;
  }
  return children;
}

// Histories -----------------------------------------------------------------------------------

/** One acquire call: when it began and ended (host clock), and whether it acquired. */
interface Call {
  client: number;
  start: number;
  end: number;
  acquired: boolean;
}

/**
 * One hold. A hold that dies has `serverExpiry` (server clock), then `expiresAt` (host clock,
 * ServerClock#toHost); a healthy one `releasedAt`.
 */
interface Hold {
  client: number;
  start: number;
  acquiredAt: number;
  serverExpiry?: number;
  expiresAt?: number;
  releasedAt?: number;
}

/** Where the lock was free while someone waited: from an expiry (or release) to an acquisition. */
interface Analysis {
  delays: number[];
  unserved: number;
  stalled: number;
  handOffs: number[];
  problems: string[];
}

/**
 * Checks an exclusive kind's history: after each expiry of a hold nobody released, while a call
 * was waiting, the next acquisition must come within the bound; no call may give up after the
 * lock sat free past the bound during its wait (so every waiter whose budget covers the holds
 * ahead of it acquires); no acquisition may come before the expiry of a hold that never ended.
 */
function analyseExclusive(holds: readonly Hold[], calls: readonly Call[]): Analysis {
  const sorted = [...holds].sort((a, b) => a.acquiredAt - b.acquiredAt);
  const out: Analysis = { delays: [], unserved: 0, stalled: 0, handOffs: [], problems: [] };
  const free: { from: number; to: number }[] = [];
  sorted.forEach((hold, i) => {
    const next = sorted[i + 1];
    const end = hold.expiresAt ?? hold.releasedAt;
    if (end === undefined) {
      out.problems.push(`client ${hold.client}'s hold has neither an expiry nor a release`);
      return;
    }
    const waiting = calls.filter((c) => c.start < end && c.end > end);
    if (hold.releasedAt !== undefined) {
      if (next && waiting.length > 0) out.handOffs.push(next.acquiredAt - hold.releasedAt);
      return;
    }
    if (next && next.acquiredAt < end - CLOCK_SLACK_MS) {
      out.problems.push(
        `client ${next.client} acquired ${Math.round(end - next.acquiredAt)} ms before client ${hold.client}'s lease expired`,
      );
    }
    if (waiting.length === 0) return;
    if (next) {
      out.delays.push(Math.max(0, next.acquiredAt - end));
      free.push({ from: end, to: next.acquiredAt });
    } else {
      const last = Math.max(...waiting.map((c) => c.end));
      out.unserved += 1;
      out.delays.push(last - end);
      free.push({ from: end, to: Number.POSITIVE_INFINITY });
      out.problems.push(
        `nobody acquired after client ${hold.client}'s expiry, while ${waiting.length} waiter(s) waited up to ${Math.round(last - end)} ms past it`,
      );
    }
  });
  out.stalled = countStalled(calls, free);
  return out;
}

/** Calls that gave up after the lock had sat free past the bound (`TARGET_MS`) in their wait. */
function countStalled(calls: readonly Call[], free: readonly { from: number; to: number }[]) {
  return calls.filter(
    (c) =>
      !c.acquired &&
      free.some((f) => Math.max(c.start, f.from + TARGET_MS) < Math.min(c.end, f.to)),
  ).length;
}

/**
 * The read lock's history: readers waiting behind writers whose leases ran out unreleased each
 * hold the lock within the bound of the expiry that freed it.
 */
function analyseReaders(writers: readonly Hold[], readers: readonly Call[]): Analysis {
  const out: Analysis = { delays: [], unserved: 0, stalled: 0, handOffs: [], problems: [] };
  const free: { from: number; to: number }[] = [];
  for (const reader of readers) {
    const blocking = writers.filter(
      (w) => w.acquiredAt <= reader.start && (w.expiresAt ?? 0) > reader.start,
    );
    if (blocking.length === 0) continue;
    const expiry = Math.max(...blocking.map((w) => w.expiresAt ?? 0));
    if (reader.acquired) {
      if (reader.end < expiry - CLOCK_SLACK_MS) {
        out.problems.push(
          `reader ${reader.client} acquired ${Math.round(expiry - reader.end)} ms before the writer's lease expired`,
        );
      }
      out.delays.push(Math.max(0, reader.end - expiry));
    } else if (reader.end > expiry) {
      out.unserved += 1;
      out.delays.push(reader.end - expiry);
      free.push({ from: expiry, to: Number.POSITIVE_INFINITY });
      out.problems.push(
        `reader ${reader.client} gave up ${Math.round(reader.end - expiry)} ms after the writer's lease expired`,
      );
    }
  }
  out.stalled = countStalled(readers, free);
  return out;
}

/**
 * Fair lock: whether the calls that acquired did so in the order they arrived; the note names
 * the arrival ranks (1 = first call) in the order they acquired when they did not.
 */
function fairOrder(row: HolderRow, holds: readonly Hold[]): void {
  const byArrival = [...holds].sort((a, b) => a.start - b.start);
  const ranks = [...holds]
    .sort((a, b) => a.acquiredAt - b.acquiredAt)
    .map((h) => byArrival.indexOf(h) + 1);
  row.inOrder = ranks.every((r, i) => r === i + 1);
  if (!row.inOrder) row.notes.push(`arrival ranks in acquisition order: ${ranks.join(", ")}`);
}

/** The problems every holder row shares: the bound on delays, the counts. */
function judge(row: HolderRow, expectAll: boolean, boundMs = ASSERT_MS): HolderRow {
  const p99 = percentile(row.delays, 99);
  if (row.delays.length > 0 && p99 > boundMs) {
    row.problems.push(
      `p99 of the delays after expiries ${Math.round(p99)} ms > ${boundMs} ms (all: ${row.delays.map(Math.round).join(", ")})`,
    );
  }
  if (row.stalled > 0) {
    row.problems.push(
      `${row.stalled} waiter(s) gave up after the lock had sat free > ${TARGET_MS} ms during their wait`,
    );
  }
  if (expectAll && row.acquired !== row.calls) {
    row.problems.push(`${row.acquired} of ${row.calls} acquired, expected all`);
  }
  if (row.inOrder === false) row.problems.push("acquisitions out of arrival order");
  return row;
}

/** Settles every background task the clients handed to `waitUntil` (cancels, give-backs). */
async function settle(background: Promise<unknown>[]): Promise<void> {
  for (let seen = 0; seen < background.length; ) {
    seen = background.length;
    await within(30_000, Promise.allSettled(background), "background tasks");
  }
}

/** Arrival `i` of a herd `apartMs` apart that began at `t0` (performance.now()). */
async function arrive(t0: number, i: number, apartMs: number): Promise<void> {
  const wait = t0 + i * apartMs - performance.now();
  if (wait > 0) await delay(wait);
}

/** The permit id a probe reads, for a permit-expirable semaphore's lease. */
const permitOf = (lease: { permitIds?: readonly string[] | undefined }) => lease.permitIds?.[0];

/**
 * Reads `hold`'s expiry now, and again whenever `client` reports a confirmed renewal (a
 * hand-off's claim window made its full lease), until the caller clears `client.onRenewed`.
 * Renewals only lengthen a hold, so the latest reading is its expiry.
 */
function trackExpiry(
  clock: ServerClock,
  name: string,
  hold: Hold,
  permitId: string | undefined,
  probes: Promise<void>[],
  client?: Client,
): void {
  const read = () => {
    probes.push(
      clock.expiry(name, permitId).then((at) => {
        if (at !== undefined) hold.serverExpiry = Math.max(hold.serverExpiry ?? 0, at);
      }),
    );
  };
  read();
  if (client) client.onRenewed = read;
}

// Herd: nobody ever releases ------------------------------------------------------------------

export async function runHerd(stage: Stage, kind: LeasedKind, cfg: HerdConfig): Promise<HolderRow> {
  const clock = new ServerClock(stage.raw);
  const name = fresh("herd", kind);
  const background: Promise<unknown>[] = [];
  const setup = makeClient(stage.pair, background);
  await prepare(setup.edgelock, kind, name);
  const probes: Promise<void>[] = [];
  const holds: Hold[] = [];
  const calls: Call[] = [];
  const clients = Array.from({ length: cfg.clients }, () => makeClient(stage.pair, background));
  const lease = (i: number) => cfg.leases[i % cfg.leases.length] ?? 1_000;
  let writer: Hold | undefined;
  if (kind === "read") {
    // The readers' writer: its lease runs out unreleased while they wait.
    const start = Date.now();
    const held = await acquire(setup.edgelock, kind, "holder", name, {
      waitTime: 0,
      leaseTime: lease(0),
    });
    if (!held) throw new Error(`${name}: the writer could not take a free lock`);
    writer = { client: -1, start, acquiredAt: Date.now() };
    trackExpiry(clock, name, writer, undefined, probes);
  }
  const t0 = performance.now();
  await Promise.all(
    clients.map(async (client, i) => {
      await arrive(t0, i, cfg.apartMs);
      const start = Date.now();
      const held = await acquire(client.edgelock, kind, "waiter", name, {
        waitTime: WAIT_TIME,
        leaseTime: lease(i),
      });
      const end = Date.now();
      calls.push({ client: i, start, end, acquired: held !== null });
      if (!held) return;
      const hold: Hold = { client: i, start, acquiredAt: end };
      holds.push(hold);
      if (kind !== "read") trackExpiry(clock, name, hold, permitOf(held), probes, client);
    }),
  );
  for (const c of clients) c.onRenewed = undefined;
  await Promise.all(probes);
  clock.toHost([...holds, writer]);
  await settle(background);
  const analysis =
    kind === "read" && writer ? analyseReaders([writer], calls) : analyseExclusive(holds, calls);
  const row: HolderRow = {
    scenario: "herd",
    kind,
    run: `${cfg.clients} ${kind === "read" ? "readers" : "clients"} ${cfg.apartMs} ms apart, leases ${cfg.leases.map((l) => l / 1000).join("/")} s`,
    acquired: holds.length,
    calls: calls.length,
    delays: analysis.delays,
    unserved: analysis.unserved,
    stalled: analysis.stalled,
    offsetMs: clock.offset(),
    notes: [],
    problems: analysis.problems,
  };
  if (kind === "fair" && cfg.apartMs >= 10) fairOrder(row, holds);
  return judge(row, cfg.expectAll);
}

// A healthy rotation, one holder dies ---------------------------------------------------------

const ROTATION_APART_MS = 10;
const ROTATION_HOLD_MS = 20;
const ROTATION_LEASE_MS = 1_000;

export async function runRotation(
  stage: Stage,
  kind: LeasedKind,
  cfg: RotationConfig,
): Promise<HolderRow> {
  const clock = new ServerClock(stage.raw);
  const name = fresh("rotation", kind);
  const background: Promise<unknown>[] = [];
  await prepare(makeClient(stage.pair, background).edgelock, kind, name);
  const probes: Promise<void>[] = [];
  const holds: Hold[] = [];
  const calls: Call[] = [];
  const clients = Array.from({ length: cfg.clients }, () => makeClient(stage.pair, background));
  let acquisitions = 0;
  const t0 = performance.now();
  await Promise.all(
    clients.map(async (client, i) => {
      await arrive(t0, i, ROTATION_APART_MS);
      for (let cycle = 0; cycle < cfg.cycles; cycle++) {
        const start = Date.now();
        const held = await acquire(client.edgelock, kind, "waiter", name, {
          waitTime: WAIT_TIME,
          leaseTime: ROTATION_LEASE_MS,
        });
        const end = Date.now();
        calls.push({ client: i, start, end, acquired: held !== null });
        if (!held) continue;
        acquisitions += 1;
        const hold: Hold = { client: i, start, acquiredAt: end };
        holds.push(hold);
        if (cfg.deaths.includes(acquisitions)) {
          // This holder dies holding: it never releases, and its client makes no more calls.
          trackExpiry(clock, name, hold, permitOf(held), probes, client);
          return;
        }
        await delay(ROTATION_HOLD_MS);
        await held.release();
        hold.releasedAt = Date.now();
      }
    }),
  );
  for (const c of clients) c.onRenewed = undefined;
  await Promise.all(probes);
  clock.toHost(holds);
  await settle(background);
  const analysis = analyseExclusive(holds, calls);
  const timeouts = calls.filter((c) => !c.acquired).length;
  const row: HolderRow = {
    scenario: "rotation",
    kind,
    run: `${cfg.clients} clients ${ROTATION_APART_MS} ms apart × ${cfg.cycles} cycles, ${ROTATION_HOLD_MS} ms holds, lease 1 s, ${cfg.deaths.length} holder(s) die`,
    acquired: holds.length,
    calls: calls.length,
    delays: analysis.delays,
    unserved: analysis.unserved,
    stalled: analysis.stalled,
    handOffs: analysis.handOffs,
    offsetMs: clock.offset(),
    notes: [],
    problems: analysis.problems,
  };
  if (timeouts > 0) row.problems.push(`${timeouts} call(s) waited out their ${WAIT_TIME} ms`);
  if (analysis.delays.length !== cfg.deaths.length) {
    row.problems.push(
      `${analysis.delays.length} expiries with waiters measured, expected ${cfg.deaths.length}`,
    );
  }
  return judge(row, true);
}

// Holders killed with SIGKILL -----------------------------------------------------------------

const SIGKILL_APART_MS = 100;

export async function runSigkill(
  stage: Stage,
  kind: LeasedKind,
  cfg: SigkillConfig,
): Promise<HolderRow> {
  const clock = new ServerClock(stage.raw);
  const name = fresh("sigkill", kind);
  const background: Promise<unknown>[] = [];
  const setup = makeClient(stage.pair, background);
  await prepare(setup.edgelock, kind, name);
  const options: AcquireOptions = { waitTime: WAIT_TIME, leaseTime: cfg.leaseTime };
  const childConfig = (role: Role): LivenessChildConfig => ({
    bridgeUrl: stage.pair.url,
    bridgeToken: stage.pair.token,
    kind,
    role,
    name,
    options,
  });
  // The read lock's holders are writers, its waiters readers of this process.
  const killed = kind === "read" ? 1 : cfg.clients;
  const children = await forkAll(
    Array.from({ length: killed }, () => childConfig(kind === "read" ? "holder" : "waiter")),
  );
  const probes: Promise<void>[] = [];
  const holds: Hold[] = [];
  const calls: Call[] = [];
  const kills: Promise<void>[] = [];
  const problems: string[] = [];
  try {
    const outcomes = children.map((child, i) => {
      const outcome = child.until(
        (m) => m.type === "acquired" || m.type === "gave-up" || m.type === "failed",
        CHILD_START_MS + WAIT_TIME,
        "outcome",
      );
      return outcome.then((m) => {
        if (m.type === "failed") problems.push(`client process ${i} failed: ${m.error}`);
        if (m.type !== "acquired" && m.type !== "gave-up") return;
        calls.push({ client: i, start: m.startedAt, end: m.at, acquired: m.type === "acquired" });
        if (m.type !== "acquired") return;
        const hold: Hold = { client: i, start: m.startedAt, acquiredAt: m.at };
        holds.push(hold);
        const permitId = m.permitIds?.[0];
        trackExpiry(clock, name, hold, permitId, probes);
        kills.push(
          (async () => {
            const wait = m.at + cfg.leaseTime / 2 - Date.now();
            if (wait > 0) await delay(wait);
            await child.kill();
            // A renewal sent before the kill may still have reached Redis.
            trackExpiry(clock, name, hold, permitId, probes);
          })(),
        );
      });
    });
    const readers: Call[] = [];
    let readersDone: Promise<unknown> = Promise.resolve();
    const t0 = performance.now();
    children.forEach((child, i) => {
      void arrive(t0, i, SIGKILL_APART_MS)
        .then(() => child.go())
        .catch((error: unknown) => problems.push(`client process ${i}: ${String(error)}`));
    });
    if (kind === "read") {
      // Readers arrive once the writer holds, then wait behind it.
      await outcomes[0];
      const clients = Array.from({ length: 6 }, () => makeClient(stage.pair, background));
      const r0 = performance.now();
      readersDone = Promise.all(
        clients.map(async (client, i) => {
          await arrive(r0, i, 10);
          const start = Date.now();
          const held = await acquire(client.edgelock, kind, "waiter", name, options);
          readers.push({ client: i, start, end: Date.now(), acquired: held !== null });
        }),
      );
    }
    await Promise.all(outcomes);
    await readersDone;
    await Promise.all(kills);
    await Promise.all(probes);
    clock.toHost(holds);
    await settle(background);
    const analysis =
      kind === "read" ? analyseReaders(holds, readers) : analyseExclusive(holds, calls);
    const row: HolderRow = {
      scenario: "sigkill",
      kind,
      run:
        kind === "read"
          ? `a writer process killed at half its lease (${cfg.leaseTime / 1000} s), 6 readers 10 ms apart`
          : `${cfg.clients} processes ${SIGKILL_APART_MS} ms apart, lease ${cfg.leaseTime / 1000} s, each killed at half its lease`,
      acquired: kind === "read" ? readers.filter((r) => r.acquired).length : holds.length,
      calls: kind === "read" ? readers.length : calls.length,
      delays: analysis.delays,
      unserved: analysis.unserved,
      stalled: analysis.stalled,
      offsetMs: clock.offset(),
      notes: [],
      problems: [...problems, ...analysis.problems],
    };
    if (kind === "fair") fairOrder(row, holds);
    return judge(row, true);
  } finally {
    await Promise.all(children.map((c) => c.kill()));
  }
}

// The first waiter is dead --------------------------------------------------------------------

const LIVE_APART_MS = 10;
const LIVE_LEASE_MS = 1_000;
const LIVE_HOLD_MS = 50;

export async function runDeadFirst(
  stage: Stage,
  kind: LeasedKind,
  cfg: DeadFirstConfig,
): Promise<HolderRow> {
  const clock = new ServerClock(stage.raw);
  const name = fresh("dead-first", kind);
  const background: Promise<unknown>[] = [];
  const setup = makeClient(stage.pair, background);
  await prepare(setup.edgelock, kind, name);
  const options: AcquireOptions = { waitTime: WAIT_TIME, leaseTime: LIVE_LEASE_MS };
  const [first] = await forkAll([
    {
      bridgeUrl: stage.pair.url,
      bridgeToken: stage.pair.token,
      kind,
      role: "waiter",
      name,
      options,
    },
  ]);
  if (!first) throw new Error("no client process");
  const probes: Promise<void>[] = [];
  const problems: string[] = [];
  try {
    const start = Date.now();
    const held = await acquire(setup.edgelock, kind, "holder", name, {
      waitTime: 0,
      leaseTime: cfg.holderLease,
    });
    if (!held) throw new Error(`${name}: the holder could not take a free lock`);
    const holder: Hold = { client: -1, start, acquiredAt: Date.now() };
    trackExpiry(clock, name, holder, permitOf(held), probes);
    // Its second wait: the attempt after its subscription was confirmed registered it.
    let waitings = 0;
    const registered = first.until(
      (m) => m.type === "event" && m.event.type === "waiting" && ++waitings === 2,
      CHILD_START_MS,
      "registration",
    );
    first.go();
    await registered;
    await first.kill();
    const killedAt = Date.now();
    const clients = Array.from({ length: cfg.live }, () => makeClient(stage.pair, background));
    const calls: Call[] = [];
    const t0 = performance.now();
    await Promise.all(
      clients.map(async (client, i) => {
        await arrive(t0, i, LIVE_APART_MS);
        const callStart = Date.now();
        const lease = await acquire(client.edgelock, kind, "waiter", name, options);
        calls.push({ client: i, start: callStart, end: Date.now(), acquired: lease !== null });
        if (!lease) return;
        await delay(LIVE_HOLD_MS);
        await lease.release();
      }),
    );
    await Promise.all(probes);
    clock.toHost([holder]);
    await settle(background);
    const expiry = holder.expiresAt;
    if (expiry === undefined) throw new Error(`${name}: the holder's expiry was not read`);
    if (killedAt > expiry - 100) {
      problems.push(
        `setup too slow: the first waiter was killed ${Math.round(killedAt - expiry + 100)} ms too late (100 ms before the holder's expiry at the latest)`,
      );
    }
    const acquiredAt = calls.filter((c) => c.acquired).map((c) => c.end);
    const firstLive = acquiredAt.length > 0 ? Math.min(...acquiredAt) - expiry : Number.NaN;
    const bound = CLAIM_WINDOW_MS + ASSERT_MS;
    const row: HolderRow = {
      scenario: "dead-first",
      kind,
      run: `holder lease ${cfg.holderLease / 1000} s, a dead first waiter, ${cfg.live} live waiters ${LIVE_APART_MS} ms apart`,
      acquired: acquiredAt.length,
      calls: calls.length,
      delays: Number.isNaN(firstLive) ? [] : [Math.max(0, firstLive)],
      unserved: Number.isNaN(firstLive) ? 1 : 0,
      // Every live waiter's budget covers the holder and the claim window of the dead one.
      stalled: calls.filter((c) => !c.acquired).length,
      offsetMs: clock.offset(),
      notes: [`killed ${Math.round(expiry - killedAt)} ms before the holder's expiry`],
      problems,
    };
    if (Number.isNaN(firstLive)) row.problems.push("no live waiter acquired");
    if (firstLive < -CLOCK_SLACK_MS) {
      row.problems.push(`a live waiter acquired ${Math.round(-firstLive)} ms before the expiry`);
    }
    return judge(row, true, bound);
  } finally {
    await first.kill();
  }
}

// Streams ended every 1-5 s -------------------------------------------------------------------

const STREAM_APART_MS = 10;
const STREAM_HOLD_MS = 1_500;
const STREAM_LEASE_MS = 5_000;
const STREAM_PERMITS = 3;
const STREAM_CLIENTS: Record<"lock" | "semaphore" | "pes", number> = {
  // Waits about as long as the semaphores' (two holds ahead): each stream end costs a
  // subscription and an attempt, so the ratio grows with the wait, whatever the kind.
  lock: 3,
  semaphore: 8,
  pes: 8,
};
const LATCH_AWAITERS = 8;
const LATCH_OPEN_AFTER_MS = QUICK ? 3_500 : 6_000;

/**
 * Ends every subscription stream opened from now on 1–5 s after its confirmation, finishing the
 * response or cutting its connection, as hosts do (a lifetime and a way drawn every 200 ms from
 * a seeded generator), until the returned function is called.
 */
function endStreams(pair: Pair, seed: number): () => void {
  const random = seededRandom(seed);
  const set = () =>
    pair.bridge.setFaults({
      streamLifetimeMs: 1_000 + Math.floor(random() * 4_001),
      streamEnd: random() < 0.5 ? "cut" : "end",
    });
  set();
  const timer = setInterval(set, 200);
  return () => {
    clearInterval(timer);
    pair.bridge.setFaults({});
  };
}

/**
 * The longest stretch during which fewer than `permits` were held while a call waited, and the
 * stretches longer than a claim window. Holds run from their acquisition to their release's
 * answer.
 */
function freeWhileWaiting(holds: readonly Hold[], calls: readonly Call[], permits: number) {
  const points: { at: number; held: number; waiting: number }[] = [];
  for (const h of holds) {
    points.push({ at: h.acquiredAt, held: 1, waiting: 0 });
    points.push({ at: h.releasedAt ?? Number.POSITIVE_INFINITY, held: -1, waiting: 0 });
  }
  for (const c of calls) {
    points.push({ at: c.start, held: 0, waiting: 1 });
    points.push({ at: c.end, held: 0, waiting: -1 });
  }
  points.sort((a, b) => a.at - b.at);
  let held = 0;
  let waiting = 0;
  let since: number | undefined;
  let longest = 0;
  let stretches = 0;
  const close = (at: number) => {
    if (since === undefined) return;
    longest = Math.max(longest, at - since);
    if (at - since > CLAIM_WINDOW_MS) stretches += 1;
    since = undefined;
  };
  for (let i = 0; i < points.length; i++) {
    const p = points[i];
    if (!p) continue;
    held += p.held;
    waiting += p.waiting;
    if (points[i + 1]?.at === p.at) continue;
    if (held < permits && waiting > 0) since ??= p.at;
    else close(p.at);
  }
  return { longest, stretches };
}

/** One run of the stream workload of `kind`, with streams ended or not. */
export async function runStreams(stage: Stage, kind: Kind, ends: boolean): Promise<StreamRow> {
  if (kind === "latch") return runLatch(stage, ends);
  if (kind !== "lock" && kind !== "semaphore" && kind !== "pes") {
    throw new Error(`no stream workload for ${kind}`);
  }
  const name = fresh("streams", kind);
  const background: Promise<unknown>[] = [];
  const permits = kind === "lock" ? 1 : STREAM_PERMITS;
  await prepare(makeClient(stage.pair, background).edgelock, kind, name, permits);
  const clients = Array.from({ length: STREAM_CLIENTS[kind] }, () =>
    makeClient(stage.pair, background),
  );
  const holds: Hold[] = [];
  const calls: Call[] = [];
  const stop = ends ? endStreams(stage.pair, 50) : () => {};
  // The lock's 3 clients make twice the cycles of the semaphores' 8, for as many waits.
  const cycles = SIZES.streamCycles * (kind === "lock" ? 2 : 1);
  try {
    const t0 = performance.now();
    await Promise.all(
      clients.map(async (client, i) => {
        await arrive(t0, i, STREAM_APART_MS);
        for (let cycle = 0; cycle < cycles; cycle++) {
          const start = Date.now();
          const release = await take(client.edgelock, kind, name);
          const end = Date.now();
          calls.push({ client: i, start, end, acquired: release !== null });
          if (!release) continue;
          const hold: Hold = { client: i, start, acquiredAt: end };
          holds.push(hold);
          await delay(STREAM_HOLD_MS);
          await release();
          hold.releasedAt = Date.now();
        }
      }),
    );
  } finally {
    stop();
  }
  await settle(background);
  const free = freeWhileWaiting(holds, calls, permits);
  const timeouts = calls.filter((c) => !c.acquired).length;
  const row: StreamRow = {
    kind,
    ends,
    run: `${clients.length} clients on ${permits} ${permits === 1 ? "lock" : "permits"}, ${STREAM_HOLD_MS / 1000} s holds × ${cycles}`,
    acquisitions: holds.length,
    timeouts,
    longestFree: free.longest,
    freeStretches: free.stretches,
    requests: clients.reduce((n, c) => n + c.requests(), 0),
    subscriptions: clients.reduce((n, c) => n + c.subscriptions(), 0),
    polls: clients.reduce((n, c) => n + c.polls(), 0),
    problems: [],
  };
  if (timeouts > 0) row.problems.push(`${timeouts} call(s) waited out their ${WAIT_TIME} ms`);
  if (free.stretches > 0) {
    row.problems.push(
      `${free.stretches} stretch(es) free longer than a claim window while a waiter waited (longest ${Math.round(free.longest)} ms)`,
    );
  }
  return row;
}

/** Takes the lock or a permit; resolves to its release, or null when the wait ran out. */
async function take(
  edgelock: EdgeLock,
  kind: "lock" | "semaphore" | "pes",
  name: string,
): Promise<(() => Promise<unknown>) | null> {
  let held: Lease | { release(): Promise<unknown> } | null;
  if (kind === "semaphore")
    held = await edgelock.getSemaphore(name).tryAcquire({ waitTime: WAIT_TIME });
  else
    held = await acquire(edgelock, kind, "waiter", name, {
      waitTime: WAIT_TIME,
      leaseTime: STREAM_LEASE_MS,
    });
  return held ? () => held.release() : null;
}

async function runLatch(stage: Stage, ends: boolean): Promise<StreamRow> {
  const background: Promise<unknown>[] = [];
  const opener = makeClient(stage.pair, background);
  const latencies: number[] = [];
  let timeouts = 0;
  let awaits = 0;
  const all: Client[] = [];
  const stop = ends ? endStreams(stage.pair, 51) : () => {};
  try {
    for (let round = 0; round < SIZES.latchRounds; round++) {
      const name = fresh("streams", "latch");
      if (!(await opener.edgelock.getCountDownLatch(name).trySetCount(1))) {
        throw new Error(`${name}: the latch was already set`);
      }
      const clients = Array.from({ length: LATCH_AWAITERS }, () =>
        makeClient(stage.pair, background),
      );
      all.push(...clients);
      let openedAt = Number.POSITIVE_INFINITY;
      const t0 = performance.now();
      const answers = clients.map(async (client, i) => {
        await arrive(t0, i, STREAM_APART_MS);
        const open = await client.edgelock.getCountDownLatch(name).await({ waitTime: WAIT_TIME });
        awaits += 1;
        if (open) latencies.push(Date.now() - openedAt);
        else timeouts += 1;
      });
      // The latch stays closed long enough for every awaiter's stream to end at least once.
      await delay(LATCH_OPEN_AFTER_MS);
      openedAt = Date.now();
      await opener.edgelock.getCountDownLatch(name).countDown();
      await Promise.all(answers);
    }
  } finally {
    stop();
  }
  await settle(background);
  const row: StreamRow = {
    kind: "latch",
    ends,
    run: `${LATCH_AWAITERS} awaiters, opened after ${LATCH_OPEN_AFTER_MS / 1000} s × ${SIZES.latchRounds}`,
    acquisitions: awaits - timeouts,
    timeouts,
    longestFree: Math.max(0, ...latencies),
    freeStretches: latencies.filter((l) => l > CLAIM_WINDOW_MS).length,
    latencies,
    requests: all.reduce((n, c) => n + c.requests(), 0),
    // A latch's await listens on Redisson's latch channel, and reports no wait-strategy events.
    subscriptions: undefined,
    polls: all.reduce((n, c) => n + c.polls(), 0),
    problems: [],
  };
  if (timeouts > 0) row.problems.push(`${timeouts} await(s) waited out their ${WAIT_TIME} ms`);
  const p99 = percentile(latencies, 99);
  if (p99 > ASSERT_MS) {
    row.problems.push(
      `p99 from the opening count-down to the awaiters' answers ${Math.round(p99)} ms > ${ASSERT_MS} ms`,
    );
  }
  return row;
}

/**
 * Compares a run with stream ends to one without: requests per acquisition (a problem above
 * {@link ASSERT_RATIO}, except for the latch, whose awaiters wait as long as it stays closed: its ratio says
 * how many streams ended while it was, and is shown), and the requests each added subscription
 * cost.
 */
export function compareStreams(without: StreamRow, withEnds: StreamRow): void {
  const ratio = perAcquisition(withEnds) / perAcquisition(without);
  withEnds.ratio = ratio;
  const scale = withEnds.acquisitions / Math.max(1, without.acquisitions);
  const added = (withEnds.subscriptions ?? 0) - (without.subscriptions ?? 0) * scale;
  if (added > 0) withEnds.perEnd = (withEnds.requests - without.requests * scale) / added;
  if (withEnds.kind !== "latch" && ratio > ASSERT_RATIO) {
    withEnds.problems.push(
      `requests per acquisition ${perAcquisition(without).toFixed(2)} without stream ends, ${perAcquisition(withEnds).toFixed(2)} with: ${ratio.toFixed(2)}× > ${ASSERT_RATIO}×`,
    );
  }
}

export const perAcquisition = (r: StreamRow) => r.requests / Math.max(1, r.acquisitions);

// Report --------------------------------------------------------------------------------------

const ms = (v: number) => (Number.isFinite(v) ? String(Math.round(v)) : "–");

export function renderHolderTable(rows: readonly HolderRow[]): string {
  const lines = [
    `| scenario | kind | run | acquired | after expiry p50 / p99 / max (ms) | ≤ ${TARGET_MS} ms | unserved expiries | stalled waiters | verdict |`,
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of rows) {
    const within = r.scenario === "dead-first" ? CLAIM_WINDOW_MS + TARGET_MS : TARGET_MS;
    const ok = r.delays.filter((d) => d <= within).length;
    const extra = [
      r.inOrder === undefined ? "" : r.inOrder ? "in order" : "OUT OF ORDER",
      r.handOffs?.length ? `hand-offs p50 ${ms(median(r.handOffs))} ms` : "",
      ...r.notes,
    ].filter(Boolean);
    lines.push(
      `| ${r.scenario} | ${r.kind} | ${r.run}${extra.length ? ` (${extra.join("; ")})` : ""} | ${r.acquired}/${r.calls} | ${ms(median(r.delays))} / ${ms(percentile(r.delays, 99))} / ${ms(Math.max(...r.delays))} | ${ok}/${r.delays.length} | ${r.unserved} | ${r.stalled} | ${r.problems.length === 0 ? "pass" : "FAIL"} |`,
    );
  }
  return lines.join("\n");
}

export function renderStreamTable(rows: readonly StreamRow[]): string {
  const lines = [
    "| kind | run | stream ends | acquired (timeouts) | longest free while waiting (ms) | requests / acquisition (with / without) | subscriptions | requests per added subscription | polls | verdict |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of rows) {
    const free =
      r.latencies !== undefined
        ? `open → answer p50 / p99 / max ${ms(median(r.latencies))} / ${ms(percentile(r.latencies, 99))} / ${ms(Math.max(...r.latencies))}`
        : ms(r.longestFree);
    const ratio =
      r.ratio === undefined
        ? ""
        : ` (${r.ratio.toFixed(2)}×${r.kind === "latch" ? ", not judged" : r.ratio > TARGET_RATIO ? `, over the ${TARGET_RATIO}× target` : ""})`;
    lines.push(
      `| ${r.kind} | ${r.run} | ${r.ends ? "every 1–5 s, ended or cut" : "none"} | ${r.acquisitions} (${r.timeouts}) | ${free} | ${perAcquisition(r).toFixed(2)}${ratio} | ${r.subscriptions ?? "–"} | ${r.perEnd === undefined ? "–" : r.perEnd.toFixed(1)} | ${r.polls} | ${r.problems.length === 0 ? "pass" : "FAIL"} |`,
    );
  }
  return lines.join("\n");
}
