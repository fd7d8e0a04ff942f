/**
 * One run of a campaign: P processes (each its own EdgeLock and `@upstash/redis` client, like
 * separate invocations) cycle acquire → critical section → release on one lock name, through a
 * bridge that injects faults, in front of a redis-server of the run's own; a nemesis may act
 * meanwhile (kill -9), or a proxy delay a share of the requests. Then quiescence and the checkers.
 *
 * Critical section of a granted hold (a careful user: it first checks the lease is still valid):
 * - (c) read-modify-write of an unguarded counter on a separate, fault-free redis-server (GET,
 *   random delay, SET);
 * - (b) with a fencing token: a write to the in-test fenced witness;
 * - a random extra hold time.
 * A stalled holder (stall campaign) reads the counter, waits until its lease is over and a newer
 * holder has written to the witness, then writes both (late).
 */
import { setTimeout as delay } from "node:timers/promises";
import type { Redis } from "@upstash/redis";
import type { FaultConfig } from "../../src/bridge/index.js";
import {
  EdgeLock,
  type Lease,
  type LockEvent,
  type PermitExpirableSemaphore,
  TransportError,
} from "../../src/index.js";
import {
  type CounterReport,
  checkCounter,
  checkFencing,
  checkOverlaps,
  classifyKeys,
  FencedWitness,
  type FencingReport,
  type KeysReport,
  type OverlapReport,
} from "./checkers.js";
import { History, type Hold, holdWindow, type Op, type OpKind, type Outcome } from "./history.js";
import { startLatencyProxy } from "./latency-proxy.js";
import { type Pair, type RawClient, rawClient, scanKeys, startPair } from "./nodes.js";

/** Which primitive the processes use. */
export type LockKind = "lock" | "fenced" | "semaphore";

/** Shape of a run (sizes, times in ms). */
export interface WorkloadOptions {
  kind: LockKind;
  /** Negative control: a deliberately broken lock (no exclusion, write-time tokens, no release). */
  broken?: boolean;
  processes: number;
  /** Acquire attempts per process. */
  cycles: number;
  /** Fixed lease; omitted: watchdog mode renewed by the timer keep-alive. */
  leaseTime?: number;
  waitTime: number;
  requestTimeout: number;
  watchdogTimeout?: number;
  /** Most random delay between the counter's read and write. */
  rmwDelayMs: number;
  /** Most random extra time in the critical section. */
  holdMs: number;
  /** A share of the critical sections that last `ms` instead (long holds). */
  longHold?: { rate: number; ms: number };
  /** Semaphore permits (kind "semaphore"). */
  permits?: number;
  /** Probability that a holder stalls past its lease (stall campaign). */
  stallRate?: number;
  /** Bridge faults for the whole run. */
  faults?: FaultConfig;
  /** A nemesis acting during the run. */
  nemesis?: (pair: Pair) => Nemesis;
  /**
   * Latency on a share of the requests (a proxy in front of the bridge): each request delayed
   * with a probability drawn once per run from `rate`, by a time drawn from `delayMs`.
   */
  latency?: { rate: [number, number]; delayMs: [number, number] };
}

/** Something that injects faults while the processes run. */
export interface Nemesis {
  /** Stops injecting, heals everything (node running, faults cleared) and reports. */
  stop(): Promise<NemesisReport>;
}

/** What a nemesis did. */
export interface NemesisReport {
  /** e.g. "4 × kill -9 + restart". */
  summary: string;
  /** Fault events (kills, delay phases). */
  events: number;
}

/** Everything a run measured. */
export interface RunReport {
  durationMs: number;
  ops: Record<OpKind, Record<Outcome, number>>;
  /** Granted holds, and those whose lease had run out before the holder could use it. */
  holds: number;
  tooLate: number;
  /** Requests the bridge saw, requests it faulted, and what the nemesis did. */
  requests: number;
  faultsInjected: number;
  nemesis?: NemesisReport;
  stalls: number;
  overlaps: OverlapReport;
  fencing?: FencingReport;
  counter?: CounterReport;
  keys: KeysReport;
  /** Timer renewals sent after their lease's release had completed (and those that renewed). */
  zombies: { attempts: number; renewed: number };
  /** Releases sent while a timer renewal of the same lease was in flight. */
  racedRenewals: number;
  /**
   * Releases that answered "still-held": every hold here is one acquisition, never re-entered,
   * so such an answer means an acquire was applied twice (a copy of it counted another hold).
   */
  stillHeld: number;
  /** Processes that acquired in the final phase, after healing (of `processes`). */
  recovered: number;
  processes: number;
}

/** What a process holds, whatever the primitive. */
interface Grantee {
  owner: string;
  expiresAt: number;
  /** The grant's fencing token (fenced locks). */
  fencingToken?: number | undefined;
  /** The token a write to the witness carries; absent: no fenced write. */
  writeToken?: () => number;
  signal?: AbortSignal;
  release(): Promise<string>;
}

/** A usable lease must have at least this much left when the critical section starts. */
const MIN_USABLE_MS = 25;
/** How long a stalled holder waits for a newer holder's write before writing anyway. */
const STALL_WAIT_MS = 3_000;

let runs = 0;
/** The broken lock's token source: a counter read when writing. */
let brokenTokens = 0;

/** Runs the workload once on a fresh redis-server + bridge and checks the history. */
export async function runWorkload(
  options: WorkloadOptions,
  resource: RawClient,
  tag: string,
): Promise<RunReport> {
  runs += 1;
  const prefix = `f:${tag}:${runs}:${Math.random().toString(36).slice(2, 8)}:`;
  const name = `${prefix}lock`;
  const counterKey = `${prefix}counter`;
  const pair = await startPair();
  try {
    return await execute(options, pair, resource, prefix, name, counterKey);
  } finally {
    await pair.close();
  }
}

async function execute(
  o: WorkloadOptions,
  pair: Pair,
  resource: RawClient,
  prefix: string,
  name: string,
  counterKey: string,
): Promise<RunReport> {
  const history = new History();
  const witness = new FencedWitness();
  const background: Promise<unknown>[] = [];
  const unreleased: { hold: Hold; grantee: Grantee }[] = [];
  const increments: { hold: Hold; op: Op }[] = [];
  const events: { process: number; at: number; event: LockEvent }[] = [];
  let tooLate = 0;
  let stalls = 0;
  const started = history.now();

  const rate = o.latency ? between(o.latency.rate) : 0;
  const proxy = o.latency && (await startLatencyProxy(pair.url, rate, o.latency.delayMs));
  const clients = Array.from({ length: o.processes }, (_, p) => {
    const redis = proxy ? pair.redis({ url: proxy.url }) : pair.redis();
    const edgelock = new EdgeLock({
      redis,
      requestTimeout: o.requestTimeout,
      ...(o.watchdogTimeout === undefined ? {} : { watchdogTimeout: o.watchdogTimeout }),
      onEvent: (event) => events.push({ process: p, at: history.now(), event }),
      waitUntil: (task) => background.push(task),
    });
    return { redis, edgelock, acquire: acquirer(o, edgelock, redis, name, prefix) };
  });
  const replayWindow = clients[0]?.edgelock.replayWindow ?? 30_000;
  if (o.kind === "semaphore" && !o.broken) {
    await clients[0]?.edgelock.getPermitExpirableSemaphore(name).trySetPermits(o.permits ?? 1);
  }

  if (o.faults) pair.bridge.setFaults(o.faults);
  pair.bridge.resetStats();
  const nemesis = o.nemesis?.(pair);

  const release = async (p: number, hold: Hold, grantee: Grantee) => {
    // The latest confirmed expiry (renewals move it; a renewal that came too late aborted the
    // signal first, which ends the window at lostAt).
    hold.expiresAt = history.fromEpoch(grantee.expiresAt);
    const pending = history.invoke(p, "release");
    hold.releaseInvoke = pending.invoke;
    let last: unknown;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const result = await grantee.release();
        const op = pending.ok(result);
        hold.releaseComplete = op.complete;
        hold.releaseOutcome = "ok";
        hold.releaseResult = result;
        return;
      } catch (error) {
        if (!o.broken && !(error instanceof TransportError)) throw error;
        last = error;
      }
    }
    const op = isDefiniteFailure(last) ? pending.fail(codeOf(last)) : pending.info(codeOf(last));
    hold.releaseComplete = op.complete;
    hold.releaseOutcome = op.outcome;
    unreleased.push({ hold, grantee });
  };

  /** The processes' main loops (a stalled holder stops waiting when all the others are done). */
  const loops: Promise<void>[] = [];
  const stall = async (p: number, hold: Hold, grantee: Grantee) => {
    stalls += 1;
    // Paused past the lease: the lease's own signal says when it is over (for the broken lock,
    // a timer at its nominal expiry), then a newer holder must have written.
    const signal = grantee.signal;
    if (signal && !signal.aborted) {
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    }
    await Promise.race([
      witness.newerWrite(hold, STALL_WAIT_MS),
      Promise.all(loops.filter((_, i) => i !== p)),
    ]);
  };

  const holdTime = () =>
    o.longHold && Math.random() < o.longHold.rate ? o.longHold.ms : Math.random() * o.holdMs;

  /** One acquire → critical section → release of process `p` (`healed`: no stall). */
  const cycle = async (p: number, healed: boolean): Promise<boolean> => {
    const client = clients[p];
    if (!client) throw new Error(`no process ${p}`);
    const pending = history.invoke(p, "acquire");
    let grantee: Grantee | null;
    try {
      grantee = await client.acquire();
    } catch (error) {
      // The real lock fails only with TransportError; anything else is a bug to surface.
      if (!o.broken && !(error instanceof TransportError)) throw error;
      if (isDefiniteFailure(error)) pending.fail(codeOf(error));
      else pending.info(codeOf(error));
      // A client's retry pacing after an error (not a synchronisation).
      await delay(10 + Math.random() * 40);
      return false;
    }
    if (!grantee) {
      pending.fail("busy");
      return false;
    }
    const op = pending.ok();
    const hold = history.grant(
      op,
      grantee.owner,
      grantee.expiresAt,
      grantee.fencingToken,
      grantee.signal,
    );
    const stalled = !healed && Math.random() < (o.stallRate ?? 0);
    if (!stalled && (hold.expiresAt - history.now() < MIN_USABLE_MS || grantee.signal?.aborted)) {
      tooLate += 1;
    } else if (o.kind !== "semaphore") {
      // (c) the unguarded read-modify-write.
      const inc = history.invoke(p, "increment");
      const value = Number((await resource.send(["GET", counterKey])) ?? 0);
      await delay(Math.random() * o.rmwDelayMs);
      if (stalled) await stall(p, hold, grantee);
      await resource.send(["SET", counterKey, String(value + 1)]);
      increments.push({ hold, op: inc.ok() });
      await delay(holdTime());
      // (b) the fenced write, at the end of the critical section.
      const token = grantee.writeToken?.();
      if (token !== undefined) {
        hold.token ??= token;
        const accepted = witness.write(hold, token, history.now(), stalled);
        history.invoke(p, "write")[accepted ? "ok" : "fail"](accepted ? undefined : "refused");
      }
    } else {
      if (stalled) await stall(p, hold, grantee);
      await delay(holdTime());
    }
    await release(p, hold, grantee);
    return true;
  };

  for (const [p] of clients.entries()) {
    loops.push(
      (async () => {
        for (let i = 0; i < o.cycles; i++) await cycle(p, false);
      })(),
    );
  }
  await Promise.all(loops);
  const latency = proxy && {
    summary: `${proxy.delayed} of ${proxy.requests} requests delayed ${o.latency?.delayMs.join("–")} ms (rate ${(100 * rate).toFixed(0)} %; half before Redis, half after)`,
    events: proxy.delayed,
  };
  const requests = pair.bridge.stats().requests;
  const faultsInjected = pair.bridge.stats().faultsInjected;

  // Quiescence: heal, run the final phase, release what could not be released, let background
  // clean-ups finish, close the network so nothing in flight can still land, let orphans of
  // unanswered acquires run out their lease, then look.
  const nemesisReport = await nemesis?.stop();
  pair.bridge.clearFaults();
  proxy?.heal();
  // Final phase on the healed system (Jepsen's): one more cycle per process. The real lock
  // must serve it; the broken one leaves its key behind again even if a crash wiped it.
  const recovered = (await Promise.all(clients.map((_, p) => cycle(p, true)))).filter(Boolean);
  for (const { hold, grantee } of unreleased) {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        hold.releaseResult = await grantee.release();
        break;
      } catch {
        // Try again: the faults are off now.
      }
    }
  }
  for (let seen = 0; seen < background.length; ) {
    const batch = background.slice(seen);
    seen = background.length;
    await Promise.allSettled(batch);
  }
  await proxy?.close();
  await pair.bridge.close();
  const lease = o.leaseTime ?? o.watchdogTimeout ?? 30_000;
  const orphansGone = Math.max(
    0,
    ...history.ops
      .filter((op) => op.op === "acquire" && op.outcome === "info")
      .map((op) => op.invoke + lease + 50),
  );
  const wait = orphansGone - history.now();
  if (wait > 0) await delay(wait); // an orphaned hold lives at most its lease
  const raw = await rawClient(pair.node.url);
  let keys: KeysReport;
  try {
    const persistent =
      o.kind === "semaphore" && !o.broken
        ? [name, `edgelock_permits:{${name}}`, `edgelock_taken:{${name}}`]
        : [];
    keys = classifyKeys(await scanKeys(raw, prefix), { replayWindow, persistent });
  } finally {
    await raw.close();
  }

  const report: RunReport = {
    durationMs: history.now() - started,
    ops: history.counts(),
    holds: history.holds.length,
    tooLate,
    requests,
    faultsInjected,
    stalls,
    overlaps: checkOverlaps(history.holds, o.kind === "semaphore" ? (o.permits ?? 1) : 1),
    keys,
    zombies: zombieRenewals(history.holds, events),
    racedRenewals: racedRenewals(history.holds, events),
    stillHeld: history.holds.filter((h) => h.releaseResult === "still-held").length,
    recovered: recovered.length,
    processes: o.processes,
  };
  const fault = nemesisReport ?? latency;
  if (fault) report.nemesis = fault;
  if (o.kind === "fenced") report.fencing = checkFencing(witness.writes, history.holds);
  if (o.kind !== "semaphore") {
    const final = Number((await resource.send(["GET", counterKey])) ?? 0);
    const outside = increments.filter(({ hold, op }) => op.complete > holdWindow(hold).end).length;
    report.counter = checkCounter(increments.length, final, outside);
  }
  return report;
}

/** How a process acquires, for the primitive under test (or the broken stand-in). */
function acquirer(
  o: WorkloadOptions,
  edgelock: EdgeLock,
  redis: Redis,
  name: string,
  prefix: string,
): () => Promise<Grantee | null> {
  const leaseOptions = o.leaseTime === undefined ? {} : { leaseTime: o.leaseTime };
  if (o.broken) {
    // No NX (no exclusion), no TTL and no delete (a leak), and a token fetched when writing
    // (a counter read right before the write, not the grant's): it grows with time, so the
    // witness accepts nearly everything, in write order rather than grant order.
    const lease = o.leaseTime ?? o.watchdogTimeout ?? 30_000;
    return async () => {
      const owner = `broken:${Math.random().toString(36).slice(2)}`;
      await redis.set(`${prefix}broken`, owner);
      const grantee: Grantee = {
        owner,
        expiresAt: Date.now() + lease,
        signal: AbortSignal.timeout(lease),
        release: async () => "released",
      };
      if (o.kind === "fenced") grantee.writeToken = () => ++brokenTokens;
      return grantee;
    };
  }
  const asGrantee = (lease: Lease | null): Grantee | null => {
    if (!lease) return null;
    const { fencingToken } = lease;
    const grantee: Grantee = {
      owner: lease.owner,
      expiresAt: lease.expiresAt,
      fencingToken,
      signal: lease.signal,
      release: () => lease.release(),
    };
    if (fencingToken !== undefined) grantee.writeToken = () => fencingToken;
    return grantee;
  };
  switch (o.kind) {
    case "lock": {
      const lock = edgelock.getLock(name);
      return async () => asGrantee(await lock.tryLock({ waitTime: o.waitTime, ...leaseOptions }));
    }
    case "fenced": {
      const lock = edgelock.getFencedLock(name);
      return async () => asGrantee(await lock.tryLock({ waitTime: o.waitTime, ...leaseOptions }));
    }
    case "semaphore": {
      const semaphore: PermitExpirableSemaphore = edgelock.getPermitExpirableSemaphore(name);
      return async () =>
        asGrantee(await semaphore.tryAcquire({ waitTime: o.waitTime, ...leaseOptions }));
    }
  }
}

/**
 * Timer renewals sent after the release of their process's hold had completed and before the
 * process's next grant (a process holds one lease at a time, and a new lease's timer starts only
 * after its grant): a keep-alive that outlived its release.
 */
function zombieRenewals(
  holds: readonly Hold[],
  events: readonly { process: number; at: number; event: LockEvent }[],
): { attempts: number; renewed: number } {
  let attempts = 0;
  let renewed = 0;
  for (const { process, at, event } of events) {
    if (event.type !== "renew" || event.by !== "timer") continue;
    const sent = at - event.durationMs - 2; // durationMs is whole Date.now() ms
    const mine = holds.filter((h) => h.process === process);
    const zombie = mine.some((h, i) => {
      const next = mine[i + 1];
      return (
        h.releaseComplete !== undefined &&
        h.releaseOutcome === "ok" &&
        sent > h.releaseComplete &&
        (next === undefined || sent < next.complete)
      );
    });
    if (zombie) {
      attempts += 1;
      if (event.renewed) renewed += 1;
    }
  }
  return { attempts, renewed };
}

/** Releases invoked while a timer renewal of the same process (its one lease) was in flight. */
function racedRenewals(
  holds: readonly Hold[],
  events: readonly { process: number; at: number; event: LockEvent }[],
): number {
  const renewals = events.flatMap(({ process, at, event }) =>
    event.type === "renew" && event.by === "timer"
      ? [{ process, sent: at - event.durationMs - 1, answered: at }]
      : [],
  );
  return holds.filter((h) => {
    const released = h.releaseInvoke;
    if (released === undefined) return false;
    return renewals.some(
      (r) => r.process === h.process && r.sent <= released && r.answered >= released,
    );
  }).length;
}

/** A definite failure: a TransportError that says the request was not applied. */
function isDefiniteFailure(error: unknown): boolean {
  return error instanceof TransportError && !error.ambiguous;
}

function codeOf(error: unknown): string {
  if (error instanceof TransportError) return error.ambiguous ? "transport?" : "transport";
  return error instanceof Error ? error.name : "error";
}

/** kill -9 of the run's redis-server every `everyMs`, restarted on its port after `downMs`. */
export function killNemesis(everyMs: [number, number], downMs: [number, number]) {
  return (pair: Pair): Nemesis => {
    let stopped = false;
    const wake = new AbortController();
    const loop = (async () => {
      // The nemesis's schedule (random intervals; the first kill early), not a synchronisation.
      for (let next = between([50, everyMs[0]]); !stopped; next = between(everyMs)) {
        await delay(next, undefined, { signal: wake.signal }).catch(() => {});
        if (stopped) break;
        await pair.node.kill9();
        await delay(between(downMs));
        await pair.node.restart();
      }
    })();
    return {
      stop: async () => {
        stopped = true;
        wake.abort();
        await loop;
        await pair.node.restart();
        await untilServing(pair);
        return {
          summary: `${pair.node.kills} × kill -9 + restart on the same port (empty: no persistence)`,
          events: pair.node.kills,
        };
      },
    };
  };
}

/** Resolves once the bridge serves requests again (it reconnects to Redis with a backoff). */
async function untilServing(pair: Pair): Promise<void> {
  const redis = pair.redis({ retry: false });
  const deadline = performance.now() + 15_000;
  for (;;) {
    try {
      await redis.ping();
      return;
    } catch (error) {
      if (performance.now() > deadline) throw error;
      await delay(20); // polling the health check: Redis gives no event for "reconnected"
    }
  }
}

function between([min, max]: [number, number]): number {
  return min + Math.random() * (max - min);
}
