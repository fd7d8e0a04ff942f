/**
 * The lock-protected set's checkers (set-workload.ts) on hand-written records (no Redis): each
 * fires on the violation it is for and stays quiet on the legal history next to it.
 */
import { describe, expect, it } from "vitest";
import { checkOverlaps } from "./checkers.js";
import { type CycleRecord, holdOf, overlappingSections, staleAccepted } from "./set-workload.js";

function cycle(
  client: string,
  [acquireInvoke, acquireComplete]: [number, number],
  [readInvoke, writeComplete]: [number, number],
  releaseInvoke: number,
  extra: Partial<CycleRecord> = {},
): CycleRecord {
  return {
    client,
    cycle: 0,
    acquire: "granted",
    owner: client,
    acquireInvoke,
    acquireComplete,
    readInvoke,
    writeInvoke: writeComplete - 1,
    writeComplete,
    acked: true,
    element: `${client}.0`,
    expiresAt: releaseInvoke + 1_000,
    releaseInvoke,
    ...extra,
  };
}

describe("set checkers", () => {
  // a holds [1, 10], b is granted after a's release was sent.
  const handOff = [cycle("a", [0, 1], [2, 8], 10), cycle("b", [5, 11], [12, 20], 21)];

  it("sections: a hand-off is legal, a section begun inside another's is not", () => {
    expect(overlappingSections(handOff)).toBe(0);
    const inside = [cycle("a", [0, 1], [2, 8], 10), cycle("b", [3, 4], [5, 9], 12)];
    expect(overlappingSections(inside)).toBe(1);
    // A refused (unacknowledged) write is no applied section.
    const refused = [inside[0] as CycleRecord, { ...(inside[1] as CycleRecord), acked: false }];
    expect(overlappingSections(refused)).toBe(0);
  });

  it("windows: the records become holds the overlap checker reads", () => {
    expect(checkOverlaps(handOff.map(holdOf)).violations).toBe(0);
    const early = [cycle("a", [0, 1], [2, 8], 10), cycle("b", [3, 4], [12, 20], 21)];
    expect(checkOverlaps(early.map(holdOf)).violations).toBe(1);
    // A lease lost (signal aborted) at 3 ends the window there.
    const lost = [cycle("a", [0, 1], [2, 8], 10, { lostAt: 3 }), early[1] as CycleRecord];
    expect(checkOverlaps(lost.map(holdOf)).violations).toBe(0);
  });

  it("stale: an older grant's write accepted after a newer grant's decision", () => {
    // b was requested (5) after a was granted (1).
    const records = [cycle("a", [0, 1], [2, 30], 31), cycle("b", [5, 11], [12, 20], 21)];
    expect(
      staleAccepted(records, [
        { writer: "b/0", accepted: true },
        { writer: "a/0", accepted: false },
      ]),
    ).toBe(0);
    expect(
      staleAccepted(records, [
        { writer: "b/0", accepted: true },
        { writer: "a/0", accepted: true },
      ]),
    ).toBe(1);
    // In grant order, both accepted: legal.
    expect(
      staleAccepted(records, [
        { writer: "a/0", accepted: true },
        { writer: "b/0", accepted: true },
      ]),
    ).toBe(0);
  });
});
