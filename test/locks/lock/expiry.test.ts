/**
 * A lease never believes it holds longer than Redis keeps the lock: for any sequence of
 * acquires, re-entries, renewals and (partial) releases by one owner, every live lease's
 * `expiresAt` is at most the lock's real expiry, because a TTL is never shortened; and a lease
 * whose time ran out without a confirmed renewal sees its signal abort.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Lease, LeaseLostError } from "../../../src/index.js";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { aborted, recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();

/** Checks every live lease against the lock's real expiry, read after the call. */
async function checkInvariant(name: string, live: readonly Lease[]) {
  const pttl = Number(await raw.pTTL(name));
  const answeredAt = Date.now();
  // Redis applied PTTL before its answer arrived, so the real expiry is at most answeredAt +
  // pttl (and a key already gone expired before answeredAt): a lease claiming more is wrong.
  const realExpiry =
    pttl >= 0 ? answeredAt + pttl : pttl === -2 ? answeredAt : Number.POSITIVE_INFINITY;
  for (const lease of live) {
    if (lease.signal.aborted) continue;
    expect(lease.expiresAt).toBeLessThanOrEqual(realExpiry + 1);
  }
}

describe("expiresAt is never later than the real expiry", () => {
  it("re-entering with a shorter lease keeps the longer TTL (a partial release too)", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}reenter-shorter`;
    const lock = edgelock.getLock(name);
    const long = await lock.lock({ leaseTime: 10_000 });
    const short = await lock.lock({ leaseTime: 1_000, owner: long.owner });
    expect(await raw.pTTL(name)).toBeGreaterThan(9_000);
    expect(await short.release()).toBe("still-held");
    expect(await raw.pTTL(name)).toBeGreaterThan(9_000);
    await checkInvariant(name, [long]);
    expect(await long.release()).toBe("released");
  });

  it("a lease re-entered by a longer one keeps the TTL after the short one's release (the issue's case)", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}short-then-long`;
    const lock = edgelock.getLock(name);
    const short = await lock.lock({ leaseTime: 1_000 });
    const long = await lock.lock({ leaseTime: 10_000, owner: short.owner });
    expect(await short.release()).toBe("still-held");
    await checkInvariant(name, [long]);
    expect(await raw.pTTL(name)).toBeGreaterThan(8_500);
    expect(await long.release()).toBe("released");
  });

  it("renew with a shorter lease does not cut the lock short for another lease of the owner", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}renew-shorter`;
    const lock = edgelock.getLock(name);
    const first = await lock.lock({ leaseTime: 10_000 });
    const second = await lock.lock({ leaseTime: 10_000, owner: first.owner });
    await second.renew(300);
    expect(await raw.pTTL(name)).toBeGreaterThan(9_000);
    await checkInvariant(name, [first, second]);
    const other = await lock.tryLock({ leaseTime: 1_000 });
    expect(other).toBeNull();
    await second.release();
    await first.release();
  });

  it("a fixed lease that nobody renews aborts its signal at expiresAt", async () => {
    const rec = recordingEdgeLock();
    const lease = await rec.edgelock.getLock(`${prefix}fixed`).lock({ leaseTime: 300 });
    const reason = await aborted(lease.signal);
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(Date.now()).toBeGreaterThanOrEqual(lease.expiresAt);
    expect(Date.now() - lease.expiresAt).toBeLessThan(500);
    await rec.until((e) => e.type === "lost");
    await expect(lease.renew()).rejects.toBeInstanceOf(LeaseLostError);
    expect(rec.events.filter((e) => e.type === "renew")).toHaveLength(0); // no request sent
  });

  it("holds for any sequence of acquires, re-entries, renewals, releases and waits by one owner", async () => {
    type Op =
      | { op: "acquire"; leaseTime: number }
      | { op: "renew"; index: number; leaseTime: number }
      | { op: "release"; index: number }
      | { op: "wait"; ms: number };
    const leaseTime = fc.integer({ min: 50, max: 700 });
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ op: fc.constant("acquire" as const), leaseTime }),
      fc.record({ op: fc.constant("renew" as const), index: fc.nat(5), leaseTime }),
      fc.record({ op: fc.constant("release" as const), index: fc.nat(5) }),
      fc.record({ op: fc.constant("wait" as const), ms: fc.integer({ min: 0, max: 120 }) }),
    );
    const { edgelock } = recordingEdgeLock();
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 7 }), async (ops) => {
        const name = `${prefix}prop-${run++}`;
        const lock = edgelock.getLock(name);
        const owner = `${edgelock.clientId}:prop-owner`;
        const live: Lease[] = [];
        try {
          for (const step of ops) {
            if (step.op === "acquire") {
              const lease = await lock.tryLock({ leaseTime: step.leaseTime, owner });
              if (lease) live.push(lease);
            } else if (step.op === "renew" && live.length > 0) {
              const lease = live[step.index % live.length] as Lease;
              await lease.renew(step.leaseTime).catch((e: unknown) => {
                if (!(e instanceof LeaseLostError)) throw e;
              });
            } else if (step.op === "release" && live.length > 0) {
              const [lease] = live.splice(step.index % live.length, 1);
              await lease?.release();
            } else if (step.op === "wait") {
              await new Promise((r) => setTimeout(r, step.ms));
            }
            await checkInvariant(name, live);
          }
        } finally {
          await Promise.all(live.map((l) => l.release()));
          await raw.del(name);
        }
      }),
      { numRuns: 25 },
    );
  });
});
