/**
 * How long a fair lock's hand-off holds the lock for the waiter it goes to: a lease shorter than
 * the claim window starts when the waiter confirms and lasts exactly that lease, instead of the
 * rest of the window; a longer one is held for its whole lease.
 */
import { describe, expect, it } from "vitest";
import { FAIR_CLAIM_WINDOW_MS, HAND_OFF_CLAIM_WINDOW_MS } from "../../../src/index.js";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { expectFirstWaiterLeavingTellsNext, recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const queueOf = async (name: string) =>
  (await raw.lRange(`redisson_lock_queue:{${name}}`, 0, -1)).map(String);

/** Hands the lock from a holder to one waiter asking for `leaseTime`; the waiter's lease. */
async function handOff(name: string, leaseTime: number, wait: "block" | "poll" = "block") {
  const holder = await recordingEdgeLock().edgelock.getFairLock(name).lock({ leaseTime: 10_000 });
  const waiter = recordingEdgeLock({ wait }).edgelock.getFairLock(name).lock({ leaseTime });
  await expect.poll(() => queueOf(name), { timeout: 3_000, interval: 10 }).toHaveLength(1);
  expect(await holder.release()).toBe("released");
  const lease = await waiter;
  return { lease, acquiredAt: Date.now() };
}

describe("fair lock hand-off and short leases", () => {
  for (const wait of ["block", "poll"] as const) {
    it(`a 1 s lease handed off (${wait}) holds the lock about 1 s, not the ${HAND_OFF_CLAIM_WINDOW_MS} ms claim window`, async () => {
      const name = `${prefix}short-${wait}`;
      const { lease, acquiredAt } = await handOff(name, 1_000, wait);
      const ttl = await raw.pTTL(name);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(1_000);
      expect(lease.expiresAt).toBeLessThanOrEqual(acquiredAt + 1_000);
      expect(await raw.hExists(name, "edgelock:grant")).toBe(0); // confirmed
      await expect.poll(() => raw.exists(name), { timeout: 3_000, interval: 20 }).toBe(0);
      const held = Date.now() - acquiredAt;
      expect(held).toBeLessThan(HAND_OFF_CLAIM_WINDOW_MS - 500);
    });
  }

  it("a lease longer than the claim window is held for its whole lease", async () => {
    const name = `${prefix}long`;
    const { lease } = await handOff(name, 5_000);
    await expect
      .poll(() => raw.pTTL(name), { timeout: 3_000, interval: 20 })
      .toBeGreaterThan(HAND_OFF_CLAIM_WINDOW_MS + 1_000);
    expect(await lease.release()).toBe("released");
  });

  it("a re-entry made before the hand-off is confirmed keeps its longer lease", async () => {
    const name = `${prefix}reentry`;
    const { lease } = await handOff(name, 1_000);
    const lock = recordingEdgeLock().edgelock.getFairLock(name);
    const again = await lock.tryLock({ leaseTime: 8_000, owner: lease.owner });
    expect(again).not.toBeNull();
    expect(await raw.pTTL(name)).toBeGreaterThan(6_000);
    expect(await again?.release()).toBe("still-held");
    expect(await lease.release()).toBe("released");
  });
});

describe("FAIR_CLAIM_WINDOW_MS", () => {
  it("the first waiter giving up tells the next, which then comes back when a crashed holder's lease runs out, not at its own bound", async () => {
    const name = `${prefix}first-leaves`;
    await expectFirstWaiterLeavingTellsNext((e) => e.getFairLock(name));
  });

  it("is kept, deprecated, as the hand-off claim window under its old name", () => {
    expect(FAIR_CLAIM_WINDOW_MS).toBe(HAND_OFF_CLAIM_WINDOW_MS);
  });
});
