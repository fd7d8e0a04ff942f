/**
 * Scenarios 1 and 2: the physical limit (one PING, one small EVALSHA) and the uncontended
 * acquire+release cycle, measured in blocks run in the same rounds so both see the same machine
 * state, in an order shuffled anew every round (seeded: the same every run). A rotation kept
 * each block behind the same one every round, and the reentrant lock, always right behind the
 * probes that pause before each pair of calls (the idle machine a hand-off meets), ran 0.3 to
 * 0.9 ms slower at p50 than the fair lock, which runs the same client code. The pause probes
 * also run in rounds of their own, after the others.
 * @module
 */
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "@upstash/redis";
import { EdgeLock } from "edgelock";
import { billOf } from "../billing.js";
import type { BenchEnv, Counters } from "../env.js";
import {
  LEASE_MS,
  type LibClient,
  type Library,
  type LibraryName,
  WAIT_BUDGET_MS,
} from "../libraries.js";
import {
  cpuMicros,
  mean,
  now,
  type PairedDifference,
  pairedDifference,
  percentile,
  type RatioInterval,
  round,
  roundsRatio,
  seeded,
} from "../stats.js";

/** Sizes of scenarios 1 and 2. */
export interface UncontendedOptions {
  /** Timed cycles per library (and PINGs per probe). */
  cycles: number;
  /** Untimed cycles per participant before the first round. */
  warmup: number;
  /** The cycles are split into this many blocks, one per round, in a shuffled order. */
  rounds: number;
  /** Cold cycles per library (each on a fresh client, once with an empty script cache). */
  coldRepeats: number;
  /** Key prefix of this run. */
  prefix: string;
  libs: readonly Library[];
  /** Pause before each PING pair of the "after a pause" probes (the contended hold time), ms. */
  pauseMs: number;
  /**
   * The HTTP libraries' cycles once more with the bridge holding every request this long (a
   * network's round trip; 0: not run), ms.
   */
  networkDelayMs: number;
  /** Timed cycles per HTTP library at {@link networkDelayMs}. */
  networkCycles: number;
  /**
   * Pairs of cycles, each of an HTTP participant next to one of @upstash/lock's, timed after the
   * rounds (0: not run): see {@link UncontendedResult.pairedVsUpstash}.
   */
  pairedCycles: number;
}

/** Scenario 1. HTTP = `@upstash/redis` → bridge → Redis; TCP = ioredis → Redis. */
export interface LimitResult {
  pingP50Ms: number | null;
  pingP99Ms: number | null;
  evalshaP50Ms: number | null;
  evalshaP99Ms: number | null;
  tcpPingP50Ms: number | null;
  tcpPingP99Ms: number | null;
  samples: number;
  /**
   * Two PINGs back to back after a pause of `pauseMs` (what a hand-off looks like in scenario 3:
   * the holder wakes from its critical section, releases, and asks again), p50 of the pair.
   */
  pingPairAfterPauseP50Ms: number | null;
  tcpPingPairAfterPauseP50Ms: number | null;
  pauseMs: number;
  pauseSamples: number;
  /**
   * The two requests of edgelock's uncontended cycle (the reentrant lock's acquire and release
   * scripts, with the keys and arguments a warm `tryLock` + `release()` sends) sent by
   * `@upstash/redis` `evalsha()` (each a request of its own, as edgelock's transport sends it)
   * with no edgelock code around them, p50 of the pair: what the cycle costs on the bridge and
   * in Redis, the floor of edgelock's own row in scenario 2.
   */
  edgelockScriptsP50Ms: number | null;
  edgelockScriptsP99Ms: number | null;
  /** Bridge-process CPU per pair of {@link edgelockScriptsP50Ms}, µs. */
  edgelockScriptsBridgeCpuMicros: number | null;
  /** What the bridge added to every request in the network rows of scenario 2, ms (0: none). */
  networkDelayMs: number;
  /**
   * {@link edgelockScriptsP50Ms}'s two requests paired with @upstash/lock's whole cycle, µs (see
   * {@link UncontendedResult.pairedVsUpstash}); `null` when not run.
   */
  edgelockScriptsPairedVsUpstash: PairedDifference | null;
}

/** Scenario 2, per library. */
export interface UncontendedResult {
  transport: "http" | "tcp";
  p50Ms: number | null;
  p99Ms: number | null;
  meanMs: number | null;
  /** p50 / (2 × PING p50 of the library's own transport). */
  ratioToLimit: number | null;
  /** 2 × PING p50 of the library's transport, ms. */
  limitMs: number | null;
  /** HTTP requests (http) or TCP commands (tcp) per cycle, warm client. */
  requestsPerCycleWarm: number | null;
  /** Same, fresh client while Redis has the scripts cached (a new isolate on a warm database). */
  requestsPerCycleColdClient: number | null;
  /** Same, fresh client after SCRIPT FLUSH (a new isolate on a database without the scripts). */
  requestsPerCycleCold: number | null;
  /** Redis commands per cycle inside the HTTP requests (http only). */
  commandsPerCycle: number | null;
  /**
   * Billed commands per cycle, warm client: every command Redis ran, a script's inner calls
   * included (`INFO commandstats`), as Upstash bills them; and how many of them write (a global
   * database bills each write once per region).
   */
  billedPerCycle: number | null;
  billedWritesPerCycle: number | null;
  /** p50 of a cold cycle (fresh client, empty script cache), ms. */
  coldP50Ms: number | null;
  /** Client-process CPU time per cycle, µs (user + system). */
  cpuMicrosPerCycle: number | null;
  /** Bridge-process CPU time per cycle, µs (http only). */
  bridgeCpuMicrosPerCycle: number | null;
  /**
   * redis-server CPU time per cycle, µs: the scripts and commands the cycle ran, their
   * parsing and replies (its share of Redis's housekeeping lands in whichever block ran then).
   */
  redisCpuMicrosPerCycle: number | null;
  cycles: number;
  /**
   * p50 of a cycle while the bridge holds every request {@link LimitResult.networkDelayMs}
   * (a network's round trip, the case of a real deployment), ms; `null` for TCP or when not run.
   */
  networkP50Ms: number | null;
  /**
   * How much longer than @upstash/lock's this library's cycle takes, µs: the median of the
   * differences of `pairs` cycles each timed right next to one of @upstash/lock's (which of the
   * two goes first alternates), with its 90 % bootstrap interval. Blocks of cycles drift with
   * the machine by tens of µs; a pair sees one moment. Timed after the rounds, so on warm
   * clients. `null` for @upstash/lock itself, TCP libraries, or when not run.
   */
  pairedVsUpstash: PairedDifference | null;
  /**
   * p50 of this library's cycles over @upstash/lock's (the `p50Ms` columns' ratio), with a 90 %
   * interval from resampling the rounds (stats.ts, roundsRatio): how far the ratio moves with
   * the rounds a run happens to get. `null` for @upstash/lock itself, TCP libraries, or when it
   * did not run.
   */
  p50VsUpstash: RatioInterval | null;
}

interface Participant {
  id: string;
  transport: "http" | "tcp";
  /** One timed operation; resolves to its own duration in ms when it times only part of itself. */
  op(): Promise<number | undefined>;
  close(): Promise<void>;
  /** Share of `cycles` this participant runs (pause probes are slow). Default 1. */
  share?: number;
  /** Leaves the machine idle between its calls: measured apart from the others. */
  pauses?: true;
}

interface Tally {
  samples: number[];
  /** Where each round's block ends in {@link samples} (one block per round). */
  blockEnds: number[];
  cpu: number;
  bridgeCpu: number;
  redisCpu: number;
  requests: number;
  commands: number;
  billed: number;
  billedWrites: number;
}

const SMALL_SCRIPT = "return redis.call('exists', KEYS[1])";

/** Runs scenarios 1 and 2. */
export async function runUncontended(
  env: BenchEnv,
  options: UncontendedOptions,
  log: (line: string) => void,
): Promise<{ limit: LimitResult; uncontended: Record<LibraryName, UncontendedResult> }> {
  const { libs } = options;
  const participants = await makeParticipants(env, options.prefix, libs, options.pauseMs);
  /** Samples of the cycles at {@link UncontendedOptions.networkDelayMs}, per library. */
  const network = new Map<string, number[]>();
  /** {@link UncontendedResult.pairedVsUpstash} per participant. */
  const paired = new Map<string, PairedDifference>();
  const tallies = new Map<string, Tally>(
    participants.map((p) => [
      p.id,
      {
        samples: [],
        blockEnds: [],
        cpu: 0,
        bridgeCpu: 0,
        redisCpu: 0,
        requests: 0,
        commands: 0,
        billed: 0,
        billedWrites: 0,
      },
    ]),
  );
  try {
    for (const p of participants) for (let i = 0; i < options.warmup; i++) await p.op();
    const phases = [participants.filter((p) => !p.pauses), participants.filter((p) => p.pauses)];
    for (const phase of phases) {
      for (let r = 0; r < options.rounds; r++) {
        for (const p of shuffled(phase, r)) {
          const total = Math.max(options.rounds, Math.round(options.cycles * (p.share ?? 1)));
          const per = Math.ceil(total / options.rounds);
          const n = Math.min(per, total - r * per);
          if (n > 0) await measureBlock(env, p, n, tallies.get(p.id) as Tally);
        }
        log(
          `  uncontended: round ${r + 1}/${options.rounds} done${phase[0]?.pauses ? " (pauses)" : ""}`,
        );
      }
    }
    const http = participants.filter((p) =>
      libs.some((lib) => lib.name === p.id && lib.transport === "http"),
    );
    const upstash = participants.find((p) => p.id === UPSTASH);
    if (options.pairedCycles > 0 && upstash) {
      for (const p of [...http, ...participants.filter((q) => q.id === SCRIPTS_PROBE)]) {
        if (p === upstash) continue;
        paired.set(p.id, await measurePaired(p, upstash, options.pairedCycles));
      }
      log(`  uncontended: ${options.pairedCycles} pairs per HTTP library with @upstash/lock done`);
    }
    if (options.networkDelayMs > 0 && http.length > 0) {
      await measureAtDelay(env, http, options, network);
      log(`  uncontended: ${options.networkDelayMs} ms per request done`);
    }
  } finally {
    for (const p of participants) await p.close();
  }
  const cold = await measureCold(env, options, log);

  const p50 = (id: string) => percentile(tallies.get(id)?.samples ?? [], 50);
  const p99 = (id: string) => percentile(tallies.get(id)?.samples ?? [], 99);
  const scriptsTally = tallies.get(SCRIPTS_PROBE);
  const limit: LimitResult = {
    pingP50Ms: round(p50("http-ping")),
    pingP99Ms: round(p99("http-ping")),
    evalshaP50Ms: round(p50("http-evalsha")),
    evalshaP99Ms: round(p99("http-evalsha")),
    tcpPingP50Ms: round(p50("tcp-ping")),
    tcpPingP99Ms: round(p99("tcp-ping")),
    samples: options.cycles,
    pingPairAfterPauseP50Ms: round(p50("http-ping-pair-paused")),
    tcpPingPairAfterPauseP50Ms: round(p50("tcp-ping-pair-paused")),
    pauseMs: options.pauseMs,
    pauseSamples: tallies.get("http-ping-pair-paused")?.samples.length ?? 0,
    edgelockScriptsP50Ms: round(p50(SCRIPTS_PROBE)),
    edgelockScriptsP99Ms: round(p99(SCRIPTS_PROBE)),
    edgelockScriptsBridgeCpuMicros: scriptsTally?.samples.length
      ? round(scriptsTally.bridgeCpu / scriptsTally.samples.length, 0)
      : null,
    networkDelayMs: network.size > 0 ? options.networkDelayMs : 0,
    edgelockScriptsPairedVsUpstash: paired.get(SCRIPTS_PROBE) ?? null,
  };
  const uncontended = {} as Record<LibraryName, UncontendedResult>;
  for (const lib of libs) {
    const t = tallies.get(lib.name) as Tally;
    const n = t.samples.length;
    const limitMs = 2 * p50(lib.transport === "http" ? "http-ping" : "tcp-ping");
    const c = cold.get(lib.name);
    uncontended[lib.name] = {
      transport: lib.transport,
      p50Ms: round(p50(lib.name)),
      p99Ms: round(p99(lib.name)),
      meanMs: round(mean(t.samples)),
      ratioToLimit: round(p50(lib.name) / limitMs, 2),
      limitMs: round(limitMs),
      requestsPerCycleWarm: round(t.requests / n, 2),
      requestsPerCycleColdClient: c ? round(c.warmDbRequests, 2) : null,
      requestsPerCycleCold: c ? round(c.requests, 2) : null,
      commandsPerCycle: lib.transport === "http" ? round(t.commands / n, 2) : null,
      billedPerCycle: round(t.billed / n, 2),
      billedWritesPerCycle: round(t.billedWrites / n, 2),
      coldP50Ms: c ? round(c.p50Ms) : null,
      cpuMicrosPerCycle: round(t.cpu / n, 0),
      bridgeCpuMicrosPerCycle: lib.transport === "http" ? round(t.bridgeCpu / n, 0) : null,
      redisCpuMicrosPerCycle: round(t.redisCpu / n, 0),
      cycles: n,
      networkP50Ms: network.has(lib.name)
        ? round(percentile(network.get(lib.name) ?? [], 50))
        : null,
      pairedVsUpstash: paired.get(lib.name) ?? null,
      p50VsUpstash:
        lib.transport === "http" && lib.name !== UPSTASH
          ? vsUpstash(t, tallies.get(UPSTASH))
          : null,
    };
  }
  return { limit, uncontended };
}

/**
 * Times `participants` again with the bridge holding every request `networkDelayMs` (its
 * `delayMs` fault), in shuffled blocks as the loopback rounds: on loopback a round trip is about
 * 1 ms, so a client's own work weighs several times what it does behind a real network.
 */
async function measureAtDelay(
  env: BenchEnv,
  participants: readonly Participant[],
  options: UncontendedOptions,
  samples: Map<string, number[]>,
): Promise<void> {
  await env.setDelay(options.networkDelayMs);
  try {
    // The first requests at the new delay are not a steady state's.
    for (const p of participants) for (let i = 0; i < 5; i++) await p.op();
    for (const p of participants) samples.set(p.id, []);
    const per = Math.ceil(options.networkCycles / options.rounds);
    for (let r = 0; r < options.rounds; r++) {
      for (const p of shuffled(participants, r)) {
        const own = samples.get(p.id) as number[];
        for (let i = 0; i < per && own.length < options.networkCycles; i++) {
          own.push(await timeOp(p));
        }
      }
    }
  } finally {
    await env.setDelay(0);
  }
  // The scenarios after this one must see the bridge as it was: the fastest of a few PINGs
  // takes less than the delay only once it is gone.
  const http = env.http();
  let fastest = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 5; i++) {
    const t0 = now();
    await http.ping();
    fastest = Math.min(fastest, now() - t0);
  }
  if (fastest >= options.networkDelayMs) {
    throw new Error(`the bridge still delays requests (fastest PING ${round(fastest)} ms)`);
  }
}

/**
 * Times `pairs` pairs of cycles, one of `a` and one of `b` back to back (`a` first in every
 * other pair), after a few untimed ones; the difference of each pair, in µs.
 */
async function measurePaired(
  a: Participant,
  b: Participant,
  pairs: number,
): Promise<PairedDifference> {
  const time = async (p: Participant) => (await timeOp(p)) * 1_000;
  for (let i = 0; i < 5; i++) {
    await a.op();
    await b.op();
  }
  const ta: number[] = [];
  const tb: number[] = [];
  for (let i = 0; i < pairs; i++) {
    if (i % 2 === 0) {
      ta.push(await time(a));
      tb.push(await time(b));
    } else {
      tb.push(await time(b));
      ta.push(await time(a));
    }
  }
  const d = pairedDifference(ta, tb);
  return {
    pairs: d.pairs,
    median: round(d.median, 1) ?? 0,
    low: round(d.low, 1) ?? 0,
    high: round(d.high, 1) ?? 0,
  };
}

/** One operation of `p`, in ms: the part it timed itself, else the whole call. */
async function timeOp(p: Participant): Promise<number> {
  const t0 = now();
  const own = await p.op();
  return own ?? now() - t0;
}

async function measureBlock(env: BenchEnv, p: Participant, n: number, t: Tally): Promise<void> {
  const before = await env.counters();
  const cpu0 = cpuMicros();
  for (let i = 0; i < n; i++) {
    t.samples.push(await timeOp(p));
  }
  t.blockEnds.push(t.samples.length);
  t.cpu += cpuMicros() - cpu0;
  const after = await env.counters();
  t.requests += requestsOf(p.transport, before, after);
  t.commands += after.httpCommands - before.httpCommands;
  t.bridgeCpu += after.bridgeCpuMicros - before.bridgeCpuMicros;
  t.redisCpu += after.redisCpuMicros - before.redisCpuMicros;
  const bill = billOf(before.commandStats, after.commandStats);
  t.billed += bill.total;
  t.billedWrites += bill.writes;
}

/**
 * {@link UncontendedResult.p50VsUpstash}: the two tallies' samples split into their rounds'
 * blocks; `null` without @upstash/lock's or when the two ran different numbers of rounds.
 */
function vsUpstash(t: Tally, upstash: Tally | undefined): RatioInterval | null {
  const blocks = (x: Tally) =>
    x.blockEnds.map((end, i) => x.samples.slice(x.blockEnds[i - 1] ?? 0, end));
  if (!upstash || upstash.blockEnds.length !== t.blockEnds.length || t.blockEnds.length === 0) {
    return null;
  }
  const r = roundsRatio(blocks(t), blocks(upstash));
  return { ratio: round(r.ratio) ?? 0, low: round(r.low) ?? 0, high: round(r.high) ?? 0 };
}

/** HTTP requests for an HTTP participant, commands sent for a TCP one. */
export function requestsOf(transport: "http" | "tcp", before: Counters, after: Counters): number {
  return transport === "http"
    ? after.httpRequests - before.httpRequests
    : after.tcpCommands - before.tcpCommands;
}

/** Share of the cycles the pause probes run: each costs a pause on top of its round trips. */
const PAUSE_SHARE = 0.25;

async function makeParticipants(
  env: BenchEnv,
  prefix: string,
  libs: readonly Library[],
  pauseMs: number,
): Promise<Participant[]> {
  const http = env.http();
  const tcp = await env.tcp();
  const sha = (await env.admin.script("LOAD", SMALL_SCRIPT)) as string;
  const probeKey = `${prefix}probe`;
  const probes: Participant[] = [
    { id: "http-ping", transport: "http", op: async () => void (await http.ping()), close },
    {
      id: "http-evalsha",
      transport: "http",
      op: async () => void (await http.evalsha(sha, [probeKey], [])),
      close,
    },
    { id: "tcp-ping", transport: "tcp", op: async () => void (await tcp.ping()), close },
    {
      id: SCRIPTS_PROBE,
      transport: "http",
      // edgelock sends each script call as a request of its own (src/transport/retries.ts):
      // so does its floor, not through the client's auto-pipelining.
      op: await edgelockScripts(env, env.http({ enableAutoPipelining: false }), `${prefix}scripts`),
      close,
    },
    {
      id: "http-ping-pair-paused",
      transport: "http",
      op: () => pairAfterPause(() => http.ping(), pauseMs),
      close,
      share: PAUSE_SHARE,
      pauses: true,
    },
    {
      id: "tcp-ping-pair-paused",
      transport: "tcp",
      op: () => pairAfterPause(() => tcp.ping(), pauseMs),
      close,
      share: PAUSE_SHARE,
      pauses: true,
    },
  ];
  const ops: Participant[] = [];
  for (const lib of libs) {
    const client = await lib.client(env, "default", undefined, false);
    const key = `${prefix}uncontended:${lib.name}`;
    ops.push({
      id: lib.name,
      transport: lib.transport,
      op: async () => {
        const held = await client.acquire(key);
        if (!held) throw new Error(`${lib.name}: uncontended acquire failed`);
        await held.release();
        return undefined;
      },
      close: () => client.close(),
    });
  }
  return [...probes, ...ops];
}

async function close(): Promise<void> {}

/** The probe of {@link LimitResult.edgelockScriptsP50Ms}. */
const SCRIPTS_PROBE = "http-edgelock-scripts";

/** The library every HTTP participant is paired with. */
const UPSTASH: LibraryName = "upstash-lock";

/** One `evalsha` a client sent. */
interface SentScript {
  sha: string;
  keys: string[];
  args: (string | number)[];
}

/**
 * An operation that sends the requests of edgelock's uncontended cycle on `key` through `http`
 * without edgelock's client code: the two `evalsha` calls of a warm client's `tryLock` +
 * `release()` (as scenario 2's edgelock row makes them) are recorded, then each operation sends them again
 * with a fresh request id (ARGV[4] of lua/lock/acquire.lua and release.lua: the lease id) and the
 * epoch (release ARGV[5]) its acquire answered. Throws when a reply is not the cycle's (acquired
 * with hold count 1; released), so a change to the scripts' arguments cannot time something
 * else.
 */
async function edgelockScripts(
  env: BenchEnv,
  http: Redis,
  key: string,
): Promise<() => Promise<undefined>> {
  const sent: SentScript[] = [];
  const recording = new Proxy(env.http(), {
    get(target, property, receiver) {
      if (property === "evalsha") {
        return (sha: string, keys: string[], args: (string | number)[]) => {
          sent.push({ sha, keys, args });
          return target.evalsha(sha, keys, args);
        };
      }
      return Reflect.get(target, property, receiver);
    },
  });
  const lock = new EdgeLock({ redis: recording }).getLock(key);
  // The second cycle is a warm client's: the first may have found Redis's script cache empty.
  for (let cycle = 0; cycle < 2; cycle++) {
    sent.length = 0;
    const lease = await lock.tryLock({ waitTime: WAIT_BUDGET_MS, leaseTime: LEASE_MS });
    await lease?.release();
  }
  const [acquire, release] = sent;
  if (sent.length !== 2 || !acquire || !release || acquire.args[3] !== release.args[3]) {
    throw new Error(
      `edgelock's cycle sent ${sent.length} evalsha calls, not its acquire and release`,
    );
  }
  return async () => {
    const id = randomBytes(16).toString("hex");
    // A client without onEvent sends the scripts uncounted: their replies are the scripts' own.
    const grant = await http.evalsha(acquire.sha, acquire.keys, withAt(acquire.args, [[3, id]]));
    if (!Array.isArray(grant) || grant[0] !== 1 || grant[1] !== 1) {
      throw new Error(`edgelock's acquire script answered ${JSON.stringify(grant)}`);
    }
    const epoch = String(grant[2]);
    const freed = await http.evalsha(
      release.sha,
      release.keys,
      withAt(release.args, [
        [3, id],
        [4, epoch],
      ]),
    );
    if (freed !== 1) {
      throw new Error(`edgelock's release script answered ${JSON.stringify(freed)}`);
    }
    return undefined;
  };
}

/** `args` with the values at the given positions replaced. */
function withAt(args: readonly (string | number)[], at: [number, string][]): (string | number)[] {
  const out = [...args];
  for (const [i, value] of at) out[i] = value;
  return out;
}

/** Sleeps `pauseMs`, then times two calls back to back. */
async function pairAfterPause(call: () => Promise<unknown>, pauseMs: number): Promise<number> {
  await sleep(pauseMs);
  const t0 = now();
  await call();
  await call();
  return now() - t0;
}

interface ColdTally {
  requests: number;
  warmDbRequests: number;
  p50Ms: number;
}

/**
 * One acquire+release on a fresh client, `coldRepeats` times per library in rotating order:
 * once while Redis has every script cached and once right after SCRIPT FLUSH.
 */
async function measureCold(
  env: BenchEnv,
  options: UncontendedOptions,
  log: (line: string) => void,
): Promise<Map<LibraryName, ColdTally>> {
  const { libs } = options;
  const sums = new Map<LibraryName, { flushed: number; warmDb: number; samples: number[] }>();
  for (const lib of libs) sums.set(lib.name, { flushed: 0, warmDb: 0, samples: [] });
  for (let k = 0; k < options.coldRepeats; k++) {
    for (const lib of rotate(libs, k)) {
      const sum = sums.get(lib.name);
      if (!sum) continue;
      const key = `${options.prefix}cold:${lib.name}`;
      // A throwaway cycle first, so that Redis has this library's scripts (other libraries'
      // flushes emptied the cache) for the fresh-client-on-a-warm-database case.
      await oneCycle(await lib.client(env, "default", undefined, false), key);
      for (const flush of [false, true]) {
        if (flush) await env.admin.script("FLUSH");
        const client = await lib.client(env, "default", undefined, false);
        const before = await env.counters();
        const t0 = now();
        const held = await client.acquire(key);
        if (!held) throw new Error(`${lib.name}: cold acquire failed`);
        await held.release();
        const elapsed = now() - t0;
        const after = await env.counters();
        await client.close();
        const requests = requestsOf(lib.transport, before, after);
        if (flush) {
          sum.flushed += requests;
          sum.samples.push(elapsed);
        } else {
          sum.warmDb += requests;
        }
      }
    }
  }
  log(`  uncontended: ${options.coldRepeats} cold cycles per library done`);
  const out = new Map<LibraryName, ColdTally>();
  for (const [name, s] of sums) {
    out.set(name, {
      requests: s.flushed / options.coldRepeats,
      warmDbRequests: s.warmDb / options.coldRepeats,
      p50Ms: percentile(s.samples, 50),
    });
  }
  return out;
}

async function oneCycle(client: LibClient, key: string): Promise<void> {
  const held = await client.acquire(key);
  if (!held) throw new Error("uncontended acquire failed");
  await held.release();
  await client.close();
}

/**
 * `items` in an order drawn from `seed` (Fisher-Yates over a mulberry32 generator): the same seed
 * gives the same order, and unlike a rotation, which keeps the order's cycle, each item follows
 * a different one from seed to seed.
 */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  const next = seeded((seed + 1) * 0x9e3779b9);
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/** `items` rotated left by `by` places, so each round starts with a different participant. */
export function rotate<T>(items: readonly T[], by: number): T[] {
  const k = by % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}
