import type { RedisConfigNodejs } from "@upstash/redis";
import { describe, expect, it } from "vitest";
import {
  type Lease,
  LeaseLostError,
  LockNotHeldError,
  LockTimeoutError,
} from "../../../src/index.js";
import { bridgeRedis, keyPrefix, useRawRedis } from "../../support/env.js";
import { aborted, recordingEdgeLock, replayRecords } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();

describe("reentrant lock", () => {
  it("acquires, excludes another owner, and releases", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}basic`);
    const lease = await lock.tryLock({ leaseTime: 10_000 });
    expect(lease).not.toBeNull();
    if (!lease) return;
    expect(lease.owner.startsWith(`${edgelock.clientId}:`)).toBe(true);
    expect(await lock.isLocked()).toBe(true);
    expect(await lock.isHeldBy(lease.owner)).toBe(true);
    expect(await lock.tryLock({ leaseTime: 10_000 })).toBeNull();
    const other = recordingEdgeLock().edgelock.getLock(`${prefix}basic`);
    expect(await other.tryLock()).toBeNull();
    expect(await lease.release()).toBe("released");
    expect(await lock.isLocked()).toBe(false);
    expect(await lock.remainTimeToLive()).toBe(-2);
    expect(lease.signal.aborted).toBe(true);
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
  });

  it("stores Redisson's layout: a HASH with field = owner and value = hold count, plus the epoch and the creating request", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}layout`;
    const lease = await edgelock.getLock(name).tryLock({ leaseTime: 5_000 });
    if (!lease) throw new Error("not acquired");
    expect(String(await raw.type(name))).toBe("hash");
    const fields = await raw.hGetAll(name);
    expect(Object.keys(fields).sort()).toEqual(
      [lease.owner, "edgelock:epoch", "edgelock:by"].sort(),
    );
    expect(String(fields[lease.owner])).toBe("1");
    expect(Number(fields["edgelock:epoch"])).toBe(lease.epoch);
    // The creating request is the hold's replay record; the epoch is read from its id.
    expect(String(fields["edgelock:by"])).toBe(lease.id);
    expect(lease.epoch).toBe(Number.parseInt(lease.id.slice(0, 13), 16) + 1);
    const pttl = await raw.pTTL(name);
    expect(pttl).toBeGreaterThan(4_000);
    expect(pttl).toBeLessThanOrEqual(5_000);
    await lease.release();
  });

  it("re-enters with the same owner and counts holds like Redisson", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}reentrant`);
    const first = await lock.tryLock({ leaseTime: 10_000 });
    if (!first) throw new Error("not acquired");
    const second = await lock.tryLock({ leaseTime: 10_000, owner: first.owner });
    if (!second) throw new Error("re-entry refused");
    expect(second.owner).toBe(first.owner);
    expect(await lock.getHoldCount(first.owner)).toBe(2);
    expect(await second.release()).toBe("still-held");
    expect(await lock.getHoldCount(first.owner)).toBe(1);
    expect(await lock.isLocked()).toBe(true);
    expect(await first.release()).toBe("released");
    expect(await lock.getHoldCount(first.owner)).toBe(0);
  });

  it("releasing one lease twice has the effect of once", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}twice`);
    const first = await lock.tryLock({ leaseTime: 10_000 });
    if (!first) throw new Error("not acquired");
    const second = await lock.tryLock({ leaseTime: 10_000, owner: first.owner });
    if (!second) throw new Error("re-entry refused");
    expect(await second.release()).toBe("still-held");
    expect(await second.release()).toBe("still-held");
    // A restored copy of the same lease shares its id: still one decrement.
    expect(await edgelock.restoreLease(second.toJSON()).release()).toBe("still-held");
    expect(await lock.getHoldCount(first.owner)).toBe(1);
    await first.release();
  });

  it("a fixed lease expires; release then reports expired and renew rejects", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}expiry`);
    const lease = await lock.tryLock({ leaseTime: 150 });
    if (!lease) throw new Error("not acquired");
    expect(lease.expiresAt).toBeLessThanOrEqual(Date.now() + 150);
    // The waiter's sleeps are bounded by the holder's PTTL, so it gets in right after expiry.
    const next = await recordingEdgeLock()
      .edgelock.getLock(`${prefix}expiry`)
      .tryLock({ waitTime: 5_000, leaseTime: 5_000 });
    expect(next).not.toBeNull();
    await expect(lease.renew()).rejects.toBeInstanceOf(LeaseLostError);
    expect(lease.signal.aborted).toBe(true);
    expect(await lease.release()).toBe("not-owner");
    expect(await next?.release()).toBe("released");
    expect(await lease.release()).toBe("not-owner");
  });

  it("release of an expired lease with no new holder reports expired", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}expired`);
    const lease = await lock.tryLock({ leaseTime: 50 });
    if (!lease) throw new Error("not acquired");
    const waiter = await lock.tryLock({ waitTime: 2_000, leaseTime: 50 });
    // The waiter got in only after the first lease ran out; let it run out too.
    if (!waiter) throw new Error("waiter not acquired");
    const third = await lock.tryLock({ waitTime: 2_000, leaseTime: 1_000 });
    if (!third) throw new Error("third not acquired");
    await third.release();
    expect(await waiter.release()).toBe("expired");
  });

  it("renew extends the TTL and a watchdog lease outlives watchdogTimeout", async () => {
    const { edgelock, events, until } = recordingEdgeLock({ watchdogTimeout: 300 });
    const lock = edgelock.getLock(`${prefix}watchdog`);
    const lease = await lock.tryLock();
    if (!lease) throw new Error("not acquired");
    expect(lease.watchdog).toBe(true);
    expect(lease.leaseTime).toBe(300);
    // Wait for four timer renewals: well past the 300 ms watchdog timeout.
    await until((_, all) => all.filter((e) => e.type === "renew" && e.renewed).length >= 4);
    expect(await lock.isHeldBy(lease.owner)).toBe(true);
    expect(lease.signal.aborted).toBe(false);
    await lease.renew(5_000);
    expect(await lock.remainTimeToLive()).toBeGreaterThan(4_000);
    expect(await lease.release()).toBe("released");
    const renewsAtRelease = events.filter((e) => e.type === "renew").length;
    await lock.tryLock({ leaseTime: 1_000 }).then((l) => l?.release());
    expect(events.filter((e) => e.type === "renew").length).toBe(renewsAtRelease);
  });

  it("keep-alive finds a lost lease and aborts lease.signal with LeaseLostError", async () => {
    const { edgelock, events } = recordingEdgeLock({ watchdogTimeout: 300 });
    const lock = edgelock.getLock(`${prefix}lost`);
    const lease = await lock.tryLock();
    if (!lease) throw new Error("not acquired");
    expect(await lock.forceUnlock()).toBe(true);
    const reason = await aborted(lease.signal);
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect((reason as LeaseLostError).reason).toBe("lost");
    expect(events.some((e) => e.type === "lost")).toBe(true);
    expect(await lock.forceUnlock()).toBe(false);
  });

  it("lease.signal read only after the loss or the release is already aborted, with the reason", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}late-signal`);
    const lost = await lock.tryLock({ leaseTime: 10_000 });
    if (!lost) throw new Error("not acquired");
    expect(await lock.forceUnlock()).toBe(true);
    // The renewal finds the lease gone; nobody has read its signal yet.
    const error = await lost.renew().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect((error as LeaseLostError).reason).toBe("lost");
    expect(lost.ended).toBe(true);
    expect(lost.signal.aborted).toBe(true);
    expect((lost.signal.reason as LeaseLostError).reason).toBe("lost");
    expect(lost.signal.reason).toBe(error); // one reason, whoever asks

    const released = await lock.tryLock({ leaseTime: 10_000 });
    if (!released) throw new Error("not acquired");
    expect(released.ended).toBe(false);
    expect(await released.release()).toBe("released");
    expect(released.ended).toBe(true);
    expect((released.signal.reason as LeaseLostError).reason).toBe("released");
    // A second release answers the first release's answer; the reason stays.
    expect(await released.release()).toBe("released");
    expect((released.signal.reason as LeaseLostError).reason).toBe("released");
  });

  it("unlock(owner) throws LockNotHeldError for a non-owner and after expiry", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}unlock`);
    await expect(lock.unlock("nobody")).rejects.toMatchObject({
      code: "LOCK_NOT_HELD",
      reason: "expired",
    });
    const lease = await lock.tryLock({ leaseTime: 5_000 });
    if (!lease) throw new Error("not acquired");
    const error = await lock.unlock("someone-else").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect(error).toMatchObject({ name: "LockNotHeldError", reason: "not-owner" });
    await lock.unlock(lease.owner);
    expect(await lock.isLocked()).toBe(false);
    await expect(lock.unlock(lease.owner)).rejects.toBeInstanceOf(LockNotHeldError);
  });

  it("a stale owner cannot release a new owner's lock", async () => {
    const a = recordingEdgeLock().edgelock.getLock(`${prefix}stale`);
    const b = recordingEdgeLock().edgelock.getLock(`${prefix}stale`);
    const stale = await a.tryLock({ leaseTime: 100 });
    if (!stale) throw new Error("not acquired");
    const fresh = await b.tryLock({ waitTime: 3_000, leaseTime: 10_000 });
    if (!fresh) throw new Error("not acquired after expiry");
    expect(await stale.release()).toBe("not-owner");
    await expect(a.unlock(stale.owner)).rejects.toBeInstanceOf(LockNotHeldError);
    expect(await b.isHeldBy(fresh.owner)).toBe(true);
    expect(await b.getHoldCount(fresh.owner)).toBe(1);
    await fresh.release();
  });

  it("forceUnlock deletes whoever holds the lock", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}force`);
    await lock.tryLock({ leaseTime: 10_000 });
    expect(await lock.forceUnlock()).toBe(true);
    expect(await lock.isLocked()).toBe(false);
    expect(await lock.forceUnlock()).toBe(false);
  });

  it("remainTimeToLive follows PTTL semantics", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}pttl`;
    const lock = edgelock.getLock(name);
    expect(await lock.remainTimeToLive()).toBe(-2);
    await raw.hSet(name, "jvm-client:1", "1");
    expect(await lock.remainTimeToLive()).toBe(-1);
    expect(await lock.isLocked()).toBe(true);
    await raw.del(name);
  });

  it("two acquires without owner exclude each other even on one EdgeLock", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}same-instance`);
    const [x, y] = await Promise.all([
      lock.tryLock({ leaseTime: 5_000 }),
      lock.tryLock({ leaseTime: 5_000 }),
    ]);
    expect([x, y].filter((l) => l !== null)).toHaveLength(1);
    await (x ?? y)?.release();
  });

  it("await using releases at the end of the block", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}using`);
    {
      const lease = await lock.tryLock({ leaseTime: 5_000 });
      if (!lease) throw new Error("not acquired");
      await using held = lease;
      expect(await lock.isHeldBy(held.owner)).toBe(true);
    }
    expect(await lock.isLocked()).toBe(false);
  });
});

describe("leases across invocations and clients", () => {
  it("a lease restored by another EdgeLock renews and releases the same hold", async () => {
    const a = recordingEdgeLock();
    const b = recordingEdgeLock();
    const lock = a.edgelock.getLock(`${prefix}restore`);
    const lease = await lock.tryLock({ leaseTime: 2_000 });
    if (!lease) throw new Error("not acquired");
    const json = JSON.stringify(lease);
    const restored = b.edgelock.restoreLease(json);
    expect(restored.owner).toBe(lease.owner);
    expect(restored.expiresAt).toBe(lease.expiresAt);
    await restored.renew(20_000);
    expect(await lock.remainTimeToLive()).toBeGreaterThan(15_000);
    expect(await restored.release()).toBe("released");
    expect(await lease.release()).toBe("released"); // same lease id: the first answer
    expect(await lock.isLocked()).toBe(false);
  });

  it.each<[string, Partial<RedisConfigNodejs>]>([
    ["auto-pipelining off", { enableAutoPipelining: false }],
    ["no automatic deserialization", { automaticDeserialization: false }],
    ["no base64 response encoding", { responseEncoding: false }],
  ])("works with a client configured with %s", async (_, options) => {
    const { edgelock } = recordingEdgeLock({}, bridgeRedis(options));
    const lock = edgelock.getLock(`${prefix}client-${_}`);
    const lease = await lock.tryLock({ leaseTime: 5_000 });
    if (!lease) throw new Error("not acquired");
    expect(await lock.getHoldCount(lease.owner)).toBe(1);
    expect(await lock.remainTimeToLive()).toBeGreaterThan(4_000);
    expect(await lease.release()).toBe("released");
  });

  it("leaves no key behind but its replay records, which expire within a replay window", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}no-leak`;
    const lock = edgelock.getLock(name);
    const a = await lock.tryLock({ leaseTime: 5_000 });
    if (!a) throw new Error("not acquired");
    const b = await lock.tryLock({ leaseTime: 5_000, owner: a.owner });
    await b?.release();
    await a.release();
    await lock.unlock(a.owner).catch(() => {});
    expect(await raw.exists(name)).toBe(0);
    const left = (await raw.keys(`*${name}*`)).map(String);
    expect(left.length).toBeGreaterThan(0);
    for (const key of left) {
      expect(key.startsWith(`edgelock_replay:{${name}}:`)).toBe(true);
      const pttl = await raw.pTTL(key);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(edgelock.replayWindow);
    }
    // Records where the HASH cannot tell: the re-entry "A", overwritten by its release's "R2";
    // the release that freed the lock "R1". The acquire that created the lock needed none.
    expect(Object.values(await replayRecords(raw, name)).sort()).toEqual(["R1", "R2"]);
  });
});

describe("withLock", () => {
  it("runs the callback under the lock and returns its value", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}with`);
    const value = await edgelock.withLock(`${prefix}with`, async (lease) => {
      expect(await lock.isHeldBy(lease.owner)).toBe(true);
      return 42;
    });
    expect(value).toBe(42);
    expect(await lock.isLocked()).toBe(false);
  });

  it("releases when the callback throws, and rethrows", async () => {
    const { edgelock } = recordingEdgeLock();
    const boom = new Error("boom");
    await expect(
      edgelock.withLock(`${prefix}with-throw`, () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(await edgelock.getLock(`${prefix}with-throw`).isLocked()).toBe(false);
  });

  it("throws LockTimeoutError when the lock stays busy for waitTime", async () => {
    const { edgelock } = recordingEdgeLock();
    const holder = await edgelock.getLock(`${prefix}with-busy`).tryLock({ leaseTime: 10_000 });
    const error = await edgelock
      .withLock(`${prefix}with-busy`, () => "never", { waitTime: 100, leaseTime: 1_000 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect(error).toMatchObject({ code: "LOCK_TIMEOUT", waitTime: 100 });
    expect((error as LockTimeoutError).attempts).toBeGreaterThanOrEqual(2);
    await holder?.release();
  });
});

describe("withLock after a lost lease", () => {
  it("rejects with LeaseLostError carrying fn's value when another client force-unlocked meanwhile", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}with-lost-forced`;
    const other = recordingEdgeLock().edgelock.getLock(name);
    const error = await edgelock
      .withLock(
        name,
        async () => {
          expect(await other.forceUnlock()).toBe(true);
          return 42;
        },
        { leaseTime: 10_000 },
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(error).toMatchObject({
      code: "LEASE_LOST",
      reason: "lost",
      resource: name,
      outcome: "returned",
      result: 42,
    });
    expect((error as LeaseLostError).cause).toBeUndefined();
  });

  it("rejects with LeaseLostError carrying fn's error as cause when another owner took the lock", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}with-lost-taken`;
    const other = recordingEdgeLock().edgelock.getLock(name);
    const boom = new Error("boom");
    let taker: Lease | null = null;
    const error = await edgelock
      .withLock(
        name,
        async () => {
          await other.forceUnlock();
          taker = await other.tryLock({ leaseTime: 10_000 });
          throw boom;
        },
        { leaseTime: 10_000 },
      )
      .catch((e: unknown) => e);
    expect(taker).not.toBeNull();
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(error).toMatchObject({ outcome: "threw", result: undefined });
    expect((error as LeaseLostError).cause).toBe(boom);
    // The other owner's hold is untouched by the lost lease's release.
    expect(await other.isHeldBy((taker as unknown as Lease).owner)).toBe(true);
    await (taker as unknown as Lease).release();
  });

  it("rejects when a fixed lease expires while fn runs (no renewals), after fn settled", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}with-lost-expired`;
    let settledAt = 0;
    const error = await edgelock
      .withLock(
        name,
        async (lease) => {
          await aborted(lease.signal);
          settledAt = Date.now();
          return "late";
        },
        { leaseTime: 100 },
      )
      .catch((e: unknown) => ({ e, at: Date.now() }));
    const { e, at } = error as { e: unknown; at: number };
    expect(e).toBeInstanceOf(LeaseLostError);
    expect(e).toMatchObject({ outcome: "returned", result: "late" });
    expect(at).toBeGreaterThanOrEqual(settledAt);
  });

  it("with onLeaseLost: \"return\" answers fn's value, or rethrows fn's error, as if the lease had held", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}with-lost-return`;
    const other = recordingEdgeLock().edgelock.getLock(name);
    const value = await edgelock.withLock(
      name,
      async () => {
        await other.forceUnlock();
        return 7;
      },
      { leaseTime: 10_000, onLeaseLost: "return" },
    );
    expect(value).toBe(7);
    const boom = new Error("boom");
    await expect(
      edgelock.withLock(
        name,
        async () => {
          await other.forceUnlock();
          throw boom;
        },
        { leaseTime: 10_000, onLeaseLost: "return" },
      ),
    ).rejects.toBe(boom);
  });

  it("does not report a loss when fn released the lease itself", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}with-self-released`;
    const value = await edgelock.withLock(
      name,
      async (lease) => {
        expect(await lease.release()).toBe("released");
        return 1;
      },
      { leaseTime: 10_000, onLeaseLost: "throw" },
    );
    expect(value).toBe(1);
  });
});

describe("requests", () => {
  it("an uncontended acquire + release takes 2 HTTP requests on a warm client", async () => {
    const rec = recordingEdgeLock();
    const lock = rec.edgelock.getLock(`${prefix}requests`);
    await (await lock.tryLock({ leaseTime: 5_000 }))?.release(); // warm the script cache
    rec.events.length = 0;
    for (let i = 0; i < 5; i++) {
      const lease = await lock.tryLock({ leaseTime: 5_000 });
      await lease?.release();
    }
    expect(rec.requests("acquire")).toBe(5);
    expect(rec.requests("release")).toBe(5);
  });
});
