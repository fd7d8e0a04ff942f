/**
 * The fault campaigns. Each runs three times on a fresh redis-server + bridge:
 * 1. negative control: the same workload (same faults) through a deliberately broken lock (no
 *    exclusion, a token fetched when writing instead of at the grant, no release): every checker that applies MUST report violations,
 *    otherwise the checker is blind and the campaign fails;
 * 2. positive control: the real lock, no faults: zero violations;
 * 3. the campaign: the real lock under its faults: zero violations, except those the campaign
 *    declares outside the model (kill -9 without persistence forgets held locks; a holder stalled
 *    past its lease keeps writing), which are reported, not hidden.
 *
 * Sizes: `FAULTS_QUICK=1` picks the CI sizes, otherwise the full ones.
 */
import type { FaultConfig } from "../../src/bridge/index.js";
import type { RawClient } from "./nodes.js";
import {
  killNemesis,
  type LockKind,
  type RunReport,
  runWorkload,
  type WorkloadOptions,
} from "./workload.js";

/** CI sizes (`FAULTS_QUICK=1`) or full ones. */
export const QUICK = process.env.FAULTS_QUICK === "1";

/** The checkers, as named in the report. */
export type CheckerId = "overlaps" | "stale" | "regressions" | "lost" | "keys" | "zombies";

/** Checkers a negative control must make fire (zombies has no broken counterpart: see report). */
const MUST_FIRE: readonly CheckerId[] = ["overlaps", "stale", "regressions", "lost", "keys"];

/** One campaign. */
export interface Campaign {
  id: string;
  title: string;
  kind: LockKind;
  /** What is injected, in words. */
  faults: string;
  /** What the checkers expect, in words (for the report). */
  expects: string;
  options: Omit<WorkloadOptions, "kind" | "broken">;
  /** Checkers whose violations are expected in the faulted run (outside the timing model). */
  outsideModel?: readonly CheckerId[];
  /** The faulted run must have released while a timer renewal was in flight. */
  racesRenewals?: boolean;
}

/** A campaign's three runs and the verdict. */
export interface CampaignResult {
  campaign: Campaign;
  negative: RunReport;
  positive: RunReport;
  faulted: RunReport;
  /** Empty when the campaign passed. */
  problems: string[];
}

/** Violations per checker of a run (`undefined`: the checker does not apply). */
export function violations(r: RunReport): Record<CheckerId, number | undefined> {
  return {
    overlaps: r.overlaps.violations,
    stale: r.fencing?.stale,
    regressions: r.fencing?.regressions,
    lost: r.counter?.lost,
    keys: r.keys.leaked.length,
    zombies: r.zombies.renewed,
  };
}

/** Runs a campaign's negative control, positive control and faulted run, and judges them. */
export async function runCampaign(c: Campaign, resource: RawClient): Promise<CampaignResult> {
  const { faults, nemesis, latency, ...clean } = c.options;
  const negative = await runWorkload({ ...c.options, kind: c.kind, broken: true }, resource, c.id);
  const positive = await runWorkload({ ...clean, stallRate: 0, kind: c.kind }, resource, c.id);
  const faulted = await runWorkload({ ...c.options, kind: c.kind }, resource, c.id);
  const problems: string[] = [];
  const neg = violations(negative);
  for (const id of MUST_FIRE) {
    const n = neg[id];
    if (n !== undefined && n <= 0) problems.push(`negative control: checker "${id}" saw nothing`);
  }
  for (const [id, n] of Object.entries(violations(positive))) {
    if (n) problems.push(`positive control: ${n} "${id}" violation(s)`);
  }
  const allowed = new Set(c.outsideModel ?? []);
  for (const [id, n] of Object.entries(violations(faulted))) {
    if (n && !allowed.has(id as CheckerId)) problems.push(`faulted run: ${n} "${id}" violation(s)`);
  }
  for (const [label, run] of [
    ["positive control", positive],
    ["faulted run", faulted],
  ] as const) {
    if (run.recovered === 0) problems.push(`${label}: nobody acquired in the final, healed phase`);
    if (run.stillHeld > 0) {
      problems.push(`${label}: ${run.stillHeld} release(s) of a single hold answered still-held`);
    }
  }
  if (c.racesRenewals && faulted.racedRenewals === 0) {
    problems.push("faulted run: no release raced a renewal");
  }
  for (const [label, run] of [
    ["negative control", negative],
    ["faulted run", faulted],
  ] as const) {
    if (run.faultsInjected === 0 && !run.nemesis?.events && !run.stalls) {
      problems.push(`${label}: no fault was injected`);
    }
  }
  return { campaign: c, negative, positive, faulted, problems };
}

const cycles = QUICK ? 20 : 100;
/** How long a hung request stays unanswered before the bridge closes its socket. */
const hangMs = QUICK ? 600 : 1_000;

/**
 * The common workload: 4 processes on one lock, a 1 s lease, waits of up to 1.5 s, critical
 * sections of 0–3 ms between the counter's read and write, then 0–15 ms (15 %: 60 ms) before the
 * fenced write. The long holds let the negative control's writes overtake each other.
 */
const base = {
  processes: 4,
  cycles,
  leaseTime: 1_000,
  waitTime: 1_500,
  requestTimeout: 300,
  rmwDelayMs: 3,
  holdMs: 15,
  longHold: { rate: 0.15, ms: 60 },
} satisfies Omit<WorkloadOptions, "kind">;

const rules = (...r: NonNullable<FaultConfig["rules"]>): FaultConfig => ({ rules: r, seed: 7 });

/** Fault campaigns run for both the reentrant lock and the fenced lock. */
const perLock: Omit<Campaign, "kind" | "id">[] = [
  {
    title: "fail before apply",
    faults: "10 % of requests answered 503 and 10 % cut (socket closed) without reaching Redis",
    expects: "no violation: nothing applied, every script replay-safe",
    options: {
      ...base,
      faults: rules(
        { action: "fail", mode: "503", rate: 0.1 },
        { action: "fail", mode: "close", rate: 0.1 },
      ),
    },
  },
  {
    title: "apply then lose (close)",
    faults: "15 % of requests applied, then the socket closed (@upstash/redis resends them)",
    expects: "no violation: resends answered from the replay records",
    options: { ...base, faults: rules({ action: "lose", mode: "close", rate: 0.15 }) },
  },
  {
    title: "apply then lose (503)",
    faults: "15 % of requests applied, then answered 503 (the transport resends once)",
    expects: "no violation: resends answered from the replay records",
    options: { ...base, faults: rules({ action: "lose", mode: "503", rate: 0.15 }) },
  },
  {
    title: "apply then lose (hang)",
    faults: `10 % of requests applied, then no answer for ${hangMs / 1000} s (requestTimeout 200 ms: ambiguous), then the socket closed (the client resends)`,
    expects: "no violation: unanswered acquires cancelled, late resends answered from the records",
    options: {
      ...base,
      requestTimeout: 200,
      faults: rules({ action: "lose", mode: "hang", rate: 0.1, hangMs }),
    },
  },
  {
    title: "hangs",
    faults: `10 % of requests held unapplied for ${hangMs / 1000} s (requestTimeout 200 ms), then the socket closed: the client's resend applies late`,
    expects: "no violation: the cancel's tombstone turns a late acquire into a no-op",
    options: {
      ...base,
      requestTimeout: 200,
      faults: rules({ action: "fail", mode: "hang", rate: 0.1, hangMs }),
    },
  },
  {
    title: "latency",
    faults:
      "10–30 % of requests (rate drawn per run) delayed 50–400 ms, half before reaching Redis and half after it answered (requestTimeout 300 ms: some time out, and some of those apply late)",
    expects:
      "no violation: unanswered acquires cancelled, late arrivals turned into no-ops, grants that arrive late carry less (or no) validity and are not used past it",
    options: { ...base, latency: { rate: [0.1, 0.3], delayMs: [50, 400] } },
  },
];

/** Every campaign, in run order. */
export const campaigns: Campaign[] = [
  ...perLock.flatMap((c): Campaign[] =>
    (QUICK ? (["fenced"] as const) : (["lock", "fenced"] as const)).map((kind) => ({
      ...c,
      kind,
      id: `${kind}-${c.title.replace(/[^a-z0-9]+/g, "-").replace(/-$/, "")}`,
      title: `${c.title} — ${kind === "lock" ? "reentrant lock" : "fenced lock"}`,
    })),
  ),
  {
    id: "fenced-kill-9",
    title: "kill -9 and restart of the redis-server — fenced lock",
    kind: "fenced",
    faults:
      "redis-server SIGKILLed every 0.3–0.7 s (the first within 0.3 s) and restarted empty on the same port after 20–150 ms (no persistence); critical sections of up to 120 ms so that crashes hit holders",
    expects:
      "held locks are forgotten at the crash, so overlapping windows and lost updates CAN happen (outside the model: reported, not failed); the fenced witness must still accept 0 stale writes and tokens must never regress (token rule max(last + 1, server time in µs)); no leftover keys",
    options: {
      ...base,
      cycles: QUICK ? 12 : 60,
      holdMs: 120,
      longHold: undefined,
      nemesis: killNemesis([300, 700], [20, 150]),
    },
    outsideModel: ["overlaps", "lost"],
  },
  {
    id: "fenced-stalled-holder",
    title: "holder stalled past its lease — fenced lock",
    kind: "fenced",
    faults:
      "15 % of holders read the counter, then stall until their lease is over and a newer holder has written, then write (late)",
    expects:
      "windows never overlap (the stalled holder's window ended at its expiry); the unguarded counter loses updates (outside the model: a lock alone cannot stop a paused holder); the fenced witness refuses every late write after a newer one: 0 stale writes",
    options: { ...base, cycles: QUICK ? 15 : 100, leaseTime: 300, stallRate: 0.15 },
    outsideModel: ["lost"],
  },
  {
    id: "lock-release-vs-renewal",
    racesRenewals: true,
    title: "release racing a timer renewal — reentrant lock (watchdog mode)",
    kind: "lock",
    faults:
      "watchdog lease 150 ms renewed by the timer every 50 ms; holds of 0–150 ms; 8 ms latency on every request and 5 % of requests applied then lost (close)",
    expects:
      "no zombie renewal (no timer renewal sent after its lease's release completed), no lock key left after quiescence, no overlap",
    options: {
      ...base,
      // The campaign must see a release race a renewal: CI-sized runs of 10 cycles saw 3-7, and
      // once, on a loaded machine, none; 25 make a run without one unlikely.
      cycles: QUICK ? 25 : 60,
      leaseTime: undefined,
      watchdogTimeout: 150,
      requestTimeout: 100,
      holdMs: 150,
      longHold: undefined,
      faults: { delayMs: 8, ...rules({ action: "lose", mode: "close", rate: 0.05 }) },
    },
  },
  {
    id: "semaphore-mixed",
    title: "permit-expirable semaphore (2 permits, 5 processes) — mixed faults",
    kind: "semaphore",
    faults: "10 % of requests applied then lost (close), 10 % answered 503 unapplied",
    expects: "never more than 2 holders at once; only the permit counters remain",
    options: {
      ...base,
      processes: 5,
      permits: 2,
      faults: rules(
        { action: "lose", mode: "close", rate: 0.1 },
        { action: "fail", mode: "503", rate: 0.1 },
      ),
    },
  },
];
