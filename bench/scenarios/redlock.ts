/**
 * Scenario 6: RedLock over 5 independent endpoints (each its own redis-server and bridge
 * process). Per trial, on fresh names: the 5 endpoints' single-lock acquires sent at once, each
 * timed (their 3rd-fastest is what a quorum of 3 cannot beat), then RedLock(5)'s acquire, timed;
 * releases untimed. Goal: RedLock acquire p50 / 3rd-fastest endpoint p50 ≤ 1.3 (the decision
 * is taken at the quorum; the other grants join the lease when they arrive).
 * @module
 */
import { EdgeLock, RedLock } from "edgelock";
import { type BenchEnv, startBenchEnv } from "../env.js";
import { now, percentile, round } from "../stats.js";

/** Sizes of scenario 6. */
export interface RedlockOptions {
  /** Measured trials. */
  trials: number;
  prefix: string;
}

/** What scenario 6 measured. */
export interface RedlockResult {
  endpoints: number;
  trials: number;
  acquireP50Ms: number | null;
  acquireP99Ms: number | null;
  /** p50 over trials of the 3rd-fastest of the 5 single-lock acquires sent at once. */
  thirdFastestP50Ms: number | null;
  /** acquireP50Ms / thirdFastestP50Ms (goal ≤ 1.3). */
  ratio: number | null;
}

const ENDPOINTS = 5;
const LEASE_MS = 10_000;

/** Runs scenario 6 on `env` plus 4 more endpoints it starts (and stops) itself. */
export async function runRedlock(
  env: BenchEnv,
  options: RedlockOptions,
  log: (line: string) => void,
): Promise<RedlockResult> {
  const extra = await Promise.all(Array.from({ length: ENDPOINTS - 1 }, () => startBenchEnv()));
  try {
    const clients = [env, ...extra].map((e) => new EdgeLock({ redis: e.http() }));
    const acquires: number[] = [];
    const thirds: number[] = [];
    const trial = async (i: number, measured: boolean) => {
      // Alternate which goes first, so neither always meets warmer connections.
      const single = async () => {
        // Every acquire is timed before any release is sent: a release must not load the
        // endpoints while slower acquires are still on their way.
        const held = await Promise.all(
          clients.map(async (c, k) => {
            const started = now();
            const lease = await c.getLock(`${options.prefix}single:${i}:${k}`).tryLock({
              leaseTime: LEASE_MS,
            });
            return { ms: now() - started, lease };
          }),
        );
        await Promise.all(held.map((h) => h.lease?.release()));
        const times = held.map((h) => h.ms).sort((a, b) => a - b);
        if (measured) thirds.push(times[2] ?? Number.NaN);
      };
      const quorum = async () => {
        const redlock = new RedLock(clients.map((c) => c.getLock(`${options.prefix}red:${i}`)));
        const started = now();
        const lease = await redlock.tryLock({ leaseTime: LEASE_MS });
        const ms = now() - started;
        if (!lease) throw new Error("bench: RedLock on 5 free endpoints was not acquired");
        await lease.release();
        if (measured) acquires.push(ms);
      };
      // Warm-up trials start with the single acquires: RedLock's 500 ms endpoint limit refuses a
      // cold first request (NOSCRIPT, then EVAL) on a loaded machine.
      if (i % 2 === 0 || !measured) {
        await single();
        await quorum();
      } else {
        await quorum();
        await single();
      }
    };
    for (let i = 0; i < 20; i++) await trial(-1 - i, false); // scripts loaded, connections open
    for (let i = 0; i < options.trials; i++) await trial(i, true);
    const acquireP50 = percentile(acquires, 50);
    const thirdP50 = percentile(thirds, 50);
    const result: RedlockResult = {
      endpoints: ENDPOINTS,
      trials: options.trials,
      acquireP50Ms: round(acquireP50),
      acquireP99Ms: round(percentile(acquires, 99)),
      thirdFastestP50Ms: round(thirdP50),
      ratio: round(acquireP50 / thirdP50),
    };
    log(
      `  RedLock(5) acquire p50 ${result.acquireP50Ms} ms (p99 ${result.acquireP99Ms}), 3rd-fastest endpoint p50 ${result.thirdFastestP50Ms} ms: ratio ${result.ratio}`,
    );
    return result;
  } finally {
    await Promise.all(extra.map((e) => e.close()));
  }
}
