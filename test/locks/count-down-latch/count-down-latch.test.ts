/**
 * Count-down latch: Redisson RCountDownLatch's behaviour (RedissonCountDownLatchTest's cases:
 * trySetCount once, getCount, countDown to zero deletes the key, await), waiters woken by the
 * count-down that opens the latch (a message on the waiter's wake channel) or polling, abort, replay safety of every mutating call,
 * argument checks, interop with Redisson's own scripts, inspect, and no key left behind.
 */
import type { Redis } from "@upstash/redis";
import { beforeAll, describe, expect, it } from "vitest";
import { TransportError } from "../../../src/index.js";
import {
  countDownLatchAwait,
  countDownLatchCountDown,
  countDownLatchDelete,
  countDownLatchInspect,
  countDownLatchTrySetCount,
  lockLeave,
} from "../../../src/lua.gen.js";
import { sentSource } from "../../../src/transport/billed.js";
import {
  REDISSON_LATCH_COUNT_DOWN,
  REDISSON_LATCH_TRY_SET_COUNT,
} from "../../fixtures/redisson.js";
import { bridgeRedis, keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import {
  isReplayRecord,
  type RecordingEdgeLock,
  recordingEdgeLock,
  replayKeys,
} from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();

// Every script in Redis's cache: each call below is one EVALSHA, so request counts are exact, and
// a lost request is the one that applies.
beforeAll(async () => {
  for (const script of [
    countDownLatchAwait,
    countDownLatchCountDown,
    countDownLatchDelete,
    countDownLatchInspect,
    countDownLatchTrySetCount,
    lockLeave,
  ]) {
    await raw.scriptLoad(sentSource(script));
  }
});

const channel = (name: string) => `redisson_countdownlatch__channel__{${name}}`;
const waitingKey = (name: string) => `edgelock_waiting:{${name}}`;
const wakeKey = (name: string) => `edgelock_wake:{${name}}`;

/** Every key of `name` in Redis: the latch itself and every `…{<name>}…` key. */
const keysOf = async (name: string) =>
  [...(await raw.keys(name)), ...(await raw.keys(`*{${name}}*`))].map(String).sort();

/** Keys of `name` besides its replay records, which expire by themselves. */
const liveKeysOf = async (name: string) =>
  (await keysOf(name)).filter((k) => !isReplayRecord(name, k));

/** A latch `name` set to count 1, through `redis` (default: a client on the shared bridge). */
async function latchOfOne(name: string, redis?: Redis) {
  const latch = recordingEdgeLock({}, redis).edgelock.getCountDownLatch(name);
  await latch.trySetCount(1);
  return latch;
}

/**
 * The waiter's call left one task in the background, its unregistration: once it ran, only the
 * latch's own key is left of `name`.
 */
async function expectUnregistered(waiter: RecordingEdgeLock, name: string): Promise<void> {
  expect(waiter.background).toHaveLength(1);
  await Promise.all(waiter.background);
  expect(await liveKeysOf(name)).toEqual([name]);
}

/** Asserts that only replay records of `name` are left, each with a TTL. */
async function expectOnlyReplayRecords(name: string): Promise<void> {
  expect(await liveKeysOf(name)).toEqual([]);
  for (const key of await keysOf(name)) expect(await raw.pTTL(key)).toBeGreaterThan(0);
}

/**
 * `redis` wrapped so that every script request (EVALSHA, EVAL) and every subscription it opens
 * is counted; with `noSubscribe` it has no `subscribe` (a client that cannot be woken).
 */
function counting(redis: Redis, noSubscribe = false) {
  const count = { scripts: 0, subscriptions: 0 };
  const proxy = new Proxy(redis, {
    get(target, key) {
      if (key === "subscribe" && noSubscribe) return undefined;
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      const fn = value as (...args: unknown[]) => unknown;
      if (key === "eval" || key === "evalsha" || key === "subscribe") {
        return (...args: unknown[]) => {
          if (key === "subscribe") count.subscriptions += 1;
          else count.scripts += 1;
          return fn.apply(target, args);
        };
      }
      return fn.bind(target);
    },
  });
  return { redis: proxy, count, total: () => count.scripts + count.subscriptions };
}

const waitsOf = (rec: RecordingEdgeLock) =>
  rec.events.flatMap((e) => (e.type === "waiting" ? [e.maxMs] : []));

/** Messages published on a latch's Redisson channel, from a SUBSCRIBE confirmed before return. */
async function listen(name: string) {
  const sub = raw.duplicate();
  await sub.connect();
  const messages: string[] = [];
  await sub.subscribe(channel(name), (m) => messages.push(String(m)));
  return { messages, close: () => sub.close() };
}

describe("count-down latch (Redisson RCountDownLatch)", () => {
  it("trySetCount sets the count once; getCount reads it; no TTL, Redisson's STRING layout", async () => {
    const name = `${prefix}set-once`;
    const latch = recordingEdgeLock().edgelock.getCountDownLatch(name);
    expect(await latch.getCount()).toBe(0);
    expect(await latch.trySetCount(3)).toBe(true);
    expect(await latch.trySetCount(5)).toBe(false);
    expect(await latch.getCount()).toBe(3);
    expect(String(await raw.get(name))).toBe("3");
    expect(await raw.pTTL(name)).toBe(-1);
    await latch.delete();
  });

  it("countDown counts to zero, deleting the key; then trySetCount works again", async () => {
    const name = `${prefix}to-zero`;
    const latch = recordingEdgeLock().edgelock.getCountDownLatch(name);
    await latch.trySetCount(2);
    expect(await latch.countDown()).toBe(1);
    expect(await latch.getCount()).toBe(1);
    expect(await latch.countDown()).toBe(0);
    expect(await latch.getCount()).toBe(0);
    expect(await raw.exists(name)).toBe(0);
    expect(await latch.trySetCount(1)).toBe(true);
    expect(await latch.countDown()).toBe(0);
    await expectOnlyReplayRecords(name);
  });

  it("countDown on a missing latch is a no-op", async () => {
    const name = `${prefix}missing`;
    const latch = recordingEdgeLock().edgelock.getCountDownLatch(name);
    expect(await latch.countDown()).toBe(0);
    expect(await latch.countDown()).toBe(0);
    expect(await raw.exists(name)).toBe(0);
    expect(await latch.getCount()).toBe(0);
    await expectOnlyReplayRecords(name);
  });

  it("await returns true at once when the count is 0: one request, nothing written", async () => {
    const name = `${prefix}open`;
    const c = counting(bridgeRedis());
    const latch = recordingEdgeLock({}, c.redis).edgelock.getCountDownLatch(name);
    expect(await latch.await()).toBe(true);
    expect(await latch.await({ waitTime: 5_000 })).toBe(true);
    expect(await latch.await({ waitTime: 0 })).toBe(true);
    expect(c.count).toEqual({ scripts: 3, subscriptions: 0 });
    expect(await keysOf(name)).toEqual([]);
  });

  it("await with a waitTime returns false when the count stays above 0, and unregisters", async () => {
    const name = `${prefix}timeout`;
    const c = counting(bridgeRedis());
    const rec = recordingEdgeLock({}, c.redis);
    const latch = rec.edgelock.getCountDownLatch(name);
    await latch.trySetCount(1);
    const before = c.count.scripts;
    const started = Date.now();
    expect(await latch.await({ waitTime: 300 })).toBe(false);
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(300 + 2_000);
    // check (registers), the subscription, check, one wait bounded by the deadline, last check;
    // then the leave, before the answer (nothing is left to the background).
    expect(c.count.subscriptions).toBe(1);
    expect(rec.background).toHaveLength(0);
    // (Three checks when the subscription took most of the 300 ms.)
    expect(c.count.scripts - before).toBeGreaterThanOrEqual(3);
    expect(c.count.scripts - before).toBeLessThanOrEqual(4);
    expect(await liveKeysOf(name)).toEqual([name]);
    // One check only, registering nothing.
    expect(await latch.await({ waitTime: 0 })).toBe(false);
    expect(await liveKeysOf(name)).toEqual([name]);
    await latch.delete();
  });

  it("a latch opened by 5 count-downs from 5 clients wakes all 8 waiters, each once", async () => {
    const name = `${prefix}five-by-eight`;
    const setter = recordingEdgeLock({}, bridge.redis()).edgelock.getCountDownLatch(name);
    expect(await setter.trySetCount(5)).toBe(true);
    const waiters = Array.from({ length: 8 }, () => {
      const c = counting(bridge.redis());
      return { c, rec: recordingEdgeLock({}, c.redis) };
    });
    await bridge.control.resetStats();
    const results: boolean[] = [];
    const waiting = waiters.map(async (w) => {
      results.push(await w.rec.edgelock.getCountDownLatch(name).await());
    });
    // Each subscribed and registered (its second `waiting` event).
    await Promise.all(waiters.map((w) => w.rec.waited(2)));
    expect(await raw.zCard(waitingKey(name))).toBe(8);
    expect((await setter.inspect()).waiters).toBe(8);
    const counters = Array.from({ length: 5 }, () =>
      recordingEdgeLock({}, bridge.redis()).edgelock.getCountDownLatch(name),
    );
    const left = await Promise.all(counters.map((latch) => latch.countDown()));
    const opened = Date.now();
    expect([...left].sort()).toEqual([0, 1, 2, 3, 4]);
    await Promise.all(waiting);
    // Woken by the messages, not by a 15 s wait running out or a poll.
    expect(Date.now() - opened).toBeLessThan(2_000);
    expect(results).toEqual(Array(8).fill(true));
    for (const w of waiters) {
      // Check, the subscription, check, one wake-up, check: no waiter polled or was woken twice.
      expect(w.c.count).toEqual({ scripts: 3, subscriptions: 1 });
      expect(waitsOf(w.rec)).toHaveLength(2);
    }
    expect((await bridge.control.stats()).byRoute.subscribe).toBe(8);
    expect(waiters.flatMap((w) => w.rec.background)).toEqual([]);
    await expectOnlyReplayRecords(name);
  });

  it("a single waiter is woken well within the block cap after the last countDown", async () => {
    const name = `${prefix}one-waiter`;
    const latch = recordingEdgeLock().edgelock.getCountDownLatch(name);
    await latch.trySetCount(2);
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getCountDownLatch(name).await({ waitTime: 20_000 });
    await waiter.waited(2);
    expect(await latch.countDown()).toBe(1);
    expect(await latch.countDown()).toBe(0);
    const opened = Date.now();
    expect(await pending).toBe(true);
    expect(Date.now() - opened).toBeLessThan(1_000);
    // The wait would have lasted up to 15 s: it was bounded by the cap, not the waitTime (the
    // first wait is the subscription's).
    expect(waitsOf(waiter)).toEqual([15_000, 15_000]);
    expect(waiter.background).toHaveLength(0);
    await expectOnlyReplayRecords(name);
  });

  it('with wait: "poll" a waiter registers nothing, sleeps with backoff, and sees the latch open', async () => {
    const name = `${prefix}poll`;
    const latch = await latchOfOne(name);
    const c = counting(bridgeRedis());
    const waiter = recordingEdgeLock(
      { wait: "poll", backoff: { initialDelay: 10, maxDelay: 100 } },
      c.redis,
    );
    const pending = waiter.edgelock.getCountDownLatch(name).await({ waitTime: 10_000 });
    await waiter.until((_e, all) => all.filter((x) => x.type === "waiting").length >= 3);
    expect(await liveKeysOf(name)).toEqual([name]);
    expect(await latch.countDown()).toBe(0);
    expect(await pending).toBe(true);
    expect(c.count.subscriptions).toBe(0);
    // Every sleep has a floor: no hot loop (one check per sleep, plus the last).
    const waits = waitsOf(waiter);
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(5);
    expect(c.count.scripts).toBeLessThanOrEqual(waits.length + 2);
    await expectOnlyReplayRecords(name);
  });

  it("a client without subscribe (cannot be woken) polls", async () => {
    const name = `${prefix}no-exec`;
    const latch = await latchOfOne(name);
    const c = counting(bridgeRedis(), true);
    const waiter = recordingEdgeLock({ backoff: { initialDelay: 10, maxDelay: 100 } }, c.redis);
    const pending = waiter.edgelock.getCountDownLatch(name).await({ waitTime: 10_000 });
    await waiter.until((_e, all) => all.filter((x) => x.type === "waiting").length >= 2);
    expect(await liveKeysOf(name)).toEqual([name]);
    await latch.countDown();
    expect(await pending).toBe(true);
    expect(c.count.subscriptions).toBe(0);
    await expectOnlyReplayRecords(name);
  });

  it("a latch key with a TTL counts as open once it expires: the waiter's block is bounded by it", async () => {
    const name = `${prefix}expiring`;
    await raw.set(name, "2");
    await raw.pExpire(name, 400);
    const waiter = recordingEdgeLock();
    const started = Date.now();
    expect(await waiter.edgelock.getCountDownLatch(name).await({ waitTime: 10_000 })).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(350);
    expect(Date.now() - started).toBeLessThan(3_000);
    const [block] = waitsOf(waiter);
    expect(block).toBeLessThanOrEqual(400 + 5);
    await expectOnlyReplayRecords(name);
  });

  it("delete opens the latch for edgelock waiters (departure from Redisson) and says whether it deleted", async () => {
    const name = `${prefix}delete`;
    const latch = recordingEdgeLock().edgelock.getCountDownLatch(name);
    expect(await latch.delete()).toBe(false);
    await latch.trySetCount(3);
    const waiters = [0, 1].map(() => recordingEdgeLock());
    const pending = waiters.map((w) => w.edgelock.getCountDownLatch(name).await());
    // Each subscribed and registered (its second `waiting` event): only a wake-up opens it before 15 s.
    await Promise.all(waiters.map((w) => w.waited(2)));
    const heard = await listen(name);
    expect(await latch.delete()).toBe(true);
    const deleted = Date.now();
    expect(await Promise.all(pending)).toEqual([true, true]);
    expect(Date.now() - deleted).toBeLessThan(2_000);
    expect(await latch.delete()).toBe(false);
    // Redisson's delete message, so JVM waiters behave as after Redisson's own delete.
    await expect.poll(() => heard.messages).toEqual(["1"]);
    await heard.close();
    await expectOnlyReplayRecords(name);
  });

  it("an aborted await rejects with the reason and leaves no waiter registered", async () => {
    const name = `${prefix}abort`;
    const latch = await latchOfOne(name);
    const rec = recordingEdgeLock();
    const controller = new AbortController();
    const reason = new Error("stop waiting");
    const pending = rec.edgelock.getCountDownLatch(name).await({ signal: controller.signal });
    await rec.until((e) => e.type === "waiting");
    expect(await raw.zCard(waitingKey(name))).toBe(1);
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    await expectUnregistered(rec, name);
    // With nobody registered, opening the latch pushes no token.
    expect(await latch.countDown()).toBe(0);
    await expectOnlyReplayRecords(name);
  });

  it("an already aborted signal rejects with its reason before any request", async () => {
    const c = counting(bridgeRedis());
    const latch = recordingEdgeLock({}, c.redis).edgelock.getCountDownLatch(`${prefix}pre-abort`);
    const reason = new Error("already");
    await expect(latch.await({ signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(c.total()).toBe(0);
  });

  it("a check whose answer is lost is sent again: the wait goes on and opens", async () => {
    const name = `${prefix}resent`;
    const latch = await latchOfOne(name, bridge.redis());
    const rec = recordingEdgeLock({}, bridge.redis({ retry: { retries: 0 } }));
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "close", match: "evalsha", times: 1 }],
    });
    const opened = rec.edgelock.getCountDownLatch(name).await({ waitTime: 10_000 });
    await expect.poll(() => raw.zCard(waitingKey(name))).toBe(1);
    expect(await latch.countDown()).toBe(0);
    expect(await opened).toBe(true);
    expect(bridge.bridge.stats().faultsInjected).toBe(1);
  });

  it("a check applied but unanswered for its whole budget rejects with the TransportError and unregisters", async () => {
    const name = `${prefix}unanswered`;
    const latch = await latchOfOne(name, bridge.redis());
    const rec = recordingEdgeLock({ requestTimeout: 300 }, bridge.redis({ retry: { retries: 0 } }));
    bridge.bridge.setFaults({ rules: [{ action: "lose", mode: "close", match: "evalsha" }] });
    const error = await rec.edgelock
      .getCountDownLatch(name)
      .await({ waitTime: 500 })
      .catch((e: unknown) => e);
    bridge.bridge.clearFaults();
    expect(error).toBeInstanceOf(TransportError);
    expect((error as TransportError).ambiguous).toBe(true);
    // The check registered the waiter before its answer was lost; the call unregistered it.
    await expectUnregistered(rec, name);
    await latch.delete();
  });

  it("an abort while the first check is in flight (it applied) rejects with the reason and unregisters", async () => {
    const name = `${prefix}abort-in-flight`;
    const latch = await latchOfOne(name, bridge.redis());
    const rec = recordingEdgeLock({}, bridge.redis({ retry: { retries: 0 } }));
    // The check is applied, then its answer never comes (the socket closes after 1 s).
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "hang", match: "evalsha", times: 1, hangMs: 1_000 }],
    });
    const controller = new AbortController();
    const reason = new Error("gave up");
    const pending = rec.edgelock.getCountDownLatch(name).await({ signal: controller.signal });
    await expect.poll(() => raw.zCard(waitingKey(name))).toBe(1);
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    bridge.bridge.clearFaults();
    expect(rec.events.filter((e) => e.type === "waiting")).toEqual([]);
    await expectUnregistered(rec, name);
    await latch.delete();
  });

  it("a key that is not a latch is a TransportError for every call", async () => {
    const name = `${prefix}not-a-latch`;
    await raw.set(name, "abc");
    const latch = recordingEdgeLock().edgelock.getCountDownLatch(name);
    await expect(latch.getCount()).rejects.toBeInstanceOf(TransportError);
    await expect(latch.inspect()).rejects.toBeInstanceOf(TransportError);
    await expect(latch.await({ waitTime: 1_000 })).rejects.toBeInstanceOf(TransportError);
    await expect(latch.countDown()).rejects.toBeInstanceOf(TransportError);
    expect(await latch.trySetCount(1)).toBe(false);
    expect(String(await raw.get(name))).toBe("abc");
    await raw.del(name);
    await raw.hSet(name, "f", "1");
    await expect(latch.getCount()).rejects.toBeInstanceOf(TransportError);
    await expect(latch.countDown()).rejects.toBeInstanceOf(TransportError);
    await raw.del(name);
  });

  it("inspect reports the count, TTL and live waiters in one read-only request", async () => {
    const name = `${prefix}inspect`;
    const c = counting(bridgeRedis());
    const latch = recordingEdgeLock({}, c.redis).edgelock.getCountDownLatch(name);
    expect(await latch.inspect()).toEqual({
      kind: "count-down-latch",
      name,
      ttl: -2,
      holders: [],
      count: 0,
      waiters: 0,
    });
    await latch.trySetCount(4);
    const waiters = [0, 1].map(() => recordingEdgeLock());
    const pending = waiters.map((w) => w.edgelock.getCountDownLatch(name).await());
    // Each subscribed and registered (its second `waiting` event).
    await Promise.all(waiters.map((w) => w.waited(2)));
    const before = c.total();
    const seen = await latch.inspect();
    expect(c.total() - before).toBe(1);
    expect(seen).toEqual({
      kind: "count-down-latch",
      name,
      ttl: -1,
      holders: [],
      count: 4,
      waiters: 2,
    });
    const keysBefore = await keysOf(name);
    await latch.inspect();
    expect(await keysOf(name)).toEqual(keysBefore);
    for (let i = 0; i < 4; i++) await latch.countDown();
    expect(await Promise.all(pending)).toEqual([true, true]);
    expect(await latch.inspect()).toMatchObject({ count: 0, ttl: -2, waiters: 0 });
  });
});

describe("replay safety", () => {
  it("trySetCount, countDown and delete applied, answer lost, resent by the client: each applies once", async () => {
    const name = `${prefix}replay`;
    const latch = recordingEdgeLock({}, bridge.redis()).edgelock.getCountDownLatch(name);
    const lose = () =>
      bridge.bridge.setFaults({
        rules: [{ action: "lose", mode: "close", match: "evalsha", times: 1 }],
      });
    await bridge.control.resetStats();
    lose();
    expect(await latch.trySetCount(3)).toBe(true); // the resent copy answers as the first
    lose();
    expect(await latch.countDown()).toBe(2);
    expect(await latch.getCount()).toBe(2);
    lose();
    expect(await latch.delete()).toBe(true);
    bridge.bridge.clearFaults();
    const stats = await bridge.control.stats();
    expect(stats.faultsInjected).toBe(3);
    // Each lost request was resent by @upstash/redis: 3 × 2 + getCount.
    expect(stats.byCommand.evalsha).toBe(7);
    expect(await raw.exists(name)).toBe(0);
  });

  it("countDown with a repeated idempotencyKey counts once and repeats its first answer", async () => {
    const name = `${prefix}idempotency-key`;
    const latch = recordingEdgeLock().edgelock.getCountDownLatch(name);
    await latch.trySetCount(4);
    // Another client, as a retry after a lost answer would come from.
    const retrier = recordingEdgeLock().edgelock.getCountDownLatch(name);
    expect(await latch.countDown({ idempotencyKey: "part-a" })).toBe(3);
    expect(await retrier.countDown({ idempotencyKey: "part-a" })).toBe(3);
    expect(await latch.getCount()).toBe(3);
    expect(await latch.countDown({ idempotencyKey: "part-b" })).toBe(2);
    // A key repeated after others counted answers what it did then, and counts nothing.
    expect(await latch.countDown({ idempotencyKey: "part-a" })).toBe(3);
    expect(await latch.getCount()).toBe(2);
    // Without a key every call counts.
    expect(await latch.countDown()).toBe(1);
    expect(await latch.countDown()).toBe(0);
    await raw.del(replayKeys(name));
  });

  it("a copy arriving after the latch changed repeats the first answer and changes nothing", async () => {
    const name = `${prefix}late-copy`;
    const keys = [name, channel(name), ...replayKeys(name)];
    const wakeKeys = [waitingKey(name), wakeKey(name)];
    const latch = recordingEdgeLock().edgelock.getCountDownLatch(name);
    await latch.trySetCount(2);
    const setId = "a".repeat(32);
    const trySet = () =>
      raw.eval(countDownLatchTrySetCount.source, { keys, arguments: ["7", "60000", setId] });
    // The first copy found the latch set: 0. After the latch opens, a late copy must not set it.
    expect(await trySet()).toBe(0);
    const downId = "b".repeat(32);
    const countDown = () =>
      raw.eval(countDownLatchCountDown.source, {
        keys: [...keys, ...wakeKeys],
        arguments: ["60000", downId],
      });
    expect(await countDown()).toBe(1);
    expect(await countDown()).toBe(1);
    expect(await latch.getCount()).toBe(1);
    expect(await latch.countDown()).toBe(0);
    expect(await trySet()).toBe(0);
    expect(await raw.exists(name)).toBe(0);
    // And a count-down copy arriving after the latch was set again counts nothing.
    await latch.trySetCount(2);
    expect(await countDown()).toBe(1);
    expect(await latch.getCount()).toBe(2);
    await latch.delete();
    await raw.del(replayKeys(name));
  });
});

describe("argument checks, before any request", () => {
  it("bad counts, options, signals and names throw TypeError / RangeError", async () => {
    const name = `${prefix}checks`;
    const c = counting(bridgeRedis());
    const { edgelock } = recordingEdgeLock({}, c.redis);
    const latch = edgelock.getCountDownLatch(name);
    const bad = latch as unknown as {
      trySetCount(n: unknown): Promise<boolean>;
      await(o: unknown): Promise<boolean>;
    };
    for (const count of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      await expect(bad.trySetCount(count), String(count)).rejects.toThrow(RangeError);
    }
    await expect(bad.trySetCount(0)).rejects.toThrow(/`count`.*a latch at 0 is open/);
    for (const count of ["3", undefined, null, 3n, {}]) {
      await expect(bad.trySetCount(count), String(count)).rejects.toThrow(TypeError);
    }
    for (const waitTime of [-1, 1.5, 86_400_001, Number.NaN]) {
      await expect(bad.await({ waitTime }), String(waitTime)).rejects.toThrow(RangeError);
    }
    await expect(bad.await({ waitTime: "10" })).rejects.toThrow(/`waitTime`/);
    await expect(bad.await({ waitTime: "10" })).rejects.toThrow(TypeError);
    await expect(bad.await({ signal: {} })).rejects.toThrow(/`signal` must be an AbortSignal/);
    await expect(bad.await({ leaseTime: 10 })).rejects.toThrow(/unknown option `leaseTime`/);
    await expect(bad.await({ leaseTime: 10 })).rejects.toThrow(TypeError);
    for (const options of [null, "x", 5, []]) {
      await expect(bad.await(options), String(options)).rejects.toThrow(TypeError);
    }
    const badName = edgelock as unknown as { getCountDownLatch(n: unknown): unknown };
    expect(() => badName.getCountDownLatch("")).toThrow(RangeError);
    expect(() => badName.getCountDownLatch("a{b}")).toThrow(RangeError);
    expect(() => badName.getCountDownLatch("x".repeat(513))).toThrow(RangeError);
    expect(() => badName.getCountDownLatch(7)).toThrow(TypeError);
    expect(c.total()).toBe(0);
    expect(await keysOf(name)).toEqual([]);
  });
});

describe("interop with Redisson", () => {
  const redissonTrySetCount = (name: string, count: number) =>
    raw.eval(REDISSON_LATCH_TRY_SET_COUNT, {
      keys: [name, channel(name)],
      arguments: ["1", String(count), "publish"],
    });
  const redissonCountDown = (name: string) =>
    raw.eval(REDISSON_LATCH_COUNT_DOWN, {
      keys: [name, channel(name)],
      arguments: ["0", "publish"],
    });

  it("a JVM client's last count-down wakes an edge waiter within a round trip (it listens on Redisson's channel)", async () => {
    const name = `${prefix}jvm-opens`;
    expect(await redissonTrySetCount(name, 1)).toBe(1);
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getCountDownLatch(name).await({ waitTime: 20_000 });
    // Checked, subscribed to Redisson's channel, checked again: waiting for its message.
    await waiter.waited(2);
    const opened = Date.now();
    await redissonCountDown(name);
    expect(await pending).toBe(true);
    // Its message, then one check; not its 15 s bound.
    expect(Date.now() - opened).toBeLessThan(400);
    await Promise.all(waiter.background);
    await expectOnlyReplayRecords(name);
  });

  it("a latch edgelock set is counted down by a JVM client; both publish Redisson's messages", async () => {
    const name = `${prefix}edge-set`;
    const heard = await listen(name);
    const latch = recordingEdgeLock().edgelock.getCountDownLatch(name);
    expect(await latch.trySetCount(2)).toBe(true);
    expect(await redissonTrySetCount(name, 9)).toBe(0); // the JVM client sees it set
    await redissonCountDown(name);
    expect(await latch.getCount()).toBe(1);
    await redissonCountDown(name);
    expect(await raw.exists(name)).toBe(0);
    expect(await latch.getCount()).toBe(0);
    expect(await latch.await({ waitTime: 0 })).toBe(true);
    // NEW_COUNT from edgelock's trySetCount, ZERO_COUNT from the JVM's last count-down.
    await expect.poll(() => heard.messages).toEqual(["1", "0"]);
    await heard.close();
    await expectOnlyReplayRecords(name);
  });

  it("a latch a JVM client set is counted down by edgelock, whose last count-down JVM waiters hear", async () => {
    const name = `${prefix}jvm-set`;
    expect(await redissonTrySetCount(name, 3)).toBe(1);
    const heard = await listen(name);
    const latch = recordingEdgeLock().edgelock.getCountDownLatch(name);
    expect(await latch.getCount()).toBe(3);
    expect(await latch.trySetCount(5)).toBe(false);
    expect(await latch.countDown()).toBe(2);
    expect(await latch.countDown()).toBe(1);
    expect(heard.messages).toEqual([]);
    expect(await latch.countDown()).toBe(0);
    await expect.poll(() => heard.messages).toEqual(["0"]);
    await heard.close();
    expect(await raw.exists(name)).toBe(0);
    expect(await redissonTrySetCount(name, 1)).toBe(1); // open again for the JVM client too
    await redissonCountDown(name);
    await expectOnlyReplayRecords(name);
  });

  it("a Redisson latch set to 0 is open for edgelock; edgelock's count-down deletes it", async () => {
    const name = `${prefix}jvm-zero`;
    expect(await redissonTrySetCount(name, 0)).toBe(1);
    const latch = recordingEdgeLock().edgelock.getCountDownLatch(name);
    expect(await latch.getCount()).toBe(0);
    expect(await latch.await({ waitTime: 1_000 })).toBe(true);
    expect(await latch.trySetCount(2)).toBe(false); // the key exists, as for Redisson
    expect(await latch.countDown()).toBe(0);
    expect(await raw.exists(name)).toBe(0);
    await expectOnlyReplayRecords(name);
  });

  it("a polling edgelock waiter sees a latch opened by a JVM count-down", async () => {
    const name = `${prefix}jvm-opens`;
    await redissonTrySetCount(name, 1);
    const waiter = recordingEdgeLock({
      wait: "poll",
      backoff: { initialDelay: 10, maxDelay: 100 },
    });
    const pending = waiter.edgelock.getCountDownLatch(name).await({ waitTime: 10_000 });
    await waiter.until((e) => e.type === "waiting");
    await redissonCountDown(name);
    expect(await pending).toBe(true);
    expect(await keysOf(name)).toEqual([]);
  });
});
