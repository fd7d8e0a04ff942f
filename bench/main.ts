/**
 * `npm run bench`: edgelock against @upstash/lock (same HTTP bridge) and redlock and
 * redis-semaphore (TCP), on a throwaway redis-server and bridge this run starts. Writes
 * RESULTS.md, results.json and results.svg; `--json` prints the JSON; `--help` lists the flags.
 * @module
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { loadavg } from "node:os";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { BackoffOptions } from "edgelock";
import { bareHandOffLibrary } from "./bare-handoff.js";
import { renderChart } from "./chart.js";
import { startBenchEnv } from "./env.js";
import { createLibraries } from "./libraries.js";
import { parseOptions } from "./options.js";
import { renderMarkdown } from "./report.js";
import { type BenchResults, BLOCKING_MODES, evaluateTargets } from "./results.js";
import { coreBreakdown, entrySizes, runBundle } from "./scenarios/bundle.js";
import { runContended } from "./scenarios/contended.js";
import { runFootprint } from "./scenarios/footprint.js";
import { runOperations } from "./scenarios/operations.js";
import { runRedlock } from "./scenarios/redlock.js";
import { runScale } from "./scenarios/scale.js";
import { runSemaphore, semaphoreLibraries } from "./scenarios/semaphore.js";
import { runUncontended } from "./scenarios/uncontended.js";
import { now } from "./stats.js";

/**
 * Other edgelock backoffs run beside the default at {@link VARIANT_CLIENTS} clients: a shorter
 * cap and a much shorter start and cap, to show what polling faster buys and costs.
 */
const VARIANTS: BackoffOptions[] = [
  { initialDelay: 10, maxDelay: 100, multiplier: 2 },
  { initialDelay: 5, maxDelay: 20, multiplier: 2 },
];
const VARIANT_CLIENTS = 16;

const benchDir = dirname(fileURLToPath(import.meta.url));
const root = resolve(benchDir, "..");

const parsed = parseOptions(process.argv.slice(2), benchDir);
if ("exit" in parsed) {
  const help = process.argv.includes("--help");
  (help ? process.stdout : process.stderr).write(`${parsed.exit}\n`);
  process.exit(help ? 0 : 2);
}
const options = parsed;
const log = (line: string) => process.stderr.write(`${line}\n`);
const has = (s: (typeof options.scenarios)[number]) => options.scenarios.includes(s);

const started = now();
const { json: _json, outDir: _outDir, ...config } = options;
const env = await startBenchEnv();
const prefix = `bench:${randomBytes(4).toString("hex")}:`;
// The bare hand-off lock is the contended scenarios' reference row (bench/bare-handoff.ts).
const libs = [...createLibraries(options.backoff), bareHandOffLibrary].filter(
  (lib) => !options.libraries || options.libraries.includes(lib.name),
);
// How a library waits only shows where there is waiting: the polling variant of edgelock is left
// out of the scenarios without contention.
const waitless = libs.filter((lib) => lib.name !== "edgelock-poll" && lib.name !== "bare-handoff");
let partial: Pick<
  BenchResults,
  | "machine"
  | "config"
  | "limit"
  | "uncontended"
  | "contended"
  | "backoffVariants"
  | "longHold"
  | "bridgeModes"
  | "footprint"
  | "operations"
  | "semaphore"
  | "redlock"
  | "scale"
  | "bundle"
  | "bundlePeers"
>;
try {
  const machine = await env.machine();
  log(
    `bench: ${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, Redis ${machine.redis}`,
  );
  partial = {
    machine,
    config,
    limit: null,
    uncontended: null,
    contended: null,
    backoffVariants: null,
    longHold: null,
    bridgeModes: null,
    footprint: null,
    operations: null,
    semaphore: null,
    redlock: null,
    scale: null,
    bundle: null,
    bundlePeers: null,
  };
  if (has("uncontended")) {
    log("scenarios 1+2: physical limit and uncontended cycle");
    const u = await runUncontended(
      env,
      {
        cycles: options.cycles,
        warmup: options.warmup,
        rounds: options.uncontendedRounds,
        coldRepeats: options.coldRepeats,
        networkDelayMs: options.networkDelayMs,
        networkCycles: options.networkCycles,
        pairedCycles: options.pairedCycles,
        pauseMs: options.holdMs,
        prefix,
        libs: waitless,
      },
      log,
    );
    partial.limit = u.limit;
    partial.uncontended = u.uncontended;
  }
  if (has("contended")) {
    log("scenario 3: contended");
    const contended = await runContended(
      env,
      {
        clientCounts: options.clientCounts,
        holdMs: options.holdMs,
        warmMs: options.warmMs,
        measureMs: options.measureMs,
        rounds: options.contendedRounds,
        prefix,
        libs,
        variants: options.backoff || !libs.some((l) => l.name === "edgelock-poll") ? [] : VARIANTS,
        variantClients: VARIANT_CLIENTS,
      },
      log,
    );
    partial.contended = contended.byClients;
    partial.backoffVariants = contended.variants;
  }
  if (has("long-hold")) {
    log("scenario 3b: long holds");
    const waiters = options.longHoldWaiters;
    const longHold = await runContended(
      env,
      {
        clientCounts: [waiters + 1],
        holdMs: options.longHoldMs,
        // Every waiter must be able to wait for all the holds before its own.
        waitMs: 2 * (waiters + 1) * options.longHoldMs,
        warmMs: options.longHoldMs,
        measureMs: options.longHoldMeasureMs,
        rounds: 1,
        prefix,
        libs: libs.filter((l) => l.name.startsWith("edgelock") || l.name === "bare-handoff"),
        variants: [],
        variantClients: 0,
      },
      log,
    );
    partial.longHold = longHold.byClients[String(waiters + 1)] ?? null;
  }
  if (has("bridge-modes")) {
    log("scenario 3f: bridge blocking modes");
    const byMode: Partial<NonNullable<BenchResults["bridgeModes"]>> = {};
    try {
      for (const mode of BLOCKING_MODES) {
        await env.setBlocking(mode);
        const run = await runContended(
          env,
          {
            clientCounts: [16],
            holdMs: options.holdMs,
            warmMs: options.warmMs,
            measureMs: options.bridgeModesMeasureMs,
            rounds: 1,
            prefix: `${prefix}${mode}:`,
            libs: libs.filter((l) => l.name.startsWith("edgelock")),
            variants: [],
            variantClients: 0,
          },
          log,
        );
        byMode[mode] = run.byClients["16"] ?? {};
      }
    } finally {
      await env.setBlocking("refuse");
    }
    partial.bridgeModes = byMode as NonNullable<BenchResults["bridgeModes"]>;
  }
  if (has("operations")) {
    log("scenario 3d: requests per operation");
    partial.operations = await runOperations(
      env,
      { repeats: options.operationRepeats, prefix },
      log,
    );
  }
  if (has("semaphore")) {
    log("scenario 3e: semaphore");
    partial.semaphore = await runSemaphore(
      env,
      {
        clients: options.semaphoreClients,
        permits: options.semaphorePermits,
        holdMs: options.holdMs,
        warmMs: options.warmMs,
        measureMs: options.measureMs,
        rounds: options.contendedRounds,
        prefix,
        libs: semaphoreLibraries().filter(
          (lib) => !options.libraries || options.libraries.includes(lib.library),
        ),
      },
      log,
    );
  }
  if (has("redlock")) {
    log("scenario 6: RedLock over 5 endpoints");
    partial.redlock = await runRedlock(env, { trials: options.redlockTrials, prefix }, log);
  }
  if (has("footprint")) {
    log("scenario 5: footprint");
    partial.footprint = await runFootprint(
      env,
      {
        cycles: options.footprintCycles,
        names: options.footprintNames,
        workers: 16,
        prefix,
      },
      log,
    );
  }
  if (has("scale")) {
    log("scenario 4: scale");
    partial.scale = await runScale(
      env,
      {
        sizes: options.scaleSizes,
        cycles: options.scaleCycles,
        memoryLocks: options.memoryLocks,
        prefix,
        libs: waitless,
      },
      log,
    );
  }
} finally {
  await env.close();
}
if (has("bundle")) {
  log("scenario 5: bundle size");
  const { "@upstash/lock": peer, ...entries } = await runBundle(root, log);
  partial.bundle = entries;
  partial.bundlePeers = peer ? { "@upstash/lock": peer } : null;
}

const results: BenchResults = {
  ...partial,
  targets: evaluateTargets(partial),
  durationSec: Math.round((now() - started) / 100) / 10,
  loadAverageAtEnd: Math.round((loadavg()[0] ?? 0) * 100) / 100,
  versions: await readVersions(),
  core: has("bundle") ? await coreBreakdown(root) : null,
  entrySizes: has("bundle") ? await entrySizes(root, log) : null,
};
const markdown = renderMarkdown(results);
if (options.outDir) {
  await mkdir(options.outDir, { recursive: true });
  await writeFile(`${options.outDir}/results.json`, `${JSON.stringify(results, null, 2)}\n`);
  await writeFile(`${options.outDir}/RESULTS.md`, markdown);
  if (results.contended) {
    await writeFile(`${options.outDir}/results.svg`, await renderChart(results));
  }
  log(
    `bench: wrote ${options.outDir}/RESULTS.md, results.json${results.contended ? ", results.svg" : ""}`,
  );
}
log(`bench: done in ${results.durationSec} s`);
process.stdout.write(options.json ? `${JSON.stringify(results)}\n` : markdown);

/** Installed versions of the packages under test, from their package.json files. */
async function readVersions(): Promise<Record<string, string>> {
  const names = ["@upstash/redis", "@upstash/lock", "redlock", "redis-semaphore", "ioredis"];
  const out: Record<string, string> = {};
  for (const name of names) {
    const text = await readFile(`${root}/node_modules/${name}/package.json`, "utf8");
    out[name] = String((JSON.parse(text) as { version?: unknown }).version ?? "?").replace(
      /^v/,
      "",
    );
  }
  return out;
}
