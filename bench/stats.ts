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
