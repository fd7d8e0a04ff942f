/**
 * Smoke test of `npm run bench`: a tiny run of scenarios 1–3 in its own process (it starts its
 * own redis-server and bridge) must print the Bench JSON of DESIGN.md as its last stdout line.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const LIBRARIES = ["edgelock", "upstash-lock", "redlock", "redis-semaphore"];

describe("npm run bench", () => {
  it("prints the Bench JSON shape with --json", { timeout: 60_000 }, async () => {
    const { stdout } = await run(
      process.execPath,
      [
        "--import",
        "tsx",
        "bench/run.ts",
        "--quick",
        "--json",
        "--no-write",
        "--only",
        "uncontended,contended",
        "--cycles",
        "20",
        "--clients",
        "4",
        "--measure",
        "200",
      ],
      { cwd: new URL("..", import.meta.url), maxBuffer: 16 * 1024 * 1024 },
    );
    const last = stdout.trim().split("\n").at(-1) ?? "";
    const r = JSON.parse(last);

    expect(r.machine).toMatchObject({ cores: expect.any(Number), node: process.version });
    expect(r.limit).toMatchObject({
      pingP50Ms: expect.any(Number),
      evalshaP50Ms: expect.any(Number),
    });
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
    expect(r.bundle).toBeNull();
    expect(r.targets.map((t: { id: string }) => t.id)).toContain("coreBundle");
  });
});
