// Runs every ```ts code sample of README.md and docs/*.md against the BUILT package, the way a
// reader would on the no-account set-up of the README: a private redis-server behind the REST
// bridge, UPSTASH_REDIS_REST_URL / _TOKEN pointing at it. Run `npm run build` first; run with
// `node --import tsx scripts/run-samples.mjs` (`npm run check:samples` type-checks, then runs).
//
// - Each sample runs in its own process (scripts/sample-driver.mjs), on emptied databases, and
//   its output is printed under its `file:line`: what it printed itself, and for a handler the
//   answers to the calls the driver made (which got 409, which ran). Worker code with a
//   `scheduled` handler or Durable Objects runs in local workerd (scripts/sample-worker.mjs).
// - The samples across databases read EU_, US_, AP_, ORDERS_ and BILLING_REDIS_REST_URL / _TOKEN:
//   two more private Redis servers, each behind its own bridge, stand in for them.
// - A sample that cannot run on its own is fenced ```ts norun: <reason>; the reasons are printed.
// - `<!-- output: <text> -->` lines right after a block name text its run must print (what the
//   sample's comments or the page claim it prints).
//
// - Then the README's "Try it without an account" runs as a reader would, with 127.0.0.1:6379
//   and :8079 taken (scripts/try-it.mjs).
// - `SAMPLES=<file>[:<line>]` runs only the samples whose `file:line` starts with it (and "Try it"
//   only for README.md).
//
// Exit code 1 when a sample threw, printed nothing, did not print a promised output, did not
// finish within TIMEOUT_MS, or a request it served got a 5xx.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { Redis } from "@upstash/redis";
import { startBridge } from "edgelock/bridge";
import { startRedisServer } from "../demo/redis-server.ts";
import { extract, isWorkerCode, markdown, root } from "./samples.mjs";
import { checkTryIt } from "./try-it.mjs";

const TIMEOUT_MS = 60_000;
const TOKEN = "dev-token";
const only = process.env.SAMPLES ?? "";
const blocks = markdown.flatMap(extract).filter((b) => `${b.file}:${b.line}`.startsWith(only));

const servers = [];
const bridges = [];
const stop = async () => {
  await Promise.allSettled(bridges.map((b) => b.close()));
  await Promise.allSettled(servers.map((s) => s.stop()));
};
const dir = join(root, ".samples-run");
let failures = 0;
try {
  for (let i = 0; i < 3; i++) {
    const server = await startRedisServer();
    servers.push(server);
    bridges.push(await startBridge({ redisUrl: server.url, token: TOKEN }));
  }
  const [main, second, third] = bridges;
  const databases = {
    UPSTASH: main,
    EU: main,
    US: second,
    AP: third,
    ORDERS: main,
    BILLING: second,
  };
  const env = { ...process.env, CRON_SECRET: "sample-cron-secret" };
  for (const [prefix, bridge] of Object.entries(databases)) {
    env[`${prefix}_REDIS_REST_URL`] = bridge.url;
    env[`${prefix}_REDIS_REST_TOKEN`] = TOKEN;
  }
  const clients = bridges.map((b) => new Redis({ url: b.url, token: TOKEN }));

  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const skipped = [];
  let ran = 0;
  for (const [i, block] of blocks.entries()) {
    const where = `${block.file}:${block.line}`;
    if (block.norun) {
      skipped.push(`${where} (${block.norun})`);
      continue;
    }
    await Promise.all(clients.map((c) => c.flushall()));
    // Inside the package, so that `edgelock` resolves to the package itself.
    const path = join(dir, `sample-${String(i + 1).padStart(2, "0")}.ts`);
    writeFileSync(path, `${block.code}\n`);
    // A sample serving HTTP listens on PORT (3000 when unset): a free one here.
    const driver = needsWorkerd(block.code) ? "sample-worker.mjs" : "sample-driver.mjs";
    const { code, output } = await runOne(driver, path, {
      ...env,
      PORT: String(await freePort()),
    });
    ran += 1;
    const missing = block.outputs.filter((text) => !output.includes(text));
    const problem =
      code === "timeout"
        ? `did not finish within ${TIMEOUT_MS} ms`
        : code !== 0
          ? `exit code ${code}`
          : output.trim() === ""
            ? "printed nothing"
            : missing.length > 0
              ? `did not print ${missing.map((m) => JSON.stringify(m)).join(", ")}`
              : undefined;
    console.log(`\n▶ ${where}${problem ? `  FAILED: ${problem}` : ""}`);
    console.log(output.trimEnd().replace(/^/gm, "  "));
    if (problem) failures += 1;
  }
  if ("README.md".startsWith(only) || only.startsWith("README.md")) {
    if ((await checkTryIt()).length > 0) failures += 1;
  }
  console.log(`\n${ran} samples ran, ${failures} failed; not run (${skipped.length}):`);
  for (const s of skipped) console.log(`  ${s}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
  await stop();
}
process.exit(failures > 0 ? 1 : 0);

/**
 * Worker code that only workerd runs: a `scheduled` handler, or Durable Objects. Other Worker
 * code (a fetch handler) runs under Node's driver, with the application's stand-ins.
 */
function needsWorkerd(code) {
  return isWorkerCode(code) && /\bscheduled\s*:|DurableObjectNamespace</.test(code);
}

/** Runs one sample under `driver`; its stdout and stderr, interleaved. */
function runOne(driver, path, env) {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(root, "scripts", driver), path],
      { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] },
    );
    let output = "";
    child.stdout.on("data", (d) => {
      output += d;
    });
    child.stderr.on("data", (d) => {
      output += d;
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, TIMEOUT_MS);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code: timedOut ? "timeout" : code, output });
    });
  });
}

/** A TCP port free on 127.0.0.1 right now. */
async function freePort() {
  const server = createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address();
  server.close();
  await once(server, "close");
  return port;
}
