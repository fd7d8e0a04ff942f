/** The backoff policy of a polling wait (src/wait/backoff.ts). */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HAND_OFF_CLAIM_WINDOW_MS } from "../../src/limits.js";
import {
  backoffDelay,
  DEFAULT_BACKOFF,
  expiryBound,
  resolveBackoff,
  SLEEP_FLOOR_MS,
} from "../../src/wait/backoff.js";

describe("backoff policy", () => {
  const policy = resolveBackoff(undefined);

  it("never sleeps past the deadline, past the holder's PTTL by more than the floor, or below the floor", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: -2, max: 100_000 }),
        fc.integer({ min: 1, max: 100_000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (attempt, pttl, remaining, r) => {
          const d = backoffDelay(policy, attempt, pttl, remaining, () => r);
          expect(d).toBeLessThanOrEqual(remaining);
          if (pttl >= 0) expect(d).toBeLessThanOrEqual(Math.max(pttl, SLEEP_FLOOR_MS) + 1);
          if (remaining >= SLEEP_FLOOR_MS) expect(d).toBeGreaterThanOrEqual(SLEEP_FLOOR_MS);
          expect(d).toBeLessThanOrEqual(policy.maxDelay);
        },
      ),
    );
  });

  it("grows exponentially with equal jitter up to maxDelay", () => {
    expect(backoffDelay(policy, 0, -1, 1e9, () => 0)).toBe(DEFAULT_BACKOFF.initialDelay / 2);
    expect(backoffDelay(policy, 0, -1, 1e9, () => 0.999999)).toBe(DEFAULT_BACKOFF.initialDelay);
    expect(backoffDelay(policy, 3, -1, 1e9, () => 0)).toBe((DEFAULT_BACKOFF.initialDelay * 8) / 2);
    expect(backoffDelay(policy, 30, -1, 1e9, () => 0.999999)).toBe(DEFAULT_BACKOFF.maxDelay);
  });

  it("rejects bad backoff options", () => {
    expect(() => resolveBackoff({ initialDelay: 0 })).toThrow(RangeError);
    expect(() => resolveBackoff({ initialDelay: 1.5 })).toThrow(/backoff.initialDelay/);
    expect(() => resolveBackoff({ initialDelay: 50, maxDelay: 10 })).toThrow(/backoff.maxDelay/);
    expect(() => resolveBackoff({ multiplier: 0.5 })).toThrow(/backoff.multiplier/);
    expect(() => resolveBackoff({ multiplier: Number.NaN })).toThrow(RangeError);
    expect(() => resolveBackoff({ initial: 5 } as never)).toThrow(/unknown option `initial`/);
  });
});

describe("when a waiter comes back for the holder's expiry", () => {
  it("the first at the expiry, each one behind it a claim window later per waiter ahead", () => {
    expect(expiryBound({ pttl: 1_500 })).toBe(1_500);
    expect(expiryBound({ pttl: 1_500, ahead: 0 })).toBe(1_500);
    expect(expiryBound({ pttl: 1_500, ahead: 1 })).toBe(1_500 + HAND_OFF_CLAIM_WINDOW_MS);
    expect(expiryBound({ pttl: 1_500, ahead: 2 })).toBe(1_500 + 2 * HAND_OFF_CLAIM_WINDOW_MS);
    expect(expiryBound({ pttl: 1_500, ahead: 7 })).toBe(1_500 + 7 * HAND_OFF_CLAIM_WINDOW_MS);
    // No TTL or unknown: nothing to come back for, whatever the place.
    expect(expiryBound({ pttl: -1, ahead: 1 })).toBe(-1);
    expect(expiryBound({ pttl: -2, ahead: 0 })).toBe(-2);
  });
});
