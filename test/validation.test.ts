import { describe, expect, it } from "vitest";
import { renewLeasesOf } from "../src/client.js";
import { EdgeLock } from "../src/index.js";
import { bridgeRedis, keyPrefix } from "./support/env.js";
import { countingRedis } from "./support/locks.js";

const prefix = keyPrefix();

describe("invalid arguments", () => {
  const { redis, calls } = countingRedis();
  const edgelock = new EdgeLock({ redis });
  const lock = edgelock.getLock(`${prefix}valid`);

  it.each([
    ["empty name", () => edgelock.getLock(""), RangeError, /`name` must be 1 to 512/],
    ["long name", () => edgelock.getLock("x".repeat(513)), RangeError, /1 to 512/],
    ["name with {", () => edgelock.getLock("a{b"), RangeError, /must not contain "\{"/],
    ["name with }", () => edgelock.getLock("a}b"), RangeError, /hash-tag/],
    ["non-string name", () => edgelock.getLock(42 as never), TypeError, /`name` must be a string/],
  ])("getLock: %s", (_, call, type, message) => {
    expect(call).toThrow(type);
    expect(call).toThrow(message);
  });

  it.each([
    ["leaseTime 0", { leaseTime: 0 }, RangeError, /`leaseTime`/],
    ["negative leaseTime", { leaseTime: -1 }, RangeError, /`leaseTime`/],
    ["fractional leaseTime", { leaseTime: 1.5 }, RangeError, /`leaseTime` must be an integer/],
    ["NaN leaseTime", { leaseTime: Number.NaN }, RangeError, /`leaseTime`/],
    ["Infinity leaseTime", { leaseTime: Number.POSITIVE_INFINITY }, RangeError, /`leaseTime`/],
    ["leaseTime above one day", { leaseTime: 86_400_001 }, RangeError, /86400000/],
    ["string leaseTime", { leaseTime: "10s" }, TypeError, /`leaseTime` must be a number/],
    ["negative waitTime", { waitTime: -5 }, RangeError, /`waitTime`/],
    ["fractional waitTime", { waitTime: 0.5 }, RangeError, /`waitTime`/],
    ["non-finite waitTime", { waitTime: Number.POSITIVE_INFINITY }, RangeError, /`waitTime`/],
    ["waitTime above one day", { waitTime: 86_400_001 }, RangeError, /`waitTime`/],
    ["empty owner", { owner: "" }, RangeError, /`owner` must be 1 to 200/],
    ["long owner", { owner: "o".repeat(201) }, RangeError, /`owner`/],
    ["reserved owner", { owner: "edgelock:epoch" }, RangeError, /must not be "edgelock:epoch"/],
    ["reserved owner", { owner: "edgelock:by" }, RangeError, /must not be "edgelock:by"/],
    ["reserved owner", { owner: "edgelock:partial" }, RangeError, /must not be "edgelock:partial"/],
    ["reserved owner", { owner: "edgelock:token" }, RangeError, /must not be "edgelock:token"/],
    ["numeric owner", { owner: 7 }, TypeError, /`owner` must be a string/],
    ["bad signal", { signal: {} }, TypeError, /`signal` must be an AbortSignal/],
    ["bad keepAlive", { keepAlive: "forever" }, TypeError, /`keepAlive`/],
    [
      "keeper without maxHoldTime",
      { keepAlive: { keeper: { getByName: () => ({}) } } },
      TypeError,
      /keepAlive.maxHoldTime/,
    ],
    [
      "keeper with maxHoldTime 0",
      { keepAlive: { maxHoldTime: 0 } },
      RangeError,
      /keepAlive.maxHoldTime/,
    ],
    [
      "keeper option with no keeper configured",
      { keepAlive: { maxHoldTime: 1_000 } },
      TypeError,
      /keepAlive.keeper/,
    ],
    ["unknown option (unit typo)", { waitMs: 100 }, TypeError, /unknown option `waitMs`/],
    ["options not an object", "fast", TypeError, /options must be an object/],
  ])("tryLock: %s", async (_, options, type, message) => {
    const error = await lock.tryLock(options as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(type);
    expect((error as Error).message).toMatch(message);
    expect(calls()).toBe(0);
  });

  it("lock, unlock, queries and lease methods validate too", async () => {
    await expect(lock.lock({ waitTime: 5 } as never)).rejects.toThrow(/unknown option `waitTime`/);
    await expect(lock.lock({ leaseTime: 0 })).rejects.toThrow(RangeError);
    await expect(lock.unlock("")).rejects.toThrow(RangeError);
    await expect(lock.unlock(undefined as never)).rejects.toThrow(TypeError);
    await expect(lock.isHeldBy("")).rejects.toThrow(RangeError);
    await expect(lock.getHoldCount(5 as never)).rejects.toThrow(TypeError);
    await expect(edgelock.withLock(`${prefix}w`, () => 1, { waitTime: -1 })).rejects.toThrow(
      RangeError,
    );
    await expect(edgelock.withLock(`${prefix}w`, "fn" as never)).rejects.toThrow(
      /`fn` must be a function/,
    );
    await expect(
      edgelock.withLock(`${prefix}w`, () => 1, { onLeaseLost: "ignore" as never }),
    ).rejects.toThrow(new TypeError('`onLeaseLost` must be "throw" or "return"'));
    const renew = (l: { name: string; owner: string; leaseTime: number }) =>
      renewLeasesOf(edgelock, [l]);
    await expect(renew({ name: "{x}", owner: "o", leaseTime: 1 })).rejects.toThrow(RangeError);
    await expect(renew({ name: "n", owner: "", leaseTime: 1 })).rejects.toThrow(/`lease.owner`/);
    await expect(renew({ name: "n", owner: "o", leaseTime: 0 })).rejects.toThrow(
      /`lease.leaseTime`/,
    );
    expect(calls()).toBe(0);
  });

  it("restoreLease refuses anything that is not a serialized lease", () => {
    expect(() => edgelock.restoreLease("not json")).toThrow(TypeError);
    expect(() => edgelock.restoreLease({} as never)).toThrow(/unknown lease format/);
    const good = {
      v: 1 as const,
      kind: "lock" as const,
      name: `${prefix}r`,
      owner: "a:b",
      id: "0".repeat(32),
      leaseTime: 1_000,
      watchdog: false,
      expiresAt: Date.now(),
    };
    expect(edgelock.restoreLease(good).owner).toBe("a:b");
    expect(edgelock.restoreLease(JSON.stringify(good)).name).toBe(good.name);
    expect(() => edgelock.restoreLease({ ...good, name: "a{b" })).toThrow(RangeError);
    expect(() => edgelock.restoreLease({ ...good, id: "xyz" })).toThrow(/lease.id/);
    expect(() => edgelock.restoreLease({ ...good, leaseTime: 0 })).toThrow(RangeError);
    expect(() => edgelock.restoreLease({ ...good, owner: "" })).toThrow(RangeError);
    expect(calls()).toBe(0);
  });

  it("lease.renew validates its leaseTime before any request", async () => {
    const { redis: r2, calls: calls2 } = countingRedis();
    const lease = new EdgeLock({ redis: r2 }).restoreLease({
      v: 1,
      kind: "lock",
      name: `${prefix}renew`,
      owner: "a:b",
      id: "1".repeat(32),
      leaseTime: 1_000,
      watchdog: false,
      expiresAt: Date.now(),
    });
    await expect(lease.renew(0)).rejects.toThrow(RangeError);
    await expect(lease.renew(1.5)).rejects.toThrow(RangeError);
    expect(calls2()).toBe(0);
  });
});

describe("EdgeLock options", () => {
  const redis = bridgeRedis();
  it.each([
    ["no options", undefined, TypeError, /`redis` must be an @upstash\/redis client/],
    ["options not an object", "redis://x", TypeError, /options must be an object/],
    ["no redis", {}, TypeError, /`redis` must be an @upstash\/redis client/],
    ["redis without eval", { redis: {} }, TypeError, /`redis`/],
    ["empty clientId", { redis, clientId: "" }, RangeError, /`clientId`/],
    ["numeric clientId", { redis, clientId: 5 }, TypeError, /`clientId` must be a string/],
    ["watchdogTimeout below 100", { redis, watchdogTimeout: 99 }, RangeError, /`watchdogTimeout`/],
    [
      "fractional watchdogTimeout",
      { redis, watchdogTimeout: 1000.5 },
      RangeError,
      /`watchdogTimeout`/,
    ],
    ["requestTimeout below 10", { redis, requestTimeout: 9 }, RangeError, /`requestTimeout`/],
    ["requestTimeout as text", { redis, requestTimeout: "3s" }, TypeError, /`requestTimeout`/],
    ["replayWindow below 1000", { redis, replayWindow: 999 }, RangeError, /`replayWindow`/],
    ["fractional replayWindow", { redis, replayWindow: 1000.5 }, RangeError, /`replayWindow`/],
    ["bad backoff", { redis, backoff: { maxDelay: 0 } }, RangeError, /backoff.maxDelay/],
    ["bad onEvent", { redis, onEvent: "log" }, TypeError, /`onEvent` must be a function/],
    ["bad waitUntil", { redis, waitUntil: 1 }, TypeError, /`waitUntil` must be a function/],
    ["non-boolean cluster", { redis, cluster: "yes" }, TypeError, /`cluster` must be a boolean/],
    ["bad keeper", { redis, keeper: {} }, TypeError, /`keeper`/],
    ["unknown option", { redis, leaseMs: 5 }, TypeError, /unknown option `leaseMs`/],
  ])("%s", (_, options, type, message) => {
    expect(() => new EdgeLock(options as never)).toThrow(type);
    expect(() => new EdgeLock(options as never)).toThrow(message);
  });

  it("defaults: watchdogTimeout 30 000 ms and a 128-bit random clientId", () => {
    const a = new EdgeLock({ redis });
    const b = new EdgeLock({ redis });
    expect(a.watchdogTimeout).toBe(30_000);
    expect(a.clientId).toMatch(/^[0-9a-f]{32}$/);
    expect(a.clientId).not.toBe(b.clientId);
    expect(new EdgeLock({ redis, clientId: "svc-a" }).clientId).toBe("svc-a");
  });

  it("defaults: requestTimeout 3 000 ms, replayWindow the larger of 30 000 and 10 × requestTimeout", () => {
    const a = new EdgeLock({ redis });
    expect(a.requestTimeout).toBe(3_000);
    expect(a.replayWindow).toBe(30_000);
    expect(new EdgeLock({ redis, requestTimeout: 5_000 }).replayWindow).toBe(50_000);
    expect(new EdgeLock({ redis, requestTimeout: 100, replayWindow: 2_000 }).replayWindow).toBe(
      2_000,
    );
  });
});
