/**
 * A read-write lock shared with Redisson clients: Redisson's own isLocked and write-unlock
 * scripts (fixtures) give the same answers on a hold edgelock made as on one Redisson made,
 * because edgelock keeps its bookkeeping (the lock's epoch) outside Redisson's HASH.
 */
import { describe, expect, it } from "vitest";
import type { Lease } from "../../../src/index.js";
import {
  REDISSON_READ_ACQUIRE,
  REDISSON_READ_IS_LOCKED,
  REDISSON_READ_UNLOCK,
  REDISSON_WRITE_ACQUIRE,
  REDISSON_WRITE_IS_LOCKED,
  REDISSON_WRITE_UNLOCK,
} from "../../fixtures/redisson.js";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { isReplayRecord, recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
/** One owner string on both sides, as when a JVM and an edge function act for one holder. */
const OWNER = "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:76";
const LEASE = 10_000;

function held(lease: Lease | null): Lease {
  if (!lease) throw new Error("not acquired");
  return lease;
}

/** Redisson's client on the same Redis, acting as OWNER. */
function jvm(name: string) {
  return {
    readIsLocked: async () => Number(await raw.eval(REDISSON_READ_IS_LOCKED, { keys: [name] })),
    writeIsLocked: async () => Number(await raw.eval(REDISSON_WRITE_IS_LOCKED, { keys: [name] })),
    read: () =>
      raw.eval(REDISSON_READ_ACQUIRE, {
        keys: [name, `{${name}}:${OWNER}:rwlock_timeout`],
        arguments: [String(LEASE), OWNER, `${OWNER}:write`],
      }),
    write: () =>
      raw.eval(REDISSON_WRITE_ACQUIRE, {
        keys: [name],
        arguments: [String(LEASE), `${OWNER}:write`],
      }),
    readUnlock: () =>
      raw.eval(REDISSON_READ_UNLOCK, {
        keys: [name, `redisson_rwlock:{${name}}`, `{${name}}:${OWNER}:rwlock_timeout`, `{${name}}`],
        arguments: ["0", OWNER],
      }),
    writeUnlock: () =>
      raw.eval(REDISSON_WRITE_UNLOCK, {
        keys: [name, `redisson_rwlock:{${name}}`],
        arguments: ["1", String(LEASE), `${OWNER}:write`],
      }),
  };
}

/** Keys of `name` other than its replay records and the read holds' timeout keys. */
const keysOf = async (name: string) =>
  (await raw.keys(`*${name}*`))
    .map(String)
    .filter((k) => !isReplayRecord(name, k) && !k.includes(":rwlock_timeout:"))
    .sort();

type Made = "edgelock" | "redisson";

/** A write hold of OWNER, with `reads` read holds of the same owner on top (a downgrade). */
async function writeHold(name: string, by: Made, reads: number): Promise<Lease[]> {
  const j = jvm(name);
  if (by === "redisson") {
    expect(await j.write()).toBeNull();
    for (let i = 0; i < reads; i++) expect(await j.read()).toBeNull();
    return [];
  }
  const rw = recordingEdgeLock().edgelock.getReadWriteLock(name);
  const leases = [held(await rw.writeLock().tryLock({ leaseTime: LEASE, owner: OWNER }))];
  for (let i = 0; i < reads; i++) {
    leases.push(held(await rw.readLock().tryLock({ leaseTime: LEASE, owner: OWNER })));
  }
  return leases;
}

describe("read-write lock shared with Redisson", () => {
  for (const by of ["redisson", "edgelock"] as const) {
    it(`Redisson's isLocked on a ${by} write hold: write locked, read not; with a read hold too, both`, async () => {
      const name = `${prefix}is-locked-${by}`;
      const j = jvm(name);
      await writeHold(name, by, 0);
      expect([await j.writeIsLocked(), await j.readIsLocked()]).toEqual([1, 0]);
      expect((await raw.hKeys(name)).map(String).sort()).toEqual([`${OWNER}:write`, "mode"]);
      const rw = recordingEdgeLock().edgelock.getReadWriteLock(name);
      expect(await rw.readLock().isLocked()).toBe(false);
      expect(await rw.writeLock().isLocked()).toBe(true);
      await raw.del(name);
      await writeHold(name, by, 1);
      expect([await j.writeIsLocked(), await j.readIsLocked()]).toEqual([1, 1]);
      expect(await rw.readLock().isLocked()).toBe(true);
      await raw.del(name);
    });

    it(`Redisson's write unlock frees a ${by} write hold fully, and a Redisson writer gets in`, async () => {
      const name = `${prefix}unlock-${by}`;
      const j = jvm(name);
      const leases = await writeHold(name, by, 0);
      expect(await j.writeUnlock()).toBe(1);
      expect(await raw.exists(name)).toBe(0);
      expect([await j.writeIsLocked(), await j.readIsLocked()]).toEqual([0, 0]);
      for (const lease of leases) expect(await lease.release()).toBe("expired");
      expect(await j.write()).toBeNull(); // no lock-out until a TTL runs out
      expect(await j.writeUnlock()).toBe(1);
      // What edgelock kept beside the hash lasts no longer than the lease it was made for.
      for (const key of await keysOf(name)) {
        expect(key).toBe(`edgelock_epoch:{${name}}`);
        expect(await raw.pTTL(key)).toBeLessThanOrEqual(LEASE);
      }
    });

    it(`Redisson's write unlock of a ${by} write hold with a read hold too leaves the read lock`, async () => {
      const name = `${prefix}downgrade-${by}`;
      const j = jvm(name);
      const leases = await writeHold(name, by, 1);
      expect(await j.writeUnlock()).toBe(1);
      expect(String(await raw.hGet(name, "mode"))).toBe("read");
      expect([await j.writeIsLocked(), await j.readIsLocked()]).toEqual([0, 1]);
      const rw = recordingEdgeLock().edgelock.getReadWriteLock(name);
      expect(held(await rw.readLock().tryLock({ leaseTime: LEASE })).owner).not.toBe(OWNER);
      expect(await rw.writeLock().tryLock({ leaseTime: LEASE })).toBeNull();
      if (by === "edgelock") expect(await leases[1]?.release()).toBe("released");
      await raw.del(name);
    });
  }

  it("an edgelock write hold renewed and released keeps the HASH to Redisson's fields, and leaves no key", async () => {
    const name = `${prefix}renew`;
    const rw = recordingEdgeLock().edgelock.getReadWriteLock(name);
    const w = held(await rw.writeLock().tryLock({ leaseTime: 1_000 }));
    await w.renew(LEASE);
    expect(await raw.pTTL(name)).toBeGreaterThan(LEASE - 2_000);
    expect(await raw.pTTL(`edgelock_epoch:{${name}}`)).toBeGreaterThan(LEASE - 2_000);
    expect((await raw.hKeys(name)).map(String).sort()).toEqual([`${w.owner}:write`, "mode"]);
    expect(await w.release()).toBe("released");
    expect(await keysOf(name)).toEqual([]);
    held(await rw.writeLock().tryLock({ leaseTime: LEASE }));
    expect(await rw.writeLock().forceUnlock()).toBe(true);
    expect(await keysOf(name)).toEqual([]);
  });

  it("a lease of a lock whose epoch an earlier version kept in the HASH still releases it", async () => {
    const name = `${prefix}old-layout`;
    const rw = recordingEdgeLock().edgelock.getReadWriteLock(name);
    const w = held(await rw.writeLock().tryLock({ leaseTime: LEASE }));
    // The layout before: the epoch as a HASH field "e<epoch>", no key beside it.
    await raw.hSet(name, "edgelock:epoch", `e${w.epoch}`);
    await raw.del(`edgelock_epoch:{${name}}`);
    expect(await w.release()).toBe("released");
    expect(await keysOf(name)).toEqual([]);
  });

  // A JVM holder's unlock publishes only on Redisson's channel; the edge waiter listens there.
  const jvmHolds = [
    { held: "write", waits: "read" },
    { held: "write", waits: "write" },
    { held: "read", waits: "write" },
  ] as const;
  for (const { held: side, waits } of jvmHolds) {
    it(`an edge ${waits} waiter behind a Redisson ${side} hold wakes on Redisson's unlock within a round trip`, async () => {
      const name = `${prefix}jvm-wakes-${side}-${waits}`;
      const redisson = jvm(name);
      expect(await (side === "read" ? redisson.read() : redisson.write())).toBeNull();
      const waiter = recordingEdgeLock();
      const rw = waiter.edgelock.getReadWriteLock(name);
      const lock = waits === "read" ? rw.readLock() : rw.writeLock();
      const pending = lock.tryLock({ waitTime: 20_000, leaseTime: LEASE });
      // Busy (a JVM holder), subscribed to Redisson's channel, busy again: waiting for its message.
      await waiter.waited(2);
      // The lock carries no epoch: nobody registers for a wake-up of ours that would never come.
      expect(await raw.exists(`edgelock_waiting:{${name}}`)).toBe(0);
      const unlocked = Date.now();
      expect(await (side === "read" ? redisson.readUnlock() : redisson.writeUnlock())).toBe(1);
      const lease = held(await pending);
      // One round trip and the message; the JVM holder's TTL is 10 s.
      expect(Date.now() - unlocked).toBeLessThan(400);
      // Busy attempt, Redisson's channel, busy attempt, the attempt its message triggered.
      expect(waiter.requests("acquire")).toBe(4);
      expect(await lease.release()).toBe("released");
      expect(await keysOf(name)).toEqual([]);
    });
  }

  it("an edge waiter behind an edgelock hold registers for edgelock's own wake-up, not Redisson's channel", async () => {
    const name = `${prefix}edge-wakes-edge`;
    const holder = held(
      await recordingEdgeLock()
        .edgelock.getReadWriteLock(name)
        .writeLock()
        .tryLock({ leaseTime: LEASE }),
    );
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock
      .getReadWriteLock(name)
      .readLock()
      .tryLock({ waitTime: 20_000, leaseTime: LEASE });
    await waiter.waited(2);
    expect(await raw.zCard(`edgelock_waiting:{${name}}`)).toBe(1);
    expect(await holder.release()).toBe("released");
    const lease = held(await pending);
    expect(await lease.release()).toBe("released");
    expect(await keysOf(name)).toEqual([]);
  });
});
