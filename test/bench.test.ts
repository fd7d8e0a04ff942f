/**
 * Smoke test of `npm run bench`: a tiny run of scenarios 1–3 in its own process (it starts its
 * own redis-server and bridge) must print the Bench JSON of DESIGN.md as its last stdout line;
 * and a tiny run of scenarios 3d and 3e must report the semaphores' and the latch's rows.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);

/** Runs `npm run bench -- --quick --json --no-write ...args` and parses its last stdout line. */
async function quickBench(...args: string[]) {
  const { stdout } = await run(
    process.execPath,
    ["--import", "tsx", "bench/run.ts", "--quick", "--json", "--no-write", ...args],
    { cwd: new URL("..", import.meta.url), maxBuffer: 16 * 1024 * 1024 },
  );
  return JSON.parse(stdout.trim().split("\n").at(-1) ?? "");
}
const LIBRARIES = ["edgelock", "upstash-lock", "redlock", "redis-semaphore"];
/** The operations rows of a wait that another party's request ends. */
const woken = () => [
  "reentrant lock: acquire after a wait (woken by the release)",
  "semaphore: tryAcquire after a wait (woken by the release)",
  "permit-expirable semaphore: acquire after a wait (woken by the release)",
  "count-down latch: await woken by the last countDown",
];

describe("npm run bench", () => {
  it("prints the Bench JSON shape with --json", { timeout: 60_000 }, async () => {
    const r = await quickBench(
      "--only",
      "uncontended,contended",
      "--cycles",
      "20",
      "--clients",
      "4",
      "--measure",
      "200",
    );

    expect(r.machine).toMatchObject({ cores: expect.any(Number), node: process.version });
    expect(r.limit).toMatchObject({
      pingP50Ms: expect.any(Number),
      evalshaP50Ms: expect.any(Number),
      // edgelock's two requests sent raw: each reply was checked to be its cycle's.
      edgelockScriptsP50Ms: expect.any(Number),
      edgelockScriptsBridgeCpuMicros: expect.any(Number),
      networkDelayMs: 5,
    });
    // The network column: every HTTP library's cycle again, each of its two requests held 5 ms
    // by the bridge (which the bench removes again, or throws).
    for (const name of ["edgelock", "upstash-lock"] as const) {
      expect(r.uncontended[name].networkP50Ms, name).toBeGreaterThanOrEqual(10);
    }
    expect(r.uncontended.redlock.networkP50Ms).toBeNull();
    // The pairs with @upstash/lock's cycles: every HTTP library but @upstash/lock itself, and
    // edgelock's two requests alone.
    const pairedShape = {
      pairs: 10,
      median: expect.any(Number),
      low: expect.any(Number),
      high: expect.any(Number),
    };
    for (const paired of [
      r.uncontended.edgelock.pairedVsUpstash,
      r.limit.edgelockScriptsPairedVsUpstash,
    ]) {
      expect(paired).toMatchObject(pairedShape);
      expect(paired.low).toBeLessThanOrEqual(paired.median);
      expect(paired.median).toBeLessThanOrEqual(paired.high);
    }
    expect(r.uncontended["upstash-lock"].pairedVsUpstash).toBeNull();
    expect(r.uncontended.redlock.pairedVsUpstash).toBeNull();
    for (const name of LIBRARIES) {
      expect(r.uncontended[name]).toMatchObject({
        p50Ms: expect.any(Number),
        p99Ms: expect.any(Number),
        requestsPerCycleWarm: 2,
        requestsPerCycleCold: expect.any(Number),
        ratioToLimit: expect.any(Number),
      });
      expect(r.contended["4"][name]).toMatchObject({
        throughputRatio: expect.any(Number),
        requestsPerAcquisition: expect.any(Number),
        fairnessMin: expect.any(Number),
        overlaps: 0,
        errors: 0,
      });
      // Hand-off and fairness need at least two acquisitions; a loaded machine may give fewer.
      expect(r.contended["4"][name]).toHaveProperty("handoffP50Ms");
      expect(r.contended["4"][name]).toHaveProperty("handoffP99Ms");
      expect(r.contended["4"][name]).toHaveProperty("fairnessMinOverMean");
    }
    // Requests per cycle are counted by the bridge (HTTP) and at the ioredis client (TCP):
    // every library needs one request to acquire and one to release when warm; a brand-new
    // edgelock client on an empty script cache pays at most one extra request per script.
    expect(r.uncontended.edgelock.requestsPerCycleCold).toBeGreaterThanOrEqual(2);
    expect(r.uncontended.edgelock.requestsPerCycleCold).toBeLessThanOrEqual(4);
    expect(r.uncontended["upstash-lock"].requestsPerCycleCold).toBe(2);
    // The bill (INFO commandstats): edgelock's lock cycle within its budget, @upstash/lock's 4
    // (SET NX PX; EVAL GET DEL), every peer counted, writes apart.
    expect(r.uncontended.edgelock.billedPerCycle).toBeLessThanOrEqual(10);
    expect(r.uncontended["upstash-lock"].billedPerCycle).toBe(4);
    expect(r.uncontended["upstash-lock"].billedWritesPerCycle).toBe(3);
    for (const name of LIBRARIES) {
      expect(r.uncontended[name].billedPerCycle, name).toBeGreaterThanOrEqual(2);
      // Redis's own CPU (INFO cpu) per cycle: every library's commands run there.
      expect(r.uncontended[name].redisCpuMicrosPerCycle, name).toBeGreaterThan(0);
      expect(r.contended["4"][name].billedPerAcquisition, name).toBeGreaterThanOrEqual(2);
    }
    // The bare hand-off lock, the contended reference row, runs only where there is contention:
    // a queued acquire and a release that hands over, at most 3 + 5 calls per acquisition. The
    // figure is the bill between two readings over the acquisitions inside the window, so its
    // edges add calls of acquisitions outside it: the hold running when the window opens (its
    // acquire and release, 8), at its close an acquire of each of the 4 clients (3 each) and
    // the release of a hold taken after it (5), and a client's SUBSCRIBE before its first
    // acquire (1 each). With ~10 acquisitions in this 200 ms window, those edges alone can add
    // more than 1 per acquisition; a full run's windows make them negligible.
    const bare = r.contended["4"]["bare-handoff"];
    expect(r.uncontended["bare-handoff"]).toBeUndefined();
    expect(bare).toMatchObject({ overlaps: 0, errors: 0, acquisitions: expect.any(Number) });
    const edges = 8 + 4 * 3 + 5 + 4 + 8 * bare.gaveUp;
    // billedPerAcquisition is rounded to 0.1.
    expect((bare.billedPerAcquisition - 0.05) * bare.acquisitions).toBeLessThanOrEqual(
      8 * bare.acquisitions + edges,
    );
    expect(r.bundle).toBeNull();
    expect(r.targets.map((t: { id: string }) => t.id)).toContain("coreBundle");
  });

  it("runs the semaphore scenario and the new operations rows", { timeout: 60_000 }, async () => {
    // 600 ms windows: a loaded machine (the rest of the suite running) can leave a 200 ms one
    // with no acquisition of a library at all.
    const r = await quickBench("--only", "semaphore,operations", "--measure", "600");

    expect(r.semaphore).toMatchObject({ clients: 16, permits: 3, idealPerSec: 300 });
    for (const name of ["edgelock-semaphore", "edgelock-permit-semaphore", "redis-semaphore"]) {
      const e = r.semaphore.byLibrary[name];
      expect(e, `${name}: ${JSON.stringify(e)}`).toMatchObject({
        throughputRatio: expect.any(Number),
        requestsPerAcquisition: expect.any(Number),
        fairnessMin: expect.any(Number),
        errors: 0,
      });
      // The scenario fails the run above the permits; this checks that it counted at all.
      expect(e.maxInside).toBeGreaterThanOrEqual(1);
      expect(e.maxInside).toBeLessThanOrEqual(3);
    }
    expect(r.semaphore.byLibrary["redis-semaphore"].transport).toBe("tcp");
    // One request per operation; three for a wait a release (or the last countDown) ends: the
    // busy attempt, the BLPOP and the attempt (the other party's request is not counted).
    const ops = r.operations as Record<string, { requests: number }>;
    const single = [
      "semaphore: tryAcquire, permit available",
      "semaphore: release",
      "permit-expirable semaphore: tryAcquire, permit available",
      "permit-expirable semaphore: lease.renew()",
      "permit-expirable semaphore: lease.release()",
      "count-down latch: trySetCount",
      "count-down latch: countDown",
      "count-down latch: getCount",
      "count-down latch: await, open",
    ];
    for (const label of single) expect(ops[label]?.requests, label).toBe(1);
    const bills = r.operations as Record<string, { billed: number | null }>;
    expect(bills["count-down latch: countDown"]?.billed).toBeLessThanOrEqual(6);
    expect(bills["count-down latch: getCount"]?.billed).toBeGreaterThanOrEqual(2);
    for (const label of woken()) expect(bills[label]?.billed, label).toBeNull();
    for (const label of woken()) {
      expect(ops[label]?.requests, label).toBeGreaterThanOrEqual(3);
      expect(ops[label]?.requests, label).toBeLessThan(3.5);
    }
  });

  it("runs the RedLock scenario: 5 endpoints, acquire latency against the 3rd-fastest", {
    timeout: 60_000,
  }, async () => {
    const r = await quickBench("--only", "redlock");
    expect(r.redlock).toMatchObject({
      endpoints: 5,
      trials: 10,
      acquireP50Ms: expect.any(Number),
      thirdFastestP50Ms: expect.any(Number),
      ratio: expect.any(Number),
    });
    expect(r.redlock.acquireP50Ms).toBeGreaterThan(0);
  });

  it("runs the 16-client loop under each bridge blocking mode, with no overlap and no error", {
    timeout: 60_000,
  }, async () => {
    const r = await quickBench("--only", "bridge-modes", "--libs", "edgelock,edgelock-poll");
    for (const mode of ["refuse", "instant", "block"]) {
      for (const name of ["edgelock", "edgelock-poll"]) {
        expect(r.bridgeModes[mode][name]).toMatchObject({ overlaps: 0, errors: 0 });
        expect(r.bridgeModes[mode][name].requestsPerAcquisition).toBeGreaterThan(0);
      }
    }
    // The target itself is judged on a full run: a 300 ms window is too short to compare.
    expect(r.targets.find((t: { id: string }) => t.id === "bridgeModesRequests")).toMatchObject({
      value: expect.any(Number),
      goal: 1,
    });
  });
});

describe("the uncontended scenario's block order", () => {
  it("is a permutation drawn from the round's seed, with a different predecessor per round", async () => {
    const { shuffled } = await import("../bench/scenarios/uncontended.js");
    const items = ["ping", "evalsha", "tcp", "edgelock", "fair", "upstash", "redlock", "sem"];
    const orders = [0, 1, 2, 3].map((r) => shuffled(items, r));
    for (const order of orders) expect([...order].sort()).toEqual([...items].sort());
    expect(shuffled(items, 2)).toEqual(orders[2]);
    // Behind whom each participant ran: a rotation keeps it the same every round.
    const before = (order: string[], id: string) => order[order.indexOf(id) - 1] ?? "first";
    for (const id of items) {
      expect(new Set(orders.map((o) => before(o, id))).size).toBeGreaterThan(1);
    }
  });
});

describe("the paired difference of the uncontended scenario", () => {
  it("takes the median of the pairs' differences, whatever drifts under both", async () => {
    const { pairedDifference } = await import("../bench/stats.js");
    // The machine's speed swings by far more than the difference, the same for both of a pair.
    const drift = [900, 40, 2_000, 15, 700, 1_300, 60, 5, 880, 300];
    const a = drift.map((x) => x + 3);
    expect(pairedDifference(a, drift)).toEqual({ pairs: 10, median: 3, low: 3, high: 3 });
    expect(pairedDifference(drift, a).median).toBe(-3);
  });

  it("brackets the median with a seeded bootstrap interval", async () => {
    const { pairedDifference } = await import("../bench/stats.js");
    const a = [11, 12, 13, 14, 110, 15, 9, 13, 12, 200];
    const b = a.map(() => 10);
    const d = pairedDifference(a, b);
    expect(d.median).toBe(3);
    expect(d.low).toBeLessThanOrEqual(3);
    expect(d.high).toBeGreaterThanOrEqual(3);
    expect(d.low).toBeGreaterThanOrEqual(-1);
    expect(d.high).toBeLessThan(100);
    // The same input gives the same interval.
    expect(pairedDifference(a, b)).toEqual(d);
  });

  it("refuses samples that are not pairs", async () => {
    const { pairedDifference } = await import("../bench/stats.js");
    expect(() => pairedDifference([1, 2], [1])).toThrow(RangeError);
    expect(() => pairedDifference([], [])).toThrow(RangeError);
  });
});

describe("the p50 ratio's interval over rounds", () => {
  it("is the pooled p50s' ratio, and exact when every round says the same", async () => {
    const { roundsRatio } = await import("../bench/stats.js");
    const b = [
      [10, 10, 10],
      [10, 10, 10],
      [10, 10, 10],
    ];
    const a = b.map((round) => round.map((x) => x * 1.1));
    const r = roundsRatio(a, b);
    expect(r.ratio).toBeCloseTo(1.1, 9);
    expect(r.low).toBeCloseTo(1.1, 9);
    expect(r.high).toBeCloseTo(1.1, 9);
  });

  it("widens with rounds that disagree, draws a round's blocks of both together, and is seeded", async () => {
    const { roundsRatio } = await import("../bench/stats.js");
    // The machine's speed swings from round to round, the same for both libraries' blocks:
    // drawn together, the swing cancels and the interval stays at the one ratio.
    const speed = [1, 3, 0.5, 2, 1.5, 0.8, 2.5, 1.2];
    const b = speed.map((v) => [100 * v, 101 * v, 99 * v]);
    const a = speed.map((v) => [105 * v, 106 * v, 104 * v]);
    const same = roundsRatio(a, b);
    expect(same.high - same.low).toBeLessThan(0.01);
    // Rounds where the ratio itself differs: the interval brackets the ratio and widens.
    const mixed = speed.map((_, i) => (i % 2 === 0 ? [100, 100, 100] : [120, 120, 120]));
    const flat = speed.map(() => [100, 100, 100]);
    const r = roundsRatio(mixed, flat);
    expect(r.low).toBeLessThanOrEqual(r.ratio);
    expect(r.high).toBeGreaterThanOrEqual(r.ratio);
    expect(r.high - r.low).toBeGreaterThan(0.1);
    expect(roundsRatio(mixed, flat)).toEqual(r);
  });

  it("judges the target on the ratio to three decimals, so 1.052 is not read as 1.05", async () => {
    const { evaluateTargets } = await import("../bench/results.js");
    const target = (p50VsUpstash: { ratio: number; low: number; high: number } | null) =>
      evaluateTargets({
        uncontended: {
          edgelock: { p50Ms: 1.169, p50VsUpstash },
          "upstash-lock": { p50Ms: 1.11, p50VsUpstash: null },
        },
        contended: null,
        bundle: null,
        limit: null,
        longHold: null,
        bridgeModes: null,
      } as never).find((t) => t.id === "uncontendedVsUpstash");
    expect(target({ ratio: 1.052, low: 1.042, high: 1.068 })).toMatchObject({
      value: 1.052,
      met: false,
      digits: 3,
    });
    expect(target({ ratio: 1.049, low: 1.03, high: 1.07 })?.met).toBe(true);
    // Without the rounds' ratio (an older results.json): the p50 columns', to three decimals.
    expect(target(null)).toMatchObject({ value: 1.053, met: false });
  });

  it("refuses rounds that do not match", async () => {
    const { roundsRatio } = await import("../bench/stats.js");
    expect(() => roundsRatio([[1]], [[1], [2]])).toThrow(RangeError);
    expect(() => roundsRatio([], [])).toThrow(RangeError);
    expect(() => roundsRatio([[1], []], [[1], [2]])).toThrow(RangeError);
  });
});

describe("what the bench measures", () => {
  it("loads edgelock from its build, as the package, never from its sources", async () => {
    const { readdir, readFile } = await import("node:fs/promises");
    const dir = new URL("../bench/", import.meta.url);
    const files = (await readdir(dir, { recursive: true })).filter(
      // hung-responses.ts is a separate probe: a ratio of the same code with and without faults.
      (f) => f.endsWith(".ts") && !f.startsWith(".tmp") && f !== "hung-responses.ts",
    );
    expect(files).toContain("scenarios/uncontended.ts");
    const fromSources: string[] = [];
    for (const file of files) {
      const text = await readFile(new URL(file, dir), "utf8");
      if (/from "(\.\.\/)+src\/index\.js"/.test(text)) fromSources.push(file);
    }
    expect(fromSources).toEqual([]);
    expect(await readFile(new URL("scenarios/uncontended.ts", dir), "utf8")).toContain(
      'from "edgelock"',
    );
  });
});
