/**
 * Wake-ups of the reentrant lock's waiters: a busy attempt registers the waiter, the release that
 * frees the lock pushes one token, and the waiter blocked longest (BLPOP) attempts again at once.
 * The lock stays non-fair; what changes is the cost and latency of a wait.
 */
import { afterEach, describe, expect, it } from "vitest";
import { lockAcquire } from "../../../src/lua.gen.js";
import {
  keyPrefix,
  type PrivateBridge,
  startPrivateBridge,
  useRawRedis,
} from "../../support/env.js";
import { recordingEdgeLock, replayKeys } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();

const waitingKey = (name: string) => `edgelock_waiting:{${name}}`;
const wakeKey = (name: string) => `edgelock_wake:{${name}}`;
/** Keys of `name` other than the lock itself and its replay records. */
const wakeKeysOf = async (name: string) =>
  (await raw.keys(`*${name}*`))
    .map(String)
    .filter((k) => k !== name && !replayKeys(name).includes(k))
    .sort();

describe("reentrant lock wake-ups", () => {
  it("a waiter behind a long hold is woken by the release: one attempt, one wait, one attempt", async () => {
    const name = `${prefix}woken`;
    const holder = recordingEdgeLock();
    const held = await holder.edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 5_000 });
    await waiter.until((e) => e.type === "wait");
    expect(await raw.zCard(waitingKey(name))).toBe(1);
    const released = Date.now();
    expect(await held.release()).toBe("released");
    const lease = await pending;
    // A poll would come back after up to a second; a wait that ran out, after 15 s.
    expect(Date.now() - released).toBeLessThan(1_000);
    expect(lease).not.toBeNull();
    expect(waiter.requests("acquire")).toBe(3);
    expect(waiter.events.filter((e) => e.type === "wait")).toHaveLength(1);
    // The acquiring attempt unregistered the waiter, and its token was consumed.
    expect(await wakeKeysOf(name)).toEqual([]);
    await lease?.release();
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
    await expect.poll(() => raw.zCard(waitingKey(name)), { timeout: 3_000 }).toBe(3);
    await held.release();
    await Promise.all(done);
    // A waiter woken for nothing would have attempted again and waited a second time.
    for (const w of waiters) {
      expect(w.events.filter((e) => e.type === "wait")).toHaveLength(1);
      expect(w.requests("acquire")).toBe(3);
    }
    expect(await wakeKeysOf(name)).toEqual([]);
  });

  it("a holder that never releases wakes nobody: its waiter is back when the lease runs out", async () => {
    const name = `${prefix}crashed`;
    await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 400 });
    const waiter = recordingEdgeLock();
    const started = Date.now();
    const lease = await waiter.edgelock
      .getLock(name)
      .tryLock({ waitTime: 5_000, leaseTime: 5_000 });
    expect(lease).not.toBeNull();
    expect(Date.now() - started).toBeGreaterThanOrEqual(350);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(waiter.requests("acquire")).toBe(3);
    await lease?.release();
  });

  it("a waiter that gives up, or is aborted, unregisters: nothing of it stays in Redis", async () => {
    const name = `${prefix}gives-up`;
    const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock();
    expect(await waiter.edgelock.getLock(name).tryLock({ waitTime: 200 })).toBeNull();
    const controller = new AbortController();
    const reason = new Error("gone");
    const aborted = waiter.edgelock.getLock(name).lock({ signal: controller.signal });
    await waiter.until((_e, all) => all.filter((x) => x.type === "wait").length === 2);
    controller.abort(reason);
    await expect(aborted).rejects.toBe(reason);
    expect(waiter.background).toHaveLength(2);
    await Promise.all(waiter.background);
    expect(await wakeKeysOf(name)).toEqual([]);
    // With nobody registered, the release pushes no token.
    await held.release();
    expect(await wakeKeysOf(name)).toEqual([]);
  });

  it("tokens never outnumber live waiters, and lapse with the registrations", async () => {
    const name = `${prefix}dead-waiter`;
    const holder = recordingEdgeLock();
    await holder.edgelock.getLock(name).lock({ leaseTime: 20_000, owner: "holder" });
    // A waiter registers for 1.5 s with a busy attempt, then dies without blocking.
    const reply = await raw.eval(lockAcquire.source, {
      keys: [name, ...replayKeys(name), waitingKey(name), wakeKey(name)],
      arguments: ["5000", "dead", "30000", "a".repeat(32), "w".repeat(32), "1500"],
    });
    expect((reply as number[])[0]).toBe(0);
    await holder.edgelock.getLock(name).unlock("holder");
    for (let i = 0; i < 3; i++) {
      const again = await holder.edgelock.getLock(name).lock({ leaseTime: 20_000 });
      await again.release();
    }
    // One token, on the dead waiter's own list, lapsing with its registration.
    const ownList = `${wakeKey(name)}:${"w".repeat(32)}`;
    expect(await raw.lLen(ownList)).toBe(1);
    const ttl = await raw.pTTL(ownList);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1_500);
  });

  it("a waiter aborted mid-block leaves no BLPOP behind that takes the next waiter's token", async () => {
    const name = `${prefix}orphan`;
    const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const quitter = recordingEdgeLock();
    const controller = new AbortController();
    const quitting = quitter.edgelock.getLock(name).lock({ signal: controller.signal });
    await quitter.until((e) => e.type === "wait");
    controller.abort(new Error("gone"));
    await expect(quitting).rejects.toThrow("gone");
    await Promise.all(quitter.background);
    // The quitter's BLPOP may still be open at Redis (its HTTP request outlives the abort).
    const waiter = recordingEdgeLock();
    const started = Date.now();
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 5_000 });
    await waiter.until((e) => e.type === "wait");
    await held.release();
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect(Date.now() - started).toBeLessThan(5_000); // not the 15 s of a stolen token
    expect(waiter.requests("acquire")).toBe(3);
    await lease?.release();
  });

  it('with wait: "poll" a waiter registers nothing and polls', async () => {
    const name = `${prefix}poll`;
    const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock({ wait: "poll" });
    const pending = waiter.edgelock.getLock(name).lock({ leaseTime: 5_000 });
    await waiter.until((_e, all) => all.filter((x) => x.type === "wait").length === 3);
    expect(await wakeKeysOf(name)).toEqual([]);
    await held.release();
    await (await pending).release();
    expect(waiter.requests("acquire")).toBeGreaterThan(3);
  });

  it("a blocked wait does not hold up the client's other requests (auto-pipelining on)", async () => {
    const rec = recordingEdgeLock();
    const blocker = await rec.edgelock.getLock(`${prefix}blocked`).lock({ leaseTime: 20_000 });
    const other = await rec.edgelock.getLock(`${prefix}other`).lock({ leaseTime: 20_000 });
    const pending = rec.edgelock
      .getLock(`${prefix}blocked`)
      .tryLock({ waitTime: 10_000, owner: "second" });
    await rec.until((e) => e.type === "wait");
    // The BLPOP is in flight on this client: a renewal shares no HTTP request with it.
    const started = Date.now();
    await other.renew();
    expect(Date.now() - started).toBeLessThan(1_000);
    await blocker.release();
    await (await pending)?.release();
    await other.release();
  });

  describe("when a wait fails", () => {
    let bridge: PrivateBridge;
    afterEach(async () => {
      await bridge?.close();
    });

    it("a waiter whose BLPOP fails sleeps with backoff instead, and still acquires", async () => {
      bridge = await startPrivateBridge({ rules: [{ action: "fail", match: "blpop" }] });
      const name = `${prefix}blpop-fails`;
      const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
      const waiter = recordingEdgeLock({}, bridge.redis({ retry: { retries: 0 } }));
      const pending = waiter.edgelock.getLock(name).lock({ leaseTime: 5_000 });
      // Failed waits do not turn into a hot loop of attempts: each is followed by a backoff
      // sleep (a second, shorter `wait` event) before the next attempt.
      await waiter.until((_e, all) => all.filter((x) => x.type === "wait").length === 6);
      const waits = waiter.events.flatMap((e) => (e.type === "wait" ? [e.durationMs] : []));
      expect(waits.filter((ms) => ms < 1_000)).toHaveLength(3);
      expect(bridge.bridge.stats().byCommand.blpop).toBe(3);
      await held.release();
      await (await pending).release();
    });
  });
});
