/**
 * The committed seed set: per kind, seeds and run counts that `npm test`
 * (test/explore/explore.test.ts) and `npm run explore` without `--minutes` replay. Small on
 * purpose (a few minutes on 2 cores for all kinds); longer runs draw fresh seeds.
 */
import type { KindName } from "./kinds.js";

/** One fixed exploration: fast-check's seed and how many runs it generates from it. */
export interface SeedRun {
  seed: number;
  runs: number;
}

/** The fixed seeds of each kind. */
export const SEEDS: Record<KindName, readonly SeedRun[]> = {
  lock: [
    { seed: 51_001, runs: 40 },
    // With the explorer's first generators this seed found a hold count of 2 (a late copy of a
    // busy attempt took the freed lock and the waiter's next attempt re-entered), fixed in
    // lua/lock/acquire.lua by 8548642; kept, it is the seed that finds most of the defects of
    // mutants.ts.
    { seed: 5, runs: 50 },
  ],
  "fair-lock": [{ seed: 51_002, runs: 20 }],
  "fenced-lock": [{ seed: 51_003, runs: 20 }],
  "write-lock": [{ seed: 51_004, runs: 20 }],
  "read-write-lock": [{ seed: 51_009, runs: 20 }],
  semaphore: [{ seed: 51_006, runs: 20 }],
  "permit-expirable-semaphore": [{ seed: 51_007, runs: 20 }],
  "count-down-latch": [{ seed: 51_008, runs: 15 }],
};
