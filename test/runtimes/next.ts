/**
 * `npm run check:next`: the Next.js app of `examples/next/` (App Router, `edgelock/vercel`),
 * built with `next build` and served by `next start` against a throwaway redis-server behind the
 * REST bridge, then driven over HTTP:
 *
 * - the demo's webhook sequence on `/api/webhook` (Node) and `/api/webhook-edge` (Edge): 5
 *   concurrent deliveries of one event (1×200 + 4×409), then 2 redeliveries (200 duplicate),
 *   the work reaching the downstream service once;
 * - deliveries without a usable id (`{"id":""}`, `{}`, a body that is not JSON): 400 each, the
 *   work never reached;
 * - the cron route `/api/cron`: 401 without the secret, a run overlapping a running one skipped
 *   (`reason: "overlap"`), the next run after it runs.
 *
 * The app installs its own dependencies (`npm ci` in examples/next when they are missing or not
 * at their pinned versions) plus this checkout's package packed with `npm pack`, as a user
 * would install it. The routes' work calls a downstream service that this check serves; it holds
 * the first call open until the duplicates have been answered, so the outcome is decided by the
 * lock, not by timing. Needs the built package (`npm run build`). Exits 1 on any failure.
 */

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startRedisBehindBridge, stops, within } from "./services.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const app = join(root, "examples/next");
const SEQUENCE_TIMEOUT_MS = 30_000;
const START_TIMEOUT_MS = 60_000;

/** A promise with its resolve function outside. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve: (value: T) => void = () => {};
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * The service the app's routes call (`DOWNSTREAM_URL`): counts calls per path and event, and
 * holds a call open while a gate for it is set.
 */
function startDownstream() {
  const calls = new Map<string, number>();
  const gates = new Map<string, Promise<void>>();
  const arrivals = new Map<string, ReturnType<typeof deferred<void>>>();
  const arrived = (key: string) => {
    let a = arrivals.get(key);
    if (!a) {
      a = deferred();
      arrivals.set(key, a);
    }
    return a;
  };
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let body = "";
    request.on("data", (chunk: Buffer) => {
      body += chunk.toString("utf8");
    });
    request.on("end", () => {
      const event = JSON.parse(body || "{}") as { id?: string };
      const key = `${request.url}${event.id ? `:${event.id}` : ""}`;
      calls.set(key, (calls.get(key) ?? 0) + 1);
      arrived(key).resolve();
      void (gates.get(key) ?? Promise.resolve()).then(() => {
        gates.delete(key);
        response.writeHead(200, { "content-type": "application/json" });
        response.end(JSON.stringify(request.url === "/report" ? { rows: 42 } : { ok: true }));
      });
    });
  });
  return {
    async listen(): Promise<string> {
      server.listen(0, "127.0.0.1");
      await once(server, "listening");
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    },
    /** Holds the next call of `key` (`/fulfil:<id>`, `/report`) until `until` resolves. */
    hold(key: string, until: Promise<void>) {
      gates.set(key, until);
    },
    /** Resolves once a call of `key` has arrived. */
    arrived: (key: string) => arrived(key).promise,
    calls: (key: string) => calls.get(key) ?? 0,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    },
  };
}
type Downstream = ReturnType<typeof startDownstream>;

/** Asks the OS for a free loopback port. */
async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, "close");
  return port;
}

/** Whether every direct dependency of the app is installed at the version it pins. */
function appInstalled(): boolean {
  const pkg = JSON.parse(readFileSync(join(app, "package.json"), "utf8")) as {
    dependencies: Record<string, string>;
    devDependencies: Record<string, string>;
  };
  return Object.entries({ ...pkg.dependencies, ...pkg.devDependencies }).every(([name, pin]) => {
    const manifest = join(app, "node_modules", name, "package.json");
    if (!existsSync(manifest)) return false;
    return (JSON.parse(readFileSync(manifest, "utf8")) as { version: string }).version === pin;
  });
}

const npm = (args: string[], cwd: string) =>
  execFileSync("npm", [...args, "--no-audit", "--no-fund"], {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });

/** Runs `command` in the app to its end, printing its output; throws on a non-zero exit. */
async function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  // A process group of its own, so that an interrupted check also ends the build's workers.
  const child = spawn(command, args, {
    cwd: app,
    env,
    stdio: ["ignore", "inherit", "inherit"],
    detached: true,
  });
  const stop = async () => {
    if (child.pid !== undefined && child.exitCode === null) process.kill(-child.pid, "SIGKILL");
  };
  stops.add(stop);
  const [code] = (await once(child, "exit")) as [number | null];
  stops.delete(stop);
  if (code !== 0) throw new Error(`${command} ${args.join(" ")} exited with ${code}`);
}

/** Starts `next start` and resolves once it is ready; `stop()` ends its process group. */
async function nextStart(port: number, env: NodeJS.ProcessEnv) {
  const child: ChildProcess = spawn(
    join(app, "node_modules/.bin/next"),
    ["start", "--port", String(port), "--hostname", "127.0.0.1"],
    { cwd: app, env, stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  let output = "";
  const exited = once(child, "exit");
  const ready = new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8");
      if (/Ready in/.test(output)) resolve();
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    void exited.then(() => reject(new Error(`next start exited early:\n${output}`)));
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
    // Its own process group: whatever `next start` spawned goes with it.
    process.kill(-child.pid, "SIGTERM");
    await exited;
  };
  try {
    await within(START_TIMEOUT_MS, "next start", ready);
  } catch (error) {
    await stop();
    throw error;
  }
  return { stop, output: () => output };
}

interface Finding {
  ok: boolean;
  result: string;
}

/** The demo's webhook sequence against `path`: 5 deliveries at once, then 2 redeliveries. */
async function webhook(base: string, path: string, downstream: Downstream): Promise<Finding> {
  const id = `evt_${randomBytes(4).toString("hex")}`;
  const duplicatesAnswered = deferred();
  downstream.hold(`/fulfil:${id}`, duplicatesAnswered.promise);
  let locked = 0;
  const deliver = async () => {
    const response = await fetch(`${base}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id, type: "invoice.paid" }),
    });
    const body = (await response.json()) as { processed?: string; duplicate?: boolean };
    if (response.status === 409 && ++locked === 4) duplicatesAnswered.resolve();
    return { status: response.status, body };
  };
  try {
    const { concurrent, later } = await within(
      SEQUENCE_TIMEOUT_MS,
      path,
      (async () => {
        const concurrent = await Promise.all(Array.from({ length: 5 }, deliver));
        return { concurrent, later: [await deliver(), await deliver()] };
      })(),
    );
    const firsts = concurrent.filter((r) => r.status === 200 && r.body.processed === id).length;
    const inFlight = concurrent.filter((r) => r.status === 409).length;
    const duplicates = later.filter((r) => r.status === 200 && r.body.duplicate === true).length;
    const fulfilled = downstream.calls(`/fulfil:${id}`);
    return {
      ok: firsts === 1 && inFlight === 4 && duplicates === 2 && fulfilled === 1,
      result: `5 concurrent: ${firsts}×200 + ${inFlight}×409; 2 later: ${duplicates}×200 duplicate; fulfilled ${fulfilled}×`,
    };
  } finally {
    duplicatesAnswered.resolve();
  }
}

/**
 * Deliveries without a usable id on `path`: an empty id, no id, a body that is not JSON. Each
 * gets 400 (`missing-key` or `invalid-key`), and none reaches the work.
 */
async function keyless(base: string, path: string, downstream: Downstream): Promise<Finding> {
  const before = downstream.calls("/fulfil");
  const deliver = async (body: string) => {
    const response = await fetch(`${base}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    return `${response.status} ${((await response.json()) as { error?: string }).error}`;
  };
  const answers = await within(
    SEQUENCE_TIMEOUT_MS,
    path,
    Promise.all([deliver('{"id":""}'), deliver("{}"), deliver("not json")]),
  );
  const expected = ["400 missing-key", "400 missing-key", "400 invalid-key"];
  const reached = downstream.calls("/fulfil") - before;
  return {
    ok: answers.every((a, i) => a === expected[i]) && reached === 0,
    result: `{"id":""}: ${answers[0]}; {}: ${answers[1]}; not JSON: ${answers[2]}; work run ${reached}×`,
  };
}

/** The cron route: 401 without the secret, an overlapping run skipped, the next one runs. */
async function cron(base: string, secret: string, downstream: Downstream): Promise<Finding> {
  const get = async (authorization?: string) => {
    const response = await fetch(`${base}/api/cron`, {
      headers: authorization ? { authorization } : {},
    });
    const body = (await response.json()) as { rows?: number; skipped?: boolean; reason?: string };
    return { status: response.status, body };
  };
  const finished = deferred();
  downstream.hold("/report", finished.promise);
  try {
    return await within(
      SEQUENCE_TIMEOUT_MS,
      "/api/cron",
      (async () => {
        const unauthorized = await get();
        const wrong = await get("Bearer wrong");
        const first = get(`Bearer ${secret}`);
        // The first run holds the lock once its job has reached the report service.
        await downstream.arrived("/report");
        const overlapping = await get(`Bearer ${secret}`);
        finished.resolve();
        const done = await first;
        const next = await get(`Bearer ${secret}`);
        const reports = downstream.calls("/report");
        const ok =
          unauthorized.status === 401 &&
          wrong.status === 401 &&
          overlapping.status === 200 &&
          overlapping.body.skipped === true &&
          overlapping.body.reason === "overlap" &&
          done.status === 200 &&
          done.body.rows === 42 &&
          next.status === 200 &&
          next.body.rows === 42 &&
          reports === 2;
        return {
          ok,
          result: `no secret: ${unauthorized.status}, wrong: ${wrong.status}; overlapping run: ${overlapping.status}${overlapping.body.skipped ? ` skipped (${overlapping.body.reason})` : ""}; first: ${done.status}; next: ${next.status}; jobs run: ${reports}`,
        };
      })(),
    );
  } finally {
    finished.resolve();
  }
}

async function main(): Promise<number> {
  if (!existsSync(join(root, "dist/src/vercel.js"))) {
    console.error("check:next: the package is not built: run `npm run build` first");
    return 1;
  }
  const times: [string, number][] = [];
  const timed = async <T>(what: string, work: () => Promise<T> | T): Promise<T> => {
    const started = performance.now();
    try {
      return await work();
    } finally {
      times.push([what, performance.now() - started]);
    }
  };

  await timed("npm ci (examples/next)", () => {
    if (appInstalled()) return;
    console.log("installing examples/next (npm ci)");
    npm(["ci"], app);
  });
  const packDir = mkdtempSync(join(tmpdir(), "edgelock-next-"));
  try {
    await timed("npm pack + install into the app", () => {
      // The build already ran: pack dist/ as it is.
      const [packed] = JSON.parse(
        npm(["pack", "--ignore-scripts", "--json", "--pack-destination", packDir], root),
      ) as { filename: string }[];
      if (!packed) throw new Error("npm pack produced nothing");
      npm(["install", "--no-save", join(packDir, packed.filename)], app);
    });
  } finally {
    rmSync(packDir, { recursive: true, force: true });
  }

  const backend = await startRedisBehindBridge();
  const downstream = startDownstream();
  const cronSecret = randomBytes(16).toString("hex");
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NEXT_TELEMETRY_DISABLED: "1",
    UPSTASH_REDIS_REST_URL: backend.bridgeUrl,
    UPSTASH_REDIS_REST_TOKEN: backend.token,
    CRON_SECRET: cronSecret,
    DOWNSTREAM_URL: await downstream.listen(),
  };
  let server: Awaited<ReturnType<typeof nextStart>> | undefined;
  const rows: [string, Finding, number][] = [];
  try {
    await timed("next build", () => run(join(app, "node_modules/.bin/next"), ["build"], env));
    const port = await freePort();
    server = await timed("next start (until ready)", () => nextStart(port, env));
    stops.add(server.stop);
    const base = `http://127.0.0.1:${port}`;
    const scenarios: [string, () => Promise<Finding>][] = [
      ["webhook, Node runtime (/api/webhook)", () => webhook(base, "/api/webhook", downstream)],
      [
        "webhook, Edge runtime (/api/webhook-edge)",
        () => webhook(base, "/api/webhook-edge", downstream),
      ],
      [
        "webhook without a usable id (/api/webhook)",
        () => keyless(base, "/api/webhook", downstream),
      ],
      ["cron (/api/cron)", () => cron(base, cronSecret, downstream)],
    ];
    for (const [what, body] of scenarios) {
      const started = performance.now();
      let finding: Finding;
      try {
        finding = await body();
      } catch (error) {
        finding = { ok: false, result: error instanceof Error ? error.message : String(error) };
      }
      rows.push([what, finding, performance.now() - started]);
    }
  } finally {
    await server?.stop();
    await downstream.close();
    await backend.close();
  }

  console.log("");
  for (const [what, finding, ms] of rows) {
    console.log(
      `${finding.ok ? "PASS" : "FAIL"}  ${what}: ${finding.result} (${Math.round(ms)} ms)`,
    );
  }
  console.log("");
  for (const [what, ms] of times) console.log(`${what.padEnd(34)} ${(ms / 1000).toFixed(1)} s`);
  const failed = rows.filter(([, f]) => !f.ok).length;
  if (failed > 0 && server) console.log(`\nnext start output:\n${server.output()}`);
  return rows.length === 4 && failed === 0 ? 0 : 1;
}

const started = performance.now();
let code = 1;
try {
  code = await main();
} catch (error) {
  console.error("check:next failed:", error instanceof Error ? error.message : error);
}
console.log(
  `\ncheck:next: ${code === 0 ? "passed" : "FAILED"} in ${((performance.now() - started) / 1000).toFixed(1)} s`,
);
process.exitCode = code;
