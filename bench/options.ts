/**
 * Command-line options of `npm run bench` and the sizes of a full and a quick run.
 * @module
 */
import { parseArgs } from "node:util";
import type { BackoffOptions } from "edgelock";
import { LIBRARY_NAMES } from "./libraries.js";

/** Scenario names accepted by `--only`. `uncontended` includes scenario 1 (the limit). */
export const SCENARIOS = [
  "uncontended",
  "contended",
  "long-hold",
  "bridge-modes",
  "operations",
  "semaphore",
  "redlock",
  "scale",
  "footprint",
  "bundle",
] as const;
export type Scenario = (typeof SCENARIOS)[number];

/** Everything a run needs to know; every duration in ms. */
export interface BenchOptions {
  quick: boolean;
  json: boolean;
  /** Directory for RESULTS.md, results.json and results.svg; `null` writes nothing. */
  outDir: string | null;
  scenarios: Scenario[];
  cycles: number;
  warmup: number;
  uncontendedRounds: number;
  coldRepeats: number;
  /**
   * Scenario 2 again at a network's round trip: the bridge holds each request this long (0: not
   * run), for `networkCycles` cycles per HTTP library.
   */
  networkDelayMs: number;
  networkCycles: number;
  /** Scenario 2's pairs of cycles with @upstash/lock's per HTTP library (0: not run). */
  pairedCycles: number;
  clientCounts: number[];
  holdMs: number;
  warmMs: number;
  measureMs: number;
  contendedRounds: number;
  scaleSizes: number[];
  scaleCycles: number;
  memoryLocks: number;
  /** Long holds: waiters behind the holder, hold time and measured window. */
  longHoldWaiters: number;
  longHoldMs: number;
  longHoldMeasureMs: number;
  /** Bridge modes: the 16-client loop of scenario 3 once per blocking mode, this window each. */
  bridgeModesMeasureMs: number;
  /** Calls of each operation in scenario 3d. */
  operationRepeats: number;
  /** Scenario 3e: clients contending for a semaphore of `semaphorePermits` permits. */
  semaphoreClients: number;
  semaphorePermits: number;
  /** Scenario 6: measured RedLock(5) trials. */
  redlockTrials: number;
  /** Footprint: acquire/release cycles per shape, and names of the many-names shape. */
  footprintCycles: number;
  footprintNames: number;
  /** Libraries to run (`--libs`); default all. */
  libraries: string[] | null;
  /** Non-default edgelock backoff (`--backoff initial,max,multiplier`), for exploration. */
  backoff?: BackoffOptions;
}

export const USAGE = `usage: npm run bench -- [options]

  --quick             smoke run of a few seconds (writes to bench/.tmp/ unless --out is given)
  --json              print the results as JSON (the last JSON object on stdout)
  --out <dir>         where to write RESULTS.md, results.json, results.svg (default: bench/)
  --no-write          write no files
  --only <list>       comma-separated scenarios: ${SCENARIOS.join(", ")}
  --libs <list>       comma-separated libraries (default: all): ${LIBRARY_NAMES.join(", ")}
  --cycles <n>        uncontended cycles per library (default 2000)
  --clients <list>    contended client counts (default 4,16,64)
  --hold <ms>         contended and semaphore hold time (default 10)
  --measure <ms>      contended and semaphore measured window per round (default 2500)
  --rounds <n>        contended and semaphore rounds per configuration (default 2)
  --long-measure <ms> long-hold measured window (default 20000: about 10 acquisitions, so
                      requests per acquisition ±0.2; longer windows narrow that)
  --scale-max <n>     largest number of locks in the scale scenario (default 100000)
  --backoff <i,m,x>   run edgelock with backoff { initialDelay: i, maxDelay: m, multiplier: x }
                      instead of its defaults (exploration; RESULTS.md flags it)
  --help              this text`;

const FULL = {
  cycles: 2000,
  warmup: 200,
  uncontendedRounds: 20,
  coldRepeats: 10,
  networkDelayMs: 5,
  networkCycles: 400,
  pairedCycles: 2_000,
  clientCounts: [4, 16, 64],
  holdMs: 10,
  warmMs: 500,
  measureMs: 2500,
  contendedRounds: 2,
  scaleSizes: [1, 1_000, 10_000, 100_000],
  scaleCycles: 300,
  memoryLocks: 2000,
  longHoldWaiters: 8,
  longHoldMs: 2_000,
  longHoldMeasureMs: 20_000,
  bridgeModesMeasureMs: 2_500,
  operationRepeats: 200,
  semaphoreClients: 16,
  semaphorePermits: 3,
  redlockTrials: 300,
  footprintCycles: 100_000,
  footprintNames: 1_000,
};

const QUICK: typeof FULL = {
  cycles: 60,
  warmup: 10,
  uncontendedRounds: 2,
  coldRepeats: 1,
  networkDelayMs: 5,
  networkCycles: 10,
  pairedCycles: 10,
  clientCounts: [4, 16],
  holdMs: 10,
  // Past the start of 16 clients (each subscribes after its first busy attempt, and only then
  // registers for a hand-off): about 150-300 ms on a loaded machine, in which a window may
  // see no acquisition at all.
  warmMs: 400,
  measureMs: 300,
  contendedRounds: 1,
  scaleSizes: [1, 1_000],
  scaleCycles: 20,
  memoryLocks: 50,
  longHoldWaiters: 3,
  longHoldMs: 200,
  longHoldMeasureMs: 1_500,
  bridgeModesMeasureMs: 300,
  operationRepeats: 10,
  semaphoreClients: 16,
  semaphorePermits: 3,
  redlockTrials: 10,
  footprintCycles: 2_000,
  footprintNames: 100,
};

/** Parses `argv`; returns the options, or a message to print (help or a usage error). */
export function parseOptions(argv: string[], benchDir: string): BenchOptions | { exit: string } {
  let values: ReturnType<typeof parse>["values"];
  try {
    values = parse(argv).values;
  } catch (error) {
    return { exit: `${(error as Error).message}\n${USAGE}` };
  }
  if (values.help) return { exit: USAGE };
  const quick = values.quick ?? false;
  const base = quick ? QUICK : FULL;
  const int = (text: string | undefined, fallback: number, name: string) => {
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`--${name} must be an integer ≥ 1`);
    return n;
  };
  try {
    const scenarios = values.only
      ? values.only.split(",").map((s) => {
          if (!(SCENARIOS as readonly string[]).includes(s)) {
            throw new RangeError(`--only: unknown scenario "${s}"`);
          }
          return s as Scenario;
        })
      : [...SCENARIOS];
    const scaleMax = int(values["scale-max"], Math.max(...base.scaleSizes), "scale-max");
    return {
      quick,
      json: values.json ?? false,
      outDir: values["no-write"] ? null : (values.out ?? (quick ? `${benchDir}/.tmp` : benchDir)),
      scenarios,
      libraries: values.libs
        ? values.libs.split(",").map((l) => {
            if (!(LIBRARY_NAMES as readonly string[]).includes(l)) {
              throw new RangeError(`--libs: unknown library "${l}"`);
            }
            return l;
          })
        : null,
      ...base,
      cycles: int(values.cycles, base.cycles, "cycles"),
      clientCounts: values.clients
        ? values.clients.split(",").map((c) => int(c, 0, "clients"))
        : base.clientCounts,
      holdMs: int(values.hold, base.holdMs, "hold"),
      measureMs: int(values.measure, base.measureMs, "measure"),
      contendedRounds: int(values.rounds, base.contendedRounds, "rounds"),
      longHoldWaiters: base.longHoldWaiters,
      longHoldMs: base.longHoldMs,
      longHoldMeasureMs: int(values["long-measure"], base.longHoldMeasureMs, "long-measure"),
      bridgeModesMeasureMs: base.bridgeModesMeasureMs,
      operationRepeats: base.operationRepeats,
      semaphoreClients: base.semaphoreClients,
      semaphorePermits: base.semaphorePermits,
      redlockTrials: base.redlockTrials,
      footprintCycles: base.footprintCycles,
      footprintNames: base.footprintNames,
      scaleSizes: [...new Set([...base.scaleSizes.filter((s) => s < scaleMax), scaleMax])],
      ...(values.backoff !== undefined && { backoff: parseBackoff(values.backoff) }),
    };
  } catch (error) {
    return { exit: `${(error as Error).message}\n${USAGE}` };
  }
}

function parseBackoff(text: string): BackoffOptions {
  const [initialDelay, maxDelay, multiplier] = text.split(",").map(Number);
  if (initialDelay === undefined || maxDelay === undefined || multiplier === undefined) {
    throw new RangeError("--backoff must be initialDelay,maxDelay,multiplier");
  }
  return { initialDelay, maxDelay, multiplier };
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    strict: true,
    options: {
      quick: { type: "boolean" },
      json: { type: "boolean" },
      out: { type: "string" },
      "no-write": { type: "boolean" },
      only: { type: "string" },
      libs: { type: "string" },
      cycles: { type: "string" },
      clients: { type: "string" },
      hold: { type: "string" },
      measure: { type: "string" },
      "long-measure": { type: "string" },
      rounds: { type: "string" },
      "scale-max": { type: "string" },
      backoff: { type: "string" },
      help: { type: "boolean" },
    },
  });
}
