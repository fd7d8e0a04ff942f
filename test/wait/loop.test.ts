/**
 * The wait loop (src/wait/loop.ts), through the reentrant lock: the wait budget, the `waiting` and
 * `wait` events, the PTTL bound of a sleep, aborts, the fall-back to polling when subscribing is
 * not possible, and no spin whatever the server answers to blocking commands.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { BlockingMode } from "../../src/bridge/index.js";
import { contextOf } from "../../src/core.js";
import type { LuaScript } from "../../src/lua/script.js";
import { lockAcquire, lockCancel, semaphoreAcquire, semaphoreCancel } from "../../src/lua.gen.js";
import { sha1Of } from "../../src/transport/sha1.js";
import { SLEEP_FLOOR_MS } from "../../src/wait/backoff.js";
import { waitFor } from "../../src/wait/loop.js";
import {
  bridgeRedis,
  keyPrefix,
  type PrivateBridge,
  startPrivateBridge,
  useRawRedis,
} from "../support/env.js";
import { type RecordingEdgeLock, recordingEdgeLock, replayRecords } from "../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();

// A private bridge some tests start (faults, subscription limits, blocking modes), closed after each.
let bridge: PrivateBridge | undefined;
afterEach(async () => {
  await bridge?.close();
  bridge = undefined;
});
const waitingKey = (name: string) => `edgelock_waiting:{${name}}`;
const waits = (events: readonly { type: string }[]) =>
  events.filter((e) => e.type === "waiting").length;

/**
 * Holds `name` (a 20 s lease) until `waiter` waits for it, then releases it: the waiter acquires
 * and releases in turn.
 */
async function acquiresOnRelease(
  waiter: RecordingEdgeLock,
  name: string,
  wait: "subscribe" | "poll",
): Promise<void> {
  const held = await recordingEdgeLock({ wait })
    .edgelock.getLock(name)
    .tryLock({ leaseTime: 20_000 });
  if (!held) throw new Error("not acquired");
  const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 10_000, leaseTime: 5_000 });
  await waiter.until((e) => e.type === "waiting");
  await held.release();
  const lease = await pending;
  expect(lease).not.toBeNull();
  await lease?.release();
}

describe.each(["subscribe", "poll"] as const)("waiting (wait: %s)", (wait) => {
  it("honours waitTime: returns null within one round trip of the deadline and never acquires afterwards", async () => {
    const holder = recordingEdgeLock({ wait });
    const waiter = recordingEdgeLock({ wait });
    const name = `${prefix}${wait}:deadline`;
    const held = await holder.edgelock.getLock(name).tryLock({ leaseTime: 20_000 });
    if (!held) throw new Error("not acquired");
    const started = Date.now();
    const result = await waiter.edgelock
      .getLock(name)
      .tryAcquire({ waitTime: 300, leaseTime: 5_000 });
    const elapsed = Date.now() - started;
    expect(result.lease).toBeNull();
    expect(elapsed).toBeGreaterThanOrEqual(300);
    expect(elapsed).toBeLessThan(300 + 250); // one round trip here is ~1 ms; generous margin
    // Polling comes back several times; a subscribed waiter attempts once more after subscribing
    // and once when its wait runs out.
    if (wait === "poll") expect(result.attempts).toBeGreaterThan(3);
    else expect(result.attempts).toBe(3);
    if (result.lease === null) expect(result.holderTtl).toBeGreaterThan(15_000);
    const attemptsAtReturn = waiter.events.filter((e) => e.type === "waiting").length;
    await held.release();
    // The waiter has stopped: releasing does not let it in, and it sends nothing more.
    expect(await holder.edgelock.getLock(name).isLocked()).toBe(false);
    expect(waiter.events.filter((e) => e.type === "waiting").length).toBe(attemptsAtReturn);
  });

  it("waitTime 0 or omitted makes exactly one attempt", async () => {
    const holder = recordingEdgeLock({ wait });
    const waiter = recordingEdgeLock({ wait });
    const name = `${prefix}${wait}:one-attempt`;
    const held = await holder.edgelock.getLock(name).tryLock({ leaseTime: 5_000 });
    expect(await waiter.edgelock.getLock(name).tryLock()).toBeNull();
    expect(await waiter.edgelock.getLock(name).tryLock({ waitTime: 0 })).toBeNull();
    expect(waiter.requests("acquire")).toBe(2);
    expect(waiter.events.some((e) => e.type === "waiting")).toBe(false);
    await held?.release();
  });

  it("acquires as soon as the holder releases", async () => {
    await acquiresOnRelease(recordingEdgeLock({ wait }), `${prefix}${wait}:handoff`, wait);
  });

  it("each wait is reported twice: waiting (its longest) before, wait (the time it took) after", async () => {
    const waiter = recordingEdgeLock({ wait, backoff: { initialDelay: 5_000, maxDelay: 5_000 } });
    await acquiresOnRelease(waiter, `${prefix}${wait}:waited`, wait);

    const begun = waiter.events.flatMap((e) => (e.type === "waiting" ? [e] : []));
    const ended = waiter.events.flatMap((e) => (e.type === "wait" ? [e] : []));
    // Every wait that began ended, with the same attempt and bound.
    expect(ended.map((e) => [e.attempt, e.maxMs])).toEqual(begun.map((e) => [e.attempt, e.maxMs]));
    for (const e of ended) expect(e.durationMs).toBeGreaterThanOrEqual(0);
    const last = ended.at(-1);
    if (!last) throw new Error("no wait reported");
    if (wait === "subscribe") {
      // Woken by the release: far shorter than its bound (the holder's 20 s lease, capped).
      expect(last.maxMs).toBeGreaterThanOrEqual(5_000);
      expect(last.durationMs).toBeLessThan(last.maxMs - 2_000);
    } else {
      // A sleep is not cut short by the release: it lasts its length.
      expect(last.durationMs).toBeGreaterThanOrEqual(last.maxMs - 1);
    }
  });

  it("a waiter's sleeps are bounded by the holder's PTTL, even with a long backoff", async () => {
    const holder = recordingEdgeLock({ wait });
    const waiter = recordingEdgeLock({ wait, backoff: { initialDelay: 10_000, maxDelay: 10_000 } });
    const name = `${prefix}${wait}:pttl-bound`;
    const crashed = await holder.edgelock.getLock(name).tryLock({ leaseTime: 300 });
    if (!crashed) throw new Error("not acquired");
    const started = Date.now();
    const lease = await waiter.edgelock
      .getLock(name)
      .tryLock({ waitTime: 8_000, leaseTime: 5_000 });
    const elapsed = Date.now() - started;
    expect(lease).not.toBeNull();
    // Without the PTTL bound the first sleep alone would be ≥ 5 000 ms.
    expect(elapsed).toBeLessThan(2_000);
    for (const e of waiter.events) {
      if (e.type === "waiting") expect(e.maxMs).toBeLessThanOrEqual(300 + SLEEP_FLOOR_MS);
    }
    await lease?.release();
  });

  it("lock() waits until acquired", async () => {
    const holder = recordingEdgeLock({ wait });
    const waiter = recordingEdgeLock({ wait });
    const name = `${prefix}${wait}:lock-waits`;
    const held = await holder.edgelock.getLock(name).tryLock({ leaseTime: 20_000 });
    if (!held) throw new Error("not acquired");
    const pending = waiter.edgelock.getLock(name).lock({ leaseTime: 5_000 });
    await waiter.until((e) => e.type === "waiting");
    await held.release();
    const lease = await pending;
    expect(await waiter.edgelock.getLock(name).isHeldBy(lease.owner)).toBe(true);
    await lease.release();
  });
});

describe("abort", () => {
  it("aborting during the wait rejects with signal.reason unchanged and leaves no hold", async () => {
    const holder = recordingEdgeLock();
    const waiter = recordingEdgeLock();
    const name = `${prefix}abort-wait`;
    const held = await holder.edgelock.getLock(name).tryLock({ leaseTime: 20_000 });
    if (!held) throw new Error("not acquired");
    const controller = new AbortController();
    const reason = new Error("caller gave up");
    const pending = waiter.edgelock
      .getLock(name)
      .tryLock({ waitTime: 10_000, signal: controller.signal });
    await waiter.until((e) => e.type === "waiting");
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    const fields = await raw.hGetAll(name);
    // The waiter registered while it held: the release that frees it will look for waiters.
    expect(Object.keys(fields).sort()).toEqual(
      [held.owner, "edgelock:epoch", "edgelock:by", "edgelock:waiters"].sort(),
    );
    await held.release();
  });

  it("an already aborted signal rejects before any request", async () => {
    const rec = recordingEdgeLock();
    const reason = new Error("already");
    await expect(
      rec.edgelock.getLock(`${prefix}pre-aborted`).tryLock({ signal: AbortSignal.abort(reason) }),
    ).rejects.toBe(reason);
    expect(rec.requests()).toBe(0);
  });

  describe("in flight", () => {
    it("an acquire applied by Redis whose answer is abandoned is undone: no leaked hold", async () => {
      // The acquire reaches Redis and is applied, but its response never comes back.
      bridge = await startPrivateBridge({
        rules: [{ action: "lose", mode: "hang", match: "evalsha", times: 1 }],
      });
      const rec = recordingEdgeLock({}, bridge.redis({ retry: { retries: 0 } }));
      const name = `${prefix}abort-inflight`;
      const controller = new AbortController();
      const reason = new Error("timeout");
      const pending = rec.edgelock
        .getLock(name)
        .tryLock({ leaseTime: 20_000, signal: controller.signal });
      // Wait until the bridge has applied the command and is holding its answer back.
      for (;;) {
        const stats = bridge.bridge.stats();
        if (stats.faultsInjected === 1) break;
        await new Promise((r) => setImmediate(r));
      }
      expect(String(await raw.type(name))).toBe("hash"); // the hold exists...
      controller.abort(reason);
      await expect(pending).rejects.toBe(reason);
      expect(rec.background).toHaveLength(1);
      await Promise.all(rec.background);
      expect(await raw.exists(name)).toBe(0); // ...and was undone
      expect(Object.values(await replayRecords(raw, name))).toEqual(["U"]);
    });
  });
});

describe("when subscribing is not possible", () => {
  it("a subscription the server refuses (503) turns the wait to polling, once, and it still acquires", async () => {
    bridge = await startPrivateBridge(undefined, { maxSubscriptions: 0 });
    const name = `${prefix}refused`;
    const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock({}, bridge.redis({ retry: { retries: 0 } }));
    const pending = waiter.edgelock.getLock(name).lock({ leaseTime: 5_000 });
    await waiter.until((_e, all) => waits(all) === 4);
    const strategies = waiter.events.filter((e) => e.type === "wait-strategy");
    expect(strategies).toEqual([expect.objectContaining({ strategy: "poll", reason: "failed" })]);
    // Polling registers nothing.
    expect(await raw.zCard(waitingKey(name))).toBe(0);
    await held.release();
    await (await pending).release();
  });

  it("a subscription that is never confirmed does not hold the wait past its deadline", async () => {
    const name = `${prefix}unconfirmed`;
    const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const real = bridgeRedis();
    // A server that accepts the subscription request and never confirms it.
    const silent = new Proxy(real, {
      get(target, key) {
        if (key === "subscribe") {
          return () => ({ on: () => undefined, unsubscribe: async () => undefined });
        }
        const value: unknown = Reflect.get(target, key, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const waiter = recordingEdgeLock({}, silent);
    const started = Date.now();
    expect(await waiter.edgelock.getLock(name).tryLock({ waitTime: 300 })).toBeNull();
    expect(Date.now() - started).toBeLessThan(300 + 500);
    await Promise.all(waiter.background);
    await held.release();
  });

  it("a client at maxSubscriptions polls", async () => {
    const name = `${prefix}limit`;
    const held = await recordingEdgeLock().edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock({ maxSubscriptions: 1 });
    const first = waiter.edgelock.getLock(name).lock({ leaseTime: 5_000 });
    await waiter.until((e) => e.type === "wait-strategy");
    const second = waiter.edgelock.getLock(`${prefix}limit-2`);
    const blocker = await recordingEdgeLock()
      .edgelock.getLock(`${prefix}limit-2`)
      .lock({ leaseTime: 20_000 });
    const pending = second.lock({ leaseTime: 5_000 });
    await waiter.until((e) => e.type === "wait-strategy" && e.reason === "limit");
    await held.release();
    await blocker.release();
    await (await first).release();
    await (await pending).release();
  });
});

describe("no wait spins, whatever the server answers to blocking commands", () => {
  const modes: BlockingMode[] = ["refuse", "instant", "block"];

  for (const mode of modes) {
    it(`blocking ${mode}: one waiter over a 2 s wait sends no more requests than polling`, async () => {
      bridge = await startPrivateBridge(undefined, { blocking: mode });
      const counts: Record<string, number> = {};
      for (const wait of ["auto", "poll", "block"] as const) {
        const name = `${prefix}spin-${mode}-${wait}`;
        const holder = recordingEdgeLock({}, bridge.redis());
        const held = await holder.edgelock.getLock(name).lock({ leaseTime: 20_000 });
        const waiter = recordingEdgeLock({ wait }, bridge.redis());
        const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 5_000 });
        setTimeout(() => void held.release(), 2_000);
        const lease = await pending;
        expect(lease).not.toBeNull();
        await lease?.release();
        counts[wait] = waiter.requests("acquire");
      }
      expect(counts.auto).toBeLessThanOrEqual(counts.poll as number);
      expect(counts.block).toBeLessThanOrEqual(counts.poll as number);
      expect(bridge.bridge.stats().byCommand.blpop ?? 0).toBe(0);
    });
  }
});

describe("a wait's first attempt", () => {
  it("the wait budget counts from the call: a first attempt slower than waitTime is the only one", async () => {
    bridge = await startPrivateBridge({ delayMs: 400 });
    const name = `${prefix}first-slow`;
    const held = await recordingEdgeLock().edgelock.getLock(name).tryLock({ leaseTime: 20_000 });
    if (!held) throw new Error("not acquired");
    const waiter = recordingEdgeLock({}, bridge.redis({ retry: { retries: 0 } }));
    const result = await waiter.edgelock
      .getLock(name)
      .tryAcquire({ waitTime: 200, leaseTime: 5_000 });
    expect(result.lease).toBeNull();
    expect(result.attempts).toBe(1);
    expect(waiter.events.some((e) => e.type === "waiting")).toBe(false);
    await held.release();
  });

  it("a first attempt aborted in flight gives up the registration it made", async () => {
    // The attempt reaches Redis (busy: it registers its waiter), but its answer never comes back.
    bridge = await startPrivateBridge({
      rules: [{ action: "lose", mode: "hang", match: "evalsha", times: 1 }],
    });
    const name = `${prefix}first-aborted`;
    const held = await recordingEdgeLock().edgelock.getLock(name).tryLock({ leaseTime: 20_000 });
    if (!held) throw new Error("not acquired");
    const waiter = recordingEdgeLock({}, bridge.redis({ retry: { retries: 0 } }));
    const controller = new AbortController();
    const reason = new Error("caller gave up");
    const pending = waiter.edgelock
      .getLock(name)
      .tryLock({ waitTime: 10_000, leaseTime: 5_000, signal: controller.signal });
    while (bridge.bridge.stats().faultsInjected < 1) await new Promise((r) => setImmediate(r));
    expect(await raw.zCard(waitingKey(name))).toBe(1);
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    await Promise.all(waiter.background);
    expect(await raw.zCard(waitingKey(name))).toBe(0);
    await held.release();
  });

  it("a wait that finds its client's subscription open makes its first attempt subscribed: the release hands it the lock", async () => {
    const name = `${prefix}first-subscribed`;
    const held = await recordingEdgeLock().edgelock.getLock(name).tryLock({ leaseTime: 20_000 });
    if (!held) throw new Error("not acquired");
    const waiter = recordingEdgeLock();
    const lock = waiter.edgelock.getLock(name);
    const first = lock.tryLock({ waitTime: 15_000, leaseTime: 20_000 });
    // Subscribed and registered (its second wait), then handed the lock; while the lease lasts
    // the client keeps its subscription open.
    await waiter.until((_e, all) => waits(all) === 2);
    await held.release();
    const lease = await first;
    if (!lease) throw new Error("not handed the lock");
    const second = lock.tryLock({ waitTime: 15_000, leaseTime: 5_000 });
    await waiter.until((_e, all) => waits(all) === 3);
    await lease.release();
    const next = await second;
    expect(next).not.toBeNull();
    const calls = waiter.events.filter((e) => e.type === "acquire");
    // One attempt, subscribed from the start: the release's hand-off needs no other request.
    expect(calls.map((e) => e.requests)).toEqual([3, 1]);
    await next?.release();
  });
});

describe("hand-offs while a cancel of the wait's attempts is unanswered", () => {
  /**
   * A wait on `name` through the client's real subscription, whose attempts are played: the
   * first two are busy (the second, subscribed, reports `undoing`), a third acquires. A release's
   * message is published to the wait's channel once it waits after the second.
   * A late copy of an attempt racing its unanswered cancel is what no real part produces on
   * demand; the message and the subscription are real.
   */
  async function playedWait(undoing: Promise<boolean>) {
    const rec = recordingEdgeLock();
    const name = `${prefix}undoing:${Math.random().toString(16).slice(2)}`;
    const wakeKey = `edgelock_wake:{${name}}`;
    const seen: string[] = [];
    let waitId = "";
    const result = waitFor<string>(contextOf(rec.edgelock), {
      name,
      wakeKey,
      waitTime: 10_000,
      signal: undefined,
      counter: { requests: 0 },
      attempt: async (_waiter, _subscribed, id) => {
        waitId = id;
        seen.push(`attempt ${seen.length + 1}`);
        if (seen.length === 1) return { pttl: 10_000 };
        if (seen.length === 2) return { pttl: 10_000, undoing };
        return { acquired: `attempt ${seen.length}` };
      },
      handOff: { grant: (payload) => `held on the message ${payload}`, blockCap: 5_000 },
    });
    // Busy, subscribed, busy again (with its cancel out): waiting for a message.
    await rec.waited(2);
    const channel = `${wakeKey}:${waitId.split(":")[0]}`;
    expect(await raw.publish(channel, `${waitId}|e1`)).toBe(1);
    return { value: (await result).value, attempts: seen.length };
  }

  it("while the cancel is out, the message brings on an attempt instead of being held", async () => {
    const { value, attempts } = await playedWait(new Promise<boolean>(() => {}));
    expect(value).toBe("attempt 3");
    expect(attempts).toBe(3);
  });

  it("a cancel that gave up keeps it so for the rest of the wait", async () => {
    const { value } = await playedWait(Promise.resolve(false));
    expect(value).toBe("attempt 3");
  });

  it("once the cancel is answered, the message is held with no request", async () => {
    const { value, attempts } = await playedWait(Promise.resolve(true));
    expect(value).toBe("held on the message e1");
    expect(attempts).toBe(2);
  });
});

describe("hand-offs while a cancel is unanswered, through the real scripts", () => {
  /**
   * `waiter` (on the private bridge, subscribed and registered) is woken and makes attempt V:
   * applied by Redis but answered 503 twice (the transport resends a 5xx once by itself), so
   * sent again, busy again, and cancelled; the cancel hangs (every copy of it, until the faults
   * are cleared).
   */
  async function cancelHangs(
    name: string,
    waiter: RecordingEdgeLock,
    acquire: LuaScript,
    cancel: LuaScript,
  ) {
    const p = bridge;
    if (!p) throw new Error("no private bridge");
    p.bridge.setFaults({
      rules: [
        // The scripts as a client that reports events sends them (inside the counting wrapper).
        { action: "lose", mode: "503", match: await sha1Of(acquire), times: 2 },
        { action: "fail", mode: "hang", match: await sha1Of(cancel) },
      ],
    });
    const id = String((await raw.zRange(waitingKey(name), 0, 0))[0]).split("|")[0] ?? "";
    const seen = waits(waiter.events);
    expect(await raw.publish(`edgelock_wake:{${name}}:${id.split(":")[0]}`, id)).toBe(1);
    await waiter.until((_e, all) => waits(all) === seen + 1);
  }

  it("reentrant lock: the hand-off is confirmed by an attempt, not held on its message", async () => {
    bridge = await startPrivateBridge();
    const name = `${prefix}undoing-lock`;
    const held = await recordingEdgeLock().edgelock.getLock(name).tryLock({ leaseTime: 20_000 });
    if (!held) throw new Error("not acquired");
    const waiter = recordingEdgeLock({ requestTimeout: 1_000 }, bridge.redis());
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 15_000, leaseTime: 20_000 });
    await waiter.until((_e, all) => waits(all) === 2);
    await cancelHangs(name, waiter, lockAcquire, lockCancel);
    expect(await held.release()).toBe("released");
    const lease = await pending;
    if (!lease) throw new Error("not handed the lock");
    // Confirmed (the hand-off's mark is gone at once; held on the message it stays until the
    // lease's first renewal): busy, subscription, registering attempt, V's three requests, the
    // confirm.
    expect(await raw.hGet(name, "edgelock:grant")).toBeNull();
    expect(waiter.requests("acquire")).toBe(7);
    bridge.bridge.clearFaults();
    await Promise.all(waiter.background);
    expect(await lease.release()).toBe("released");
    expect(await raw.exists(name)).toBe(0);
  });

  it("semaphore: the next attempt takes the hand-off over, not held on its message", async () => {
    bridge = await startPrivateBridge();
    const name = `${prefix}undoing-semaphore`;
    const owner = recordingEdgeLock().edgelock.getSemaphore(name);
    await owner.trySetPermits(1);
    const held = await owner.tryAcquire();
    const waiter = recordingEdgeLock({ requestTimeout: 1_000 }, bridge.redis());
    const pending = waiter.edgelock.getSemaphore(name).tryAcquire({ waitTime: 15_000 });
    await waiter.until((_e, all) => waits(all) === 2);
    await cancelHangs(name, waiter, semaphoreAcquire, semaphoreCancel);
    // Woken again: attempt X, busy, which the release hands the permit to.
    const entry = String((await raw.zRange(waitingKey(name), 0, 0))[0]);
    const seen = waits(waiter.events);
    expect(await raw.publish(`edgelock_wake:{${name}}:${entry.split(":")[0]}`, entry)).toBe(1);
    await waiter.until((_e, all) => waits(all) === seen + 1);
    expect(await held?.release()).toBe(0);
    const permits = await pending;
    if (!permits) throw new Error("not handed the permit");
    // Busy, subscription, registering attempt, V's three requests, X, the attempt that took X's
    // over; X's record says its permit went (as the first holder's does; T1: trySetPermits).
    expect(waiter.requests("acquire")).toBe(8);
    const records = Object.values(await replayRecords(raw, name)).sort();
    expect(records).toEqual(["A1", "R", "R", "T1"]);
    bridge.bridge.clearFaults();
    await Promise.all(waiter.background);
    expect(await permits.release()).toBe(1);
    expect(Number((await raw.get(`edgelock_taken:{${name}}`)) ?? 0) % 1e15).toBe(0);
  });
});
