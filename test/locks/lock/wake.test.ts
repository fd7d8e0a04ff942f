/**
 * Wake-ups of the reentrant lock's waiters over pub/sub (SSE through the real `@upstash/redis`
 * `subscribe()`): a busy attempt registers the waiter, the release that frees the lock publishes
 * to exactly one registered waiter, and that waiter attempts again at once. The lock stays
 * non-fair; what changes is the cost and latency of a wait. The wait loop itself (polling where
 * subscribing is not possible, no spin): test/wait/loop.test.ts.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { randomHex } from "../../../src/ids.js";
import { lockAcquire, lockCancel, lockDecline, lockRelease } from "../../../src/lua.gen.js";
import {
  keyPrefix,
  type PrivateBridge,
  startPrivateBridge,
  useRawRedis,
} from "../../support/env.js";
import {
  expectFirstWaiterLeavingTellsNext,
  isReplayRecord,
  recordingEdgeLock,
  replayKeys,
} from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();

const waitingKey = (name: string) => `edgelock_waiting:{${name}}`;
const wakeKey = (name: string) => `edgelock_wake:{${name}}`;
/** Keys of `name` other than the lock itself and its replay records. */
const wakeKeysOf = async (name: string) =>
  (await raw.keys(`*${name}*`))
    .map(String)
    .filter((k) => k !== name && !isReplayRecord(name, k))
    .sort();
const waits = (events: readonly { type: string }[]) =>
  events.filter((e) => e.type === "waiting").length;

/**
 * lock/acquire.lua run directly (lease 9 s, replay window 30 s): `waiter` registers for `slot`
 * ms, asking for hand-offs with `grant` "1"; `registered` "0" for a wait's first attempt.
 */
const scriptAcquire = (
  name: string,
  owner: string,
  waiter: string,
  { grant = "1", registered = "0", slot = "30000" } = {},
) =>
  raw.eval(lockAcquire.source, {
    keys: [name, ...replayKeys(name), waitingKey(name), wakeKey(name)],
    arguments: ["9000", owner, "30000", randomHex(), waiter, slot, grant, registered],
  }) as Promise<number[]>;

/** The keys of lock/release.lua and lock/cancel.lua. */
const releaseKeys = (name: string) => [
  name,
  ...replayKeys(name),
  `redisson_lock__channel:{${name}}`,
  waitingKey(name),
  wakeKey(name),
];

/** lock/release.lua run directly: one hold of `owner`, any epoch, a 2 s claim window. */
const scriptRelease = (name: string, owner: string) =>
  raw.eval(lockRelease.source, {
    keys: releaseKeys(name),
    arguments: [owner, "0", "30000", randomHex(), "0", "0", "2000"],
  });

describe("reentrant lock wake-ups", () => {
  // A private bridge for the tests that fault one client's requests, closed after each test.
  let bridge: PrivateBridge | undefined;
  afterEach(async () => {
    await bridge?.close();
    bridge = undefined;
  });

  it("a waiter behind a long hold subscribes, is woken by the release, and closes its subscription", async () => {
    const name = `${prefix}woken`;
    const holder = recordingEdgeLock();
    const held = await holder.edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 5_000 });
    await waiter.until((_e, all) => waits(all) === 2);
    expect(await raw.zCard(waitingKey(name))).toBe(1);
    expect(waiter.events.find((e) => e.type === "wait-strategy")).toMatchObject({
      strategy: "subscribe",
    });
    const released = Date.now();
    expect(await held.release()).toBe("released");
    const lease = await pending;
    // A poll would come back after up to a second; a wait that ran out, after 15 s.
    expect(Date.now() - released).toBeLessThan(1_000);
    expect(lease).not.toBeNull();
    // Busy attempt, subscription, registering attempt (Redisson's order); the release handed
    // the lock over with its message, so no acquiring attempt follows.
    expect(waiter.requests("acquire")).toBe(3);
    expect(await wakeKeysOf(name)).toEqual([]);
    // A second wait of the same client soon after reuses the open subscription: it registers
    // with its first attempt.
    const again = waiter.edgelock.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 5_000 });
    await waiter.until((_e, all) => waits(all) === 3);
    await lease?.release();
    const second = await again;
    expect(second).not.toBeNull();
    const acquires = waiter.events.filter((e) => e.type === "acquire");
    // One attempt (it registers at once); the hand-off needs no other.
    expect(acquires.at(-1)?.requests).toBe(1);
    await second?.release();
  });

  it("a lock taken from free while waiters are registered tells its release to wake them", async () => {
    const name = `${prefix}taken-from-free`;
    const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 5_000 });
    // Subscribed and registered (its second wait): the registry exists, and needs no mark.
    await waiter.until((_e, all) => waits(all) === 2);
    expect(await raw.exists(waitingKey(name))).toBe(1);
    expect(await raw.exists(`${waitingKey(name)}:any`)).toBe(0);
    // The holder's hold ends with no release (as a crashed holder's expiry would): nobody is
    // woken, and the waiter's wait is bounded by that holder's 20 s lease.
    await raw.del(name);
    const other = await recordingEdgeLock().edgelock.getLock(name).tryLock({ leaseTime: 5_000 });
    if (!other) throw new Error("not acquired");
    // Taken from free, but the registry is marked: its release must look for waiters.
    expect(String(await raw.hGet(name, "edgelock:waiters"))).toBe("1");
    const released = Date.now();
    expect(await other.release()).toBe("released");
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect(Date.now() - released).toBeLessThan(5_000);
    await lease?.release();
    await held.release();
    expect(await wakeKeysOf(name)).toEqual([]);
  });

  it("each release wakes one waiter, not all of them", async () => {
    const name = `${prefix}one-at-a-time`;
    const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiters = [0, 1, 2].map(() => recordingEdgeLock());
    const done = waiters.map(async (w) => {
      const lease = await w.edgelock.getLock(name).lock({ leaseTime: 10_000 });
      await lease.release();
    });
    // Each subscribed and registered (its second wait).
    await Promise.all(waiters.map((w) => w.until((_e, all) => waits(all) === 2)));
    expect(await raw.zCard(waitingKey(name))).toBe(3);
    await held.release();
    await Promise.all(done);
    // A waiter woken for nothing would have attempted again and waited a third time; each was
    // handed the lock by a release, without an acquiring attempt.
    for (const w of waiters) {
      expect(waits(w.events)).toBe(2);
      expect(w.requests("acquire")).toBe(3);
    }
    expect(await wakeKeysOf(name)).toEqual([]);
  });

  it("a holder that never releases wakes nobody: its waiter is back when the lease runs out", async () => {
    const name = `${prefix}crashed`;
    await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 600 });
    const waiter = recordingEdgeLock();
    const started = Date.now();
    const lease = await waiter.edgelock
      .getLock(name)
      .tryLock({ waitTime: 5_000, leaseTime: 5_000 });
    expect(lease).not.toBeNull();
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    expect(Date.now() - started).toBeLessThan(2_500);
    expect(waiter.requests("acquire")).toBe(4);
    await lease?.release();
  });

  it("the first waiter giving up tells the next, which then comes back when a crashed holder's lease runs out, not at its own bound", async () => {
    const name = `${prefix}first-leaves`;
    await expectFirstWaiterLeavingTellsNext((e) => e.getLock(name));
  });

  it("a waiter that gives up, or is aborted, unregisters: nothing of it stays in Redis", async () => {
    const name = `${prefix}gives-up`;
    const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock();
    expect(await waiter.edgelock.getLock(name).tryLock({ waitTime: 300 })).toBeNull();
    await Promise.all(waiter.background);
    expect(await wakeKeysOf(name)).toEqual([]);
    const controller = new AbortController();
    const reason = new Error("gone");
    const before = waits(waiter.events);
    const aborted = waiter.edgelock.getLock(name).lock({ signal: controller.signal });
    await waiter.until((_e, all) => waits(all) === before + 1);
    expect(await raw.zCard(waitingKey(name))).toBe(1);
    controller.abort(reason);
    await expect(aborted).rejects.toBe(reason);
    await Promise.all(waiter.background);
    expect(await wakeKeysOf(name)).toEqual([]);
    await held.release();
    expect(await wakeKeysOf(name)).toEqual([]);
  });

  it("a release hands the lock to the registered waiter: held by its owner on the message, for the claim window, then its lease", async () => {
    const name = `${prefix}hand-off`;
    const holder = recordingEdgeLock();
    const held = await holder.edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 20_000, owner: "next" });
    await waiter.until((_e, all) => waits(all) === 2);
    const released = Date.now();
    expect(await held.release()).toBe("released");
    // Straight after the release, before the waiter's answer: the lock is already its owner's.
    expect(String(await raw.hGet(name, "next"))).toBe("1");
    expect(Number(await raw.pTTL(name))).toBeLessThanOrEqual(2_000);
    const lease = await pending;
    expect(lease?.owner).toBe("next");
    // Its watchdog lease confirms the full lease within the claim window (the renewal drops the
    // hand-off mark), once a third of it is left: not before about 1.33 s (a hold shorter than
    // that releases first and never renews).
    await waiter.until((e) => e.type === "renew" && e.renewed);
    expect(Date.now() - released).toBeGreaterThan(1_150);
    expect(Number(await raw.pTTL(name))).toBeGreaterThan(2_000);
    expect(await raw.hExists(name, "edgelock:grant")).toBe(0);
    expect(await lease?.release()).toBe("released");
    expect(await wakeKeysOf(name)).toEqual([]);
  });

  it("a hand-off released within two thirds of the claim window sends no renewal: the release is its only request", async () => {
    const name = `${prefix}hand-off-short`;
    const holder = recordingEdgeLock();
    const held = await holder.edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 9_000 });
    await waiter.until((_e, all) => waits(all) === 2);
    expect(await held.release()).toBe("released");
    const lease = await pending;
    const acquired = waiter.events.length;
    await new Promise((resolve) => setTimeout(resolve, 1_150));
    expect(await lease?.release()).toBe("released");
    expect(waiter.events.slice(acquired).map((e) => e.type)).toEqual(["release"]);
    expect(await wakeKeysOf(name)).toEqual([]);
  });

  it("scripts: a waiter's attempt confirms a hand-off made to it (hold count 1, lease TTL), never re-enters it", async () => {
    const name = `${prefix}confirm`;
    const acquire = (owner: string, id: string, waiter: string, lease = "9000") =>
      raw.eval(lockAcquire.source, {
        keys: [name, ...replayKeys(name), waitingKey(name), wakeKey(name)],
        arguments: [lease, owner, "30000", id, waiter, "30000", "1"],
      }) as Promise<number[]>;
    expect((await acquire("holder", "a".repeat(32), ""))[0]).toBe(1);
    const sub = raw.duplicate();
    await sub.connect();
    const heard: string[] = [];
    await sub.pSubscribe(`edgelock_wake:{${name}}:*`, (m) => heard.push(String(m)));
    // The waiter registers, asking for a hand-off.
    expect((await acquire("w-owner", "b".repeat(32), "hub:w1"))[0]).toBe(0);
    const released = await scriptRelease(name, "holder");
    expect(released).toBe(1);
    await expect.poll(() => heard.length).toBe(1);
    const [waiter, epoch] = (heard[0] as string).split("|");
    expect(waiter).toBe("hub:w1");
    expect(Number(await raw.pTTL(name))).toBeLessThanOrEqual(2_000);
    // Its attempt confirms: count 1 (not a re-entry), the same epoch, the TTL its lease.
    const [ok, count, confirmed] = await acquire("w-owner", "d".repeat(32), "hub:w1");
    expect([ok, count, confirmed]).toEqual([1, 1, Number(epoch)]);
    expect(Number(await raw.pTTL(name))).toBeGreaterThan(8_000);
    expect(await raw.hExists(name, "edgelock:grant")).toBe(0);
    await sub.destroy();
  });

  it("scripts: a copy of the attempt that confirmed a hand-off is a replay: it never re-enters, takes nothing once the hold is gone, and its cancel undoes the hold", async () => {
    // A wait whose confirming attempt lost its answer sends the same request again: found in a
    // fault campaign (lost and hung responses), where the copy made the hold count 2, so the
    // holder's release answered "still-held" and the lock stayed taken for its whole lease.
    const name = `${prefix}confirm-copy`;
    const acquire = (owner: string, id: string, waiter: string, lease = "9000") =>
      raw.eval(lockAcquire.source, {
        keys: [name, ...replayKeys(name), waitingKey(name), wakeKey(name)],
        arguments: [lease, owner, "30000", id, waiter, "30000", "1", "1"],
      }) as Promise<number[]>;
    const cancel = (owner: string, id: string) =>
      raw.eval(lockCancel.source, {
        keys: releaseKeys(name),
        arguments: [owner, "30000", id],
      });
    const sub = raw.duplicate();
    await sub.connect();
    const heard: string[] = [];
    await sub.pSubscribe(`edgelock_wake:{${name}}:*`, (m) => heard.push(String(m)));
    const handOff = async (lease: string) => {
      await raw.del(name);
      heard.length = 0;
      expect((await acquire("holder", randomHex(), ""))[0]).toBe(1);
      const confirmId = randomHex();
      expect((await acquire("w-owner", confirmId, "hub:w1", lease))[0]).toBe(0);
      expect(await scriptRelease(name, "holder")).toBe(1);
      await expect.poll(() => heard.length).toBe(1);
      const confirmed = await acquire("w-owner", confirmId, "hub:w1", lease);
      expect(confirmed.slice(0, 2)).toEqual([1, 1]);
      return { confirmId, epoch: confirmed[2] };
    };

    // While the hold lives, a copy answers what the confirm did: hold count 1, same epoch.
    const first = await handOff("9000");
    expect(await acquire("w-owner", first.confirmId, "hub:w1")).toEqual([1, 1, first.epoch]);
    expect(String(await raw.hGet(name, "w-owner"))).toBe("1");
    // Released: a copy takes nothing.
    expect(await scriptRelease(name, "w-owner")).toBe(1);
    expect((await acquire("w-owner", first.confirmId, "hub:w1"))[0]).toBe(-1);
    expect(await raw.exists(name)).toBe(0);

    // A lease shorter than the replay window ran out: a copy still takes nothing.
    const short = await handOff("300");
    await expect.poll(() => raw.exists(name), { timeout: 5_000 }).toBe(0);
    expect((await acquire("w-owner", short.confirmId, "hub:w1", "300"))[0]).toBe(-1);
    expect(await raw.exists(name)).toBe(0);

    // The cancel of a confirming attempt (its answer never came) undoes the hold it confirmed.
    const cancelled = await handOff("9000");
    expect(await cancel("w-owner", cancelled.confirmId)).toBe(1);
    expect(await raw.exists(name)).toBe(0);
    await sub.destroy();
  });

  it("scripts: a first waiter that leaves tells the next one (not itself, not the ones after); one that was not first tells nobody", async () => {
    const name = `${prefix}leaving-first`;
    const lockKeys = [name, `redisson_lock__channel:{${name}}`, waitingKey(name), wakeKey(name)];
    const decline = (waiter: string, owner: string) =>
      raw.eval(lockDecline.source, { keys: lockKeys, arguments: [waiter, owner, "2000", "9000"] });
    const entry = (waiter: string, owner: string) => `${waiter}|9000|${owner}`;
    const sub = raw.duplicate();
    await sub.connect();
    const heard: string[] = [];
    await sub.pSubscribe(`edgelock_wake:{${name}}:*`, (m, channel) =>
      heard.push(`${channel} ${m}`),
    );
    const lapse = Date.now() + 60_000;
    // A's bare first-attempt entry and its hand-off entry, then B's, then C's.
    await raw.zAdd(waitingKey(name), [
      { score: lapse, value: "a:1" },
      { score: lapse + 1, value: entry("a:1", "a-owner") },
      { score: lapse + 2, value: entry("b:1", "b-owner") },
      { score: lapse + 3, value: entry("c:1", "c-owner") },
    ]);
    // B is not first: its leaving tells nobody.
    expect(await decline("b:1", "b-owner")).toBe(1);
    expect(await decline("a:1", "a-owner")).toBe(1);
    await expect.poll(() => heard).toEqual([`edgelock_wake:{${name}}:c c:1`]);
    expect((await raw.zRange(waitingKey(name), 0, -1)).map(String)).toEqual([
      entry("c:1", "c-owner"),
    ]);
    await raw.del(waitingKey(name));
    await sub.destroy();
  });

  it("scripts: a call that ends gives back only a hand-off made to its own waiter, one hold of its owner", async () => {
    const name = `${prefix}decline`;
    const lockKeys = [name, `redisson_lock__channel:{${name}}`, waitingKey(name), wakeKey(name)];
    const acquire = (owner: string, id: string, waiter: string) =>
      raw.eval(lockAcquire.source, {
        keys: [name, ...replayKeys(name), waitingKey(name), wakeKey(name)],
        arguments: ["9000", owner, "30000", id, waiter, "30000", "1"],
      }) as Promise<number[]>;
    const decline = (waiter: string, owner: string) =>
      raw.eval(lockDecline.source, { keys: lockKeys, arguments: [waiter, owner, "2000", "9000"] });
    const handOffTo = async (waiter: string, owner: string) => {
      expect((await acquire("holder", randomHex(), ""))[0]).toBe(1);
      expect((await acquire(owner, randomHex(), waiter))[0]).toBe(0);
      const released = await raw.eval(lockRelease.source, {
        keys: [name, ...replayKeys(name), ...lockKeys.slice(1)],
        arguments: ["holder", "0", "30000", randomHex(), "0", "0", "2000"],
      });
      expect(released).toBe(1);
      expect(String(await raw.hGet(name, "edgelock:grant"))).toBe(waiter);
    };
    // Another waiter's decline, or one naming another owner, leaves the hand-off alone.
    await handOffTo("hub:w1", "w-owner");
    expect(await decline("hub:w2", "w-owner")).toBe(0);
    expect(await decline("hub:w1", "other")).toBe(0);
    expect(String(await raw.hGet(name, "w-owner"))).toBe("1");
    // The owner re-entered in the meantime (hold count 2): its decline takes the handed-off hold
    // only, and the re-entry keeps the lock.
    expect((await acquire("w-owner", randomHex(), ""))[1]).toBe(2);
    expect(await decline("hub:w1", "w-owner")).toBe(2);
    expect(String(await raw.hGet(name, "w-owner"))).toBe("1");
    expect(await raw.hExists(name, "edgelock:grant")).toBe(0);
    await raw.del(name);
    // A hand-off nobody took: its decline frees the lock, and a second one changes nothing.
    await handOffTo("hub:w3", "w3-owner");
    expect(await decline("hub:w3", "w3-owner")).toBe(2);
    expect(await raw.exists(name)).toBe(0);
    expect(await decline("hub:w3", "w3-owner")).toBe(0);
    expect(await wakeKeysOf(name)).toEqual([]);
    // A call that ends after its first attempt (registered as the bare waiter id, before it
    // could ask for hand-offs) is unregistered too.
    expect((await acquire("holder", randomHex(), ""))[0]).toBe(1);
    await scriptAcquire(name, "w4-owner", "hub:w4", { grant: "0" });
    expect((await raw.zRange(waitingKey(name), 0, -1)).map(String)).toEqual(["hub:w4"]);
    expect(await decline("hub:w4", "w4-owner")).toBe(1);
    expect(await raw.exists(waitingKey(name))).toBe(0);
    await raw.del(name);
  });

  it("scripts: the registry always outlives its registrations, and an entry carries the grant its waiter asks for", async () => {
    const name = `${prefix}registry-ttl`;
    const attempt = (
      owner: string,
      waiter: string,
      grant: "0" | "1",
      registered: "0" | "1",
      slot = "30000",
    ) => scriptAcquire(name, owner, waiter, { grant, registered, slot });
    const release = (owner: string) => scriptRelease(name, owner);
    const entries = async () => (await raw.zRange(waitingKey(name), 0, -1)).map(String);
    // Every registration lapses before the registry's TTL ends, and the lock's WAITERS field
    // (until when the registry is known to live) is never past that TTL.
    const expectOutlived = async () => {
      const ttl = Number(await raw.pTTL(waitingKey(name)));
      const now = Date.now();
      const lapses = (await raw.zRangeWithScores(waitingKey(name), 0, -1)).map((e) => e.score);
      if (ttl === -2) return expect(lapses).toEqual([]);
      expect(ttl).toBeGreaterThan(0);
      for (const lapse of lapses) expect(now + ttl).toBeGreaterThanOrEqual(lapse - 50);
      const known = Number(await raw.hGet(name, "edgelock:waiters"));
      expect(known - 50).toBeLessThanOrEqual(now + ttl);
    };
    expect((await attempt("holder", "", "0", "0"))[0]).toBe(1);
    // A wait's first attempt (not subscribed yet) registers the bare waiter id: a new registry.
    expect((await attempt("o1", "hub:w1", "0", "0"))[0]).toBe(0);
    expect(await entries()).toEqual(["hub:w1"]);
    await expectOutlived();
    // Subscribed, it asks for hand-offs: the entry that carries the grant takes the bare entry's
    // place (and lapse) in the registry, which keeps its TTL.
    expect((await attempt("o1", "hub:w1", "1", "1"))[0]).toBe(0);
    expect(await entries()).toEqual(["hub:w1|9000|o1"]);
    await expectOutlived();
    // Another waiter joins, with a registration longer than what the registry is known to last.
    expect((await attempt("o2", "hub:w2", "1", "0", "120000"))[0]).toBe(0);
    expect(await entries()).toEqual(["hub:w1|9000|o1", "hub:w2|9000|o2"]);
    await expectOutlived();
    expect(Number(await raw.pTTL(waitingKey(name)))).toBeGreaterThan(120_000);
    // The release hands the lock to the first; nobody hears it here (no subscriber), so the next
    // is woken as well, which empties the registry. The new incarnation keeps the WAITERS field,
    // and a new waiter makes a new registry, whose TTL that field sets at once.
    expect(await release("holder")).toBe(1);
    expect(String(await raw.hGet(name, "o1"))).toBe("1");
    expect(await raw.exists(waitingKey(name))).toBe(0);
    expect(Number(await raw.hGet(name, "edgelock:waiters"))).toBeGreaterThan(Date.now() + 100_000);
    expect((await attempt("o3", "hub:w3", "1", "0"))[0]).toBe(0);
    await expectOutlived();
    expect(Number(await raw.pTTL(waitingKey(name)))).toBeGreaterThan(100_000);
    await raw.del([name, waitingKey(name)]);
  });

  it("scripts: a busy attempt tells how many registered waiters are ahead of its waiter while the holder's lease ends before the waiter's longest block", async () => {
    const name = `${prefix}ahead`;
    // A wait's first attempt is not subscribed yet: it asks for no hand-off and may not be
    // registered; later ones ask for hand-offs and may be.
    // Each registration lapses 1 ms later than the one before (registered for 30 s + n ms), so
    // that two made in the same millisecond of server time still rank in the order made.
    let slot = 30_000;
    const attempt = (owner: string, waiter: string, registered: "0" | "1") =>
      scriptAcquire(name, owner, waiter, { registered, grant: registered, slot: `${slot++}` });
    // {0, pttl, jvm, now, ahead}
    const ahead = async (owner: string, waiter: string, registered: "0" | "1") => {
      const reply = await attempt(owner, waiter, registered);
      expect(reply[0]).toBe(0);
      return reply[4];
    };
    expect((await attempt("holder", "", "0"))[0]).toBe(1);
    // A new registry: nobody ahead. Its subscribed attempt empties and makes it again: still.
    expect(await ahead("o1", "hub:w1", "0")).toBe(0);
    expect(await ahead("o1", "hub:w1", "1")).toBe(0);
    // Joining a registry that exists: a first attempt (no hand-off asked) reads no rank, "one or
    // more"; one asking for hand-offs reads it (the holder's 9 s lease ends before its 10 s
    // longest block, a third of its registration), behind every registration there.
    expect(await ahead("o2", "hub:w2", "0")).toBe(1);
    expect(await ahead("o3", "hub:w3", "0")).toBe(1);
    // Subscribed, each takes its first attempt's place: registration order is arrival order.
    expect(await ahead("o2", "hub:w2", "1")).toBe(1);
    expect(await ahead("o3", "hub:w3", "1")).toBe(2);
    expect((await raw.zRange(waitingKey(name), 0, -1)).map(String)).toEqual([
      "hub:w1|9000|o1",
      "hub:w2|9000|o2",
      "hub:w3|9000|o3",
    ]);
    // Keeping its place, a waiter reads its rank.
    expect(await ahead("o3", "hub:w3", "1")).toBe(2);
    expect(await ahead("o2", "hub:w2", "1")).toBe(1);
    expect(await ahead("o1", "hub:w1", "1")).toBe(0);
    // A holder whose lease outlasts that block: a new registration reads no rank.
    await raw.pExpire(name, 25_000);
    expect(await ahead("o4", "hub:w4", "1")).toBe(1);
    expect(await raw.zRank(waitingKey(name), "hub:w4|9000|o4")).toBe(3);
    await raw.del([name, waitingKey(name)]);
  });

  it("scripts: a late copy of a waiting call's busy attempt that takes the freed lock makes the call's next attempt hold it once, not twice", async () => {
    const name = `${prefix}late-busy-copy`;
    const acquireWith = (owner: string, id: string, waiter: string) =>
      raw.eval(lockAcquire.source, {
        keys: [name, ...replayKeys(name), waitingKey(name), wakeKey(name)],
        arguments: ["9000", owner, "30000", id, waiter, "30000", "1", "1"],
      }) as Promise<number[]>;
    // The attempts of one waiting call share the last 8 hex digits of their ids.
    const tag = "0badcafe";
    const busy = randomHex(12) + tag;
    expect((await scriptAcquire(name, "holder", ""))[0]).toBe(1);
    expect((await acquireWith("w-owner", busy, "hub:w1"))[0]).toBe(0);
    // The holder's lease runs out; then a copy of the busy attempt arrives and takes the lock.
    await raw.del(name);
    expect((await acquireWith("w-owner", busy, "hub:w1"))[0]).toBe(1);
    // The call's next attempt finds the hold that copy made: it is the call's, held once.
    const next = await acquireWith("w-owner", randomHex(12) + tag, "hub:w1");
    expect(next.slice(0, 2)).toEqual([1, 1]);
    expect(String(await raw.hGet(name, "w-owner"))).toBe("1");
    // Another call of the same owner (another tag) re-enters, as Redisson's re-entry does.
    const other = await acquireWith("w-owner", randomHex(), "hub:w2");
    expect(other.slice(0, 2)).toEqual([1, 2]);
    await raw.del([name, waitingKey(name)]);
  });

  it("scripts: a release hands the lock to the first live registration, never to one that lapsed ahead of it", async () => {
    const name = `${prefix}lapsed-first`;
    const sub = raw.duplicate();
    await sub.connect();
    const heard: string[] = [];
    await sub.pSubscribe(`${wakeKey(name)}:*`, (m) => heard.push(String(m)));
    expect((await scriptAcquire(name, "holder", ""))[0]).toBe(1);
    // w1 registered first, for 50 ms only: its call is gone by the release; w2 is live.
    expect((await scriptAcquire(name, "o1", "hub:w1", { slot: "50", registered: "1" }))[0]).toBe(0);
    expect((await scriptAcquire(name, "o2", "hub:w2", { registered: "1" }))[0]).toBe(0);
    expect((await raw.zRange(waitingKey(name), 0, -1)).map(String)).toEqual([
      "hub:w1|9000|o1",
      "hub:w2|9000|o2",
    ]);
    await sleep(100);
    expect(await scriptRelease(name, "holder")).toBe(1);
    expect(String(await raw.hGet(name, "edgelock:grant"))).toBe("hub:w2");
    expect(String(await raw.hGet(name, "o2"))).toBe("1");
    expect(await raw.hExists(name, "o1")).toBe(0);
    await expect.poll(() => heard.filter((m) => m.startsWith("hub:w2|")).length).toBe(1);
    expect(heard.filter((m) => m.startsWith("hub:w1"))).toEqual([]);
    await sub.close();
    await raw.del([name, waitingKey(name)]);
  });

  it("scripts: a release that hands the lock over tells Redisson's channel nothing; one that frees it publishes", async () => {
    const name = `${prefix}redisson-quiet`;
    const sub = raw.duplicate();
    await sub.connect();
    const heard: string[] = [];
    await sub.subscribe(`redisson_lock__channel:{${name}}`, (m) => heard.push(String(m)));
    const attempt = (owner: string, waiter: string) => scriptAcquire(name, owner, waiter);
    const release = (owner: string) => scriptRelease(name, owner);
    expect((await attempt("holder", ""))[0]).toBe(1);
    expect((await attempt("w-owner", "hub:w1"))[0]).toBe(0);
    expect(await release("holder")).toBe(1);
    expect(String(await raw.hGet(name, "w-owner"))).toBe("1");
    // The hand-off's own message went to the waiter's channel; then the waiter's release frees
    // the lock (nobody else is registered), which Redisson's channel hears.
    expect(await release("w-owner")).toBe(1);
    expect(await raw.exists(name)).toBe(0);
    // Pub/sub keeps order: the one message is the second release's.
    await raw.publish(`redisson_lock__channel:{${name}}`, "end");
    await expect.poll(() => heard.length).toBe(2);
    expect(heard).toEqual(["0", "end"]);
    await sub.close();
  });

  it("a waiter handed the lock that nobody hears (its client is gone) holds up the next one for the claim window, not for the next one's own bound", async () => {
    const name = `${prefix}gone-hand-off`;
    const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
    // A waiter whose client died while registered, asking for a hand-off: no stream listens on
    // its channel, and its call will never decline.
    const gone = await scriptAcquire(name, "gone-owner", "gone:w1", { registered: "1" });
    expect(gone[0]).toBe(0);
    const next = recordingEdgeLock();
    const pending = next.edgelock.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 5_000 });
    await next.until((_e, all) => waits(all) === 2);
    const released = Date.now();
    expect(await held.release()).toBe("released");
    expect(String(await raw.hGet(name, "gone-owner"))).toBe("1");
    // Woken beside the unheard hand-off, the next waiter finds the lock held for the claim
    // window (2 s) and takes it when that ends; at its own bound it would be back after 15 s.
    const lease = await pending;
    expect(lease).not.toBeNull();
    const waited = Date.now() - released;
    expect(waited).toBeGreaterThanOrEqual(1_900);
    expect(waited).toBeLessThan(5_000);
    expect(await lease?.release()).toBe("released");
    expect(await wakeKeysOf(name)).toEqual([]);
  });

  it("a lease shorter than the claim window is handed over for exactly that lease", async () => {
    const name = `${prefix}short-hand-off`;
    const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 800 });
    await waiter.until((_e, all) => waits(all) === 2);
    await held.release();
    expect(Number(await raw.pTTL(name))).toBeLessThanOrEqual(800);
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect((lease?.expiresAt ?? 0) - Date.now()).toBeLessThanOrEqual(800);
    await expect.poll(() => raw.exists(name), { timeout: 2_000 }).toBe(0);
  });

  it("the fenced lock's waiters are woken, not handed the lock: each grant takes a token", async () => {
    const name = `${prefix}fenced-wake`;
    const held = await recordingEdgeLock().edgelock.getFencedLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getFencedLock(name).tryLock({ waitTime: 20_000 });
    await waiter.until((_e, all) => waits(all) === 2);
    await held.release();
    const lease = await pending;
    expect(lease?.fencingToken).toBeGreaterThan(held.fencingToken);
    // Busy attempt, subscription, registering attempt, and the attempt that takes the token.
    expect(waiter.requests("acquire")).toBe(4);
    await lease?.release();
  });

  it("a registered waiter nobody listens for is skipped: the release wakes the next live one", async () => {
    const name = `${prefix}dead-waiter`;
    const holder = recordingEdgeLock();
    await holder.edgelock.getLock(name).lock({ leaseTime: 20_000, owner: "holder" });
    // A waiter registers with a busy attempt, then dies without subscribing.
    const reply = await raw.eval(lockAcquire.source, {
      keys: [name, ...replayKeys(name), waitingKey(name), wakeKey(name)],
      arguments: ["5000", "dead", "30000", "a".repeat(32), "dead0000:w", "30000"],
    });
    expect((reply as number[])[0]).toBe(0);
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 5_000 });
    await expect.poll(() => raw.zCard(waitingKey(name)), { timeout: 3_000 }).toBe(2);
    const released = Date.now();
    await holder.edgelock.getLock(name).unlock("holder");
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect(Date.now() - released).toBeLessThan(1_000);
    // The dead registration went with the PUBLISH that reached nobody.
    expect(await raw.zCard(waitingKey(name))).toBe(0);
    await lease?.release();
  });

  it('with wait: "poll" a waiter registers nothing, subscribes to nothing, and polls', async () => {
    const name = `${prefix}poll`;
    const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock({ wait: "poll" });
    const pending = waiter.edgelock.getLock(name).lock({ leaseTime: 5_000 });
    await waiter.until((_e, all) => waits(all) === 3);
    expect(await wakeKeysOf(name)).toEqual([]);
    await held.release();
    await (await pending).release();
    expect(waiter.requests("acquire")).toBeGreaterThan(3);
    expect(waiter.events.some((e) => e.type === "wait-strategy")).toBe(false);
  });

  it("a wait does not hold up the client's other requests (auto-pipelining on)", async () => {
    const rec = recordingEdgeLock();
    const blocker = await rec.edgelock.getLock(`${prefix}blocked`).lock({ leaseTime: 20_000 });
    const other = await rec.edgelock.getLock(`${prefix}other`).lock({ leaseTime: 20_000 });
    const pending = rec.edgelock
      .getLock(`${prefix}blocked`)
      .tryLock({ waitTime: 10_000, owner: "second" });
    await rec.until((_e, all) => waits(all) === 2);
    const started = Date.now();
    await other.renew();
    expect(Date.now() - started).toBeLessThan(1_000);
    await blocker.release();
    await (await pending)?.release();
    await other.release();
  });

  describe("a waiter whose budget runs out", () => {
    it("unregisters before it answers null, so a release right after cannot hand it the lock", async () => {
      // 150 ms per request: a leave left to the background would still be on its way.
      bridge = await startPrivateBridge({ delayMs: 150 });
      const name = `${prefix}gave-up`;
      const holder = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
      const waiter = recordingEdgeLock({}, bridge.redis());
      const lease = await waiter.edgelock
        .getLock(name)
        .tryLock({ waitTime: 1_000, leaseTime: 5_000 });
      expect(lease).toBeNull();
      expect(await raw.zCard(waitingKey(name))).toBe(0);
      expect(await holder.release()).toBe("released");
      expect(await raw.exists(name)).toBe(0);
      expect(waiter.background).toHaveLength(0);
    });

    it("a busy attempt applied but never answered leaves no registration behind when the call fails", async () => {
      // The waiter's first attempt registers it in Redis, then every answer is lost for the
      // call's whole wait: the call ends with an ambiguous TransportError, and no release may
      // later wake or hand the lock to it.
      bridge = await startPrivateBridge();
      const name = `${prefix}lost-answer`;
      const holder = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
      const waiter = recordingEdgeLock(
        { requestTimeout: 300 },
        bridge.redis({ retry: { retries: 0 } }),
      );
      bridge.bridge.setFaults({
        rules: [
          // The first attempt is applied (the waiter registered) and never answered.
          { action: "lose", mode: "hang", match: "evalsha", hangMs: 2_000, times: 1 },
          // Nothing sent after it reaches Redis while the faults stand (its copies, the cancel,
          // the unregistration), so the registration is still there when the call has failed:
          // an unregistration applied at once would race the check below.
          { action: "fail", mode: "hang", match: "evalsha", hangMs: 2_000 },
        ],
      });
      const call = waiter.edgelock.getLock(name).tryLock({ waitTime: 600, leaseTime: 5_000 });
      await expect(call).rejects.toMatchObject({ name: "TransportError", ambiguous: true });
      expect(await raw.zCard(waitingKey(name))).toBe(1);
      bridge.bridge.clearFaults();
      await Promise.all(waiter.background);
      expect(await raw.zCard(waitingKey(name))).toBe(0);
      expect(await holder.release()).toBe("released");
      expect(await raw.exists(name)).toBe(0);
    });
    it("a hand-off that reaches a call after it ended is given back: the next waiter has the lock at once, not after the claim window", async () => {
      // The ended call's unregistration reaches Redis 500 ms late, after the release that handed
      // it the lock; nobody hears that message, so until it is given back the lock is kept from
      // the next waiter (for the claim window, 2 s, before decline.lua).
      bridge = await startPrivateBridge();
      const name = `${prefix}ended-hand-off`;
      const holder = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
      const ended = recordingEdgeLock({}, bridge.redis());
      const controller = new AbortController();
      const reason = new Error("gone");
      const endedCall = ended.edgelock
        .getLock(name)
        .tryLock({ waitTime: 20_000, leaseTime: 5_000, owner: "ended", signal: controller.signal });
      await ended.until((_e, all) => waits(all) === 2);
      const next = recordingEdgeLock();
      const nextCall = next.edgelock
        .getLock(name)
        .tryLock({ waitTime: 20_000, leaseTime: 5_000, owner: "next" });
      await next.until((_e, all) => waits(all) === 2);
      // Both registrations ask for hand-offs: each carries its grant ("<waiter>|<leaseMs>|<owner>").
      expect(
        (await raw.zRange(waitingKey(name), 0, -1)).map((entry) =>
          String(entry).split("|").slice(1),
        ),
      ).toEqual([
        ["5000", "ended"],
        ["5000", "next"],
      ]);
      bridge.bridge.setFaults({ delayMs: 500 });
      controller.abort(reason);
      await expect(endedCall).rejects.toBe(reason);
      const released = Date.now();
      expect(await holder.release()).toBe("released");
      // The first registered waiter was handed the lock: the call that has ended.
      expect(String(await raw.hGet(name, "ended"))).toBe("1");
      await Promise.all(ended.background);
      const lease = await nextCall;
      expect(lease?.owner).toBe("next");
      expect(Date.now() - released).toBeLessThan(5_000);
      expect(await raw.hExists(name, "ended")).toBe(0);
      expect(await lease?.release()).toBe("released");
      expect(await wakeKeysOf(name)).toEqual([]);
    });

    it("a wake-up that reaches a call after it ended is passed on: the next waiter is woken when that call unregisters, not at its own bound", async () => {
      // Fenced-lock waiters are only woken. The ended call's client still has its stream open
      // (it closes 1 s after the last wait), so the release's wake-up counts as heard and goes
      // to nobody else; the call's unregistration reaches Redis 500 ms late.
      bridge = await startPrivateBridge();
      const name = `${prefix}ended-wake`;
      const holder = await recordingEdgeLock()
        .edgelock.getFencedLock(name)
        .lock({ leaseTime: 20_000 });
      const ended = recordingEdgeLock({}, bridge.redis());
      const controller = new AbortController();
      const reason = new Error("gone");
      const endedCall = ended.edgelock
        .getFencedLock(name)
        .tryLock({ waitTime: 20_000, leaseTime: 5_000, signal: controller.signal });
      await ended.until((_e, all) => waits(all) === 2);
      const next = recordingEdgeLock();
      const nextCall = next.edgelock
        .getFencedLock(name)
        .tryLock({ waitTime: 20_000, leaseTime: 5_000 });
      await next.until((_e, all) => waits(all) === 2);
      expect(await raw.zCard(waitingKey(name))).toBe(2);
      bridge.bridge.setFaults({ delayMs: 500 });
      controller.abort(reason);
      await expect(endedCall).rejects.toBe(reason);
      const released = Date.now();
      expect(await holder.release()).toBe("released");
      // The release woke the first registered waiter only: the call that has ended.
      expect(await raw.zCard(waitingKey(name))).toBe(1);
      await Promise.all(ended.background);
      const lease = await nextCall;
      expect(lease).not.toBeNull();
      expect(Date.now() - released).toBeLessThan(5_000);
      expect(await lease?.release()).toBe("released");
      expect(await raw.exists(waitingKey(name))).toBe(0);
    });
  });

  describe("a hand-off's confirming renewal", () => {
    it("that hangs is abandoned in time for a second try: the lease is kept", async () => {
      // The holder of the hand-off talks through a bridge whose next EVALSHA (its confirming
      // renewal, a third of the claim window before the end) never answers. With the renewal's
      // usual time limit (a sixth of the 9 s lease: 1.5 s) it would still be waiting when the
      // claim window ends; bounded by half of what is left, a second try confirms it.
      bridge = await startPrivateBridge();
      const name = `${prefix}confirm-hangs`;
      const holder = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
      const waiter = recordingEdgeLock({}, bridge.redis());
      const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 9_000 });
      await waiter.until((_e, all) => waits(all) === 2);
      expect(await holder.release()).toBe("released");
      const lease = await pending;
      bridge.bridge.setFaults({
        rules: [{ action: "fail", mode: "hang", match: "evalsha", times: 1 }],
      });
      await waiter.until((e) => e.type === "renew" && e.renewed);
      expect(lease?.ended).toBe(false);
      expect(Number(await raw.pTTL(name))).toBeGreaterThan(2_000);
      expect(await lease?.release()).toBe("released");
    });
  });
});
