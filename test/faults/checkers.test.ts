/**
 * The fault suite's checkers on hand-written histories (no Redis): each one fires on the
 * violation it is for and stays quiet on the legal histories next to it. The campaigns
 * themselves run with `npm run test:faults` (test/faults/*.campaign.ts).
 */
import { describe, expect, it } from "vitest";
import {
  checkCounter,
  checkFencing,
  checkOverlaps,
  classifyKeys,
  FencedWitness,
  tokenRegressions,
} from "./checkers.js";
import type { Hold } from "./history.js";

let ids = 0;
function hold(
  owner: string,
  invoke: number,
  complete: number,
  end: { release?: number; expires?: number; lost?: number; token?: number } = {},
): Hold {
  const h: Hold = {
    id: ids++,
    process: 0,
    owner,
    invoke,
    complete,
    expiresAt: end.expires ?? 1e9,
  };
  if (end.release !== undefined) h.releaseInvoke = end.release;
  if (end.lost !== undefined) h.lostAt = end.lost;
  if (end.token !== undefined) h.token = end.token;
  return h;
}

describe("(a) overlapping windows", () => {
  it("a hand-off where the next grant is applied before the release's answer is legal", () => {
    // A releases at 10 (answer at 14); B's acquire was sent at 9 and completed at 12.
    const a = hold("a", 0, 1, { release: 10 });
    const b = hold("b", 9, 12, { release: 20 });
    expect(checkOverlaps([a, b]).violations).toBe(0);
  });

  it("a grant completed while another owner still acts is a violation", () => {
    const a = hold("a", 0, 1, { release: 10 });
    const b = hold("b", 2, 5, { release: 20 });
    const report = checkOverlaps([a, b]);
    expect(report.violations).toBe(1);
    expect(report.maxConcurrent).toBe(2);
    expect(report.examples[0]).toMatch(/began inside/);
  });

  it("a window ends at expiry or loss, whichever comes first", () => {
    const expired = hold("a", 0, 1, { release: 50, expires: 10 });
    const lost = hold("b", 11, 12, { release: 50, lost: 20 });
    const next = hold("c", 20, 21, { release: 30 });
    expect(checkOverlaps([expired, lost, next]).violations).toBe(0);
  });

  it("windows that only touch do not overlap; the same owner never conflicts with itself", () => {
    const a = hold("a", 0, 1, { release: 10 });
    const b = hold("b", 5, 10, { release: 20 });
    const reentry = hold("b", 12, 13, { release: 15 });
    expect(checkOverlaps([a, b, reentry]).violations).toBe(0);
  });

  it("with a capacity, only more holders than permits at once is a violation", () => {
    const holds = [hold("a", 0, 1), hold("b", 0, 2), hold("c", 0, 3)];
    expect(checkOverlaps(holds, 3).violations).toBe(0);
    expect(checkOverlaps(holds, 2).violations).toBe(1);
  });
});

describe("(b) fenced witness", () => {
  it("refuses lower and equal tokens and counts no stale write when tokens follow grants", () => {
    const witness = new FencedWitness();
    const g1 = hold("a", 0, 1, { token: 10 });
    const g2 = hold("b", 2, 3, { token: 11 });
    expect(witness.write(g1, 10, 1.5)).toBe(true);
    expect(witness.write(g2, 11, 4)).toBe(true);
    expect(witness.write(g1, 10, 5, true)).toBe(false); // g1 stalled, writes late
    expect(witness.write(g2, 11, 6)).toBe(false); // a resent copy
    const report = checkFencing(witness.writes, [g1, g2]);
    expect(report).toMatchObject({ stale: 0, regressions: 0, late: 1, lateRefused: 1 });
  });

  it("counts an older grant's write accepted after a newer grant wrote", () => {
    const witness = new FencedWitness();
    const older = hold("a", 0, 1, { token: 20 });
    const newer = hold("b", 2, 3, { token: 11 }); // requested after `older` was granted
    witness.write(newer, 11, 4);
    witness.write(older, 20, 5);
    const report = checkFencing(witness.writes, [older, newer]);
    expect(report.stale).toBe(1);
    expect(report.regressions).toBe(1);
  });

  it("concurrent grants may be ordered either way", () => {
    const a = hold("a", 0, 5, { token: 2 });
    const b = hold("b", 1, 4, { token: 1 }); // requested before `a` completed
    expect(tokenRegressions([a, b])).toBe(0);
  });

  it("newerWrite resolves on a newer grant's accepted write, or false on timeout", async () => {
    const witness = new FencedWitness();
    const g1 = hold("a", 0, 1, { token: 1 });
    const g2 = hold("b", 2, 3, { token: 2 });
    const waiting = witness.newerWrite(g1, 10_000);
    witness.write(g1, 1, 1.5);
    witness.write(g2, 2, 4);
    expect(await waiting).toBe(true);
    expect(await witness.newerWrite(g2, 1)).toBe(false);
  });
});

describe("(c) lost updates", () => {
  it("compares ok increments with the final value", () => {
    expect(checkCounter(10, 10, 0).lost).toBe(0);
    expect(checkCounter(10, 7, 2)).toEqual({ increments: 10, final: 7, lost: 3, outsideWindow: 2 });
  });
});

describe("(d) keys left", () => {
  it("allows documented keys within their bounds and reports the rest", () => {
    const report = classifyKeys(
      [
        { key: "edgelock_replay:{t:lock}:0123abcd", pttl: 30_000 },
        { key: "edgelock_replay:{t:lock}:k:part-1", pttl: 10_000 },
        { key: "edgelock_replay:{t:other}:4567", pttl: -1 }, // no TTL: a leak
        { key: "edgelock_replay:{t:late}:89ab", pttl: 30_001 }, // beyond the window: a leak
        { key: "redisson_lock_token:{t:lock}", pttl: -1 },
        { key: "edgelock_waiting:{t:lock}", pttl: 20_000 },
        { key: "edgelock_waiting:{t:sem}:any", pttl: 20_000 },
        { key: "edgelock_wake:{t:lock}:abc", pttl: 5_000 },
        // A registry's TTL runs up to a quarter slot past its last registration (60 s slots).
        { key: "edgelock_waiting:{t:lock2}", pttl: 75_000 },
        { key: "edgelock_waiting:{t:lock3}", pttl: 75_001 }, // beyond that: a leak
        { key: "t:sem", pttl: -1 },
        { key: "t:lock", pttl: 1_500 }, // a lock HASH nobody holds any more
      ],
      { replayWindow: 30_000, persistent: ["t:sem"] },
    );
    expect(report).toMatchObject({ replay: 2, tokens: 1, waiting: 4, persistent: 1 });
    expect(report.waitingKeys).toHaveLength(4);
    expect(report.leaked.map((k) => k.key)).toEqual([
      "edgelock_replay:{t:other}:4567",
      "edgelock_replay:{t:late}:89ab",
      "edgelock_waiting:{t:lock3}",
      "t:lock",
    ]);
  });
});
