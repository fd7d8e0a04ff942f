/**
 * The lock console in workerd: a Worker bundled as `wrangler` would (esbuild, Workers
 * conditions, no Node compatibility flag) that mounts `lockConsole` with its Redis client made
 * per request from the Worker's bindings, run by Miniflare against a redis-server and a bridge
 * of this file's own: the page, a refusal, and a free with its dry run.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, expect, it } from "vitest";
import { EdgeLock } from "../../src/index.js";
import { type Stack, startStack, until } from "./support.js";

const WORKER = `
import { Redis } from "@upstash/redis/cloudflare";
import { Hono } from "hono";
import { lockConsole } from "../../src/console/index.ts";

const app = new Hono();
app.route(
  "/locks",
  lockConsole({
    redis: (c) => Redis.fromEnv(c.env),
    authorize: (req, c) => req.headers.get("authorization") === "Bearer " + c.env.OPS_TOKEN,
    writable: true,
    onAudit: (event) => console.log("audit " + JSON.stringify(event)),
    scan: { match: "wd:*" },
  }),
);
export default app;
`;

let stack: Stack;
let mf: Miniflare;
let dir: string;
const logs: string[] = [];
const auth = { authorization: "Bearer ops" };

beforeAll(async () => {
  stack = await startStack();
  dir = mkdtempSync(join(tmpdir(), "edgelock-console-worker-"));
  const scriptPath = join(dir, "worker.mjs");
  await build({
    stdin: { contents: WORKER, resolveDir: import.meta.dirname, loader: "ts" },
    outfile: scriptPath,
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["module", "main"],
    logLevel: "warning",
  });
  mf = new Miniflare({
    modules: true,
    modulesRoot: dir,
    scriptPath,
    compatibilityDate: "2026-04-01",
    bindings: {
      UPSTASH_REDIS_REST_URL: stack.url,
      UPSTASH_REDIS_REST_TOKEN: stack.token,
      OPS_TOKEN: "ops",
    },
    handleRuntimeStdio(stdout, stderr) {
      for (const stream of [stdout, stderr]) {
        stream.on("data", (chunk: Buffer) => logs.push(chunk.toString()));
      }
    },
  });
  await mf.ready;
}, 60_000);

afterAll(async () => {
  await mf?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
  await stack?.close();
});

it("serves the page, refuses a request authorize refuses, and frees a lock after a dry run", async () => {
  const edgelock = new EdgeLock({ redis: stack.client() });
  const lease = await edgelock.getLock("wd:lock").tryLock({ leaseTime: 30_000 });
  expect(lease).not.toBeNull();
  const stop = new AbortController();
  const waiting = new EdgeLock({ redis: stack.client() })
    .getLock("wd:lock")
    .tryLock({ waitTime: 15_000, leaseTime: 5_000, signal: stop.signal })
    .catch(() => null);
  await until(async () => (await stack.client().zcard("edgelock_waiting:{wd:lock}")) === 1);

  expect((await mf.dispatchFetch("http://localhost/locks")).status).toBe(403);
  const page = await mf.dispatchFetch("http://localhost/locks", { headers: auth });
  const html = await page.text();
  expect(page.status).toBe(200);
  expect(html).toContain(`data-owner="${lease?.owner}"`);
  expect(html.match(/<li class="waiter"/g)).toHaveLength(1);
  expect(html).toMatch(/Last refresh: <b>\d+<\/b> billed commands/);

  const dry = await mf.dispatchFetch("http://localhost/locks/free?name=wd:lock", {
    headers: auth,
  });
  const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(await dry.text())?.[1] ?? "";
  const cookie = (dry.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
  const freed = await mf.dispatchFetch("http://localhost/locks/free", {
    method: "POST",
    headers: {
      ...auth,
      cookie,
      origin: "http://localhost",
      "content-type": "application/x-www-form-urlencoded",
    },
    body: new URLSearchParams({
      name: "wd:lock",
      kind: "lock",
      confirm: "wd:lock",
      csrf,
    }).toString(),
  });
  expect(freed.status).toBe(200);
  expect(await freed.text()).toContain("Freed lock &quot;wd:lock&quot;.");
  expect(logs.join("")).toMatch(
    /audit \{"action":"free","name":"wd:lock","kind":"lock","deleted":true/,
  );
  // The waiter, woken by the free, takes the lock.
  const next = await waiting;
  expect(next).not.toBeNull();
  stop.abort();
  await next?.release();
});
