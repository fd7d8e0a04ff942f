/**
 * Lock workloads as Jepsen runs them on etcd's lock: the lock-protected set (set-workload.ts)
 * (a) under request faults, with a broken-lock negative control; (b) with a holder paused
 * (SIGSTOP) past its lease in a child process; (c) with the clients' wall clocks stepped ±1 h
 * mid-run in child processes. Each run gets its own redis-server + bridge for the lock; the set
 * lives on the suite's resource redis-server, which no fault touches.
 */
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { dirname } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import type { FaultConfig } from "../../src/bridge/index.js";
import { EdgeLock } from "../../src/index.js";
import type { ChildConfig, FromChild, PauseReport, ToChild } from "./client-process.js";
import { type Pair, type RawClient, startPair } from "./nodes.js";
import {
  acquirer,
  type CycleRecord,
  checkSet,
  runClient,
  runCycle,
  type SetClientConfig,
  type SetReport,
  SetResource,
} from "./set-workload.js";

const QUICK = process.env.FAULTS_QUICK === "1";
const here = dirname(fileURLToPath(import.meta.url));

/** One run of a set campaign. */
export interface SetRun {
  label: string;
  durationMs: number;
  clients: number;
  report: SetReport;
  /** Bridge requests and faults injected; clock jumps made. */
  requests: number;
  faultsInjected: number;
  jumps?: number;
  pause?: PauseReport & { releaseResult?: string; childWrite: string };
}

/** A set campaign's runs and verdict. */
export interface SetCampaignResult {
  id: string;
  title: string;
  faults: string;
  expects: string;
  runs: SetRun[];
  /** Empty when the campaign passed. */
  problems: string[];
}

/** Where the campaigns find the resource redis-server. */
export interface ResourceNode {
  raw: RawClient;
  url: string;
}

interface SetCampaign {
  id: string;
  title: string;
  faults: string;
  expects: string;
  run(resource: ResourceNode): Promise<{ runs: SetRun[]; problems: string[] }>;
}

const kinds = (quick: readonly ("lock" | "fenced")[]) =>
  QUICK ? quick : (["lock", "fenced"] as const);
const lockName = (kind: "lock" | "fenced") => (kind === "lock" ? "getLock" : "getFencedLock");
let runs = 0;
const fresh = (id: string) => {
  runs += 1;
  return `s:${id}:${runs}:${Math.random().toString(36).slice(2, 8)}`;
};

/** Violations a correct lock must never show (and a broken one must). */
function violationsOf(r: SetReport): Record<string, number> {
  const out: Record<string, number> = {
    overlaps: r.overlaps.violations,
    sections: r.sections,
    lost: r.lost,
  };
  if (r.stale !== undefined) out.stale = r.stale;
  return out;
}

const noViolations = (label: string, r: SetReport, problems: string[]) => {
  for (const [id, n] of Object.entries(violationsOf(r))) {
    if (n > 0) problems.push(`${label}: ${n} "${id}" violation(s)`);
  }
  if (r.overlaps.violations > 0) problems.push(`e.g. ${r.overlaps.examples.join("; ")}`);
};

/** In-process clients on `pair`'s bridge, all running at once; their records. */
async function runInProcess(
  configs: readonly SetClientConfig[],
  pair: Pair,
  resource: ResourceNode,
  requestTimeout: number,
  watchdogTimeout?: number,
): Promise<CycleRecord[]> {
  const records: CycleRecord[] = [];
  const background: Promise<unknown>[] = [];
  await Promise.all(
    configs.map(async (config) => {
      const redis = pair.redis();
      const edgelock = new EdgeLock({
        redis,
        requestTimeout,
        ...(watchdogTimeout === undefined ? {} : { watchdogTimeout }),
        waitUntil: (task) => background.push(task),
      });
      const set = new SetResource(resource.raw, config.setKey);
      await runClient(config, acquirer(config, edgelock, redis, resource.raw), set, (r) =>
        records.push(r),
      );
    }),
  );
  await Promise.allSettled(background);
  return records;
}

// (a) ------------------------------------------------------------------------------------------

const setSize = QUICK
  ? { clients: 3, cycles: 4, holdMaxMs: 1_000 }
  : { clients: 5, cycles: 12, holdMaxMs: 2_000 };
const setFaults: FaultConfig = {
  rules: [
    { action: "lose", mode: "close", rate: 0.1 },
    { action: "fail", mode: "503", rate: 0.05 },
  ],
  seed: 29,
};

function setCampaign(kind: "lock" | "fenced"): SetCampaign {
  return {
    id: `set-${kind}`,
    title: `lock-protected set — ${lockName(kind)}`,
    faults:
      "on the lock's bridge: 10 % of requests applied then lost (socket closed), 5 % answered 503 unapplied",
    expects:
      "every acknowledged add in the final set, no overlapping hold windows or critical sections" +
      (kind === "fenced" ? ", no stale fenced write accepted" : "") +
      "; the negative control (a lock that grants everyone" +
      (kind === "fenced" ? ", write-time tokens" : "") +
      ") must show every one of these",
    run: async (resource) => {
      const problems: string[] = [];
      const result: SetRun[] = [];
      for (const broken of [true, false]) {
        const label = broken ? "negative control" : "faulted";
        const pair = await startPair();
        try {
          const prefix = fresh(`set-${kind}`);
          const configs = Array.from({ length: setSize.clients }, (_, i) => ({
            client: `p${i}`,
            kind,
            broken,
            lockName: `${prefix}:lock`,
            setKey: `${prefix}:set`,
            cycles: setSize.cycles,
            holdMaxMs: setSize.holdMaxMs,
            waitTime: setSize.clients * setSize.holdMaxMs,
          }));
          pair.bridge.setFaults(setFaults);
          pair.bridge.resetStats();
          const started = performance.now();
          // Watchdog mode: holds of up to 2 s outlive the 1 s watchdog lease only by renewals.
          const records = await runInProcess(configs, pair, resource, 500, 1_000);
          const stats = pair.bridge.stats();
          const report = await checkSet(
            records,
            new SetResource(resource.raw, `${prefix}:set`),
            kind === "fenced",
          );
          result.push({
            label,
            durationMs: performance.now() - started,
            clients: configs.length,
            report,
            requests: stats.requests,
            faultsInjected: stats.faultsInjected,
          });
          if (broken) {
            for (const [id, n] of Object.entries(violationsOf(report))) {
              if (n <= 0) problems.push(`negative control: checker "${id}" saw nothing`);
            }
          } else {
            noViolations(label, report, problems);
            if (report.acked === 0) problems.push(`${label}: no add acknowledged`);
            if (stats.faultsInjected === 0) problems.push(`${label}: no fault injected`);
          }
        } finally {
          await pair.close();
        }
      }
      return { runs: result, problems };
    },
  };
}

// Child processes --------------------------------------------------------------------------------

/** A forked client-process.ts: its messages as they come, and a way to wait for one. */
class Child {
  readonly process: ChildProcess;
  readonly records: CycleRecord[] = [];
  readonly #seen: FromChild[] = [];
  readonly #waiting: { type: FromChild["type"]; resolve: (m: FromChild) => void }[] = [];
  readonly exited: Promise<unknown>;

  constructor(config: ChildConfig) {
    this.process = fork(`${here}/client-process.ts`, [], {
      execArgv: ["--import", "tsx", "--import", `${here}/clock-preload.ts`],
      env: { ...process.env, EDGELOCK_SET_CLIENT: JSON.stringify(config) },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.exited = once(this.process, "exit");
    this.process.on("message", (message: FromChild) => {
      if (message.type === "record") this.records.push(message.record);
      const waiter = this.#waiting.findIndex((w) => w.type === message.type);
      if (waiter >= 0) this.#waiting.splice(waiter, 1)[0]?.resolve(message);
      else this.#seen.push(message);
    });
  }

  /** The next message of `type` (one already received and not yet taken, first). */
  next<T extends FromChild["type"]>(type: T): Promise<Extract<FromChild, { type: T }>> {
    const seen = this.#seen.findIndex((m) => m.type === type);
    if (seen >= 0) {
      return Promise.resolve(this.#seen.splice(seen, 1)[0] as Extract<FromChild, { type: T }>);
    }
    return new Promise((resolve, reject) => {
      this.#waiting.push({ type, resolve: resolve as (m: FromChild) => void });
      void this.exited.then(() => reject(new Error(`client process exited before "${type}"`)));
    });
  }

  send(message: ToChild): void {
    this.process.send(message);
  }

  async kill(): Promise<void> {
    if (this.process.exitCode === null && this.process.signalCode === null) {
      this.process.kill("SIGCONT");
      this.process.kill("SIGKILL");
    }
    await this.exited;
  }
}

function childConfig(
  set: SetClientConfig,
  mode: ChildConfig["mode"],
  pair: Pair,
  resource: ResourceNode,
  watchdogTimeout?: number,
): ChildConfig {
  const config: ChildConfig = {
    set,
    mode,
    bridgeUrl: pair.url,
    bridgeToken: pair.token,
    resourceUrl: resource.url,
    requestTimeout: 500,
  };
  if (watchdogTimeout !== undefined) config.watchdogTimeout = watchdogTimeout;
  return config;
}

// (b) ------------------------------------------------------------------------------------------

function pauseCampaign(kind: "lock" | "fenced"): SetCampaign {
  const fenced = kind === "fenced";
  return {
    id: `pause-${kind}`,
    title: `holder paused past its lease (SIGSTOP) — ${lockName(kind)}`,
    faults:
      "a client in a child process takes the lock (watchdog lease 1 s, timer keep-alive), reads the set, checks its lease, and is SIGSTOPped before writing; another client takes the lock once Redis let it expire, adds and releases; then SIGCONT, and the paused client writes",
    expects: fenced
      ? "the paused holder's late write is refused by the fenced store (its token is below the newer holder's): no lost acknowledged add, no overlapping windows, no stale write accepted; its lease reports the loss on resume"
      : "the paused holder's lease reports the loss on resume (signal aborted before it runs again, renew throws LeaseLostError, release answers expired / not-owner), and no windows overlap; its write still lands and erases the newer holder's acknowledged add (1 lost, 1 overlapping critical section: expected, the limit of an unfenced resource)",
    run: (resource) => interrupted(kind, "sigstop", resource),
  };
}

function stepBackCampaign(kind: "lock" | "fenced"): SetCampaign {
  return {
    id: `step-back-${kind}`,
    title: `clock stepped back 1 h while holding — ${lockName(kind)}`,
    faults:
      "a client in a child process takes the lock (fixed 1 s lease), reads the set, and has its Date.now() stepped back 1 h; another client takes the lock once Redis let it expire and adds; then the first checks its lease again (signal, expiresAt − Date.now() ≥ 25 ms) and writes only if it still looks valid",
    expects:
      "the stepped holder sees its lease lost (signal aborted at its expiry on the monotonic clock, expiresAt moved back with the clock): no write, no overlapping windows, no lost acknowledged add",
    run: (resource) => interrupted(kind, "step-back", resource),
  };
}

/**
 * A holder interrupted inside its critical section: stopped (SIGSTOP) or its clock stepped back,
 * while another client takes the lock and adds; then the holder goes on.
 */
async function interrupted(
  kind: "lock" | "fenced",
  how: "sigstop" | "step-back",
  resource: ResourceNode,
): Promise<{ runs: SetRun[]; problems: string[] }> {
  const fenced = kind === "fenced";
  const problems: string[] = [];
  const pair = await startPair();
  const prefix = fresh(`${how}-${kind}`);
  const base = {
    kind,
    lockName: `${prefix}:lock`,
    setKey: `${prefix}:set`,
    cycles: 1,
    holdMaxMs: 0,
    waitTime: 15_000,
    // Stopped: a watchdog lease (its keep-alive stops too). Stepped: the process runs on, so a
    // keep-alive would keep the lock; a fixed lease runs out.
    ...(how === "step-back" ? { leaseTime: 1_000 } : {}),
  } as const;
  const config = childConfig({ ...base, client: "held" }, "pause", pair, resource, 1_000);
  if (how === "step-back") config.recheck = true;
  const child = new Child(config);
  try {
    const started = performance.now();
    await child.next("ready");
    child.send({ type: "go" });
    await child.next("checked");
    if (how === "sigstop") child.process.kill("SIGSTOP");
    else {
      child.send({ type: "clock", offsetMs: -HOUR });
      await child.next("clock-set");
    }
    // The other client: waits for the first holder's lease to run out in Redis, then adds.
    const redis = pair.redis();
    const edgelock = new EdgeLock({ redis, requestTimeout: 500, watchdogTimeout: 1_000 });
    const other: SetClientConfig = { ...base, client: "other" };
    const set = new SetResource(resource.raw, base.setKey);
    const record = await runCycle(other, 0, acquirer(other, edgelock, redis, resource.raw), set);
    if (how === "sigstop") child.process.kill("SIGCONT");
    child.send({ type: "continue" });
    const { report: pause } = await child.next("pause");
    const { record: held } = await child.next("record");
    await child.next("done");
    await child.exited;
    const report = await checkSet([held, record], set, fenced);
    const run: SetRun = {
      label: how === "sigstop" ? "paused holder + one other" : "stepped holder + one other",
      durationMs: performance.now() - started,
      clients: 2,
      report,
      requests: pair.bridge.stats().requests,
      faultsInjected: 0,
      pause: {
        ...pause,
        childWrite: held.refused ? "refused" : held.acked ? "applied" : "not made",
        ...(held.releaseResult === undefined ? {} : { releaseResult: held.releaseResult }),
      },
    };
    if (how === "step-back") run.jumps = 1;
    if (!record.acked) problems.push(`the other client did not add (${record.acquire})`);
    if (held.acquire !== "granted")
      problems.push(`the first client was not granted (${held.acquire})`);
    if (!pause.abortedOnResume || pause.reason !== "lost") {
      problems.push(
        `first lease: signal ${pause.abortedOnResume ? `aborted (${pause.reason})` : "not aborted"} when it went on`,
      );
    }
    if (pause.renew !== "LeaseLostError(lost)")
      problems.push(`first lease: renew answered ${pause.renew}`);
    if (held.releaseResult !== "expired" && held.releaseResult !== "not-owner") {
      problems.push(`first lease: release answered ${held.releaseResult}`);
    }
    if (report.overlaps.violations > 0) {
      problems.push(
        `${report.overlaps.violations} overlapping window(s): ${report.overlaps.examples.join("; ")}`,
      );
    }
    if (how === "step-back") {
      if (held.writeInvoke !== undefined)
        problems.push("the stepped holder wrote after its lease ran out");
      noViolations("stepped run", report, problems);
    } else if (fenced) {
      if (!held.refused) problems.push("the paused holder's late fenced write was not refused");
      noViolations("paused run", report, problems);
    } else if (report.lost !== 1 || report.sections !== 1) {
      // The unfenced set must show the paused write erasing the other's add: this is the
      // checkers' control for the pause, and what fencing tokens exist for.
      problems.push(
        `unfenced: expected 1 lost add and 1 overlapping section, saw ${report.lost} and ${report.sections}`,
      );
    }
    return { runs: [run], problems };
  } finally {
    await child.kill();
    await pair.close();
  }
}

// (c) ------------------------------------------------------------------------------------------

const HOUR = 3_600_000;
const clockSize = QUICK ? { cycles: 4, holdMaxMs: 1_500 } : { cycles: 12, holdMaxMs: 1_500 };

function clockCampaign(kind: "lock" | "fenced"): SetCampaign {
  const fenced = kind === "fenced";
  return {
    id: `clock-${kind}`,
    title: `client clocks stepped ±1 h mid-run — ${lockName(kind)}`,
    faults:
      "2 clients in child processes whose Date.now() (and new Date()) is stepped every 300–800 ms between +1 h, 0 and −1 h (opposite directions in the two), a third in the test process on the real clock; fixed 1 s leases, holds of up to 1.5 s, so that many holds outlive their lease and depend on the local view of it",
    expects:
      "no overlapping windows or critical sections, every acknowledged add in the final set" +
      (fenced ? ", no stale fenced write accepted" : "") +
      ": a forward step makes a lease look expired (the holder skips its write), a backward one must not make it look valid past its expiry in Redis",
    run: async (resource) => {
      const problems: string[] = [];
      const pair = await startPair();
      const prefix = fresh(`clock-${kind}`);
      const base = {
        kind,
        lockName: `${prefix}:lock`,
        setKey: `${prefix}:set`,
        cycles: clockSize.cycles,
        holdMaxMs: clockSize.holdMaxMs,
        leaseTime: 1_000,
        waitTime: 3 * clockSize.holdMaxMs,
      } as const;
      const children = [0, 1].map(
        (i) => new Child(childConfig({ ...base, client: `c${i}` }, "loop", pair, resource)),
      );
      let jumps = 0;
      let stopped = false;
      try {
        await Promise.all(children.map((c) => c.next("ready")));
        const started = performance.now();
        for (const c of children) c.send({ type: "go" });
        // The nemesis: its own schedule of clock steps (not a synchronisation).
        const offsets = [
          [HOUR, 0, -HOUR, 0],
          [-HOUR, 0, HOUR, 0],
        ];
        const nemesis = (async () => {
          for (let step = 0; !stopped; step++) {
            await delay(300 + Math.random() * 500);
            if (stopped) break;
            for (const [i, c] of children.entries()) {
              const offsetMs = offsets[i]?.[step % 4] ?? 0;
              // A child that finished its cycles has closed its channel.
              if (c.process.connected) c.send({ type: "clock", offsetMs });
            }
            jumps += 1;
          }
        })();
        const local = runInProcess([{ ...base, client: "p0" }], pair, resource, 500);
        const [records] = await Promise.all([local, ...children.map((c) => c.next("done"))]);
        stopped = true;
        await nemesis;
        await Promise.all(children.map((c) => c.exited));
        const all = [...records, ...children.flatMap((c) => c.records)];
        const report = await checkSet(all, new SetResource(resource.raw, base.setKey), fenced);
        noViolations("clock run", report, problems);
        if (report.acked === 0) problems.push("no add acknowledged");
        if (jumps < 2) problems.push(`only ${jumps} clock steps`);
        return {
          runs: [
            {
              label: "2 stepped clocks + 1 real",
              durationMs: performance.now() - started,
              clients: 3,
              report,
              requests: pair.bridge.stats().requests,
              faultsInjected: 0,
              jumps,
            },
          ],
          problems,
        };
      } finally {
        stopped = true;
        await Promise.all(children.map((c) => c.kill()));
        await pair.close();
      }
    },
  };
}

/**
 * Every set campaign, in run order. CI sizes: the set under faults with the fenced lock, the clock
 * steps with getLock (whose waiters take hand-offs, a path of its own), the pause with both.
 */
export const setCampaigns: SetCampaign[] = [
  ...kinds(["fenced"]).map(setCampaign),
  ...(["lock", "fenced"] as const).map(pauseCampaign),
  ...kinds(["lock"]).map(stepBackCampaign),
  ...kinds(["lock"]).map(clockCampaign),
];

/** Runs one campaign. */
export async function runSetCampaign(
  c: SetCampaign,
  resource: ResourceNode,
): Promise<SetCampaignResult> {
  const { runs, problems } = await c.run(resource);
  return { id: c.id, title: c.title, faults: c.faults, expects: c.expects, runs, problems };
}

/** The report's section for these campaigns (report.ts). */
export function renderSetSection(results: readonly SetCampaignResult[]): string[] {
  if (results.length === 0) return [];
  const out = [
    "## Lock workloads as Jepsen runs them on etcd",
    "",
    "A lock-protected set (test/faults/set-workload.ts): each client takes the lock, reads the set " +
      "(a Redis string on the fault-free resource redis-server), holds the lock a random time, checks " +
      "its lease (`signal` not aborted, at least 25 ms left), adds one element and acknowledges it only " +
      "once the write returned, then releases. The fenced variant writes through a fenced store, a Lua " +
      "check-and-set on the resource node that refuses a token lower than the highest it accepted and " +
      "logs every decision. Checkers: **windows** (checkers.ts's overlap checker on the holds), " +
      "**sections** (critical sections [read, write returned] of applied writes that overlap), **lost** " +
      "(acknowledged adds missing from the final read), **stale** (fenced writes accepted after the store " +
      "had decided on a write of a grant requested after the writer's grant completed). Paused and " +
      "clock-stepped clients run in child processes (node with tsx) on the same bridge; the clock step " +
      "is a preload that offsets `Date.now()` and `new Date()` (test/faults/clock-preload.ts), the one " +
      "fault no real part can produce for one process.",
    "",
    "| campaign | run | duration | clients | acquires (granted) | too late | acked / refused | final | windows | sections | lost | stale | faults | verdict |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of results) {
    for (const run of r.runs) {
      const s = run.report;
      const faults = [
        run.faultsInjected ? `${run.faultsInjected} of ${run.requests} requests` : "",
        run.jumps ? `${run.jumps} clock steps` : "",
        run.pause && !run.jumps ? "SIGSTOP past the lease" : "",
      ]
        .filter(Boolean)
        .join("; ");
      out.push(
        `| ${r.title} | ${run.label} | ${(run.durationMs / 1000).toFixed(1)} s | ${run.clients} | ${s.attempts} (${s.granted}) | ${s.tooLate} | ${s.acked} / ${s.refused} | ${s.final} | ${s.overlaps.violations} | ${s.sections} | ${s.lost} | ${s.stale ?? "–"} | ${faults || "none"} | ${r.problems.length ? "**FAIL**" : "pass"} |`,
      );
    }
  }
  out.push("");
  for (const r of results) {
    out.push(`- **${r.title}.** Faults: ${r.faults}. Expects: ${r.expects}.`);
    for (const run of r.runs) {
      if (run.pause) {
        const p = run.pause;
        out.push(
          `  Interrupted holder when it went on: signal ${p.abortedOnResume ? `aborted (${p.reason})` : "not aborted"}, renew → ${p.renew}, release → ${p.releaseResult ?? "–"}, its write ${p.childWrite}.`,
        );
      }
    }
    if (r.problems.length) out.push(`  Problems: ${r.problems.join("; ")}.`);
  }
  out.push("");
  return out;
}
