// Runs one code sample (a module written by scripts/run-samples.mjs) and, when it is a handler
// rather than a script, plays its traffic and prints every answer. Run it with
// `node --import tsx scripts/sample-driver.mjs <sample.ts>`; exit code 1 when the sample threw or
// a request it served got a 5xx.
//
// - A script (top-level code) just runs: what it prints is its own output.
// - Route handlers (`export const POST` / `GET`, Next.js style), a fetch handler or a Hono app
//   (`export default`), a Node server (`serve(...)` printing `listening on <url>`) and other
//   exported functions get the same call twice at once, then once more after both answered: a
//   duplicate delivery while the first runs, and a redelivery after it. A `POST` route handler
//   then gets a delivery whose id is empty (`{"id":""}`).
// - The application's own functions the samples call (scripts/samples.d.ts) are defined here:
//   each prints its call and works for WORK_MS, so that the two calls at once overlap.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const WORK_MS = 300;
const file = process.argv[2];
if (!file) throw new Error("usage: sample-driver.mjs <sample.ts>");
const source = readFileSync(file, "utf8");

/** Resolves after WORK_MS, or rejects with the signal's reason when it aborts first. */
function work(signal) {
  return new Promise((resolve, reject) => {
    signal?.throwIfAborted();
    const timer = setTimeout(resolve, WORK_MS);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });
}
const show = (value) => (value === undefined ? "" : JSON.stringify(value));
const app = {
  fulfil: async (_event, signal) => void (await work(signal)),
  handleEvent: async (_event, signal) => void (await work(signal)),
  rebuild: async (_id, signal) => void (await work(signal)),
  rebuildReport: async (signal) => {
    await work(signal);
    return 42;
  },
  rebuildSearchIndex: async (_env, signal) => void (await work(signal)),
  reindex: async (signal) => void (await work(signal)),
};
for (const [name, fn] of Object.entries(app)) {
  globalThis[name] = async (...args) => {
    // Signals and a Worker's env are not worth printing.
    const shown = args.filter(
      (a) =>
        !(a instanceof AbortSignal) &&
        !(typeof a === "object" && a && "UPSTASH_REDIS_REST_URL" in a),
    );
    console.log(`  app: ${name}(${shown.map(show).join(", ")})`);
    return fn(...args);
  };
}

// A Node server sample prints `listening on <url>` once it accepts connections.
let listening;
const listened = new Promise((resolve) => {
  listening = resolve;
});
const log = console.log.bind(console);
console.log = (...args) => {
  log(...args);
  const url = /listening on (http:\/\/\S+)/.exec(String(args[0]))?.[1];
  if (url) listening(url);
};

let failed = false;
const env = {
  UPSTASH_REDIS_REST_URL: process.env.UPSTASH_REDIS_REST_URL,
  UPSTASH_REDIS_REST_TOKEN: process.env.UPSTASH_REDIS_REST_TOKEN,
};
const background = [];
const ctx = { waitUntil: (p) => void background.push(p), passThroughOnException() {}, props: {} };

/** Describes a Response: status, Retry-After, body. */
async function describe(response) {
  const retry = response.headers.get("retry-after");
  const body = (await response.text()).slice(0, 120);
  if (response.status >= 500) failed = true;
  return `${response.status}${retry ? ` (Retry-After: ${retry})` : ""} ${body}`.trim();
}

/** Twice at once, then once more: prints what each call answered. */
async function play(label, call, describeResult) {
  const both = await Promise.allSettled([call(), call()]);
  const shown = async (s) =>
    s.status === "fulfilled" ? describeResult(s.value) : `threw ${String(s.reason)}`;
  const at = await Promise.all(both.map(shown));
  // What a Worker finishes after its response (a release through waitUntil) ends first.
  await Promise.allSettled(background.splice(0));
  if (both.some((s) => s.status === "rejected")) failed = true;
  console.log(`${label}, twice at once: ${at.join(" | ")}`);
  const again = await Promise.allSettled([call()]);
  console.log(`${label}, once more after: ${await shown(again[0])}`);
  if (again[0].status === "rejected") failed = true;
}

const request = (method, url) => {
  const init = { method, headers: { "webhook-id": "evt_1", "content-type": "application/json" } };
  if (method === "GET" && process.env.CRON_SECRET) {
    init.headers.authorization = `Bearer ${process.env.CRON_SECRET}`;
  }
  if (method === "POST") init.body = JSON.stringify({ id: "evt_1", amount: 100 });
  return new Request(url, init);
};

/** The first route a Hono sample declares, its parameters filled in ("/orders/42/pay"). */
function route() {
  const found = /\.(post|get|put)\(\s*["'`](\/[^"'`]*)["'`]/.exec(source);
  if (!found) return { method: "GET", path: "/" };
  return { method: found[1].toUpperCase(), path: found[2].replace(/:[A-Za-z]+/g, "42") };
}

const mod = await import(pathToFileURL(file).href);

if (/\bserve\(/.test(source)) {
  const url = await listened;
  const { method, path } = route();
  await play(`${method} ${path}`, () => fetch(request(method, `${url}${path}`)), describe);
}
for (const method of ["POST", "GET"]) {
  if (typeof mod[method] !== "function") continue;
  const url = "http://localhost/api/route";
  await play(
    `${method} ${new URL(url).pathname}`,
    () => mod[method](request(method, url)),
    describe,
  );
}
if (typeof mod.POST === "function") {
  // A delivery whose id is empty: a webhook route must not take "" as one shared key.
  const empty = request("POST", "http://localhost/api/route");
  const answer = await describe(await mod.POST(new Request(empty, { body: '{"id":""}' })));
  console.log(`POST /api/route with {"id":""}: ${answer}`);
}
if (typeof mod.default?.fetch === "function") {
  const { method, path } = route();
  const handler = mod.default;
  await play(
    `${method} ${path}`,
    () => handler.fetch(request(method, `http://localhost${path}`), env, ctx),
    describe,
  );
}
for (const [name, fn] of Object.entries(mod)) {
  if (["default", "POST", "GET"].includes(name) || typeof fn !== "function") continue;
  if (/^class\s/.test(Function.prototype.toString.call(fn))) continue;
  const argument = { id: "evt_1", body: { amount: 100 } };
  await play(
    `${name}(${show(argument)})`,
    () => fn(argument),
    (v) => `returned ${show(v) || "nothing"}`,
  );
}
await Promise.allSettled(background);
process.exit(failed ? 1 : 0);
