// Runs one Worker code sample (a module written by scripts/run-samples.mjs) in local workerd
// through Miniflare, as `wrangler dev` would, and prints what the Worker logged: run it with
// `node scripts/sample-worker.mjs <sample.ts>`, with UPSTASH_REDIS_REST_URL / _TOKEN set.
//
// - The sample is bundled with esbuild for workerd; `edgelock` resolves to the built package.
// - Each Durable Object namespace its `Env` declares (`NAME: DurableObjectNamespace<Class>`) is
//   bound to the class of that name, which the sample must export.
// - A `scheduled` handler is fired twice at once for one scheduled time (a duplicate delivery
//   while the first run runs), then once more after both ended (a redelivery); each outcome and
//   every line the Worker logged is printed.
//
// Exit code 1 when the Worker failed to start or a run failed.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { build } from "esbuild";
import { Miniflare } from "miniflare";

const file = process.argv[2];
if (!file) throw new Error("usage: sample-worker.mjs <sample.ts>");
const source = await readFile(file, "utf8");
const dir = await mkdtemp(join(tmpdir(), "edgelock-sample-"));
let mf;
let failed = false;
try {
  const scriptPath = join(dir, "worker.mjs");
  await build({
    entryPoints: [file],
    outfile: scriptPath,
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["module", "main"],
    external: ["cloudflare:*"],
    logLevel: "warning",
  });
  const durableObjects = Object.fromEntries(
    [...source.matchAll(/(\w+)\s*:\s*DurableObjectNamespace<\s*(\w+)\s*>/g)].map(
      ([, binding, className]) => [binding, { className, useSQLite: true }],
    ),
  );
  mf = new Miniflare({
    modules: true,
    modulesRoot: dir,
    scriptPath,
    compatibilityDate: "2026-04-01",
    bindings: {
      UPSTASH_REDIS_REST_URL: process.env.UPSTASH_REDIS_REST_URL ?? "",
      UPSTASH_REDIS_REST_TOKEN: process.env.UPSTASH_REDIS_REST_TOKEN ?? "",
    },
    durableObjects,
    durableObjectsPersist: false,
    // The Worker's console, line by line, as `wrangler dev` shows it.
    handleRuntimeStdio(stdout, stderr) {
      for (const input of [stdout, stderr]) {
        createInterface({ input }).on("line", (line) => console.log(`  worker: ${line}`));
      }
    },
    verbose: false,
  });
  const worker = await mf.getWorker();
  if (/\bscheduled\s*:/.test(source)) {
    const scheduledTime = new Date(Math.floor(Date.now() / 300_000) * 300_000);
    const fire = () => worker.scheduled({ cron: "*/5 * * * *", scheduledTime });
    const both = await Promise.all([fire(), fire()]);
    console.log(`scheduled, twice at once: ${both.map((r) => r.outcome).join(" | ")}`);
    const again = await fire();
    console.log(`scheduled, once more after: ${again.outcome}`);
    failed = [...both, again].some((r) => r.outcome !== "ok");
  }
  // Let the last log lines through before workerd stops.
  await new Promise((resolve) => setTimeout(resolve, 200));
} catch (error) {
  console.error(error);
  failed = true;
} finally {
  await mf?.dispose().catch(() => {});
  await rm(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
