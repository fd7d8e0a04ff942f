/**
 * Read-write lock behaviours from Redisson's RedissonReadWriteLockTest, over the real client and
 * bridge: readers share, a writer excludes everyone, re-entry, downgrade, no upgrade, a crashed
 * reader's holds expire on their own, a writer behind readers is woken by the last reader, replay
 * and cancellation, interop with Redisson's own read/write scripts, contention, inspection.
 */
import { describe, expect, it } from "vitest";
import { type EdgeLock, type Lease, LeaseLostError, LockUpgradeError } from "../../../src/index.js";
import {
  REDISSON_READ_ACQUIRE,
  REDISSON_READ_UNLOCK,
  REDISSON_WRITE_ACQUIRE,
} from "../../fixtures/redisson.js";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import { aborted, isReplayRecord, recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();
const JVM = "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:76";

const rwOf = (name: string, edgelock: EdgeLock = recordingEdgeLock().edgelock) =>
  edgelock.getReadWriteLock(name);
/** Keys of `name` other than its replay records. */
const keysOf = async (name: string) =>
  (await raw.keys(`*${name}*`)).map(String).filter((k) => !isReplayRecord(name, k));

function held(lease: Lease | null): Lease {
  if (!lease) throw new Error("not acquired");
  return lease;
}

describe("read-write lock", () => {
  it("readers share; a writer is excluded by readers, and excludes readers and writers", async () => {
    const name = `${prefix}share`;
    const rw = rwOf(name);
    const r1 = held(await rw.readLock().tryLock({ leaseTime: 10_000 }));
    const r2 = held(await rw.readLock().tryLock({ leaseTime: 10_000 }));
    expect(await rw.writeLock().tryLock({ leaseTime: 10_000 })).toBeNull();
    expect(await rw.readLock().isLocked()).toBe(true);
    expect(await rw.writeLock().isLocked()).toBe(false);
    expect(await r1.release()).toBe("released");
    expect(await rw.writeLock().tryLock({ leaseTime: 10_000 })).toBeNull();
    expect(await r2.release()).toBe("released");
    const w = held(await rw.writeLock().tryLock({ leaseTime: 10_000 }));
    expect(await rw.readLock().tryLock({ leaseTime: 10_000 })).toBeNull();
    expect(await rw.writeLock().tryLock({ leaseTime: 10_000 })).toBeNull();
    expect(await rw.writeLock().isLocked()).toBe(true);
    expect(await rw.readLock().isLocked()).toBe(false);
    expect(await w.release()).toBe("released");
    expect(await keysOf(name)).toEqual([]);
  });

  it("both sides re-enter; each read hold has its own timeout key, dropped with its release", async () => {
    const name = `${prefix}reenter`;
    const rw = rwOf(name);
    const r = held(await rw.readLock().tryLock({ leaseTime: 10_000 }));
    const r2 = held(await rw.readLock().tryLock({ leaseTime: 5_000, owner: r.owner }));
    expect(await rw.readLock().getHoldCount(r.owner)).toBe(2);
    expect(await raw.pTTL(`{${name}}:${r.owner}:rwlock_timeout:2`)).toBeGreaterThan(3_000);
    expect(await r2.release()).toBe("still-held");
    expect(await raw.exists(`{${name}}:${r.owner}:rwlock_timeout:2`)).toBe(0);
    expect(await r.release()).toBe("released");
    const w = held(await rw.writeLock().tryLock({ leaseTime: 10_000 }));
    const w2 = held(await rw.writeLock().tryLock({ leaseTime: 2_000, owner: w.owner }));
    expect(await rw.writeLock().getHoldCount(w.owner)).toBe(2);
    // A shorter re-entry never shortens the lock (Redisson's adds the lease instead).
    const ttl = await raw.pTTL(name);
    expect(ttl).toBeGreaterThan(8_000);
    expect(ttl).toBeLessThanOrEqual(10_000);
    expect(await w2.release()).toBe("still-held");
    expect(await w.release()).toBe("released");
    expect(await keysOf(name)).toEqual([]);
  });

  it("downgrade: the writer takes the read lock; after the write release readers join, writers wait", async () => {
    const name = `${prefix}downgrade`;
    const rw = rwOf(name);
    const w = held(await rw.writeLock().tryLock({ leaseTime: 10_000 }));
    const r = held(await rw.readLock().tryLock({ leaseTime: 10_000, owner: w.owner }));
    expect(await rw.readLock().tryLock({ leaseTime: 10_000 })).toBeNull(); // another reader
    expect(await w.release()).toBe("released");
    expect((await rw.inspect()).mode).toBe("read");
    const other = held(await rw.readLock().tryLock({ leaseTime: 10_000 }));
    expect(await rw.writeLock().tryLock({ leaseTime: 10_000 })).toBeNull();
    await other.release();
    await r.release();
    expect(await keysOf(name)).toEqual([]);
  });

  it("no upgrade: a reader asking for the write lock fails at once with LockUpgradeError, changing nothing", async () => {
    const name = `${prefix}upgrade`;
    const rec = recordingEdgeLock();
    const rw = rwOf(name, rec.edgelock);
    const r = held(await rw.readLock().tryLock({ leaseTime: 10_000 }));
    const started = Date.now();
    const error = await rw
      .writeLock()
      .tryLock({ waitTime: 5_000, leaseTime: 10_000, owner: r.owner })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockUpgradeError);
    expect(error).toMatchObject({ code: "LOCK_UPGRADE", resource: name });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(await rw.writeLock().getHoldCount(r.owner)).toBe(0);
    expect(await rw.readLock().getHoldCount(r.owner)).toBe(1);
    await r.release();
  });

  it("a crashed reader's hold expires on its own even while another reader holds the lock", async () => {
    const name = `${prefix}crashed`;
    const rw = rwOf(name);
    const crashed = held(await rw.readLock().tryLock({ leaseTime: 300 })); // never released
    const alive = held(await rw.readLock().tryLock({ leaseTime: 10_000 }));
    await aborted(crashed.signal);
    await expect
      .poll(() => raw.exists(`{${name}}:${crashed.owner}:rwlock_timeout:1`), { timeout: 3_000 })
      .toBe(0);
    // Its field is still in the hash, but a lease whose every hold lapsed is not renewed.
    expect(await rw.readLock().getHoldCount(crashed.owner)).toBe(1);
    await expect(crashed.renew()).rejects.toBeInstanceOf(LeaseLostError);
    expect(await rw.writeLock().tryLock({ leaseTime: 10_000 })).toBeNull(); // the live reader
    // The last live reader leaves: the dead reader does not keep the writer out (Redisson
    // testMultiInstanceReadLockZombieCleanup).
    expect(await alive.release()).toBe("released");
    const w = held(await rw.writeLock().tryLock({ leaseTime: 10_000 }));
    await w.release();
    expect(await keysOf(name)).toEqual([]);
  });

  it("a writer finding only readers whose holds lapsed takes the lock", async () => {
    const name = `${prefix}zombies`;
    const rw = rwOf(name);
    const dead = held(await rw.readLock().tryLock({ leaseTime: 300 }));
    // As if a JVM ReadLockTask had renewed the hash but not the hold: only the hold lapses.
    await raw.pExpire(name, 20_000);
    await aborted(dead.signal);
    await expect
      .poll(() => raw.exists(`{${name}}:${dead.owner}:rwlock_timeout:1`), { timeout: 3_000 })
      .toBe(0);
    expect(await raw.exists(name)).toBe(1);
    const w = held(await rw.writeLock().tryLock({ leaseTime: 10_000 }));
    expect(await rw.readLock().getHoldCount(dead.owner)).toBe(0);
    await w.release();
  });

  it("a writer blocked behind readers is woken when the last reader leaves, in a few requests", async () => {
    const name = `${prefix}wake`;
    const rw = rwOf(name);
    const r1 = held(await rw.readLock().tryLock({ leaseTime: 20_000 }));
    const r2 = held(await rw.readLock().tryLock({ leaseTime: 20_000 }));
    const rec = recordingEdgeLock();
    const pending = rwOf(name, rec.edgelock)
      .writeLock()
      .tryLock({ waitTime: 15_000, leaseTime: 10_000 });
    // Subscribed and registered (its second `waiting` event): only a wake-up lets it in before the lease.
    await rec.waited(2);
    await r1.release();
    await r2.release();
    const releasedAt = Date.now();
    const w = held(await pending);
    expect(Date.now() - releasedAt).toBeLessThan(1_500);
    // busy attempt, BLPOP (woken), acquiring attempt: never a poll per backoff step.
    expect(rec.requests("acquire")).toBeLessThanOrEqual(4);
    await w.release();
  });

  it("readers blocked behind a writer are all woken by its release", async () => {
    const name = `${prefix}wake-all`;
    const w = held(await rwOf(name).writeLock().tryLock({ leaseTime: 20_000 }));
    const recs = [recordingEdgeLock(), recordingEdgeLock(), recordingEdgeLock()];
    const pending = recs.map((rec) =>
      rwOf(name, rec.edgelock).readLock().tryLock({ waitTime: 15_000, leaseTime: 10_000 }),
    );
    // Each subscribed and registered (its second `waiting` event).
    await Promise.all(recs.map((rec) => rec.waited(2)));
    await w.release();
    const releasedAt = Date.now();
    const readers = (await Promise.all(pending)).map(held);
    expect(Date.now() - releasedAt).toBeLessThan(1_500);
    await Promise.all(readers.map((r) => r.release()));
  });

  it("readers blocked behind a writer get in when it downgrades (its write release leaves its reads)", async () => {
    const name = `${prefix}wake-downgrade`;
    const rw = rwOf(name);
    const w = held(await rw.writeLock().tryLock({ leaseTime: 20_000 }));
    const own = held(await rw.readLock().tryLock({ leaseTime: 20_000, owner: w.owner }));
    const rec = recordingEdgeLock();
    const pending = rwOf(name, rec.edgelock)
      .readLock()
      .tryLock({ waitTime: 15_000, leaseTime: 10_000 });
    // Subscribed and registered (its second `waiting` event): only a wake-up lets it in before the lease.
    await rec.waited(2);
    await w.release();
    const releasedAt = Date.now();
    const reader = held(await pending);
    expect(Date.now() - releasedAt).toBeLessThan(1_500);
    await reader.release();
    await own.release();
  });

  it("an acquire or release applied but unanswered, then resent, counts once on either side", async () => {
    const name = `${prefix}replay`;
    const { edgelock } = recordingEdgeLock({}, bridge.redis());
    const rw = edgelock.getReadWriteLock(name);
    await (await rw.readLock().tryLock({ leaseTime: 1_000 }))?.release(); // scripts loaded
    const loseNext = () =>
      bridge.bridge.setFaults({
        rules: [{ action: "lose", mode: "close", match: "evalsha", times: 1 }],
      });
    loseNext();
    const r = held(await rw.readLock().tryLock({ leaseTime: 10_000 }));
    expect(await rw.readLock().getHoldCount(r.owner)).toBe(1);
    loseNext();
    const r2 = held(await rw.readLock().tryLock({ leaseTime: 10_000, owner: r.owner }));
    expect(await rw.readLock().getHoldCount(r.owner)).toBe(2);
    loseNext();
    expect(await r2.release()).toBe("still-held");
    expect(await rw.readLock().getHoldCount(r.owner)).toBe(1);
    expect(await r.release()).toBe("released");
    bridge.bridge.clearFaults();
    expect(await keysOf(name)).toEqual([]);
  });

  it("an aborted read attempt in flight is cancelled: no hold and no timeout key left", async () => {
    const name = `${prefix}abort`;
    const rec = recordingEdgeLock({}, bridge.redis());
    const rw = rwOf(name, rec.edgelock);
    await (await rw.readLock().tryLock({ leaseTime: 1_000 }))?.release();
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "hang", match: "evalsha", times: 1 }],
    });
    const ac = new AbortController();
    const attempt = rw.readLock().tryLock({ leaseTime: 10_000, signal: ac.signal });
    await expect.poll(() => raw.exists(name), { timeout: 2_000, interval: 5 }).toBe(1);
    const reason = new Error("gave up");
    ac.abort(reason);
    await expect(attempt).rejects.toBe(reason);
    await Promise.all(rec.background);
    bridge.bridge.clearFaults();
    expect(await keysOf(name)).toEqual([]);
  });

  it("interop: a Redisson reader excludes an edge writer, an edge reader a Redisson writer; a JVM read unlock frees an edge-made lock", async () => {
    const name = `${prefix}jvm`;
    const jvmRead = () =>
      raw.eval(REDISSON_READ_ACQUIRE, {
        keys: [name, `{${name}}:${JVM}:rwlock_timeout`],
        arguments: ["30000", JVM, `${JVM}:write`],
      });
    const jvmUnlock = () =>
      raw.eval(REDISSON_READ_UNLOCK, {
        keys: [name, `redisson_rwlock:{${name}}`, `{${name}}:${JVM}:rwlock_timeout`, `{${name}}`],
        arguments: ["0", JVM],
      });
    const jvmWrite = () =>
      raw.eval(REDISSON_WRITE_ACQUIRE, { keys: [name], arguments: ["30000", `${JVM}:write`] });
    const rw = rwOf(name);
    expect(await jvmRead()).toBeNull();
    expect(await rw.writeLock().tryLock({ leaseTime: 10_000 })).toBeNull();
    const edgeReader = held(await rw.readLock().tryLock({ leaseTime: 10_000 }));
    expect((await rw.inspect()).holders.map((h) => h.owner).sort()).toEqual(
      [JVM, edgeReader.owner].sort(),
    );
    expect(await edgeReader.release()).toBe("released");
    // The JVM reader is last: Redisson's unlock walks the numeric fields and deletes the hash.
    expect(await jvmUnlock()).toBe(1);
    expect(await raw.exists(name)).toBe(0);
    // An edge-made read lock keeps a JVM writer out, then lets it in.
    const r = held(await rw.readLock().tryLock({ leaseTime: 10_000 }));
    expect(typeof (await jvmWrite())).toBe("number");
    expect(await jvmRead()).toBeNull();
    expect(await jvmUnlock()).toBe(0); // the edge reader remains
    expect(await r.release()).toBe("released");
    expect(await jvmWrite()).toBeNull();
    expect(await rw.readLock().tryLock({ leaseTime: 10_000 })).toBeNull();
    await raw.del(name);
  });

  it("8 clients reading and writing through the bridge: a writer is never inside with anyone", async () => {
    const name = `${prefix}contention`;
    let readers = 0;
    let writers = 0;
    let violations = 0;
    let reads = 0;
    let writes = 0;
    const started = Date.now();
    await Promise.all(
      Array.from({ length: 8 }, async (_, c) => {
        const rw = rwOf(name);
        for (let i = 0; i < 15; i++) {
          const write = (c + i) % 4 === 0;
          const lease = await (write ? rw.writeLock() : rw.readLock()).lock({ leaseTime: 10_000 });
          if (write) {
            writers += 1;
            writes += 1;
            if (writers > 1 || readers > 0) violations += 1;
          } else {
            readers += 1;
            reads += 1;
            if (writers > 0) violations += 1;
          }
          await new Promise((r) => setTimeout(r, 2));
          if (write) writers -= 1;
          else readers -= 1;
          expect(await lease.release()).toBe("released");
        }
      }),
    );
    expect(violations).toBe(0);
    expect(reads + writes).toBe(120);
    expect(writes).toBeGreaterThan(20);
    // Under 1 s on an idle machine, about 11 s on 2 loaded cores (writers wait for a gap
    // between readers); a last reader's release that wakes no writer leaves it to the readers'
    // 10 s leases, which makes it about 50 s.
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(await keysOf(name)).toEqual([]);
  }, 60_000);

  it("inspect reports the mode and each side's holders; leases restore to their side", async () => {
    const name = `${prefix}inspect`;
    const a = recordingEdgeLock();
    const rw = rwOf(name, a.edgelock);
    expect(await rw.inspect()).toEqual({
      kind: "read-write-lock",
      name,
      locked: false,
      ttl: -2,
      mode: null,
      holders: [],
    });
    const w = held(await rw.writeLock().tryLock({ leaseTime: 10_000 }));
    const r = held(await rw.readLock().tryLock({ leaseTime: 10_000, owner: w.owner }));
    const seen = await rw.inspect();
    expect(seen).toMatchObject({ kind: "read-write-lock", locked: true, mode: "write" });
    expect(seen.holders).toEqual(
      expect.arrayContaining([
        { owner: w.owner, holdCount: 1, side: "write" },
        { owner: w.owner, holdCount: 1, side: "read" },
      ]),
    );
    expect(JSON.parse(JSON.stringify(w))).toMatchObject({ kind: "write-lock" });
    const restored = recordingEdgeLock().edgelock.restoreLease(JSON.stringify(r));
    expect(restored.toJSON()).toMatchObject({ kind: "read-lock" });
    await restored.renew(20_000);
    expect(await raw.pTTL(`{${name}}:${r.owner}:rwlock_timeout:1`)).toBeGreaterThan(15_000);
    expect(await restored.release()).toBe("released");
    expect(await w.release()).toBe("released");
    expect(await rw.writeLock().forceUnlock()).toBe(false);
  });

  it("forceUnlock deletes only in its side's mode; unlock(owner) refuses a non-holder", async () => {
    const name = `${prefix}force`;
    const rw = rwOf(name);
    const r = held(await rw.readLock().tryLock({ leaseTime: 10_000 }));
    expect(await rw.writeLock().forceUnlock()).toBe(false);
    await expect(rw.writeLock().unlock(r.owner)).rejects.toMatchObject({ code: "LOCK_NOT_HELD" });
    expect(await rw.readLock().forceUnlock()).toBe(true);
    expect(await raw.exists(name)).toBe(0);
    expect(await r.release()).toBe("expired");
  });

  it("validates before any request: bad names, a keeper keep-alive without maxHoldTime, bad options", async () => {
    const rec = recordingEdgeLock();
    expect(() => rec.edgelock.getReadWriteLock("a{b}")).toThrow(/hash-tag/);
    const rw = rec.edgelock.getReadWriteLock(`${prefix}validation`);
    const keeper = { register: async () => ({}), unregister: async () => ({}) };
    await expect(rw.readLock().tryLock({ keepAlive: { keeper } as never })).rejects.toThrow(
      TypeError,
    );
    await expect(rw.writeLock().tryLock({ leaseTime: -1 })).rejects.toThrow(RangeError);
    await expect(rw.readLock().tryLock({ waitTime: 1.5 })).rejects.toThrow(RangeError);
    expect(rec.events).toEqual([]);
  });
});
