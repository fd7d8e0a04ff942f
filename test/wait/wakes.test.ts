/**
 * The client's wake-up subscriptions (src/wait/wakes.ts): push for every name, and streams that
 * end, through the real `@upstash/redis` client (its URL, token and headers; edgelock reads the
 * SSE stream of `/subscribe/<channel>` itself) and the bridge, which percent-decodes request
 * paths strictly and ends streams on command or after a set lifetime, as hosts end long
 * responses.
 */
import { createHash } from "node:crypto";
import { afterEach, describe, expect, it, vi } from "vitest";
import { keyPrefix, type PrivateBridge, startPrivateBridge, useRawRedis } from "../support/env.js";
import { type RecordingEdgeLock, recordingEdgeLock } from "../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();

const waits = (events: readonly { type: string }[]) =>
  events.filter((e) => e.type === "waiting").length;
const strategies = (w: RecordingEdgeLock) =>
  w.events.flatMap((e) => (e.type === "wait-strategy" ? [e.strategy] : []));
const sha1 = (text: string) => createHash("sha1").update(text, "utf8").digest("hex");

describe("every name's waiters are woken by push", () => {
  // Each would be cut, ended, decoded or split on its way through a REST path as it is.
  const names = ["a/b", "a?b=1", "a#b", "50%off", "a%41", "a,b", "tab\there", "line\nbreak"];
  // Carried as they are (fetch escapes them, the service decodes them).
  const plain = ["a:b c", "zürich ✓ 東京"];

  for (const suffix of [...names, ...plain]) {
    it(`${JSON.stringify(suffix)}: the waiter subscribes, is handed the lock by the release's message, and listens on a channel the path carries`, async () => {
      const name = `${prefix}${suffix}`;
      const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
      const waiter = recordingEdgeLock();
      const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 15_000, leaseTime: 5_000 });
      // Subscribed and registered (its second wait).
      await waiter.until((_e, all) => waits(all) === 2);
      expect(strategies(waiter)).toEqual(["subscribe"]);
      const channels = (await raw.pubSubChannels("edgelock_wake:*")).map(String);
      const digest = `edgelock_wake:${sha1(name)}:`;
      const own = `edgelock_wake:{${name}}:`;
      const expected = names.includes(suffix) ? digest : own;
      expect(channels.filter((c) => c.startsWith(expected))).toHaveLength(1);
      const released = Date.now();
      expect(await held.release()).toBe("released");
      const lease = await pending;
      expect(lease).not.toBeNull();
      // A poll would come back after up to a second; a wait at its bound, after 15 s.
      expect(Date.now() - released).toBeLessThan(1_000);
      // Busy attempt, subscription, registering attempt; the hand-off needs no other.
      expect(waiter.requests("acquire")).toBe(3);
      await lease?.release();
    });
  }

  it("the fair lock and the semaphore wake waiters of such a name by push too", async () => {
    const name = `${prefix}fair/ü?`;
    const fair = await recordingEdgeLock().edgelock.getFairLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getFairLock(name).tryLock({ waitTime: 15_000 });
    await waiter.until((_e, all) => waits(all) === 2);
    let released = Date.now();
    await fair.release();
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect(Date.now() - released).toBeLessThan(1_000);
    expect(strategies(waiter)).toEqual(["subscribe"]);
    await lease?.release();

    const semaphoreName = `${prefix}sem#1%`;
    const owner = recordingEdgeLock().edgelock.getSemaphore(semaphoreName);
    expect(await owner.trySetPermits(1)).toBe(true);
    const permit = await owner.tryAcquire();
    if (!permit) throw new Error("no permit");
    const other = recordingEdgeLock();
    const wanted = other.edgelock.getSemaphore(semaphoreName).tryAcquire({ waitTime: 15_000 });
    await other.until((_e, all) => waits(all) === 2);
    released = Date.now();
    await permit.release();
    const got = await wanted;
    expect(got).not.toBeNull();
    expect(Date.now() - released).toBeLessThan(1_000);
    expect(strategies(other)).toEqual(["subscribe"]);
    await got?.release();
    await owner.delete();
  });
});

describe("a stream that ends is noticed at once", () => {
  let bridge: PrivateBridge | undefined;
  afterEach(async () => {
    vi.restoreAllMocks();
    await bridge?.close();
    bridge = undefined;
  });

  for (const end of ["end", "cut"] as const) {
    it(`streams a host ${end === "end" ? "ends" : "cuts"} after 1.2 s: the waiter subscribes again within a second each time, and the release still hands it the lock`, async () => {
      bridge = await startPrivateBridge({ streamLifetimeMs: 1_200, streamEnd: end });
      const logged = [vi.spyOn(console, "error"), vi.spyOn(console, "warn")];
      const name = `${prefix}host-${end}`;
      const held = await recordingEdgeLock({}, bridge.redis())
        .edgelock.getLock(name)
        .lock({ leaseTime: 20_000 });
      const waiter = recordingEdgeLock({}, bridge.redis());
      const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 15_000, leaseTime: 5_000 });
      const subscribed: number[] = [];
      await waiter.until((e) => {
        if (e.type === "wait-strategy") subscribed.push(Date.now());
        return subscribed.length === 3;
      });
      // Each stream ended 1.2 s after it was confirmed; the next was confirmed well within a
      // second of that (the wait's own bound is the holder's 20 s lease, capped at 15 s).
      for (let i = 1; i < subscribed.length; i++) {
        expect((subscribed[i] as number) - (subscribed[i - 1] as number)).toBeLessThan(2_200);
      }
      expect(strategies(waiter)).toEqual(["subscribe", "subscribe", "subscribe"]);
      // Registered again on the third stream (an attempt after each confirmation).
      await waiter.until((_e, all) => waits(all) === 4);
      const released = Date.now();
      await held.release();
      const lease = await pending;
      expect(lease).not.toBeNull();
      expect(Date.now() - released).toBeLessThan(1_000);
      // Per stream: the subscription and one attempt after it; nothing else.
      expect(waiter.requests("acquire")).toBe(1 + 3 * 2);
      for (const spy of logged) expect(spy).not.toHaveBeenCalled();
      await lease?.release();
    });
  }

  it("a release while the waiter has no stream is not lost: the attempt after it subscribed again finds the lock", async () => {
    bridge = await startPrivateBridge();
    const logged = [vi.spyOn(console, "error"), vi.spyOn(console, "warn")];
    const name = `${prefix}gap`;
    const held = await recordingEdgeLock({}, bridge.redis())
      .edgelock.getLock(name)
      .lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock({}, bridge.redis());
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 15_000, leaseTime: 5_000 });
    await waiter.until((_e, all) => waits(all) === 2);
    // Not synchronisation: a stream must have lived a second for its wait to subscribe again
    // rather than turn to polling (MIN_STREAM_LIFE_MS).
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    // The stream ends, and the release publishes before the waiter can subscribe again: its
    // message reaches nobody.
    bridge.bridge.dropSubscriptions();
    const released = Date.now();
    await held.release();
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect(Date.now() - released).toBeLessThan(1_000);
    expect(strategies(waiter)).toEqual(["subscribe", "subscribe"]);
    for (const spy of logged) expect(spy).not.toHaveBeenCalled();
    await lease?.release();
  });

  it("streams that end right after they open turn the wait to polling, without a spin", async () => {
    bridge = await startPrivateBridge({ streamLifetimeMs: 50 });
    const name = `${prefix}short-streams`;
    const held = await recordingEdgeLock({}, bridge.redis())
      .edgelock.getLock(name)
      .lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock({}, bridge.redis());
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 15_000, leaseTime: 5_000 });
    await waiter.until((e) => e.type === "wait-strategy" && e.strategy === "poll");
    expect(waiter.events.filter((e) => e.type === "wait-strategy")).toEqual([
      expect.objectContaining({ strategy: "subscribe" }),
      expect.objectContaining({ strategy: "poll", reason: "lost" }),
    ]);
    await waiter.until((_e, all) => waits(all) === 8);
    const released = Date.now();
    await held.release();
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect(Date.now() - released).toBeLessThan(1_500);
    // One subscription in all, and no more attempts than waits (each after a wait or a sleep).
    expect(bridge.bridge.stats().byRoute.subscribe).toBe(1);
    expect(waiter.requests("acquire")).toBeLessThanOrEqual(waits(waiter.events) + 2);
    await lease?.release();
  });

  it("a client that is not @upstash/redis's own keeps using its subscribe()", async () => {
    bridge = await startPrivateBridge();
    const real = bridge.redis();
    let subscribed = 0;
    const wrapped = new Proxy(real, {
      get(target, key) {
        if (key === "subscribe") {
          return (channels: string[]) => {
            subscribed += 1;
            return target.subscribe(channels);
          };
        }
        const value: unknown = Reflect.get(target, key, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const name = `${prefix}wrapped`;
    const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock({}, wrapped);
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 15_000, leaseTime: 5_000 });
    await waiter.until((_e, all) => waits(all) === 2);
    const released = Date.now();
    await held.release();
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect(Date.now() - released).toBeLessThan(1_000);
    expect(subscribed).toBe(1);
    await lease?.release();
    // Closed when idle, before the bridge goes (the client's own reader would log the cut).
    await expect.poll(() => bridge?.bridge.stats().subscriptions.open, { timeout: 3_000 }).toBe(0);
  });
});
