/**
 * RESULTS.md: every number of a run next to the peers', how each was taken, the machine, and
 * the issue's targets with the reason for each miss.
 * @module
 */
import { DEFAULT_BACKOFF } from "edgelock";
import { createLibraries, LEASE_MS, type LibraryName, WAIT_BUDGET_MS } from "./libraries.js";
import { type BenchResults, BLOCKING_MODES, type Target } from "./results.js";
import type { ContendedResult } from "./scenarios/contended.js";
import type { FootprintResult, FootprintShape } from "./scenarios/footprint.js";
import type { OperationsResult } from "./scenarios/operations.js";
import {
  type SemaphoreLibraryName,
  type SemaphoreResult,
  semaphoreLibraries,
} from "./scenarios/semaphore.js";
import type { PairedDifference } from "./stats.js";

const NAMES: Record<LibraryName, string> = {
  edgelock: "edgelock",
  "edgelock-poll": 'edgelock, wait: "poll"',
  "edgelock-fair": "edgelock fair lock",
  "upstash-lock": "@upstash/lock",
  redlock: "redlock",
  "redis-semaphore": "redis-semaphore",
  "bare-handoff": "bare hand-off (reference)",
};

/** Formats a number for a table cell; `–` for missing. */
/** Columns of every contended table after the first (library or setting). */
const CONTENDED_COLUMNS = [
  "throughput / s",
  "/ ideal",
  "requests / acq",
  "billed / acq (writes)",
  "hand-off p50 ms",
  "hand-off p99 ms",
  "per client min / mean / max",
  "min / mean",
  "gave up",
  "client CPU busy",
  "overlaps",
];

/** "total (writes)" of a bill, e.g. "10 (7)". */
function billed(total: number | null | undefined, writes: number | null | undefined): string {
  return total === null || total === undefined ? "–" : `${f(total, 1)} (${f(writes, 1)})`;
}

function f(value: number | null | undefined, digits = 2): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  return value.toLocaleString("en-US", { maximumFractionDigits: digits });
}

/** A Markdown table with padded columns (the layout the project's formatter gives tables). */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) =>
    Math.max(
      3,
      [...[h], ...rows.map((r) => r[i] ?? "")].reduce((w, c) => Math.max(w, width(c)), 0),
    ),
  );
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => c + " ".repeat((widths[i] ?? 0) - width(c))).join(" | ")} |`;
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

/** Display width of a cell: code points (every character used here is one column wide). */
function width(text: string): number {
  return [...text].length;
}

function version(r: BenchResults, pkg: string): string {
  return r.versions[pkg] ?? "?";
}

/** Renders RESULTS.md for `r`. */
export function renderMarkdown(r: BenchResults): string {
  const out: string[] = [];
  const m = r.machine;
  out.push("# edgelock benchmark results", "");
  if (r.config.quick) {
    out.push(
      "> **Quick smoke run** (`--quick`): a few seconds of each scenario. The numbers only show that the benchmark works; do not quote them.",
      "",
    );
  }
  if (r.config.backoff) {
    out.push(
      `> **Non-default edgelock backoff** for this run: ${JSON.stringify(r.config.backoff)} (\`--backoff\`).`,
      "",
    );
  }
  out.push(
    `Written by \`npm run bench\` on ${m.date} in ${f(r.durationSec, 1)} s. Every number below comes from this one run; rerun to reproduce (see the end).`,
    "",
    "## Machine",
    "",
    table(
      ["", ""],
      [
        ["CPU", `${m.cpuModel}, ${m.cores} cores available to Node`],
        ["memory", `${f(m.memoryGiB, 1)} GiB`],
        ["OS", m.os],
        ["Node", m.node],
        ["Redis", `redis-server ${m.redis} (started by the run, no persistence, loopback)`],
        [
          "load average (1 min)",
          `${f(m.loadAverageAtStart)} at start, ${f(r.loadAverageAtEnd)} at end (other processes share the cores)`,
        ],
        [
          "packages",
          [
            `@upstash/redis ${version(r, "@upstash/redis")}`,
            `@upstash/lock ${version(r, "@upstash/lock")}`,
            `redlock ${version(r, "redlock")}`,
            `redis-semaphore ${version(r, "redis-semaphore")}`,
            `ioredis ${version(r, "ioredis")}`,
          ].join(", "),
        ],
      ],
    ),
    "",
  );
  out.push(...setup(r), ...targets(r), ...limit(r), ...uncontended(r), ...contended(r));
  out.push(
    ...longHold(r),
    ...bridgeModes(r),
    ...footprint(r),
    ...operations(r.operations),
    ...semaphore(r),
  );
  out.push(...redlock(r));
  out.push(...scale(r), ...bundle(r), ...reproduce());
  return `${out.join("\n").trimEnd()}\n`;
}

function setup(r: BenchResults): string[] {
  const libs = createLibraries(r.config.backoff);
  return [
    "## Setup",
    "",
    "- **One Redis, one bridge, one client process.** The run starts its own `redis-server` and edgelock's Upstash-REST-compatible bridge (`src/bridge`, the same one the tests use) in a child process of its own, so the bridge's CPU is not the client's. Every library runs in the benchmark process against that same Redis, from the code its users run: edgelock from its build (`tsc -b`, which `npm run bench` brings up to date first: `dist/`, imported as the package `edgelock`), the peers from node_modules; the HTTP libraries through `@upstash/redis` (its defaults: auto-pipelining, base64 responses, retries on network errors) → bridge → Redis; redlock and redis-semaphore over **TCP** with ioredis (its defaults) straight to Redis. TCP has no HTTP/JSON/base64 layer and is about ten times faster per round trip here: compare those two with the TCP limit, not with the HTTP libraries' milliseconds.",
    "- **Alternating order, warm-up.** Within a scenario the libraries run in blocks whose order changes every round (rotated; shuffled in scenarios 1 and 2), so drift in the machine's state (other processes, CPU frequency, GC) is spread over all of them; every library warms up before it is timed.",
    `- **Same lease.** Every acquisition asks for a ${LEASE_MS} ms lease (the default of @upstash/lock and redis-semaphore; given explicitly to edgelock and redlock), so no lock expires during a run.`,
    "- **Requests** are HTTP requests served by the bridge (`bridge.stats().requests`, read over IPC before and after each measured block) for HTTP libraries, and commands the benchmark's ioredis clients sent (counted where ioredis sends them; Redis's own counters also count commands run inside Lua scripts, which are no round trips) for TCP libraries. Each is one round trip; both are what Upstash or a Redis host bills or serves.",
    "- **Client CPU** is `process.cpuUsage()` (user + system) of the benchmark process over the measured block; the bridge's CPU is read the same way inside its process. Node 20's `fetch` (undici) is most of the HTTP clients' CPU, so it says more about HTTP in Node than about the lock libraries.",
    "- **Settings** (`default` is what a user gets without configuring waiting; `same wait budget` gives each peer retries spanning edgelock's default wait of " +
      `${WAIT_BUDGET_MS} ms):`,
    "",
    table(
      ["library", "transport", "default", "same wait budget"],
      libs.map((l) => [
        NAMES[l.name],
        l.transport.toUpperCase(),
        l.settings.default,
        l.settings.sameBudget,
      ]),
    ),
    "",
  ];
}

function missText(t: Target): string {
  if (t.met !== false || t.value === null) return "";
  const by = t.kind === "max" ? t.value - t.goal : t.goal - t.value;
  const pct = t.goal === 0 ? 0 : (by / t.goal) * 100;
  const rel = t.goal === 0 ? "" : ` (${f(pct, pct < 1 ? 1 : 0)} %)`;
  return `missed by ${f(by, t.id === "coreBundle" ? 0 : (t.digits ?? 2))}${rel}`;
}

function targets(r: BenchResults): string[] {
  const rows = r.targets.map((t) => [
    t.description,
    `${t.kind === "max" ? "≤" : "≥"} ${f(t.goal)}`,
    f(t.value, t.digits),
    t.met === null ? "not run" : t.met ? "met" : `**${missText(t)}**`,
  ]);
  const out = [
    "## Targets (edgelock, from the benchmark issue)",
    "",
    table(["target", "goal", "measured", ""], rows),
    "",
  ];
  const why = whyMissed(r);
  if (why.length) out.push("### Why the misses", "", ...why, "");
  return out;
}

/** A difference in µs as "N µs more" or "N µs less". */
function more(us: number): string {
  return us >= 0 ? `${f(us, 0)} µs more` : `${f(-us, 0)} µs less`;
}

function whyMissed(r: BenchResults): string[] {
  const out: string[] = [];
  const t = (id: string) => r.targets.find((x) => x.id === id);
  const u = r.uncontended?.edgelock;
  const up = r.uncontended?.["upstash-lock"];
  const ping = r.limit?.pingP50Ms ?? null;
  const hold = r.config.holdMs;
  if ((t("uncontendedRatio")?.met === false || t("uncontendedVsUpstash")?.met === false) && u) {
    const scripts = r.limit?.edgelockScriptsP50Ms ?? null;
    const client = (x: typeof u) => x.cpuMicrosPerCycle ?? 0;
    const bridge = (x: typeof u) => x.bridgeCpuMicrosPerCycle ?? 0;
    const redis = (x: typeof u) => x.redisCpuMicrosPerCycle ?? 0;
    out.push(
      `- **Uncontended cycle.** p50 ${f(u.p50Ms, 3)} ms against 2 × PING p50 = ${f(u.limitMs, 3)} ms${up ? `; @upstash/lock, on the same bridge, takes ${f(up.p50Ms, 3)} ms (${f(up.ratioToLimit)})` : ""}. ${
        scripts !== null && up?.p50Ms
          ? `Its two requests alone, sent by \`@upstash/redis\` with no edgelock code around them (section 1), take ${f(scripts, 3)} ms, ${f(scripts / up.p50Ms)} × @upstash/lock's whole cycle: what the bridge and Redis spend on them (${f(u.billedPerCycle, 0)} commands run per cycle against ${f(up.billedPerCycle, 0)}: the scripts check the registry of waiters, write the hold with its epoch, and keep a replay record of the lease that a copy of either request, arriving late, finds); ${
              (u.p50Ms ?? 0) > scripts
                ? `the other ${f((u.p50Ms ?? 0) - scripts, 3)} ms of the cycle are edgelock's client code (option checks, request ids, per request one timer for its time limit and its hedge, a Lease with its expiry timer)`
                : "the whole cycle took no longer in this run: the client's share is within its noise"
            }. `
          : ""
      }${
        up
          ? `edgelock's cycle costs ${more(client(u) - client(up))} client CPU, ${more(bridge(u) - bridge(up))} bridge CPU and ${more(redis(u) - redis(up))} Redis CPU than @upstash/lock's (Redis runs each script while the bridge and the client wait for it). On 2 cores shared by the client, the bridge and Redis, CPU is latency. `
          : ""
      }${
        u.pairedVsUpstash && r.limit?.edgelockScriptsPairedVsUpstash
          ? `Paired cycle by cycle on warm clients (section 2), edgelock's cycle takes ${more(u.pairedVsUpstash.median)} than @upstash/lock's, its two requests alone ${more(r.limit.edgelockScriptsPairedVsUpstash.median)}. `
          : ""
      }${
        u.p50VsUpstash
          ? `Its p50 over @upstash/lock's is ${f(u.p50VsUpstash.ratio, 3)}, with a 90 % interval of ${f(u.p50VsUpstash.low, 3)} to ${f(u.p50VsUpstash.high, 3)} when the run's rounds are resampled (section 2). `
          : ""
      }A bare EVALSHA of a one-line script takes ${f(r.limit?.evalshaP50Ms, 3)} ms p50 (PING: ${f(ping, 3)} ms).${
        u.networkP50Ms != null && up?.networkP50Ms
          ? ` With ${r.limit?.networkDelayMs} ms added to every request (section 2's last column), the same cycles take ${f(u.networkP50Ms, 3)} and ${f(up.networkP50Ms, 3)} ms: ${f(networkRatio(r))} ×.`
          : ""
      }`,
    );
  }
  if (t("requestsCold")?.met === false && u) {
    out.push(
      `- **Cold requests.** A fresh client on a Redis whose script cache is empty sends EVALSHA, gets NOSCRIPT and sends EVAL, once for the acquire script and again for the release script: ${f(u.requestsPerCycleCold)} requests. A fresh client on a Redis that already has the scripts (the usual case for a new isolate: the cache lives in Redis, not in the isolate) needs ${f(u.requestsPerCycleColdClient)}. @upstash/lock never pays this because it sends its release script in full with EVAL on every call (more bytes per request, no extra round trip). A cheap fix, not made here: once a NOSCRIPT shows the cache is empty, the transport can send EVAL directly for each script it has not yet run on that client, which makes the cold cycle 3 requests.`,
    );
  }
  const c16 = r.contended?.["16"]?.edgelock;
  if (t("contended16Ratio")?.met === false && c16 && ping !== null) {
    const bound = hold / (hold + 2 * ping);
    const pair = r.limit?.pingPairAfterPauseP50Ms ?? null;
    const effective = pair === null ? bound : hold / (hold + pair);
    const c = r.contended?.["16"];
    out.push(
      `- **Contended throughput.** Every hand-off costs at least the release's trip to Redis and the next acquire's round trip. With ${hold} ms holds and an HTTP PING p50 of ${f(ping, 3)} ms in a tight loop, that bounds the ratio at ${hold} / (${hold} + 2 × ${f(ping, 3)}) = ${f(bound)}${
        pair === null
          ? ""
          : `; and two PINGs right after a ${hold} ms pause (what the holder does after its critical section) take ${f(pair, 3)} ms p50 here, because both the client's and the bridge's event loops have gone idle, which lowers the bound to ${f(hold / (hold + pair))}`
      }. ${
        effective < 0.85
          ? "So no lock whose next holder sends its acquire after the release (two HTTP round trips per hand-off) can reach 0.85 on this machine; a release that hands the lock to a waiter already subscribed (the fair lock, and the reentrant lock's registered waiters) pays about one"
          : "So 0.85 is within reach in principle; the rest is lost to waiting"
      }: the target assumes that the two round trips take at most ${f(hold / 0.85 - hold, 2)} ms together. Measured: hand-off p50 ${f(c16.handoffP50Ms)} ms (mean hold ${f(c16.meanHoldMs)} ms, timer overshoot included), ratio ${f(c16.throughputRatio)}, ${f(((c16.throughputRatio ?? 0) / effective) * 100, 0)} % of the ${pair === null ? "" : "pause-corrected "}bound, with the benchmark process, which runs all 16 clients' \`fetch\` calls, ${f((c16.clientCpuBusy ?? 0) * 100, 0)} % busy. @upstash/lock, on the same bridge, reaches ${f(c?.["upstash-lock"]?.throughputRatio)}; the TCP peers reach ${f(c?.redlock?.throughputRatio)} (redlock) and ${f(c?.["redis-semaphore"]?.throughputRatio)} (redis-semaphore) because their round trip is ~${f(r.limit?.tcpPingP50Ms, 2)} ms.`,
    );
  }
  if (t("contended16Requests")?.met === false && c16) {
    out.push(
      `- **Requests per acquisition.** ${f(c16.requestsPerAcquisition)} at 16 clients: every waiter's poll is a request; the backoff caps that at about one poll per second per waiter once it has waited long.`,
    );
  }
  if (t("contended16Fairness")?.met === false && c16) {
    const all = r.contended?.["16"];
    const list = all
      ? (Object.entries(all) as [LibraryName, ContendedResult][])
          .map(([n, e]) => `${NAMES[n]} ${f(e.fairnessMinOverMean)}`)
          .join(", ")
      : "";
    out.push(
      `- **Fairness.** Per-client min/mean ${f(c16.fairnessMinOverMean)} (min ${c16.fairnessMin}, max ${c16.fairnessMax} acquisitions in the window). The clients loop with no pause between critical sections, so the client that just released asks again at once and wins within two round trips, while the others sleep through their backoff; a waiter only wins when its poll lands in that short gap. Every polling lock here behaves the same (min/mean at 16 clients: ${list}). ${variantsText(r)}What fixes it is a FIFO of waiters (Redisson's fair lock) or a release that hands the lock to a registered waiter, which edgelock does not have yet.`,
    );
  }
  const fair16 = r.contended?.["16"]?.["edgelock-fair"];
  const rtt = r.limit?.evalshaP50Ms;
  if (t("fair16Handoff")?.met === false && fair16 && rtt) {
    const pair = r.limit?.pingPairAfterPauseP50Ms ?? null;
    out.push(
      `- **Fair hand-off.** p50 ${f(fair16.handoffP50Ms)} ms, ${f((fair16.handoffP50Ms ?? 0) / rtt)} × the EVALSHA p50 of ${f(rtt, 3)} ms. The path is the shortest there is: the holder's release request reaches Redis, its script grants the lock to the first waiter and publishes the grant, and the waiter's subscription, already open, delivers it; no request follows. But the round trip it is compared with is measured in a tight loop, and a hand-off starts after the holder has been idle for its ${hold} ms critical section${pair === null ? "" : `: one round trip after such a pause costs ${f(pair / 2, 3)} ms here (half the paused pair of section 1), and the hand-off is ${f((fair16.handoffP50Ms ?? 0) / (pair / 2))} of those`}. The rest is the release script's work and two event loops (the bridge's and the waiter's) that wake for the answer.`,
    );
  }
  const lh = r.longHold;
  const lhWait = (r.config.longHoldWaiters + 1) * r.config.longHoldMs;
  if (t("longHoldRequests")?.met === false && lh?.edgelock) {
    out.push(
      `- **Long holds, reentrant lock.** ${f(lh.edgelock.requestsPerAcquisition)} requests per acquisition. A waiter whose client still has its subscription open (it stays open while the client holds the lock) registers with its first attempt, and the release's message hands it the lock: that attempt, the renewal that confirms the hand-off (sent when a third of the 2 000 ms claim window is left, so every hold longer than about 1.3 s pays it) and its release make 3. A waiter whose subscription closed (1 s after its last wait) pays 2 more: the subscription and the attempt after it. Only the first registered waiter comes back when the holder's lease (${LEASE_MS} ms) would run out, and the second a claim window after that (in case the first one's client is gone); the others wait for their message, up to about ${lhWait} ms here. Polling costs ${f(lh["edgelock-poll"]?.requestsPerAcquisition)} on the same loop.`,
    );
  }
  if (t("longHoldFairRequests")?.met === false && lh?.["edgelock-fair"]) {
    out.push(
      `- **Long holds, fair lock.** ${f(lh["edgelock-fair"].requestsPerAcquisition)} requests per acquisition: as the reentrant lock's, the attempt that queues (with the subscription and the attempt after it when the subscription closed since the waiter's last wait), the renewal that confirms the hand-off its message delivered (a hand-off grants the lock for the 2 000 ms claim window, so that a grant to a waiter that died keeps the lock from everyone for 2 s at most), and the release. Only the first in the queue comes back when the holder's lease (${LEASE_MS} ms) would run out, the second a claim window later, and every waiter at least every 20 s to renew its place, while a waiter here waits up to about ${lhWait} ms.`,
    );
  }
  const core = r.bundle?.["."];
  if (t("coreBundle")?.met === false && core?.minGzipBytes && r.core) {
    const top = r.core.modules
      .slice(0, 5)
      .map((m) => `${m.module} ${f(m.minifiedBytes, 0)}`)
      .join(", ");
    out.push(
      `- **Core bundle.** ${f(core.minGzipBytes, 0)} bytes min+gzip against 6 000 (${f(core.minGzipBytes - 6000, 0)} over). The largest modules, in minified bytes before gzip: ${top}. The Lua scripts are embedded as string literals, which no minifier shortens: ${f(r.core.luaChars, 0)} characters${r.core.luaStrippedSavingsGzipBytes >= 100 ? `, ${f(r.core.luaCommentChars, 0)} of them comments and indentation; shipping them without (lua/gen.mjs) would save ${f(r.core.luaStrippedSavingsGzipBytes, 0)} bytes min+gzip` : ", already shipped without comments, indentation or long local names"}. The rest is code: the root entry is the whole family behind \`EdgeLock\`; a Worker that needs one primitive imports that primitive's entry instead (section 5, per-primitive entries, which also says where the lock entry's bytes go).`,
    );
  }
  return out;
}

/** One sentence on the backoff variants of this run, for the fairness explanation. */
function variantsText(r: BenchResults): string {
  const v = r.backoffVariants;
  const base = r.contended?.["16"]?.edgelock;
  if (!v?.length || !base) return "";
  const parts = v.map(
    (x) =>
      `${x.backoff.initialDelay}→${x.backoff.maxDelay} ms: min/mean ${f(x.result.fairnessMinOverMean)}, ${f(x.result.requestsPerAcquisition)} requests per acquisition, ratio ${f(x.result.throughputRatio)}`,
  );
  const helps = v.some((x) => (x.result.fairnessMinOverMean ?? 0) >= 0.5);
  return `${helps ? "Polling sooner helps fairness here, at a price in requests" : "Polling sooner does not fix it"}; in this run, at 16 clients, against the default's min/mean ${f(base.fairnessMinOverMean)}, ${f(base.requestsPerAcquisition)} requests and ratio ${f(base.throughputRatio)}: ${parts.join("; ")} (section 3). `;
}

function limit(r: BenchResults): string[] {
  const l = r.limit;
  if (!l) return [];
  return [
    "## 1. Physical limit",
    "",
    `${f(l.samples, 0)} sequential calls per probe, timed one by one, in the same rounds as the libraries of scenario 2, in an order shuffled anew every round; the pairs after a pause in rounds of their own after those (in a fixed order, whichever block ran right after them was slowed).`,
    "",
    table(
      ["path", "p50 ms", "p99 ms"],
      [
        ["`@upstash/redis` `ping()` → bridge → Redis (HTTP)", f(l.pingP50Ms, 3), f(l.pingP99Ms, 3)],
        [
          "`@upstash/redis` `evalsha()` of `return redis.call('exists', KEYS[1])` (HTTP)",
          f(l.evalshaP50Ms, 3),
          f(l.evalshaP99Ms, 3),
        ],
        ["ioredis `ping()` → Redis (TCP)", f(l.tcpPingP50Ms, 3), f(l.tcpPingP99Ms, 3)],
        [
          "edgelock's acquire and release scripts sent by `@upstash/redis` `evalsha()` with the keys and arguments of scenario 2's cycle, each a request of its own as edgelock sends them (no auto-pipelining), no edgelock code (HTTP), for the pair",
          f(l.edgelockScriptsP50Ms, 3),
          f(l.edgelockScriptsP99Ms, 3),
        ],
        [
          `two \`ping()\` back to back after a ${l.pauseMs} ms pause (HTTP), for the pair`,
          f(l.pingPairAfterPauseP50Ms, 3),
          "–",
        ],
        [
          `two \`ping()\` back to back after a ${l.pauseMs} ms pause (TCP), for the pair`,
          f(l.tcpPingPairAfterPauseP50Ms, 3),
          "–",
        ],
      ],
    ),
    "",
    `The pause rows (${f(l.pauseSamples, 0)} samples each) show what a round trip costs when the client has been idle for as long as scenario 3's critical sections: the processes' event loops go to sleep and wake up again, which a tight loop never pays.`,
    "",
    "An uncontended acquire+release needs two round trips, so 2 × PING p50 of its transport is the floor scenario 2 compares against. The scripts row is edgelock's own floor: its cycle's two requests with none of its client code, so scenario 2's edgelock row minus it is what the client adds.",
    "",
  ];
}

function uncontended(r: BenchResults): string[] {
  const u = r.uncontended;
  if (!u) return [];
  const rows = (
    Object.entries(u) as [LibraryName, NonNullable<BenchResults["uncontended"]>[LibraryName]][]
  ).map(([name, e]) => [
    NAMES[name],
    e.transport.toUpperCase(),
    f(e.p50Ms, 3),
    f(e.p99Ms, 3),
    f(e.ratioToLimit),
    f(e.requestsPerCycleWarm),
    billed(e.billedPerCycle, e.billedWritesPerCycle),
    f(e.requestsPerCycleColdClient),
    f(e.requestsPerCycleCold),
    f(e.coldP50Ms, 3),
    f(e.cpuMicrosPerCycle, 0),
    f(e.bridgeCpuMicrosPerCycle, 0),
    f(e.redisCpuMicrosPerCycle, 0),
    f(e.networkP50Ms, 3),
  ]);
  const first = Object.values(u)[0];
  const delay = r.limit?.networkDelayMs ?? 0;
  return [
    "## 2. Uncontended acquire + release",
    "",
    `${f(first?.cycles, 0)} timed cycles per library on one key each (after ${f(r.config.warmup, 0)} warm-up cycles), in ${r.config.uncontendedRounds} blocks, in an order shuffled anew every round. A cycle is acquire (no waiting needed) then release, timed from the acquire call to the release's answer. edgelock's clients here have no \`onEvent\` listener, as an EdgeLock made with its defaults (its scripts then go without the bill-counting wrapper: docs/cost.md); the contended scenarios' have one, which dates wake-ups. Cold: ${r.config.coldRepeats} cycles per library, each on a brand-new client (a new isolate), once while Redis has the library's scripts cached and once right after \`SCRIPT FLUSH\`.`,
    "",
    table(
      [
        "library",
        "transport",
        "p50 ms",
        "p99 ms",
        "p50 / (2 × PING p50)",
        "requests warm",
        "billed warm (writes)",
        "requests, new client",
        "requests, new client + empty script cache",
        "cold p50 ms",
        "client CPU µs / cycle",
        "bridge CPU µs / cycle",
        "Redis CPU µs / cycle",
        delay > 0 ? `p50 ms, bridge + ${delay} ms per request` : "p50 ms, network delay (not run)",
      ],
      rows,
    ),
    "",
    ...networkLine(r, delay),
    ...roundsLine(r),
    ...pairedLines(r),
    "The ratio divides by 2 × the PING p50 of the library's own transport (HTTP for edgelock and @upstash/lock, TCP for redlock and redis-semaphore). A TCP round trip here is under 0.1 ms, close to the scheduling noise of a machine whose two cores also run the bridge and Redis, so the TCP ratios are only indicative (they can fall below 1).",
    "",
  ];
}

/** How far the p50 ratio to @upstash/lock's moves with the rounds (scenario 2). */
function roundsLine(r: BenchResults): string[] {
  const e = r.uncontended?.edgelock?.p50VsUpstash;
  if (!e) return [];
  return [
    `edgelock's p50 over @upstash/lock's on loopback: ${f(e.ratio, 3)}, 90 % interval ${f(e.low, 3)} to ${f(e.high, 3)} when the run's ${f(r.config.uncontendedRounds, 0)} rounds are resampled (a round's blocks of the two libraries are drawn together): how far the ratio moves with the rounds one run happens to get. Runs on other days move it further, with the machine's load.`,
    "",
  ];
}

/** What the pairs with @upstash/lock's cycles say (scenario 2, after its rounds). */
function pairedLines(r: BenchResults): string[] {
  const e = r.uncontended?.edgelock?.pairedVsUpstash;
  if (!e) return [];
  const d = (x: PairedDifference) =>
    `${more(x.median)} (90 % interval ${f(x.low, 0)} to ${f(x.high, 0)} µs)`;
  const scripts = r.limit?.edgelockScriptsPairedVsUpstash;
  const fair = r.uncontended?.["edgelock-fair"]?.pairedVsUpstash;
  return [
    `Paired cycle by cycle (after the rounds): ${f(e.pairs, 0)} edgelock cycles, each timed right next to one of @upstash/lock's (which goes first alternates), take ${d(e)} at the median of their differences.${
      scripts
        ? ` Its two requests alone (section 1's scripts row), paired the same way, take ${d(scripts)}: the scripts' work in the bridge and Redis; the rest of the difference is edgelock's client code.`
        : ""
    }${fair ? ` The fair lock's cycle: ${d(fair)}.` : ""} Blocks of cycles drift with the machine by tens of µs between rounds; a pair sees one moment, so this difference is the sharper measure, while the p50 columns above also hold the cycles right after the warm-up, while V8 is still compiling the clients' code.`,
    "",
  ];
}

/** edgelock's network-column p50 over @upstash/lock's; `null` when either is missing. */
function networkRatio(r: BenchResults): number | null {
  const e = r.uncontended?.edgelock?.networkP50Ms;
  const up = r.uncontended?.["upstash-lock"]?.networkP50Ms;
  return e != null && up ? e / up : null;
}

/** What the network column says, against @upstash/lock's row. */
function networkLine(r: BenchResults, delay: number): string[] {
  const e = r.uncontended?.edgelock?.networkP50Ms;
  const up = r.uncontended?.["upstash-lock"]?.networkP50Ms;
  if (!delay || e == null) return [];
  const loopback = r.targets.find((t) => t.id === "uncontendedVsUpstash")?.value;
  const vs =
    up != null && up > 0
      ? ` edgelock's p50 is ${f(networkRatio(r))} × @upstash/lock's there (${f(e, 3)} against ${f(up, 3)} ms), against ${f(loopback)} × on loopback.`
      : "";
  return [
    `The last column times the HTTP libraries' cycles again (${delay} ms added by the bridge before it runs each request: a network's round trip, which a deployment never avoids), in shuffled blocks after the loopback rounds. On loopback a round trip takes about 1 ms, so each µs of a client's own work weighs several times what it weighs behind a network.${vs}`,
    "",
  ];
}

function longHold(r: BenchResults): string[] {
  const l = r.longHold;
  if (!l) return [];
  const c = r.config;
  const rows = (Object.entries(l) as [LibraryName, ContendedResult][]).map(([name, e]) =>
    contendedRow(NAMES[name], e),
  );
  return [
    "## 3b. Long holds",
    "",
    `${c.longHoldWaiters + 1} clients on one lock, each holding it ${c.longHoldMs} ms, so ${c.longHoldWaiters} wait behind every holder (the loop of section 3, with a wait budget of ${2 * (c.longHoldWaiters + 1) * c.longHoldMs} ms so that nobody gives up; ${c.longHoldMs} ms of run-in, one ${c.longHoldMeasureMs} ms window). What a wait costs when holds are long: the reentrant lock's waiters wait on their subscription until the release that frees the lock hands it to one of them (with wait: "poll", they poll with backoff capped at one poll per second), the fair lock's waiters likewise until the release hands them the lock.`,
    "",
    table(["lock", ...CONTENDED_COLUMNS], rows),
    "",
  ];
}

function bridgeModes(r: BenchResults): string[] {
  const m = r.bridgeModes;
  if (!m) return [];
  const rows = BLOCKING_MODES.flatMap((mode) =>
    (Object.entries(m[mode] ?? {}) as [LibraryName, ContendedResult][]).map(([name, e]) =>
      contendedRow(`${NAMES[name]}, bridge \`--blocking ${mode}\``, e),
    ),
  );
  return [
    "## 3f. Bridge blocking modes",
    "",
    `The 16-client loop of section 3 (${r.config.holdMs} ms holds, one ${r.config.bridgeModesMeasureMs} ms window) once per way the bridge answers BLPOP and the other blocking commands: \`refuse\` (an error, as the REST API lists them: the default), \`instant\` (an empty answer at once) and \`block\` (held open). edgelock's waits send no blocking command, so what they cost must not depend on the mode; a wait never sends more requests than polling would (target above).`,
    "",
    table(["lock, bridge mode", ...CONTENDED_COLUMNS], rows),
    "",
  ];
}

/**
 * The same footprint shapes measured once on the earlier design (commit 7079217: one replay latch
 * key per acquisition, kept 10 minutes), on this machine, 2026-11-24, with the driver of
 * scenarios/footprint.ts (100 000 cycles, 16 clients).
 */
const FOOTPRINT_BEFORE: FootprintResult = {
  manyNames: {
    cycles: 100000,
    names: 1000,
    seconds: 86.7,
    keys: 100000,
    volatileKeys: 100000,
    byKind: { replay: 100000, lock: 0, other: 0 },
    usedMemoryBytes: 19904560,
  },
  oneName: {
    cycles: 100000,
    names: 1,
    seconds: 159.4,
    keys: 100000,
    volatileKeys: 100000,
    byKind: { replay: 100000, lock: 0, other: 0 },
    usedMemoryBytes: 18118768,
  },
};

function operations(ops: OperationsResult | null): string[] {
  if (!ops) return [];
  const rows = Object.entries(ops).map(([label, c]) => {
    const [lock, op] = label.split(": ");
    return [
      lock ?? label,
      op ?? "",
      f(c.requests),
      billed(c.billed, c.billedWrites),
      f(c.p50Ms, 3),
    ];
  });
  return [
    "## 3d. Requests and billed commands per operation",
    "",
    "One client, warm script cache, each operation called on its own name (setup and clean-up not counted). The acquire after a wait is a waiter kept out by the other side (a read lock by a writer, a write lock by a reader) or by another owner: from its first attempt to its lease, the subscription and the wait included, without the holder's release (its latency does include that release). The semaphores are set to 1 permit (`trySetPermits(1)`, not counted); their waiter waits for the permit another client holds, and that client's release (`release()`, `lease.release()`) ends the wait. The permit-expirable semaphore's permits are taken with `leaseTime` 10 000 ms (no keep-alive timer). The latch's `countDown` and `getCount` run on a latch set to 2, `await, open` on a latch that is not set (count 0), and the waiter woken by the last `countDown` on a latch set to 1, counted down by another client (not counted, as the holder's release above).",
    "",
    table(["lock", "operation", "HTTP requests", "billed (writes)", "p50 ms"], rows),
    "",
  ];
}

const SEMAPHORE_NAMES: Record<SemaphoreLibraryName, string> = {
  "edgelock-semaphore": "edgelock semaphore",
  "edgelock-permit-semaphore": "edgelock permit-expirable semaphore",
  "redis-semaphore": "redis-semaphore Semaphore (TCP)",
};

function semaphoreRow(label: string, e: SemaphoreResult): string[] {
  return [
    label,
    e.transport.toUpperCase(),
    f(e.throughputPerSec, 1),
    f(e.throughputRatio),
    f(e.requestsPerAcquisition),
    billed(e.billedPerAcquisition, e.billedWritesPerAcquisition),
    f(e.handoffP50Ms),
    f(e.handoffP99Ms),
    `${e.fairnessMin} / ${f(e.fairnessMean, 1)} / ${e.fairnessMax}`,
    f(e.fairnessMinOverMean),
    f(e.gaveUp, 0),
    f(e.meanHoldMs),
    f(e.clientCpuBusy),
    f(e.bridgeCpuBusy),
    `${e.maxInside}${e.errors ? ` (${e.errors} errors: ${e.firstError ?? ""})` : ""}`,
  ];
}

function semaphore(r: BenchResults): string[] {
  const sem = r.semaphore;
  if (!sem) return [];
  const c = r.config;
  const entries = Object.entries(sem.byLibrary) as [SemaphoreLibraryName, SemaphoreResult][];
  const libs = semaphoreLibraries().filter((l) => l.name in sem.byLibrary);
  const out = [
    `## 3e. Semaphore: ${sem.clients} clients, ${sem.permits} permits`,
    "",
    `${sem.clients} clients, each its own isolate or process as in section 3, contend for one semaphore of ${sem.permits} permits. Each loops: take one permit with the library's own waiting (a wait budget of ${WAIT_BUDGET_MS} ms, as in section 3) → hold it ${sem.holdMs} ms (a timer) → release it → ask again at once. After ${c.warmMs} ms of run-in, a ${c.measureMs} ms window is measured; each library runs ${c.contendedRounds} ${c.contendedRounds === 1 ? "time" : "times"} in rotating order, on a fresh semaphore each time, and the rounds are pooled. edgelock's semaphores are set with \`trySetPermits(${sem.permits})\` before the round (not counted); redis-semaphore takes the limit in its constructor. redis-semaphore runs over **TCP** (ioredis straight to Redis), a different and much faster transport: compare it with the TCP limit of section 1, not with the HTTP rows' milliseconds.`,
    "",
    `- **throughput**: permits taken in the window per second; **/ ideal**: throughput × hold / permits (ideal = ${sem.permits} / ${sem.holdMs} ms = ${f(sem.idealPerSec, 0)} / s).`,
    "- **requests / acq**: HTTP requests served by the bridge, or commands the ioredis clients sent, in the window, per permit taken: busy attempts, subscriptions, polls and releases included. The floor is 2.",
    "- **billed / acq (writes)**: billed commands per permit taken (every command Redis ran in the window, script calls included: `INFO commandstats`), and the writes among them.",
    "- **hand-off**: how long a permit stays free: a permit taken − the moment a holder left its critical section (called release), each acquisition paired with the permit freed earliest and not yet taken.",
    "- **fairness**: permits taken per client in the window (min / mean / max over every client of every round) and min / mean. None of the three semaphores is fair: a client that asks again right after its release can take the permit before a waiter.",
    "- **mean hold**: the measured critical section (timer overshoot included). **max inside**: most clients holding a permit at once, counted in the client process from the acquire's answer to just before the release is sent, which never counts more holders than Redis has; the run fails if it ever exceeds the permits (a correctness check, like section 3's overlaps).",
    "",
    table(
      ["implementation", "transport", "settings"],
      libs.map((l) => [SEMAPHORE_NAMES[l.name], l.transport.toUpperCase(), l.settings]),
    ),
    "",
    table(
      [
        "implementation",
        "transport",
        "throughput / s",
        "/ ideal",
        "requests / acq",
        "billed / acq (writes)",
        "hand-off p50 ms",
        "hand-off p99 ms",
        "per client min / mean / max",
        "min / mean",
        "gave up",
        "mean hold ms",
        "client CPU busy",
        "bridge CPU busy",
        "max inside",
      ],
      entries.map(([name, e]) => semaphoreRow(SEMAPHORE_NAMES[name], e)),
    ),
    "",
  ];
  const why = semaphoreWhy(r);
  if (why) out.push(why, "");
  return out;
}

/** What this run's data say about the distance of the HTTP semaphores from the ideal. */
function semaphoreWhy(r: BenchResults): string {
  const sem = r.semaphore;
  const edge = sem?.byLibrary["edgelock-semaphore"] ?? sem?.byLibrary["edgelock-permit-semaphore"];
  if (!sem || !edge || edge.throughputRatio === null || edge.throughputRatio >= 0.85) return "";
  const pes = sem.byLibrary["edgelock-permit-semaphore"];
  const tcp = sem.byLibrary["redis-semaphore"];
  const lock = r.contended?.[String(sem.clients)]?.edgelock;
  const pair = r.limit?.pingPairAfterPauseP50Ms ?? null;
  const hold = sem.holdMs;
  const parts = [
    `**Why the HTTP semaphores are far from ideal.** Every permit that changes hands costs a hand-off: the release's round trip, then the woken waiter's message and its attempt (or the releaser's own next attempt, which may take the permit first). Here a freed permit stays free ${f(edge.handoffP50Ms)} ms at the median (p99 ${f(edge.handoffP99Ms)} ms)${pes && pes !== edge ? `, ${f(pes.handoffP50Ms)} ms for the permit-expirable semaphore` : ""}${tcp ? `, against ${f(tcp.handoffP50Ms)} ms for redis-semaphore over TCP` : ""}. Summed over the window, the permits sat free ${f((edge.idleShare ?? 0) * 100, 0)} % of the time${tcp ? ` (redis-semaphore: ${f((tcp.idleShare ?? 0) * 100, 0)} %)` : ""}, and the rest of the loss is the holds themselves running long (below).`,
  ];
  if (pair !== null) {
    parts.push(
      `Two HTTP round trips after a ${hold} ms pause take ${f(pair, 3)} ms in this run (section 1), so a hand-off is at best about that long.`,
    );
  }
  if (lock) {
    parts.push(
      `The reentrant lock, the same loop with a single "permit" (section 3, ${sem.clients} clients), has a hand-off p50 of ${f(lock.handoffP50Ms)} ms and reaches ${f(lock.throughputRatio)} of its ideal in this run.`,
    );
  }
  parts.push(
    `With ${sem.permits} permits the one client process and the one bridge serve ${sem.permits} times the hand-offs per second: the client process was ${f((edge.clientCpuBusy ?? 0) * 100, 0)} % busy and the bridge ${f((edge.bridgeCpuBusy ?? 0) * 100, 0)} % (${f(edge.cpuMicrosPerAcquisition, 0)} µs and ${f(edge.bridgeCpuMicrosPerAcquisition, 0)} µs of CPU per permit taken), and the ${hold} ms hold timers overshoot to ${f(edge.meanHoldMs)} ms on average, on ${r.machine.cores} cores that also run Redis.`,
  );
  return parts.join(" ");
}

function footprint(r: BenchResults): string[] {
  const fp = r.footprint;
  if (!fp) return [];
  const row = (label: string, s: FootprintShape) => [
    label,
    f(s.cycles, 0),
    f(s.names, 0),
    f(s.keys, 0),
    f(s.volatileKeys, 0),
    `${s.byKind.replay} / ${s.byKind.lock} / ${s.byKind.other}`,
    f(s.usedMemoryBytes / 1_048_576, 2),
    f(s.usedMemoryBytes / s.cycles, 0),
  ];
  const b = FOOTPRINT_BEFORE;
  return [
    "## 3c. Footprint of replay safety",
    "",
    "What stays in Redis right after N acquire/release cycles (16 clients, every lock released): the locks are gone, and what is left is replay records, which expire on their own. Before: one latch key `edgelock_latch:{<name>}:<id>` per acquisition, kept 10 minutes. Now: a lock's HASH is its creating acquire's record while it lives, and a STRING `edgelock_replay:{<name>}:<request id>` is written only where it cannot tell (here: the answer of each release that freed a lock), kept exactly one `replayWindow` (default 30 s = max(30 000, 10 × `requestTimeout` 3 000): a request abandoned after `requestTimeout`, plus `@upstash/redis`'s own resends over ~4.3 s of backoff, cannot land later than 6 × 3 s + 4.3 s).",
    "",
    table(
      [
        "design, shape",
        "cycles",
        "names",
        "keys left",
        "volatile keys",
        "replay / lock / other keys",
        "used_memory MiB",
        "bytes / cycle",
      ],
      [
        row("before (7079217), many names", b.manyNames),
        row("now, many names", fp.manyNames),
        row("before (7079217), one name", b.oneName),
        row("now, one name", fp.oneName),
      ],
    ),
    "",
    `"Before" rows: measured once on this machine (2026-11-24) with the same driver against the earlier commit; "now" rows: this run${r.config.quick ? " (quick: fewer cycles, so compare per cycle)" : ""}. Within one window every record is still there; the difference over time is the lifetime (30 s instead of 10 minutes), which is what Redis's active expiry has to walk.`,
    "",
  ];
}

function contendedRow(label: string, e: ContendedResult): string[] {
  return [
    label,
    f(e.throughputPerSec, 1),
    f(e.throughputRatio),
    f(e.requestsPerAcquisition),
    billed(e.billedPerAcquisition, e.billedWritesPerAcquisition),
    f(e.handoffP50Ms),
    f(e.handoffP99Ms),
    `${e.fairnessMin} / ${f(e.fairnessMean, 1)} / ${e.fairnessMax}`,
    f(e.fairnessMinOverMean),
    f(e.gaveUp, 0),
    f(e.clientCpuBusy),
    `${e.overlaps}${e.errors ? ` (${e.errors} errors: ${e.firstError ?? ""})` : ""}`,
  ];
}

function contended(r: BenchResults): string[] {
  const c = r.contended;
  if (!c) return [];
  const c0 = r.config;
  const ping = r.limit?.pingP50Ms;
  const pair = r.limit?.pingPairAfterPauseP50Ms;
  const out = [
    "## 3. Contended: N clients on one lock",
    "",
    `Each client is its own isolate or process (its own \`@upstash/redis\` client or TCP connection, so nothing is batched across clients) and loops: acquire with the library's waiting → hold ${c0.holdMs} ms (a timer) → release → acquire again at once. A client whose acquire gives up (its wait budget ran out) asks again at once. This is the loop of the only lock-contention benchmark a peer publishes (python-redis-lock's \`examples/bench.py\`). After ${c0.warmMs} ms of run-in, a ${c0.measureMs} ms window is measured; each (library, setting, N) runs ${c0.contendedRounds} ${c0.contendedRounds === 1 ? "time" : "times"}, in rotating order, and the rounds are pooled.`,
    "",
    `- **throughput**: critical sections begun in the window per second; **/ ideal**: throughput × hold time (ideal = 1 / ${c0.holdMs} ms = ${f(1000 / c0.holdMs, 0)} / s)${ping ? `. Over HTTP the two-RTT limit is 1 / (hold + 2 × PING p50) = ${f(1000 / (c0.holdMs + 2 * ping), 1)} / s (${f(c0.holdMs / (c0.holdMs + 2 * ping))} of ideal)` : ""}${pair ? `, and with the round trips measured after a ${c0.holdMs} ms pause 1 / (hold + pair p50) = ${f(1000 / (c0.holdMs + pair), 1)} / s (${f(c0.holdMs / (c0.holdMs + pair))} of ideal)` : ""}.`,
    "- **requests / acq**: requests (HTTP) or commands (TCP) in the window, failed polls and releases included, per acquisition. The floor is 2.",
    "- **billed / acq (writes)**: what Upstash would bill per acquisition: every command Redis ran in the window, each call inside a script included (`INFO commandstats`), failed attempts and releases included; in brackets the writes among them (a global database bills each write once per region). TCP peers are counted the same way.",
    "- **hand-off**: the next holder's acquire resolved − the previous holder leaving its critical section (calling release).",
    "- **fairness**: acquisitions per client in the window, min / mean / max over every client of every round, and min / mean.",
    "- **gave up**: acquire calls that returned without the lock. **client CPU busy**: share of one core the benchmark process used. **overlaps**: critical sections that began before the previous one ended (a correctness check; must be 0).",
    "",
    "![contended throughput and requests per acquisition](results.svg)",
    "",
  ];
  for (const [n, libs] of Object.entries(c)) {
    const rows: string[][] = [];
    for (const [name, e] of Object.entries(libs) as [LibraryName, (typeof libs)[LibraryName]][]) {
      rows.push(contendedRow(`${NAMES[name]} (default)`, e));
      const differs = createLibraries().find((l) => l.name === name)?.sameBudgetDiffers;
      if (e.sameBudget && differs)
        rows.push(contendedRow(`${NAMES[name]} (same wait budget)`, e.sameBudget));
    }
    out.push(`### ${n} clients`, "", table(["library", ...CONTENDED_COLUMNS], rows), "");
    const told = (Object.entries(libs) as [LibraryName, ContendedResult][]).filter(
      ([, e]) => e.releaseToMessageP50Ms !== null,
    );
    if (told.length) {
      out.push(
        `Where a hand-off's time goes, per acquisition, for the locks whose next holder is told by a message (${n} clients): the previous holder's release sent → the next holder's message, that message → its acquire resolved (the lease, its timers and events), the client process's CPU and the bill.`,
        "",
        table(
          [
            "library",
            "release → message p50 ms",
            "message → acquired p50 ms",
            "client CPU µs / acq",
            "billed / acq",
          ],
          told.map(([name, e]) => [
            NAMES[name],
            f(e.releaseToMessageP50Ms),
            f(e.messageToAcquiredP50Ms),
            f(e.cpuMicrosPerAcquisition, 0),
            f(e.billedPerAcquisition, 1),
          ]),
        ),
        "",
      );
    }
  }
  const v = r.backoffVariants;
  const base = c["16"]?.["edgelock-poll"];
  if (v?.length && base) {
    const label = (b: { initialDelay: number; maxDelay: number; multiplier: number }) =>
      `edgelock, wait: "poll", backoff ${b.initialDelay} ms × ${b.multiplier} up to ${b.maxDelay} ms`;
    out.push(
      "### edgelock polling with other backoffs (16 clients)",
      "",
      'The polling waiter (`wait: "poll"`) with a shorter backoff, in the same rotation as the table above, to show what polling sooner buys and costs. The default backoff row is repeated from above.',
      "",
      table(
        ["setting", ...CONTENDED_COLUMNS],
        [
          contendedRow(`${label(DEFAULT_BACKOFF)} (default)`, base),
          ...v.map((x) => contendedRow(label(x.backoff), x.result)),
        ],
      ),
      "",
    );
  }
  return out;
}

function scale(r: BenchResults): string[] {
  const s = r.scale;
  if (!s) return [];
  const names = Object.keys(s.acquireP50Ms) as LibraryName[];
  const rows = s.sizes.map((size, i) => [
    f(size, 0),
    ...names.map((n) => `${f(s.acquireP50Ms[n][i], 3)} / ${f(s.cycleP50Ms[n][i], 3)}`),
  ]);
  const prim = s.primitives;
  return [
    "## 4. Scale: many distinct locks",
    "",
    `Redis is filled with N held locks (Redisson-layout hashes with a 1 h TTL, written through a pipelined TCP client), then each library times ${f(r.config.scaleCycles, 0)} acquire+release cycles on fresh keys at each size, in rotating order. Cells: acquire p50 / cycle p50, ms.`,
    "",
    table(["locks in Redis", ...names.map((n) => NAMES[n])], rows),
    "",
    `Redis memory (\`used_memory\`) per lock, measured by holding ${f(r.config.memoryLocks, 0)} distinct locks at once and then releasing them:`,
    "",
    table(
      ["library", "bytes per held lock", "bytes left per lock after release"],
      names.map((n) => [
        NAMES[n],
        f(s.memory[n].bytesPerHeldLock, 0),
        f(s.memory[n].bytesAfterRelease, 0),
      ]),
    ),
    "",
    "edgelock keeps a replay record for each release that frees a lock (so that an HTTP retry is applied once; a held lock is its own acquire's record), one STRING for one `replayWindow` (default 30 s): that is what stays after release, and it expires on its own (section 3c).",
    "",
    `The issue also asks for fair-lock acquire with 1 → 1 000 queued waiters and the permit-expirable semaphore with 1 → 10 000 permits. ${
      prim.fairLock || prim.permitExpirableSemaphore
        ? `edgelock now has ${[prim.fairLock && "getFairLock", prim.permitExpirableSemaphore && "getPermitExpirableSemaphore"].filter(Boolean).join(" and ")}, but this benchmark does not measure ${prim.fairLock && prim.permitExpirableSemaphore ? "them" : "it"} at those sizes yet${prim.permitExpirableSemaphore && r.semaphore ? ` (section 3e runs the permit-expirable semaphore with ${r.semaphore.permits} permits)` : ""}.`
        : "Neither primitive exists in edgelock yet (only the reentrant lock does), so those rows are not measured."
    }`,
    "",
  ];
}

function bundle(r: BenchResults): string[] {
  const b = r.bundle;
  if (!b) return [];
  const rows = Object.entries({ ...b, ...r.bundlePeers }).map(([entry, e]) => [
    entry === "@upstash/lock" ? "@upstash/lock (peer)" : `edgelock${entry === "." ? "" : entry}`,
    f(e.minGzipBytes, 0),
    e.limitBytes === null ? "–" : f(e.limitBytes, 0),
    e.note ?? (e.passed === null ? "" : e.passed ? "within budget" : "**over budget**"),
  ]);
  return [
    "## 5. Bundle size",
    "",
    "Each entry bundled by esbuild (through size-limit with `.size-limit.cjs`, after `tsc -b`), minified, gzip, with the peers (`@upstash/redis`, `hono`, `cloudflare:*`) left out: what the entry adds to a user's Worker. `npm run size` fails when an entry is over its budget. redlock and redis-semaphore are not measured: they need Node's `crypto` and a TCP Redis client (ioredis), which Workers and Vercel's Edge runtime do not run.",
    "",
    table(["entry", "bytes min+gzip", "budget", ""], rows),
    "",
    ...entrySizes(r),
  ];
}

/** Each primitive's entry as a user's Worker meets it, and where the lock entry's bytes go. */
function entrySizes(r: BenchResults): string[] {
  const e = r.entrySizes;
  if (!e) return [];
  const kB = (n: number | null) => (n === null ? "–" : (n / 1000).toFixed(1));
  const rows = e.entries.map((x) => [
    x.name,
    kB(x.bytes),
    kB(x.lua),
    x.bytes === null || x.lua === null ? "–" : kB(x.bytes - x.lua),
    String(x.budget),
    x.target === undefined ? "–" : String(x.target),
    x.passed === null
      ? ""
      : !x.passed
        ? "**over budget**"
        : x.target !== undefined && x.bytes !== null && x.bytes > x.target * 1000
          ? "target missed"
          : "within target",
  ]);
  const sum = (lua: boolean) =>
    e.lockModules.filter((m) => m.lua === lua).reduce((n, m) => n + m.bytes, 0);
  const top = e.lockModules
    .filter((m) => !m.lua)
    .slice(0, 12)
    .map((m) => `${m.module.replace(/^src\//, "").replace(/\.js$/, "")} ${f(m.bytes, 0)}`)
    .join(", ");
  return [
    "### Per-primitive entries",
    "",
    "A Worker that re-exports the entry beside the `@upstash/redis` client, bundled by esbuild (Workers conditions, minified), gzip, minus the same Worker without the entry (`node scripts/entry-sizes.mjs`, run in CI against these budgets); Lua is what the Worker loses when every script's text is empty. kB = 1000 bytes.",
    "",
    table(["Worker", "kB", "Lua", "JS", "budget", "target", ""], rows),
    "",
    `Where \`edgelock/lock\`'s bytes go, minified before gzip (\`node scripts/entry-sizes.mjs --modules edgelock/lock\`): Lua ${f(sum(true), 0)} bytes, JavaScript ${f(sum(false), 0)}, the largest modules ${top}.`,
    "",
  ];
}

function reproduce(): string[] {
  return [
    "## Reproduce",
    "",
    "```",
    "npm ci",
    "npm run bench                   # full run, writes bench/RESULTS.md, results.json, results.svg",
    "npm run bench -- --json         # also prints the JSON (last line of stdout)",
    "npm run bench -- --quick        # smoke run of a few seconds, writes to bench/.tmp/",
    "npm run bench -- --help         # durations, client counts, scenarios, libraries",
    "```",
    "",
    "Needs `redis-server` on PATH (`apt-get install -y redis-server`).",
    "",
  ];
}

/** Section 6: RedLock(5) acquire latency against the 3rd-fastest endpoint's round trip. */
function redlock(r: BenchResults): string[] {
  const x = r.redlock;
  if (!x) return [];
  return [
    "## 6. RedLock over 5 endpoints",
    "",
    `Five independent endpoints, each its own \`redis-server\` and bridge process on this machine (the run's own plus four more), each with its own \`@upstash/redis\` client. Per trial, on fresh names: the 5 endpoints' single-lock acquires are sent at once and each is timed, all before any release is sent (a quorum of 3 cannot be faster than the 3rd-fastest of them), then \`new RedLock(5 locks).tryLock({ leaseTime: 10 000 })\` is timed; releases are not timed, and the two alternate which goes first. ${x.trials} measured trials after 20 untimed ones. RedLock decides as soon as 3 endpoints granted (the other grants join the lease when they arrive), so its acquire should cost about one round trip of the 3rd-fastest endpoint: the goal is a p50 ratio of at most 1.3.`,
    "",
    "| endpoints | trials | RedLock acquire p50 / p99, ms | 3rd-fastest endpoint p50, ms | ratio (goal ≤ 1.3) |",
    "| --- | --- | --- | --- | --- |",
    `| ${x.endpoints} | ${x.trials} | ${x.acquireP50Ms} / ${x.acquireP99Ms} | ${x.thirdFastestP50Ms} | ${x.ratio} |`,
    "",
  ];
}
