/**
 * Small statistics helpers for the benchmark: percentiles (nearest rank), means, rounding.
 * @module
 */

/**
 * The `p`-th percentile of `samples` by the nearest-rank method (p in [0, 100]); `NaN` for no
 * samples. Nearest rank returns an observed value, never an interpolation between two.
 */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1] as number;
}

/** Arithmetic mean; `NaN` for no samples. */
export function mean(samples: readonly number[]): number {
  if (samples.length === 0) return Number.NaN;
  return samples.reduce((a, b) => a + b, 0) / samples.length;
}

/** Rounds to `digits` decimals (for the JSON and the tables); keeps `NaN`/`null` as `null`. */
export function round(value: number, digits = 3): number | null {
  if (!Number.isFinite(value)) return null;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** Milliseconds since an arbitrary origin, sub-millisecond resolution. */
export function now(): number {
  return performance.now();
}

/** CPU time (user + system) of this process in microseconds since it started. */
export function cpuMicros(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

/** The median of paired differences and a bootstrap interval around it, in the samples' unit. */
export interface PairedDifference {
  /** Number of pairs. */
  pairs: number;
  /** Median of `a[i] - b[i]`. */
  median: number;
  /** 5th and 95th percentiles of the median over bootstrap resamples (a 90 % interval). */
  low: number;
  high: number;
}

/**
 * Median of the differences `a[i] - b[i]` of paired samples, with a 90 % bootstrap interval
 * (`resamples` resamples with replacement, drawn by a seeded generator: the same input gives
 * the same interval). Pairs taken at the same moment cancel what drifts between blocks (the
 * machine's speed), so a difference of a few µs shows through a drift of tens.
 * @throws RangeError when `a` and `b` differ in length or are empty.
 */
export function pairedDifference(
  a: readonly number[],
  b: readonly number[],
  resamples = 1_000,
  seed = 1,
): PairedDifference {
  if (a.length !== b.length || a.length === 0) {
    throw new RangeError(
      `paired samples must be non-empty and of one length (${a.length}, ${b.length})`,
    );
  }
  const d = a.map((x, i) => x - (b[i] as number));
  const next = seeded(seed);
  const medians: number[] = [];
  const draw = new Array<number>(d.length);
  for (let r = 0; r < resamples; r++) {
    for (let i = 0; i < d.length; i++) draw[i] = d[Math.floor(next() * d.length)] as number;
    medians.push(percentile(draw, 50));
  }
  return {
    pairs: d.length,
    median: percentile(d, 50),
    low: percentile(medians, 5),
    high: percentile(medians, 95),
  };
}

/** A ratio of two p50s and a bootstrap interval around it. */
export interface RatioInterval {
  /** p50 of `a`'s samples over p50 of `b`'s. */
  ratio: number;
  /** 5th and 95th percentiles of the ratio over bootstrap resamples (a 90 % interval). */
  low: number;
  high: number;
}

/**
 * p50 of `a`'s samples over p50 of `b`'s, with a 90 % bootstrap interval that resamples whole
 * rounds: `a[r]` and `b[r]` are the blocks the two ran in round `r` (the same rounds are drawn
 * for both, as the machine's speed in a round is shared by its blocks). So the interval says how
 * far the ratio moves with the rounds a run happens to get, which a bootstrap of single cycles
 * would hide (cycles in one block are not independent draws). Seeded: the same input gives the
 * same interval.
 * @throws RangeError when the two have different numbers of rounds, none, or an empty round.
 */
export function roundsRatio(
  a: readonly (readonly number[])[],
  b: readonly (readonly number[])[],
  resamples = 1_000,
  seed = 1,
): RatioInterval {
  if (a.length !== b.length || a.length === 0 || [...a, ...b].some((r) => r.length === 0)) {
    throw new RangeError(
      `rounds must be non-empty and as many for both (${a.length}, ${b.length})`,
    );
  }
  const p50Of = (x: readonly (readonly number[])[], rounds: readonly number[]) =>
    percentile(
      rounds.flatMap((r) => x[r] ?? []),
      50,
    );
  const ratioOf = (rounds: readonly number[]) => p50Of(a, rounds) / p50Of(b, rounds);
  const next = seeded(seed);
  const ratios: number[] = [];
  const draw = new Array<number>(a.length);
  for (let i = 0; i < resamples; i++) {
    for (let r = 0; r < a.length; r++) draw[r] = Math.floor(next() * a.length);
    ratios.push(ratioOf(draw));
  }
  return {
    ratio: ratioOf(a.map((_, r) => r)),
    low: percentile(ratios, 5),
    high: percentile(ratios, 95),
  };
}

/** A small seeded generator of numbers in [0, 1) (mulberry32). */
export function seeded(seed: number): () => number {
  let state = seed | 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
