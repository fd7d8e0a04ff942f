/**
 * Scenario 3: N clients loop acquire → hold → release on one lock for a fixed time. Each client
 * is a separate isolate/process: its own `@upstash/redis` client or TCP connection, so nothing is
 * batched across clients. Counted only inside the measured window (after a warm-up).
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import { type BackoffOptions, DEFAULT_BACKOFF } from "edgelock";
import { type Bill, billOf } from "../billing.js";
import { type BenchEnv, messageArrivals } from "../env.js";
import {
  edgelockLibrary,
  type Held,
  type Library,
  type LibraryName,
  type WaitMode,
} from "../libraries.js";
import { cpuMicros, mean, now, percentile, round } from "../stats.js";
import { requestsOf, rotate } from "./uncontended.js";

/** Sizes of scenario 3. */
export interface ContendedOptions {
  clientCounts: number[];
  /** Time each client holds the lock, ms. */
  holdMs: number;
  /** Untimed run-in before each measured window, ms. */
  warmMs: number;
  /** Measured window per round, ms. */
  measureMs: number;
  /** Each (library, mode, clients) runs this many times, in rotating library order. */
  rounds: number;
  prefix: string;
  libs: readonly Library[];
  /** Extra edgelock runs with these backoffs (same rotation), at `variantClients` only. */
  variants: BackoffOptions[];
  variantClients: number;
  /** Wait budget of edgelock's clients when not their default, in ms. */
  waitMs?: number;
}

/** One (library, mode, client count). */
export interface ContendedResult {
  /** Critical sections completed per second. */
  throughputPerSec: number | null;
  /** Throughput × hold time (ideal = 1 / hold). */
  throughputRatio: number | null;
  /** HTTP requests (http) or TCP commands (tcp) per successful acquisition, releases included. */
  requestsPerAcquisition: number | null;
  /**
   * Billed commands per successful acquisition, releases and failed attempts included (every
   * command Redis ran, a script's inner calls included: `INFO commandstats`), and the writes
   * among them.
   */
  billedPerAcquisition: number | null;
  billedWritesPerAcquisition: number | null;
  /** Next holder's acquire resolved − previous holder leaving its critical section, ms. */
  handoffP50Ms: number | null;
  handoffP99Ms: number | null;
  /**
   * The hand-off split where the next holder's acquire ended on a message of its subscription:
   * p50 of the previous holder leaving its critical section (its release sent) → that message
   * arriving, and of that message → the acquire resolved, ms (`null`: no such hand-offs).
   */
  releaseToMessageP50Ms: number | null;
  messageToAcquiredP50Ms: number | null;
  /** Per-client acquisitions in the window (all rounds pooled). */
  fairnessMin: number;
  fairnessMean: number | null;
  fairnessMax: number;
  fairnessMinOverMean: number | null;
  /** Acquire calls that gave up (the library's wait budget ran out). */
  gaveUp: number;
  acquisitions: number;
  /** Mean time the lock was actually held (timer overshoot included), ms. */
  meanHoldMs: number | null;
  /** Critical sections that began before the previous one ended: must be 0. */
  overlaps: number;
  /** Acquire or release calls that threw (should be 0); the first message is kept. */
  errors: number;
  firstError?: string;
  cpuMicrosPerAcquisition: number | null;
  bridgeCpuMicrosPerAcquisition: number | null;
  /** Share of one core the client process (all clients) used during the window. */
  clientCpuBusy: number | null;
  /** Share of one core the bridge process used during the window (http only). */
  bridgeCpuBusy: number | null;
  windowMs: number;
}

/** Per library: its default settings, plus `sameBudget` where that differs. */
export type ContendedEntry = ContendedResult & { sameBudget?: ContendedResult };

/** Pause after a failed call so that a broken client cannot spin. */
const ERROR_PAUSE_MS = 10;

interface Section {
  client: number;
  acquiredAt: number;
  /** When the holder left its critical section (called release). */
  releasedAt: number;
}

interface RoundData {
  sections: Section[];
  perClient: number[];
  gaveUp: number;
  errors: number;
  firstError: unknown;
  windowStart: number;
  windowEnd: number;
  requests: number;
  /** What Redis ran in the window (bench/billing.ts). */
  bill: Bill;
  cpu: number;
  bridgeCpu: number;
  /** When messages reached this round's subscriptions (env.ts `messageArrivals`). */
  messages: number[];
}

/** An edgelock run with a non-default backoff, at {@link ContendedOptions.variantClients}. */
export interface BackoffVariant {
  backoff: Required<BackoffOptions>;
  clients: number;
  result: ContendedResult;
}

/** Scenario 3 results: per client count and library, plus the backoff variants. */
export interface ContendedResults {
  byClients: Record<string, Record<LibraryName, ContendedEntry>>;
  variants: BackoffVariant[];
}

interface Run {
  id: string;
  lib: Library;
  mode: WaitMode;
}

/** Runs scenario 3 for every client count, library and mode. */
export async function runContended(
  env: BenchEnv,
  options: ContendedOptions,
  log: (line: string) => void,
): Promise<ContendedResults> {
  const { libs } = options;
  const runs: Run[] = libs.flatMap((lib) =>
    (lib.sameBudgetDiffers ? (["default", "sameBudget"] as const) : (["default"] as const)).map(
      (mode) => ({ id: `${lib.name}/${mode}`, lib, mode }),
    ),
  );
  const variantRuns: Run[] = options.variants.map((backoff, i) => ({
    id: `variant/${i}`,
    lib: edgelockLibrary("poll", backoff),
    mode: "default",
  }));
  const byClients: ContendedResults["byClients"] = {};
  const variants: BackoffVariant[] = [];
  for (const clients of options.clientCounts) {
    const data = new Map<string, RoundData[]>();
    const all = clients === options.variantClients ? [...runs, ...variantRuns] : runs;
    for (let r = 0; r < options.rounds; r++) {
      for (const run of rotate(all, r + clients)) {
        const round = await runRound(env, run.lib, run.mode, clients, options, `${run.id}:${r}`);
        data.set(run.id, [...(data.get(run.id) ?? []), round]);
      }
      log(`  contended: ${clients} clients, round ${r + 1}/${options.rounds} done`);
    }
    const byLib = {} as Record<LibraryName, ContendedEntry>;
    for (const lib of libs) {
      const entry: ContendedEntry = summarize(
        data.get(`${lib.name}/default`) ?? [],
        options.holdMs,
      );
      entry.sameBudget = lib.sameBudgetDiffers
        ? summarize(data.get(`${lib.name}/sameBudget`) ?? [], options.holdMs)
        : { ...entry };
      byLib[lib.name] = entry;
    }
    byClients[String(clients)] = byLib;
    if (clients === options.variantClients) {
      options.variants.forEach((backoff, i) => {
        variants.push({
          backoff: { ...DEFAULT_BACKOFF, ...backoff },
          clients,
          result: summarize(data.get(`variant/${i}`) ?? [], options.holdMs),
        });
      });
    }
  }
  return { byClients, variants };
}

async function runRound(
  env: BenchEnv,
  lib: Library,
  mode: WaitMode,
  clientCount: number,
  options: ContendedOptions,
  tag: string,
): Promise<RoundData> {
  // No "/" in a lock name: the REST API's /subscribe/<channel> path could not carry its wake
  // channel, and its waiters would poll.
  const key = `${options.prefix}contended:${tag.replaceAll("/", ".")}:${clientCount}`;
  const clients = await Promise.all(
    Array.from({ length: clientCount }, () => lib.client(env, mode, options.waitMs)),
  );
  const sections: Section[] = [];
  const perClient = new Array<number>(clientCount).fill(0);
  let gaveUp = 0;
  const errors: unknown[] = [];
  let windowStart = Number.POSITIVE_INFINITY;
  let windowEnd = Number.POSITIVE_INFINITY;
  let stopping = false;
  const inWindow = (t: number) => t >= windowStart && t < windowEnd;

  const loops = clients.map(async (client, i) => {
    while (!stopping) {
      let held: Held | null;
      try {
        held = await client.acquire(key);
      } catch (error) {
        errors.push(error);
        await sleep(ERROR_PAUSE_MS);
        continue;
      }
      if (!held) {
        if (inWindow(now())) gaveUp += 1;
        continue;
      }
      const acquiredAt = now();
      if (stopping) {
        // Drain: let the waiters through quickly; nothing after the window is counted.
        await held.release();
        break;
      }
      await sleep(options.holdMs);
      const releasedAt = now();
      sections.push({ client: i, acquiredAt, releasedAt });
      if (inWindow(acquiredAt)) perClient[i] = (perClient[i] ?? 0) + 1;
      await held.release().catch((error: unknown) => errors.push(error));
    }
  });

  messageArrivals.length = 0;
  await sleep(options.warmMs);
  const before = await env.counters();
  const cpu0 = cpuMicros();
  windowStart = now();
  await sleep(options.measureMs);
  windowEnd = now();
  const cpu = cpuMicros() - cpu0;
  const after = await env.counters();
  stopping = true;
  await Promise.all(loops);
  await Promise.all(clients.map((c) => c.close()));
  return {
    sections,
    perClient,
    gaveUp,
    errors: errors.length,
    firstError: errors[0],
    windowStart,
    windowEnd,
    requests: requestsOf(lib.transport, before, after),
    bill: billOf(before.commandStats, after.commandStats),
    cpu,
    bridgeCpu: lib.transport === "http" ? after.bridgeCpuMicros - before.bridgeCpuMicros : 0,
    messages: messageArrivals.splice(0),
  };
}

function summarize(rounds: readonly RoundData[], holdMs: number): ContendedResult {
  let acquisitions = 0;
  let windowMs = 0;
  let requests = 0;
  let billed = 0;
  let billedWrites = 0;
  let cpu = 0;
  let bridgeCpu = 0;
  let gaveUp = 0;
  let overlaps = 0;
  let errors = 0;
  let firstError: unknown;
  const handoffs: number[] = [];
  const toMessage: number[] = [];
  const afterMessage: number[] = [];
  const holds: number[] = [];
  const perClient: number[] = [];
  for (const round of rounds) {
    const inWindow = (t: number) => t >= round.windowStart && t < round.windowEnd;
    const sorted = [...round.sections].sort((a, b) => a.acquiredAt - b.acquiredAt);
    for (let i = 0; i < sorted.length; i++) {
      const s = sorted[i] as Section;
      if (!inWindow(s.acquiredAt)) continue;
      acquisitions += 1;
      holds.push(s.releasedAt - s.acquiredAt);
      const prev = sorted[i - 1];
      if (!prev) continue;
      if (s.acquiredAt < prev.releasedAt) overlaps += 1;
      else {
        handoffs.push(s.acquiredAt - prev.releasedAt);
        // The last message between the release and the acquisition: the one it resolved on.
        const m = lastIn(round.messages, prev.releasedAt, s.acquiredAt);
        if (m !== undefined) {
          toMessage.push(m - prev.releasedAt);
          afterMessage.push(s.acquiredAt - m);
        }
      }
    }
    windowMs += round.windowEnd - round.windowStart;
    requests += round.requests;
    billed += round.bill.total;
    billedWrites += round.bill.writes;
    cpu += round.cpu;
    bridgeCpu += round.bridgeCpu;
    gaveUp += round.gaveUp;
    errors += round.errors;
    firstError ??= round.firstError;
    perClient.push(...round.perClient);
  }
  const throughput = acquisitions / (windowMs / 1000);
  const fairMean = mean(perClient);
  const fairMin = perClient.length ? Math.min(...perClient) : 0;
  return {
    throughputPerSec: round(throughput, 1),
    throughputRatio: round((throughput * holdMs) / 1000, 3),
    requestsPerAcquisition: acquisitions ? round(requests / acquisitions, 2) : null,
    billedPerAcquisition: acquisitions ? round(billed / acquisitions, 1) : null,
    billedWritesPerAcquisition: acquisitions ? round(billedWrites / acquisitions, 1) : null,
    handoffP50Ms: round(percentile(handoffs, 50)),
    handoffP99Ms: round(percentile(handoffs, 99)),
    releaseToMessageP50Ms: toMessage.length ? round(percentile(toMessage, 50)) : null,
    messageToAcquiredP50Ms: afterMessage.length ? round(percentile(afterMessage, 50)) : null,
    fairnessMin: fairMin,
    fairnessMean: round(fairMean, 1),
    fairnessMax: perClient.length ? Math.max(...perClient) : 0,
    fairnessMinOverMean: fairMean > 0 ? round(fairMin / fairMean, 2) : null,
    gaveUp,
    acquisitions,
    meanHoldMs: round(mean(holds)),
    overlaps,
    errors,
    ...(firstError !== undefined && { firstError: String(firstError) }),
    cpuMicrosPerAcquisition: acquisitions ? round(cpu / acquisitions, 0) : null,
    bridgeCpuMicrosPerAcquisition: acquisitions ? round(bridgeCpu / acquisitions, 0) : null,
    clientCpuBusy: round(cpu / (windowMs * 1000), 2),
    bridgeCpuBusy: bridgeCpu ? round(bridgeCpu / (windowMs * 1000), 2) : null,
    windowMs: Math.round(windowMs),
  };
}

/** The last of the ascending `times` in [from, to], or `undefined`. */
function lastIn(times: readonly number[], from: number, to: number): number | undefined {
  let found: number | undefined;
  for (const t of times) {
    if (t > to) break;
    if (t >= from) found = t;
  }
  return found;
}
