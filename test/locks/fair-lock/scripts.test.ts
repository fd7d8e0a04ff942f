/**
 * The fair lock's scripts (lua/fair-lock/*.lua), driven directly with EVAL through the real
 * `@upstash/redis` client on the shared bridge, and checked behind the bridge's back on Redis:
 * FIFO grants, wake tokens, the claim window, leaving the queue (cancel), replay safety, dead
 * waiters, re-entry, cleanup, and Redisson's data layout (its own fair scripts play a JVM
 * client). The primitive's behaviour end to end is in fair-lock.test.ts.
 */
import { createClient } from "@redis/client";
import { afterEach, describe, expect, inject, it } from "vitest";
import { randomHex } from "../../../src/ids.js";
import {
  fairLockAcquire,
  fairLockCancel,
  fairLockForceUnlock,
  fairLockRelease,
  lockInspect,
} from "../../../src/lua.gen.js";
import { REDISSON_FAIR_ACQUIRE, REDISSON_FAIR_UNLOCK } from "../../fixtures/redisson.js";
import { bridgeRedis, keyPrefix, useRawRedis } from "../../support/env.js";
import { isReplayRecord, replayRecords } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const redis = bridgeRedis();

const WINDOW = 60_000;
const LEASE = 30_000;
const SLOT = 30_000;
const CLAIM = 2_000;

/** {1, holdCount, epoch} | {0, pttl, position (0 = first, -1 = not queued)} | {-1, 0, 0} */
type Reply = [number, number, number];

/** The scripts of one fair lock, with defaults for every option a test does not care about. */
function fairLock(label: string) {
  const name = `${prefix}${label}`;
  const keys = {
    name,
    queue: `redisson_lock_queue:{${name}}`,
    zset: `redisson_lock_timeout:{${name}}`,
    waiters: `edgelock_waiters:{${name}}`,
    channel: `redisson_lock__channel:{${name}}`,
    replay: `edgelock_replay:{${name}}`,
    replayOld: `edgelock_replay:{${name}}:old`,
    wake: `edgelock_wake:{${name}}`,
  };
  // KEYS of every fair-lock script, in order (force-unlock takes the first six).
  const all = Object.values(keys).slice(0, 7);
  const run = <T>(script: { source: string }, args: (string | number)[], count = 7) =>
    redis.eval(script.source, all.slice(0, count), args) as Promise<T>;
  return {
    ...keys,
    // Each owner here waits in one call at a time, so the owner doubles as its waiter id.
    acquire: (
      owner: string,
      o: { lease?: number; slot?: number; claim?: number; id?: string } = {},
    ) =>
      run<Reply>(fairLockAcquire, [
        o.lease ?? LEASE,
        owner,
        WINDOW,
        o.id ?? randomHex(),
        o.slot ?? SLOT,
        o.claim ?? CLAIM,
        owner,
      ]),
    release: (
      owner: string,
      o: { lease?: number; id?: string; epoch?: string; claim?: number } = {},
    ) =>
      run<number>(fairLockRelease, [
        owner,
        o.lease ?? 0,
        WINDOW,
        o.id ?? randomHex(),
        o.epoch ?? "0",
        o.claim ?? CLAIM,
      ]),
    /** A waiter gives up (cancel.lua naming an id no attempt used, as after a busy answer). */
    dequeue: (owner: string, o: { id?: string; claim?: number } = {}) =>
      run<number>(fairLockCancel, [owner, WINDOW, o.id ?? randomHex(), o.claim ?? CLAIM, owner]),
    cancel: (owner: string, id: string, o: { claim?: number } = {}) =>
      run<number>(fairLockCancel, [owner, WINDOW, id, o.claim ?? CLAIM, owner]),
    forceUnlock: (o: { claim?: number } = {}) =>
      run<number>(fairLockForceUnlock, [o.claim ?? CLAIM, WINDOW], 6),
    /** The waiting owners, first in line first. */
    queued: async () => (await raw.lRange(keys.queue, 0, -1)).map(String),
    /** The lock HASH as field -> value. */
    hash: async () =>
      Object.fromEntries(
        Object.entries(await raw.hGetAll(name)).map(([k, v]) => [k, String(v)]),
      ) as Record<string, string>,
    /** Every key of this lock left in Redis, replay records aside (they lapse on their own). */
    leftovers: async () => {
      const found: string[] = [];
      for await (const batch of raw.scanIterator({ MATCH: `*{${name}}*`, COUNT: 1000 })) {
        found.push(...batch.map(String));
      }
      if ((await raw.exists(name)) === 1) found.push(name);
      return found.filter((k) => !isReplayRecord(name, k)).sort();
    },
  };
}

/**
 * Every wake message published on the lock's wake channels ("<waiter>|<epoch>" for a hand-off),
 * heard by a raw subscriber as a client of the waiters would.
 */
const listeners: (() => void)[] = [];
afterEach(() => {
  for (const close of listeners.splice(0)) close();
});

async function listen(name: string) {
  const sub = raw.duplicate();
  await sub.connect();
  listeners.push(() => sub.destroy());
  const heard: string[] = [];
  await sub.pSubscribe(`edgelock_wake:{${name}}:*`, (message) => heard.push(String(message)));
  const notice = (m: string) => m.includes("|@");
  return {
    heard,
    /** Hand-offs and wake-ups sent to `waiter`. */
    to: (waiter: string) => heard.filter((m) => m.startsWith(`${waiter}|`) && !notice(m)),
    /** The expiries (server ms) `waiter` was told of as the new first waiter (lib/fair.lua). */
    notices: (waiter: string) =>
      heard.filter((m) => m.startsWith(`${waiter}|@`)).map((m) => Number(m.split("|@")[1])),
  };
}

/** A busy answer as {0, position}: 0 = first in line, -1 = not queued. */
const place = (reply: Reply) => [reply[0], reply[2]];

/** Redis server time in ms (the clock every script uses). */
async function serverMs(): Promise<number> {
  const [s, us] = (await raw.sendCommand(["TIME"])) as [Buffer, Buffer];
  return Number(String(s)) * 1000 + Math.floor(Number(String(us)) / 1000);
}

/** Resolves once `key` has expired (Redis drops it lazily on the EXISTS). */
const gone = (key: string) =>
  expect.poll(() => raw.exists(key), { timeout: 5_000, interval: 20 }).toBe(0);

describe("fair lock scripts", () => {
  it("grants five waiters in the order they queued, each woken by its own message", async () => {
    const f = fairLock("fifo");
    const wakes = await listen(f.name);
    const [ok, count] = await f.acquire("h");
    expect([ok, count]).toEqual([1, 1]);
    const waiters = ["w1", "w2", "w3", "w4", "w5"];
    for (const [i, w] of waiters.entries()) {
      const [busy, pttl, position] = await f.acquire(w);
      expect([busy, position]).toEqual([0, i]);
      expect(pttl).toBeGreaterThan(LEASE - 5_000);
    }
    expect(await f.queued()).toEqual(waiters);

    let holder = "h";
    for (const [i, w] of waiters.entries()) {
      expect(await f.release(holder)).toBe(1);
      // Granted to the first waiter only: hold count 1, a claim window, a message to it.
      expect(await f.hash()).toMatchObject({ [w]: "1", "edgelock:grant": w });
      expect(await raw.pTTL(f.name)).toBeLessThanOrEqual(CLAIM);
      await expect.poll(() => wakes.to(w).length).toBe(1);
      for (const later of waiters.slice(i + 1)) expect(wakes.to(later)).toEqual([]);
      expect(await f.queued()).toEqual(waiters.slice(i + 1));
      const next = waiters[i + 1];
      if (next) {
        // The waiter now first is told when the claim window ends: its wait is back by then
        // should the handed waiter never confirm. Nobody behind it is told.
        await expect.poll(() => wakes.notices(next).length).toBe(1);
        const expiry = Number(await raw.sendCommand(["PEXPIRETIME", f.name]));
        expect(wakes.notices(next)).toEqual([expiry]);
        for (const later of waiters.slice(i + 2)) expect(wakes.notices(later)).toEqual([]);
        // The next in line re-checks meanwhile: still busy, still first.
        expect(place(await f.acquire(next))).toEqual([0, 0]);
      }
      const [confirmed, held] = await f.acquire(w);
      expect([confirmed, held]).toEqual([1, 1]);
      expect(await f.hash()).not.toHaveProperty("edgelock:grant");
      expect(await raw.pTTL(f.name)).toBeGreaterThan(LEASE - 5_000);
      holder = w;
    }
    expect(await f.release(holder)).toBe(1);
    expect(await f.leftovers()).toEqual([]);
    expect(wakes.heard).toHaveLength(2 * waiters.length - 1);
  });

  it("the hand-off publishes the waiter's id and the epoch it was handed over in", async () => {
    const f = fairLock("wake");
    const wakes = await listen(f.name);
    await f.acquire("h");
    expect((await f.acquire("w"))[0]).toBe(0);
    expect(await f.release("h")).toBe(1);
    await expect.poll(() => wakes.heard.length).toBe(1);
    const [waiter, token] = (wakes.heard[0] as string).split("|");
    expect(waiter).toBe("w");
    const [ok, count, epoch] = await f.acquire("w");
    expect([ok, count]).toEqual([1, 1]);
    expect(Number(token)).toBe(epoch);
    expect(await f.release("w")).toBe(1);
    expect(await f.leftovers()).toEqual([]);
  });

  it("a grant never confirmed passes on after the claim window: to the next re-check, or through any acquire", async () => {
    const f = fairLock("claim");
    const wakes = await listen(f.name);
    // Long enough that a loaded machine confirms within it where the test means to.
    const claim = 1_000;
    await f.acquire("h");
    for (const w of ["w1", "w2", "w3"]) await f.acquire(w);
    expect(await f.release("h", { claim })).toBe(1);
    expect(await f.hash()).toMatchObject({ w1: "1" });
    // w1 never confirms: its grant lapses with the key.
    await gone(f.name);
    // w2, now first in line, re-checks and takes the free lock.
    const [ok] = await f.acquire("w2", { claim });
    expect(ok).toBe(1);
    // w1 comes back too late: it queues again, at the back.
    expect(place(await f.acquire("w1", { claim }))).toEqual([0, 1]);
    expect(await f.queued()).toEqual(["w3", "w1"]);
    expect(await f.release("w2", { claim })).toBe(1);
    expect(await f.hash()).toMatchObject({ w3: "1" });
    await gone(f.name);
    // w3's grant lapsed too; a newcomer's acquire hands the lock to w1 and queues behind it.
    const [busy, pttl, position] = await f.acquire("n", { claim });
    expect([busy, position]).toEqual([0, 0]);
    expect(pttl).toBeLessThanOrEqual(claim);
    expect(await f.hash()).toMatchObject({ w1: "1", "edgelock:grant": "w1" });
    // Its second message: the first came with the grant that lapsed.
    await expect.poll(() => wakes.to("w1").length).toBe(2);
    expect((await f.acquire("w1"))[0]).toBe(1);
    expect(await f.release("w1")).toBe(1);
    expect((await f.acquire("n"))[0]).toBe(1);
    expect(await f.release("n")).toBe(1);
    expect(await f.leftovers()).toEqual([]);
  });

  it("a waiter giving up leaves the queue; one that gives up after its grant passes the grant on", async () => {
    const f = fairLock("dequeue");
    const wakes = await listen(f.name);
    await f.acquire("h");
    for (const w of ["w1", "w2", "w3"]) await f.acquire(w);
    expect(await f.dequeue("w2")).toBe(0);
    expect(await f.queued()).toEqual(["w1", "w3"]);
    expect(await raw.zScore(f.zset, "w2")).toBeNull();
    expect(await raw.hExists(f.waiters, "w2")).toBe(0);

    expect(await f.release("h")).toBe(1);
    expect(await f.hash()).toMatchObject({ w1: "1" });
    expect(await f.dequeue("w1")).toBe(1);
    // The grant went straight to w3, woken by its own message; w1 kept nothing.
    expect(await f.hash()).toMatchObject({ w3: "1", "edgelock:grant": "w3" });
    expect(await f.hash()).not.toHaveProperty("w1");
    await expect.poll(() => wakes.to("w3").length).toBe(1);

    expect(await f.dequeue("nobody")).toBe(0);
    expect((await f.acquire("w3"))[0]).toBe(1);
    // A confirmed hold is not a wait: giving up a wait leaves it alone.
    expect(await f.dequeue("w3")).toBe(0);
    expect(await f.hash()).toMatchObject({ w3: "1" });
    expect(await f.release("w3")).toBe(1);
    expect(await f.leftovers()).toEqual([]);
  });

  it("replayed requests apply once: enqueue, release, confirm, leave; a late busy acquire never takes", async () => {
    const f = fairLock("replay");
    const wakes = await listen(f.name);
    const take = randomHex();
    const first = await f.acquire("h", { id: take });
    expect(first[0]).toBe(1);
    expect(await f.acquire("h", { id: take })).toEqual(first);
    expect(await f.hash()).toMatchObject({ h: "1" });

    const enqueue = randomHex();
    expect(place(await f.acquire("w", { id: enqueue }))).toEqual([0, 0]);
    expect(place(await f.acquire("w", { id: enqueue }))).toEqual([0, 0]);
    await f.acquire("v");
    expect(await f.queued()).toEqual(["w", "v"]);

    expect((await f.acquire("h"))[1]).toBe(2);
    const partial = randomHex();
    expect(await f.release("h", { id: partial })).toBe(2);
    expect(await f.release("h", { id: partial })).toBe(2);
    expect(await f.hash()).toMatchObject({ h: "1" });

    const last = randomHex();
    expect(await f.release("h", { id: last })).toBe(1);
    expect(await f.release("h", { id: last })).toBe(1);
    // One grant, one message: v is still waiting.
    expect(await f.hash()).toMatchObject({ w: "1" });
    await expect.poll(() => wakes.to("w").length).toBe(1);
    expect(await f.queued()).toEqual(["v"]);

    const confirm = randomHex();
    const confirmed = await f.acquire("w", { id: confirm });
    expect(confirmed.slice(0, 2)).toEqual([1, 1]);
    expect(await f.acquire("w", { id: confirm })).toEqual(confirmed);
    expect(await f.hash()).toMatchObject({ w: "1" });

    // The enqueue arrives again after w holds the lock: it reports, and neither queues nor re-enters.
    expect(await f.acquire("w", { id: enqueue })).toEqual([0, expect.any(Number), -1, 0]);
    expect(await f.hash()).toMatchObject({ w: "1" });
    expect(await f.queued()).toEqual(["v"]);

    const leave = randomHex();
    expect(await f.dequeue("v", { id: leave })).toBe(0);
    expect(await f.queued()).toEqual([]);
    expect(await f.dequeue("v", { id: leave })).toBe(2);
    // v waits again; the old leave, replayed, does not remove the new wait.
    expect(place(await f.acquire("v"))).toEqual([0, 0]);
    expect(await f.dequeue("v", { id: leave })).toBe(2);
    expect(await f.queued()).toEqual(["v"]);

    expect(await f.release("w")).toBe(1);
    expect((await f.acquire("v"))[0]).toBe(1);
    expect(await f.release("v")).toBe(1);
    expect(await f.leftovers()).toEqual([]);
  });

  it("a waiter whose slot lapsed is skipped and dropped", async () => {
    const f = fairLock("dead");
    await f.acquire("h");
    await f.acquire("dead", { slot: 200 });
    await f.acquire("live");
    const deadline = Number(await raw.zScore(f.zset, "dead"));
    await expect.poll(serverMs, { timeout: 5_000, interval: 20 }).toBeGreaterThan(deadline);
    expect(await f.release("h")).toBe(1);
    expect(await f.hash()).toMatchObject({ live: "1" });
    expect(await f.hash()).not.toHaveProperty("dead");
    expect(await f.queued()).toEqual([]);
    expect(await raw.zScore(f.zset, "dead")).toBeNull();
    expect(await raw.hExists(f.waiters, "dead")).toBe(0);
    // Back too late, the dead waiter is just a newcomer.
    expect(place(await f.acquire("dead"))).toEqual([0, 0]);
    expect(await f.dequeue("dead")).toBe(0);
    expect((await f.acquire("live"))[0]).toBe(1);
    expect(await f.release("live")).toBe(1);
    expect(await f.leftovers()).toEqual([]);
  });

  it("a release after the lease expired answers 0, passes the lock on, and answers 0 again when replayed", async () => {
    const f = fairLock("late-release");
    await f.acquire("h", { lease: 1_000 });
    await f.acquire("w");
    await gone(f.name);
    const late = randomHex();
    expect(await f.release("h", { id: late })).toBe(0);
    expect(await f.hash()).toMatchObject({ w: "1", "edgelock:grant": "w" });
    // Replayed now that w holds the lock, it still reports what it did (not "not owner").
    expect(await f.release("h", { id: late })).toBe(0);
    expect((await f.acquire("w"))[0]).toBe(1);
    expect(await f.release("w")).toBe(1);
    expect(await f.leftovers()).toEqual([]);
  });

  it("a waiter that stops calling leaves nothing behind once its slot lapses", async () => {
    const f = fairLock("abandoned");
    await f.acquire("h", { lease: 300 });
    await f.acquire("w", { slot: 400 });
    // The holder's lease and the waiter's slot lapse with nobody touching the lock again.
    for (const key of [f.name, f.queue, f.zset, f.waiters]) await gone(key);
    expect(await f.leftovers()).toEqual([]);
  });

  it("the holder re-enters while others wait; the lock passes on only at its last release", async () => {
    const f = fairLock("reentry");
    const [, , epoch] = await f.acquire("h");
    await f.acquire("w");
    expect(await f.acquire("h")).toEqual([1, 2, epoch, 0]);
    expect(await f.release("h")).toBe(2);
    expect(await f.queued()).toEqual(["w"]);
    expect(await f.hash()).not.toHaveProperty("w");
    expect(await f.release("h")).toBe(1);
    expect(await f.hash()).toMatchObject({ w: "1" });
    expect((await f.acquire("w"))[0]).toBe(1);
    expect(await f.release("w")).toBe(1);
    expect(await f.release("w")).toBe(0);
    expect(await f.leftovers()).toEqual([]);
  });

  it("never shortens the lock's TTL: re-entry, partial release and a long confirmation only extend it", async () => {
    const f = fairLock("ttl");
    await f.acquire("h", { lease: 20_000 });
    await f.acquire("h", { lease: 1_000 });
    expect(await raw.pTTL(f.name)).toBeGreaterThan(15_000);
    expect(await f.release("h", { lease: 1_000 })).toBe(2);
    expect(await raw.pTTL(f.name)).toBeGreaterThan(15_000);
    await f.acquire("w");
    expect(await f.release("h", { claim: 5_000 })).toBe(1);
    // A confirmation with a lease shorter than the claim window ends the window: the claim
    // window was nobody's lease, the waiter's starts now and lasts exactly what it asked for.
    expect((await f.acquire("w", { lease: 500 }))[0]).toBe(1);
    expect(await raw.pTTL(f.name)).toBeLessThanOrEqual(500);
    expect(await f.release("w")).toBe(1);
    // One longer than the window gets its whole lease.
    await f.acquire("h");
    await f.acquire("w");
    expect(await f.release("h", { claim: 5_000 })).toBe(1);
    expect((await f.acquire("w", { lease: 8_000 }))[0]).toBe(1);
    expect(await raw.pTTL(f.name)).toBeGreaterThan(6_000);
    expect(await f.release("w")).toBe(1);
    expect(await f.leftovers()).toEqual([]);
  });

  it("a single attempt (slot 0) never queues; a lease's epoch guards its release", async () => {
    const f = fairLock("try");
    const [, , epoch] = await f.acquire("h");
    await f.acquire("w");
    expect(await f.acquire("t", { slot: 0 })).toEqual([0, expect.any(Number), -1, 0]);
    expect(await f.queued()).toEqual(["w"]);
    expect(await f.release("t")).toBe(3);
    // A release naming another incarnation of the lock leaves this one alone.
    expect(await f.release("h", { epoch: "1" })).toBe(0);
    expect(await f.hash()).toMatchObject({ h: "1" });
    expect(await f.release("h", { epoch: String(epoch) })).toBe(1);
    expect(await f.dequeue("w")).toBe(1);
    expect(await f.leftovers()).toEqual([]);
  });

  it("cancel: before the attempt (a tombstone), after it queued (leaves), after it took (undone, passed on)", async () => {
    const f = fairLock("cancel");
    const early = randomHex();
    expect(await f.cancel("a", early)).toBe(0);
    expect(await f.acquire("a", { id: early })).toEqual([-1, 0, 0, 0]);
    expect(await raw.exists(f.name)).toBe(0);

    const took = randomHex();
    expect((await f.acquire("h", { id: took }))[0]).toBe(1);
    const queued = randomHex();
    expect((await f.acquire("w1", { id: queued }))[0]).toBe(0);
    await f.acquire("w2");
    expect(await f.cancel("w1", queued)).toBe(0);
    expect(await f.cancel("w1", queued)).toBe(2);
    expect(await f.queued()).toEqual(["w2"]);

    expect(await f.cancel("h", took)).toBe(1);
    expect(await f.acquire("h", { id: took })).toEqual([-1, 0, 0, 0]);
    expect(await f.hash()).toMatchObject({ w2: "1", "edgelock:grant": "w2" });
    // Cancelling a wait whose grant came meanwhile passes the grant on.
    const w3 = randomHex();
    await f.acquire("w3", { id: w3 });
    expect(await f.dequeue("w2")).toBe(1);
    expect(await f.hash()).toMatchObject({ w3: "1" });
    expect(await f.cancel("w3", w3)).toBe(1);
    expect(await raw.exists(f.name)).toBe(0);
    expect(await f.leftovers()).toEqual([]);
  });

  it("a lock taken with a lease of at least the replay window is its own record: copies of its acquire answer it, and once it is gone do nothing", async () => {
    const f = fairLock("own-record");
    const long = { lease: WINDOW + 30_000 };
    const records = () => replayRecords(raw, f.name);
    // A copy answers the hold it made, without a record and without holding twice.
    const take = randomHex();
    const first = await f.acquire("h", { ...long, id: take });
    expect(first).toEqual([1, 1, expect.any(Number), 0]);
    expect(await records()).toEqual({});
    expect(await raw.pTTL(f.name)).toBeGreaterThan(WINDOW);
    expect(await f.hash()).toMatchObject({ h: "1", "edgelock:by": take });
    expect(await f.acquire("h", { ...long, id: take })).toEqual(first);
    expect(await f.hash()).toMatchObject({ h: "1" });
    // Released by its lease: "R1" under the same id, and a late copy does nothing.
    expect(await f.release("h", { id: take, epoch: String(first[2]) })).toBe(1);
    expect(await records()).toEqual({ [take]: "R1" });
    expect(await f.acquire("h", { ...long, id: take })).toEqual([-1, 0, 0, 0]);
    expect(await raw.exists(f.name)).toBe(0);

    // Cancelled after it applied (its answer lost): undone, and a late copy does nothing.
    const lost = randomHex();
    expect((await f.acquire("h", { ...long, id: lost }))[0]).toBe(1);
    expect(await f.cancel("h", lost)).toBe(1);
    expect(await raw.exists(f.name)).toBe(0);
    expect(await f.acquire("h", { ...long, id: lost })).toEqual([-1, 0, 0, 0]);
    expect(await raw.exists(f.name)).toBe(0);

    // Deleted by forceUnlock, or by unlock(owner) with a request of its own: "G" for the acquire.
    const forced = randomHex();
    expect((await f.acquire("h", { ...long, id: forced }))[0]).toBe(1);
    expect(await f.forceUnlock()).toBe(1);
    expect((await records())[forced]).toBe("G");
    expect(await f.acquire("h", { ...long, id: forced })).toEqual([-1, 0, 0, 0]);
    const unlocked = randomHex();
    expect((await f.acquire("h", { ...long, id: unlocked }))[0]).toBe(1);
    expect(await f.release("h")).toBe(1);
    expect((await records())[unlocked]).toBe("G");
    expect(await f.acquire("h", { ...long, id: unlocked })).toEqual([-1, 0, 0, 0]);
    expect(await raw.exists(f.name)).toBe(0);
    expect(await f.leftovers()).toEqual([]);
  });

  it("an empty queue costs nothing; a registry entry a Redisson script left behind is cleared when its owner takes the lock", async () => {
    const f = fairLock("stale-registry");
    // Redisson's scripts drop a lapsed waiter from the LIST and the ZSET, never from our HASH.
    await raw.hSet(f.waiters, "h", "h:1");
    await raw.pExpire(f.waiters, 60_000);
    expect((await f.acquire("h"))[0]).toBe(1);
    expect(await raw.exists(f.waiters)).toBe(0);
    expect(await f.release("h")).toBe(1);
    expect(await f.leftovers()).toEqual([]);
  });

  it("forceUnlock deletes the lock whoever holds it and passes it to the next waiter", async () => {
    const f = fairLock("force");
    const wakes = await listen(f.name);
    await f.acquire("h");
    await f.acquire("h");
    await f.acquire("w");
    expect(await f.forceUnlock()).toBe(1);
    expect(await f.hash()).toMatchObject({ w: "1", "edgelock:grant": "w" });
    await expect.poll(() => wakes.to("w").length).toBe(1);
    expect((await f.acquire("w"))[0]).toBe(1);
    expect(await f.release("h")).toBe(3);
    expect(await f.forceUnlock()).toBe(1);
    expect(await f.forceUnlock()).toBe(0);
    expect(await f.leftovers()).toEqual([]);
  });

  it("keeps Redisson's layout: a JVM client's fair scripts and edgelock's share one queue", async () => {
    const f = fairLock("jvm");
    const jvm = "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:76";
    const jvmAcquire = async () =>
      raw.eval(REDISSON_FAIR_ACQUIRE, {
        keys: [f.name, f.queue, f.zset],
        arguments: [String(LEASE), jvm, "300000", String(await serverMs())],
      });
    const jvmUnlock = async () =>
      raw.eval(REDISSON_FAIR_UNLOCK, {
        keys: [f.name, f.queue, f.zset, f.channel],
        arguments: [String(LEASE), jvm, String(await serverMs())],
      });

    // edgelock holds: the HASH is Redisson's (owner -> hold count, PEXPIRE) plus our epoch field
    // and the request that created it (its replay record).
    const take = randomHex();
    const [, , epoch] = await f.acquire("edge:1", { id: take });
    expect(await f.hash()).toEqual({
      "edge:1": "1",
      "edgelock:epoch": String(epoch),
      "edgelock:by": take,
    });
    expect(await raw.pTTL(f.name)).toBeGreaterThan(LEASE - 5_000);
    // The JVM client finds it held and queues, with a timeout in the shared ZSET.
    const ttl = (await jvmAcquire()) as number;
    expect(ttl).toBeGreaterThan(LEASE - 5_000);
    expect(await f.queued()).toEqual([jvm]);
    expect(place(await f.acquire("edge:2"))).toEqual([0, 1]);
    expect(await f.queued()).toEqual([jvm, "edge:2"]);

    // Released by edgelock: the JVM waiter first in line is told on its own channel, not granted.
    const subscriber = createClient({ url: inject("redisUrl"), RESP: 2 });
    subscriber.on("error", () => undefined);
    await subscriber.connect();
    try {
      let tell: (message: string) => void = () => undefined;
      const told = new Promise<string>((resolve) => {
        tell = resolve;
      });
      await subscriber.subscribe(`${f.channel}:${jvm}`, (message) => tell(message));
      expect(await f.release("edge:1")).toBe(1);
      expect(await told).toBe("0");
    } finally {
      await subscriber.close();
    }
    expect(await raw.exists(f.name)).toBe(0);
    // edgelock's waiter behind it does not jump the queue.
    expect(place(await f.acquire("edge:2"))).toEqual([0, 1]);

    // The JVM client takes it with its own script; edgelock reads the hold as Redisson wrote it.
    expect(await jvmAcquire()).toBeNull();
    expect(await f.hash()).toEqual({ [jvm]: "1" });
    expect(await redis.eval(lockInspect.source, [f.name], [jvm])).toEqual([
      1,
      expect.any(Number),
      1,
    ]);
    // Redisson's acquire moved every ZSET score down by its wait; edge:2 queued with one wait
    // per waiter ahead in its score, so to Redisson it is still alive. A newcomer queues behind.
    expect(Number(await raw.zScore(f.zset, "edge:2"))).toBeGreaterThan(await serverMs());
    expect(place(await f.acquire("edge:3"))).toEqual([0, 1]);
    expect(await f.queued()).toEqual(["edge:2", "edge:3"]);
    expect(place(await f.acquire("edge:2"))).toEqual([0, 0]);
    expect(await f.release("edge:2")).toBe(3);
    expect(await jvmUnlock()).toBe(1);
    expect((await f.acquire("edge:2"))[0]).toBe(1);
    expect(await f.dequeue("edge:3")).toBe(0);
    expect(await jvmAcquire()).toEqual(expect.any(Number));
    expect(await f.release("edge:2")).toBe(1);
    expect(await raw.exists(f.name)).toBe(0);
    expect(await jvmAcquire()).toBeNull();
    expect(await jvmUnlock()).toBe(1);
    expect(await f.leftovers()).toEqual([]);
  });

  it("a mixed queue keeps arrival order whoever queued and whoever takes, with Redisson's default 5-minute wait", async () => {
    const f = fairLock("mixed");
    const jvm = (n: string) => `8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:${n}`;
    // Redisson's lock(): wait = fairLockWaitTimeout, 300 000 ms by default.
    const jvmAcquire = async (owner: string) =>
      raw.eval(REDISSON_FAIR_ACQUIRE, {
        keys: [f.name, f.queue, f.zset],
        arguments: [String(LEASE), owner, "300000", String(await serverMs())],
      });
    const jvmUnlock = async (owner: string) =>
      raw.eval(REDISSON_FAIR_UNLOCK, {
        keys: [f.name, f.queue, f.zset, f.channel],
        arguments: [String(LEASE), owner, String(await serverMs())],
      });
    const a = jvm("1");
    const b = jvm("2");
    const c = jvm("3");
    expect((await f.acquire("edge:1"))[0]).toBe(1);
    expect(typeof (await jvmAcquire(a))).toBe("number");
    expect(place(await f.acquire("edge:2"))).toEqual([0, 1]);
    expect(typeof (await jvmAcquire(b))).toBe("number");
    expect(place(await f.acquire("edge:3"))).toEqual([0, 3]);
    expect(typeof (await jvmAcquire(c))).toBe("number");
    const order = [a, "edge:2", b, "edge:3", c];
    expect(await f.queued()).toEqual(order);
    const taken: string[] = ["edge:1"];
    expect(await f.release("edge:1")).toBe(1); // the JVM head is told on its channel
    /** Everyone polls once; whoever takes the lock is recorded. */
    const pollAll = async () => {
      for (const owner of await f.queued()) {
        const got = owner.startsWith("edge:")
          ? (await f.acquire(owner))[0] === 1
          : (await jvmAcquire(owner)) === null;
        if (got) taken.push(owner);
      }
    };
    let holder = "edge:1";
    for (let turn = 0; turn < order.length; turn++) {
      await pollAll();
      expect(taken).toHaveLength(turn + 2);
      const next = taken[taken.length - 1] ?? "";
      expect(next).not.toBe(holder);
      holder = next;
      // Every Redisson grant lowered the scores by 5 minutes: the waiters left all still live.
      for (const owner of await f.queued()) {
        expect(Number(await raw.zScore(f.zset, owner))).toBeGreaterThan(await serverMs());
      }
      await pollAll(); // nobody overtakes while it is held
      expect(taken).toHaveLength(turn + 2);
      if (holder.startsWith("edge:")) expect(await f.release(holder)).toBe(1);
      else expect(await jvmUnlock(holder)).toBe(1);
    }
    expect(taken).toEqual(["edge:1", ...order]);
    expect(await f.queued()).toEqual([]);
    expect(await f.leftovers()).toEqual([]);
  });

  it("a waiter of ours that stops coming back lapses after its slot, whatever wait Redisson's model adds to its score", async () => {
    const f = fairLock("mixed-dead");
    const jvm = "8c8ffe61-5bd3-4d78-a5c0-2d2386af488e:9";
    const jvmArgs = async () => [String(LEASE), jvm, "300000", String(await serverMs())];
    expect((await f.acquire("edge:1"))[0]).toBe(1);
    expect(
      typeof (await raw.eval(REDISSON_FAIR_ACQUIRE, {
        keys: [f.name, f.queue, f.zset],
        arguments: await jvmArgs(),
      })),
    ).toBe("number");
    expect(place(await f.acquire("edge:2"))).toEqual([0, 1]);
    expect(place(await f.acquire("edge:dead", { slot: 200 }))).toEqual([0, 2]);
    expect(await f.release("edge:1")).toBe(1);
    expect(
      await raw.eval(REDISSON_FAIR_ACQUIRE, {
        keys: [f.name, f.queue, f.zset],
        arguments: await jvmArgs(),
      }),
    ).toBeNull();
    const deadline = (await serverMs()) + 250;
    while ((await serverMs()) < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(
      await raw.eval(REDISSON_FAIR_UNLOCK, {
        keys: [f.name, f.queue, f.zset, f.channel],
        arguments: [String(LEASE), jvm, String(await serverMs())],
      }),
    ).toBe(1);
    expect((await f.acquire("edge:2"))[0]).toBe(1);
    // To Redisson edge:dead still has one wait ahead in its score; edgelock goes by its slot.
    expect(Number(await raw.zScore(f.zset, "edge:dead"))).toBeGreaterThan(
      (await serverMs()) + 200_000,
    );
    expect(await f.queued()).toEqual(["edge:dead"]);
    expect(await f.release("edge:2")).toBe(1); // prunes it: nobody to hand on to
    expect(await f.queued()).toEqual([]);
    expect(await raw.exists(f.name)).toBe(0);
    expect(await f.leftovers()).toEqual([]);
  });

  it("a waiter of ours that moved up through edgelock hand-offs gets a score Redisson reads as its slot", async () => {
    const f = fairLock("moved-up");
    expect((await f.acquire("edge:1"))[0]).toBe(1);
    expect(place(await f.acquire("edge:2"))).toEqual([0, 0]);
    expect(place(await f.acquire("edge:3"))).toEqual([0, 1]);
    expect(place(await f.acquire("edge:4"))).toEqual([0, 2]);
    const far = Number(await raw.zScore(f.zset, "edge:4"));
    expect(far).toBeGreaterThan((await serverMs()) + 2 * 300_000);
    expect(await f.release("edge:1")).toBe(1); // to edge:2, which lowers no score
    expect((await f.acquire("edge:2"))[0]).toBe(1);
    expect(await f.release("edge:2")).toBe(1);
    expect((await f.acquire("edge:3"))[0]).toBe(1);
    expect(Number(await raw.zScore(f.zset, "edge:4"))).toBe(far);
    expect(place(await f.acquire("edge:4"))).toEqual([0, 0]);
    const now = await serverMs();
    const score = Number(await raw.zScore(f.zset, "edge:4"));
    expect(score).toBeGreaterThan(now + SLOT - 1_000);
    expect(score).toBeLessThanOrEqual(now + SLOT + 50);
    expect(await f.release("edge:3")).toBe(1);
    expect((await f.acquire("edge:4"))[0]).toBe(1);
    expect(await f.release("edge:4")).toBe(1);
    expect(await f.leftovers()).toEqual([]);
  });
});
