/**
 * Scenario 3e: N clients contend for a semaphore of P permits, each looping acquire (the
 * library's own waiting, wait budget as in scenario 3) → hold → release for a fixed time. Each
 * client is a separate isolate/process (its own `@upstash/redis` client or TCP connection).
 * Throughput is compared with the ideal P / hold; requests are counted as in scenario 3; and the
 * run checks that never more than P clients are inside at once, failing loudly if they are.
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import { EdgeLock } from "edgelock";
import { Semaphore as RedisSemaphore } from "redis-semaphore";
import { type Bill, billOf } from "../billing.js";
import type { BenchEnv } from "../env.js";
import {
  type Held,
  LEASE_MS,
  type LibClient,
  type LibraryName,
  WAIT_BUDGET_MS,
} from "../libraries.js";
import { cpuMicros, mean, now, percentile, round } from "../stats.js";
import { requestsOf, rotate } from "./uncontended.js";

/** The keys of scenario 3e's results. */
export const SEMAPHORE_LIBRARY_NAMES = [
  "edgelock-semaphore",
  "edgelock-permit-semaphore",
  "redis-semaphore",
] as const;
export type SemaphoreLibraryName = (typeof SEMAPHORE_LIBRARY_NAMES)[number];

/** A semaphore implementation under test. */
export interface SemaphoreLibrary {
  name: SemaphoreLibraryName;
  /** The package it belongs to, for `--libs`. */
  library: LibraryName;
  transport: "http" | "tcp";
  /** What it is called with, in words, for RESULTS.md. */
  settings: string;
  /** Creates the semaphore `key` with `permits` permits (before the round; not counted). */
  prepare(env: BenchEnv, key: string, permits: number): Promise<void>;
  /** One client; its `acquire` takes one permit of `key` (or gives up: `null`). */
  client(env: BenchEnv, permits: number): Promise<LibClient>;
}

/** redis-semaphore's retry interval (its default), ms. */
const REDIS_SEMAPHORE_RETRY_MS = 10;

/** The three implementations, edgelock's first. */
export function semaphoreLibraries(): readonly SemaphoreLibrary[] {
  return [
    {
      name: "edgelock-semaphore",
      library: "edgelock",
      transport: "http",
      settings: `getSemaphore(key): trySetPermits(P) once; tryAcquire({ waitTime: ${WAIT_BUDGET_MS} }) → release(); waiters subscribe and are woken by the release that frees a permit (default wait)`,
      prepare: async (env, key, permits) => {
        const s = new EdgeLock({ redis: env.http() }).getSemaphore(key);
        if (!(await s.trySetPermits(permits))) throw new Error(`bench: ${key} exists already`);
      },
      client: async (env) => {
        const edge = new EdgeLock({ redis: env.http() });
        return {
          acquire: async (key) => {
            const s = edge.getSemaphore(key);
            if (!(await s.tryAcquire({ waitTime: WAIT_BUDGET_MS }))) return null;
            return { release: async () => void (await s.release()) };
          },
          close: async () => {},
        };
      },
    },
    {
      name: "edgelock-permit-semaphore",
      library: "edgelock",
      transport: "http",
      settings: `getPermitExpirableSemaphore(key): trySetPermits(P) once; tryAcquire({ waitTime: ${WAIT_BUDGET_MS}, leaseTime: ${LEASE_MS} }) → lease.release(); waiters subscribe and are woken by the release that frees a permit (default wait)`,
      prepare: async (env, key, permits) => {
        const s = new EdgeLock({ redis: env.http() }).getPermitExpirableSemaphore(key);
        if (!(await s.trySetPermits(permits))) throw new Error(`bench: ${key} exists already`);
      },
      client: async (env) => {
        const edge = new EdgeLock({ redis: env.http() });
        return {
          acquire: async (key) => {
            const lease = await edge
              .getPermitExpirableSemaphore(key)
              .tryAcquire({ waitTime: WAIT_BUDGET_MS, leaseTime: LEASE_MS });
            return lease && { release: async () => void (await lease.release()) };
          },
          close: async () => {},
        };
      },
    },
    {
      name: "redis-semaphore",
      library: "redis-semaphore",
      transport: "tcp",
      settings: `new Semaphore(ioredis, key, P, { lockTimeout: ${LEASE_MS}, acquireTimeout: ${WAIT_BUDGET_MS}, retryInterval: ${REDIS_SEMAPHORE_RETRY_MS} }) (its defaults): tryAcquire() → release(); waiters poll every ${REDIS_SEMAPHORE_RETRY_MS} ms`,
      prepare: async () => {},
      client: async (env, permits) => {
        const tcp = await env.tcp();
        return {
          acquire: async (key) => {
            const s = new RedisSemaphore(tcp, key, permits, {
              lockTimeout: LEASE_MS,
              acquireTimeout: WAIT_BUDGET_MS,
              retryInterval: REDIS_SEMAPHORE_RETRY_MS,
            });
            if (!(await s.tryAcquire())) return null;
            return { release: () => s.release() };
          },
          close: async () => void tcp.disconnect(),
        };
      },
    },
  ];
}

/** Sizes of scenario 3e. */
export interface SemaphoreScenarioOptions {
  clients: number;
  permits: number;
  /** Time each client holds its permit, ms. */
  holdMs: number;
  /** Untimed run-in before each measured window, ms. */
  warmMs: number;
  /** Measured window per round, ms. */
  measureMs: number;
  /** Each library runs this many times, in rotating order. */
  rounds: number;
  prefix: string;
  libs: readonly SemaphoreLibrary[];
}

/** One library's run of scenario 3e (rounds pooled). */
export interface SemaphoreResult {
  transport: "http" | "tcp";
  /** Permits taken (critical sections begun) in the window per second. */
  throughputPerSec: number | null;
  /** Throughput / ideal, ideal = permits / hold. */
  throughputRatio: number | null;
  /** HTTP requests (http) or TCP commands (tcp) per acquisition, waits and releases included. */
  requestsPerAcquisition: number | null;
  /** Billed commands per acquisition, releases included (`INFO commandstats`), and the writes. */
  billedPerAcquisition: number | null;
  billedWritesPerAcquisition: number | null;
  /**
   * How long a freed permit stays free: an acquisition resolved − the earliest still-unused
   * moment a holder left its critical section (calling release), pairing them first in, first
   * out. p50 and p99, ms, over the acquisitions in the window that found such a permit.
   */
  handoffP50Ms: number | null;
  handoffP99Ms: number | null;
  /** Mean number of permits free per hand-off × hand-offs / window: share of permit time idle. */
  idleShare: number | null;
  /** Per-client acquisitions in the window (all rounds pooled). */
  fairnessMin: number;
  fairnessMean: number | null;
  fairnessMax: number;
  fairnessMinOverMean: number | null;
  /** Most clients inside at once (counted in the client process): never above `permits`. */
  maxInside: number;
  gaveUp: number;
  acquisitions: number;
  /** Mean time a permit was held (timer overshoot included), ms. */
  meanHoldMs: number | null;
  /** Acquire or release calls that threw (should be 0); the first message is kept. */
  errors: number;
  firstError?: string;
  /** CPU time per acquisition of the client process (all clients) and of the bridge, µs. */
  cpuMicrosPerAcquisition: number | null;
  bridgeCpuMicrosPerAcquisition: number | null;
  /** Share of one core the client process used during the window. */
  clientCpuBusy: number | null;
  /** Share of one core the bridge process used during the window (http only). */
  bridgeCpuBusy: number | null;
  windowMs: number;
}

/** Scenario 3e results. */
export interface SemaphoreScenarioResult {
  clients: number;
  permits: number;
  holdMs: number;
  /** Ideal throughput: permits × 1000 / hold, per second. */
  idealPerSec: number;
  byLibrary: Partial<Record<SemaphoreLibraryName, SemaphoreResult>>;
}

/** Pause after a failed call so that a broken client cannot spin. */
const ERROR_PAUSE_MS = 10;

interface Section {
  acquiredAt: number;
  /** When the holder left its critical section (called release). */
  releasedAt: number;
}

interface RoundData {
  sections: Section[];
  windowStart: number;
  windowEnd: number;
  perClient: number[];
  holds: number[];
  maxInside: number;
  gaveUp: number;
  errors: number;
  firstError: unknown;
  windowMs: number;
  requests: number;
  /** What Redis ran in the window (bench/billing.ts). */
  bill: Bill;
  cpu: number;
  bridgeCpu: number;
}

/** Runs scenario 3e; throws if any library let more than `permits` clients in at once. */
export async function runSemaphore(
  env: BenchEnv,
  options: SemaphoreScenarioOptions,
  log: (line: string) => void,
): Promise<SemaphoreScenarioResult> {
  const data = new Map<SemaphoreLibraryName, RoundData[]>();
  for (let r = 0; r < options.rounds; r++) {
    for (const lib of rotate(options.libs, r)) {
      const round = await runRound(env, lib, options, `${lib.name}:${r}`);
      data.set(lib.name, [...(data.get(lib.name) ?? []), round]);
      if (round.maxInside > options.permits) {
        throw new Error(
          `bench: semaphore scenario FAILED: ${lib.name} let ${round.maxInside} clients in at once with ${options.permits} permits (round ${r + 1})`,
        );
      }
    }
    log(
      `  semaphore: ${options.clients} clients × ${options.permits} permits, round ${r + 1}/${options.rounds} done`,
    );
  }
  const byLibrary: SemaphoreScenarioResult["byLibrary"] = {};
  for (const lib of options.libs) {
    const e = summarize(lib.transport, data.get(lib.name) ?? [], options);
    byLibrary[lib.name] = e;
    log(
      `  semaphore: ${lib.name}: ${e.throughputPerSec} / s (${e.throughputRatio} of ideal), ${e.requestsPerAcquisition} requests / acq, min/mean ${e.fairnessMinOverMean}, max inside ${e.maxInside}, client CPU ${e.clientCpuBusy}`,
    );
  }
  return {
    clients: options.clients,
    permits: options.permits,
    holdMs: options.holdMs,
    idealPerSec: (options.permits * 1000) / options.holdMs,
    byLibrary,
  };
}

async function runRound(
  env: BenchEnv,
  lib: SemaphoreLibrary,
  options: SemaphoreScenarioOptions,
  tag: string,
): Promise<RoundData> {
  const key = `${options.prefix}semaphore:${tag.replaceAll("/", ".")}`;
  await lib.prepare(env, key, options.permits);
  const clients = await Promise.all(
    Array.from({ length: options.clients }, () => lib.client(env, options.permits)),
  );
  const perClient = new Array<number>(options.clients).fill(0);
  const holds: number[] = [];
  const sections: Section[] = [];
  let inside = 0;
  let maxInside = 0;
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
      // Counted from the acquire's answer to just before the release is sent: never more than
      // the holders Redis sees, so a count above the permits is a real violation.
      inside += 1;
      maxInside = Math.max(maxInside, inside);
      const acquiredAt = now();
      if (!stopping) await sleep(options.holdMs);
      const releasedAt = now();
      sections.push({ acquiredAt, releasedAt });
      if (inWindow(acquiredAt) && !stopping) {
        perClient[i] = (perClient[i] ?? 0) + 1;
        holds.push(releasedAt - acquiredAt);
      }
      inside -= 1;
      await held.release().catch((error: unknown) => errors.push(error));
    }
  });

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
    windowStart,
    windowEnd,
    perClient,
    holds,
    maxInside,
    gaveUp,
    errors: errors.length,
    firstError: errors[0],
    windowMs: windowEnd - windowStart,
    requests: requestsOf(lib.transport, before, after),
    bill: billOf(before.commandStats, after.commandStats),
    cpu,
    bridgeCpu: lib.transport === "http" ? after.bridgeCpuMicros - before.bridgeCpuMicros : 0,
  };
}

function summarize(
  transport: "http" | "tcp",
  rounds: readonly RoundData[],
  options: SemaphoreScenarioOptions,
): SemaphoreResult {
  const perClient = rounds.flatMap((r) => r.perClient);
  const holds = rounds.flatMap((r) => r.holds);
  const acquisitions = perClient.reduce((a, b) => a + b, 0);
  const sum = (f: (r: RoundData) => number) => rounds.reduce((a, r) => a + f(r), 0);
  const windowMs = sum((r) => r.windowMs);
  const requests = sum((r) => r.requests);
  const billed = sum((r) => r.bill.total);
  const billedWrites = sum((r) => r.bill.writes);
  const cpu = sum((r) => r.cpu);
  const bridgeCpu = sum((r) => r.bridgeCpu);
  const errors = sum((r) => r.errors);
  const firstError = rounds.find((r) => r.firstError !== undefined)?.firstError;
  const handoffs = rounds.flatMap((r) => handoffsOf(r));
  const throughput = acquisitions / (windowMs / 1000);
  const fairMean = mean(perClient);
  const fairMin = perClient.length ? Math.min(...perClient) : 0;
  return {
    transport,
    throughputPerSec: round(throughput, 1),
    throughputRatio: round((throughput * options.holdMs) / (1000 * options.permits), 3),
    requestsPerAcquisition: acquisitions ? round(requests / acquisitions, 2) : null,
    billedPerAcquisition: acquisitions ? round(billed / acquisitions, 1) : null,
    billedWritesPerAcquisition: acquisitions ? round(billedWrites / acquisitions, 1) : null,
    handoffP50Ms: round(percentile(handoffs, 50)),
    handoffP99Ms: round(percentile(handoffs, 99)),
    idleShare: windowMs
      ? round(handoffs.reduce((a, b) => a + b, 0) / (windowMs * options.permits), 3)
      : null,
    fairnessMin: fairMin,
    fairnessMean: round(fairMean, 1),
    fairnessMax: perClient.length ? Math.max(...perClient) : 0,
    fairnessMinOverMean: fairMean > 0 ? round(fairMin / fairMean, 2) : null,
    maxInside: Math.max(0, ...rounds.map((r) => r.maxInside)),
    gaveUp: sum((r) => r.gaveUp),
    acquisitions,
    meanHoldMs: round(mean(holds)),
    errors,
    ...(firstError !== undefined && { firstError: String(firstError) }),
    cpuMicrosPerAcquisition: acquisitions ? round(cpu / acquisitions, 0) : null,
    bridgeCpuMicrosPerAcquisition:
      acquisitions && bridgeCpu ? round(bridgeCpu / acquisitions, 0) : null,
    clientCpuBusy: round(cpu / (windowMs * 1000), 2),
    bridgeCpuBusy: bridgeCpu ? round(bridgeCpu / (windowMs * 1000), 2) : null,
    windowMs: Math.round(windowMs),
  };
}

/**
 * Hand-offs of one round: every release frees a permit at the moment its holder left its
 * critical section; every acquisition takes the permit freed earliest that no acquisition took
 * yet (first in, first out). Returns, for the acquisitions begun in the window, how long the
 * permit they took had been free. Their sum is the permit time left idle, whatever the pairing.
 */
function handoffsOf(r: RoundData): number[] {
  type Event = { t: number; kind: "free" | "take" };
  const events: Event[] = r.sections.flatMap((s): Event[] => [
    { t: s.acquiredAt, kind: "take" },
    { t: s.releasedAt, kind: "free" },
  ]);
  // At one instant, a release (free) comes before the acquisition it made possible.
  events.sort((a, b) => a.t - b.t || (a.kind === "free" ? -1 : 1));
  const free: number[] = [];
  let next = 0;
  const out: number[] = [];
  for (const e of events) {
    if (e.kind === "free") {
      free.push(e.t);
    } else if (next < free.length) {
      const freedAt = free[next++] as number;
      if (e.t >= r.windowStart && e.t < r.windowEnd) out.push(e.t - freedAt);
    }
  }
  return out;
}
