/**
 * `npm run explore`: the model-based explorer from the command line.
 *
 *   npm run explore                                  the committed seed set, every kind
 *   npm run explore -- --kind lock,fair-lock         some kinds
 *   npm run explore -- --minutes 10                  fresh seeds for 10 minutes
 *   npm run explore -- --kind lock --seed S --path P  replay one failure
 *   npm run explore -- --kind lock --seed S --runs N N runs from seed S
 *   npm run explore -- --mutant ID ...               the same against a mutant (mutants.ts)
 *
 * The last line reads `explore: <runs> runs, <steps> steps, <violations> violations`; the
 * exit code is 1 when a property broke.
 */
import { parseArgs } from "node:util";
import { type ExploreFailure, type ExploreStats, explore } from "./explore.js";
import { KINDS, type KindName } from "./kinds.js";
import { loadMutant, MUTATIONS, type Mutant } from "./mutants.js";
import { SEEDS } from "./seeds.js";
import { startSession } from "./world.js";

const SHRINK_LIMIT_MS = 120_000;

function fail(message: string): never {
  console.error(`explore: ${message}`);
  process.exit(2);
}

const { values } = parseArgs({
  options: {
    kind: { type: "string" },
    seed: { type: "string" },
    path: { type: "string" },
    runs: { type: "string" },
    minutes: { type: "string" },
    "shrink-seconds": { type: "string" },
    verbose: { type: "boolean" },
    mutant: { type: "string" },
    "no-shrink": { type: "boolean" },
  },
});

const kinds: KindName[] = (values.kind ?? KINDS.join(","))
  .split(",")
  .map((k) => k.trim())
  .map((k) =>
    (KINDS as readonly string[]).includes(k)
      ? (k as KindName)
      : fail(`unknown kind ${k} (kinds: ${KINDS.join(", ")})`),
  );
const integer = (text: string | undefined, what: string): number | undefined => {
  if (text === undefined) return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : fail(`--${what} must be an integer`);
};
const seed = integer(values.seed, "seed");
const runs = integer(values.runs, "runs");
const minutes = values.minutes === undefined ? undefined : Number(values.minutes);
if (minutes !== undefined && !(minutes > 0)) fail("--minutes must be a positive number");
if (values.path !== undefined && (seed === undefined || kinds.length !== 1)) {
  fail("--path needs --seed and one --kind");
}
const shrinkLimitMs =
  (integer(values["shrink-seconds"], "shrink-seconds") ?? 0) * 1000 || SHRINK_LIMIT_MS;

let mutant: Mutant | undefined;
if (values.mutant !== undefined) {
  const mutation =
    MUTATIONS.find((m) => m.id === values.mutant) ??
    fail(`unknown mutant ${values.mutant} (mutants: ${MUTATIONS.map((m) => m.id).join(", ")})`);
  mutant = await loadMutant(mutation);
  console.log(`mutant ${mutation.id}: ${mutation.what}`);
}

const stats: ExploreStats = { runs: 0, steps: 0, violations: 0 };
const failures: ExploreFailure[] = [];
const session = await startSession();

async function one(kind: KindName, s: number, numRuns: number, timeLimitMs?: number) {
  const started = Date.now();
  const before = { ...stats };
  const failure = await explore({
    kind,
    session,
    seed: s,
    path: values.path,
    numRuns,
    timeLimitMs,
    shrinkLimitMs,
    shrink: !values["no-shrink"],
    lib: mutant?.lib,
    scripts: mutant?.scripts,
    stats,
    onRun: values.verbose
      ? (steps, failed, log) =>
          console.log(`run: ${steps} steps${failed ? ", failed" : ""}\n  ${log.join("\n  ")}`)
      : undefined,
  });
  console.log(
    `${kind} seed ${s}: ${stats.runs - before.runs} runs, ${stats.steps - before.steps} steps, ${((Date.now() - started) / 1000).toFixed(1)} s${failure ? ", VIOLATION" : ""}`,
  );
  if (failure) {
    failures.push(failure);
    console.log(report(failure));
  }
}

function report(f: ExploreFailure): string {
  return [
    `--- violation: ${f.kind}, seed ${f.seed}, path ${f.path}`,
    `counterexample: ${f.counterexample}`,
    f.message,
    `replay: npm run explore -- --kind ${f.kind} --seed ${f.seed} --path ${f.path}${values.mutant === undefined ? "" : ` --mutant ${values.mutant}`}`,
    "---",
  ].join("\n");
}

try {
  if (seed !== undefined) {
    for (const kind of kinds) await one(kind, seed, runs ?? 10);
  } else if (minutes !== undefined) {
    const until = Date.now() + minutes * 60_000;
    // Round-robin over the kinds, a fresh seed and a slice of at most a minute each.
    for (let i = 0; Date.now() < until; i++) {
      const kind = kinds[i % kinds.length] as KindName;
      const slice = Math.min(60_000, until - Date.now());
      await one(kind, Math.floor(Math.random() * 2 ** 31), 1_000_000, slice);
    }
  } else {
    for (const kind of kinds) {
      for (const fixed of SEEDS[kind]) await one(kind, fixed.seed, runs ?? fixed.runs);
    }
  }
} finally {
  await session.close();
  mutant?.remove();
}
console.log(`explore: ${stats.runs} runs, ${stats.steps} steps, ${stats.violations} violations`);
process.exitCode = stats.violations > 0 ? 1 : 0;
