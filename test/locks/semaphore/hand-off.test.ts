/**
 * Hand-offs of semaphore permits (lua/lib/permit-hand-off.lua): a release gives the permits it
 * frees to registered waiters, first registered first, and each holds them on the release's
 * message without another request. A waiter that cannot hear gets nothing; one whose call ended
 * gives them back; a late copy of the handing release or of the waiter's attempt changes nothing.
 */
import { afterEach, describe, expect, it } from "vitest";
import { randomHex } from "../../../src/ids.js";
import {
  semaphoreAcquire,
  semaphoreCancel,
  semaphoreLeave,
  semaphoreRelease,
} from "../../../src/lua.gen.js";
import {
  keyPrefix,
  type PrivateBridge,
  startPrivateBridge,
  useRawRedis,
} from "../../support/env.js";
import { recordingEdgeLock, replayKeys } from "../../support/locks.js";
import {
  redissonMessages,
  semaphoreChannelOf,
  wakeListener,
} from "../../support/redisson-channel.js";

const prefix = keyPrefix();
const raw = useRawRedis();

const waitingKey = (name: string) => `edgelock_waiting:{${name}}`;
const wakeKey = (name: string) => `edgelock_wake:{${name}}`;
const takenKey = (name: string) => `edgelock_taken:{${name}}`;
const limitKey = (name: string) => `edgelock_permits:{${name}}`;
const stored = async (key: string) => String(await raw.get(key));
/** Permits edgelock callers hold (lib/taken.lua's count, without its waiter mark). */
const taken = async (name: string) => Number((await raw.get(takenKey(name))) ?? 0) % 1e15;
const waits = (events: readonly { type: string }[]) =>
  events.filter((e) => e.type === "waiting").length;

/** The scripts as a client sends them, straight to Redis. */
function scripts(name: string) {
  return {
    /**
     * A waiter's attempt for `permits`, asking for a hand-off; `follows`: the call's previous
     * attempt, whose hand-off this one may take over.
     */
    attempt: (id: string, waiter: string, permits = 1, follows = "") =>
      raw.eval(semaphoreAcquire.source, {
        keys: [
          name,
          ...replayKeys(name),
          waitingKey(name),
          wakeKey(name),
          takenKey(name),
          limitKey(name),
        ],
        arguments: [String(permits), "30000", id, waiter, "30000", "1", follows],
      }) as Promise<number[]>,
    release: (id: string, permits = 1) =>
      raw.eval(semaphoreRelease.source, {
        keys: [
          name,
          limitKey(name),
          ...replayKeys(name),
          semaphoreChannelOf(name),
          waitingKey(name),
          wakeKey(name),
          takenKey(name),
        ],
        arguments: [String(permits), "0", "30000", id],
      }) as Promise<number[]>,
    cancel: (id: string) =>
      raw.eval(semaphoreCancel.source, {
        keys: [
          name,
          ...replayKeys(name),
          semaphoreChannelOf(name),
          waitingKey(name),
          wakeKey(name),
          takenKey(name),
          limitKey(name),
        ],
        arguments: ["30000", id],
      }) as Promise<number>,
    leave: (waiter: string) =>
      raw.eval(semaphoreLeave.source, {
        keys: [
          name,
          ...replayKeys(name),
          semaphoreChannelOf(name),
          waitingKey(name),
          wakeKey(name),
          takenKey(name),
        ],
        arguments: [waiter, "30000"],
      }) as Promise<number>,
  };
}

/** {@link scripts} on a semaphore of `permits` permits, set as a client sets them. */
async function scriptsWith(name: string, permits: number) {
  await recordingEdgeLock().edgelock.getSemaphore(name).trySetPermits(permits);
  return scripts(name);
}

let bridge: PrivateBridge | undefined;
afterEach(async () => {
  await bridge?.close();
  bridge = undefined;
});

describe("semaphore hand-off", () => {
  it("a release hands the permit to a subscribed waiter, which holds it on the message: no request after it", async () => {
    const name = `${prefix}handed`;
    const owner = recordingEdgeLock().edgelock.getSemaphore(name);
    await owner.trySetPermits(1);
    const held = await owner.tryAcquire();
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getSemaphore(name).tryAcquire({ waitTime: 20_000 });
    // Busy, subscribed, busy again: registered and listening.
    await waiter.until((_e, all) => waits(all) === 2);
    const jvm = await redissonMessages(raw, name);
    // Straight after the release, before the waiter's answer: the permit is already its own.
    expect(await held?.release()).toBe(0);
    expect(await stored(name)).toBe("0");
    const permits = await pending;
    expect(permits?.permits).toBe(1);
    // Busy attempt, subscription, registering attempt; the message took no request.
    expect(waiter.requests("acquire")).toBe(3);
    expect(waiter.events.filter((e) => e.type === "acquire")).toMatchObject([{ requests: 3 }]);
    // A JVM waiter still hears the release on Redisson's channel (what is left: 0).
    await jvm.received(1);
    expect(jvm.messages).toEqual(["0"]);
    await jvm.close();
    // The handle releases the handed permit under the id it was handed as, once.
    expect(await permits?.release()).toBe(1);
    expect(await permits?.release()).toBe(1);
    expect(await stored(name)).toBe("1");
    expect(await taken(name)).toBe(0);
    expect(await raw.exists(waitingKey(name))).toBe(0);
  });

  it("a release hands its permits to the waiters in registration order, as many as they need", async () => {
    const name = `${prefix}order`;
    const owner = recordingEdgeLock().edgelock.getSemaphore(name);
    await owner.trySetPermits(3);
    await owner.tryAcquire({ permits: 3 });
    const first = recordingEdgeLock();
    const firstCall = first.edgelock
      .getSemaphore(name)
      .tryAcquire({ permits: 2, waitTime: 20_000 });
    await first.until((_e, all) => waits(all) === 2);
    const second = recordingEdgeLock();
    const secondCall = second.edgelock.getSemaphore(name).tryAcquire({ waitTime: 20_000 });
    await second.until((_e, all) => waits(all) === 2);
    // Two permits: both for the first registered (it needs two); the second waits on.
    expect(await owner.release(2)).toBe(0);
    expect((await firstCall)?.permits).toBe(2);
    expect(first.requests("acquire")).toBe(3);
    expect(await raw.zCard(waitingKey(name))).toBe(1);
    expect(await owner.release(1)).toBe(0);
    expect((await secondCall)?.permits).toBe(1);
    expect(second.requests("acquire")).toBe(3);
  });

  it("scripts: a registered waiter nobody hears is given nothing; the permit goes to the next live one", async () => {
    const name = `${prefix}unheard`;
    const run = await scriptsWith(name, 1);
    const holder = randomHex();
    expect((await run.attempt(holder, ""))[0]).toBe(1);
    // A waiter whose client is gone (nobody listens on its channel), then a live one.
    expect((await run.attempt(randomHex(), "gone0000:w1"))[0]).toBe(0);
    const listener = await wakeListener(raw, name);
    const liveId = randomHex();
    // Its channel is "<wake>:live0000": the listener hears it.
    expect((await run.attempt(liveId, "live0000:w1"))[0]).toBe(0);
    expect(await run.release(holder)).toEqual([1, 0]);
    await expect.poll(() => listener.heard).toEqual([`live0000:w1|${liveId}`]);
    expect(await stored(`${replayKeys(name)[0]}:${liveId}`)).toBe("A1");
    expect(await raw.exists(`${replayKeys(name)[0]}:handed:gone0000:w1`)).toBe(0);
    expect(await raw.zCard(waitingKey(name))).toBe(0);
    // The live waiter's handle gives it back under that id.
    expect(await run.release(liveId)).toEqual([1, 1]);
    await listener.close();
  });

  it("scripts: a replayed handing release hands nothing twice; a late copy of the waiter's attempt takes nothing more", async () => {
    const name = `${prefix}replay`;
    const run = await scriptsWith(name, 2);
    const a = randomHex();
    const b = randomHex();
    expect((await run.attempt(a, ""))[0]).toBe(1);
    expect((await run.attempt(b, ""))[0]).toBe(1);
    const listener = await wakeListener(raw, name);
    const waited = randomHex();
    expect((await run.attempt(waited, "live0000:w1"))[0]).toBe(0);
    const release = randomHex();
    expect(await run.release(release)).toEqual([1, 0]);
    expect(await run.release(release)).toEqual([1, 0]);
    // One message, one permit handed: the other holder still has its own.
    await expect.poll(() => listener.heard.length).toBe(1);
    expect(await taken(name)).toBe(2);
    // A late copy of the busy attempt the permit was handed as: acquired, nothing more taken.
    expect(await run.attempt(waited, "live0000:w1")).toEqual([1, 0]);
    expect(await stored(name)).toBe("0");
    // Everything given back: both permits, once each.
    expect(await run.release(b)).toEqual([1, 1]);
    expect(await run.release(waited)).toEqual([1, 2]);
    expect(await run.release(waited)).toEqual([1, 2]);
    expect(await taken(name)).toBe(0);
    await listener.close();
  });

  it("scripts: a later attempt of the waiter takes the handed permits over; a call that ended gives them back, once", async () => {
    const name = `${prefix}takeover`;
    const run = await scriptsWith(name, 1);
    const listener = await wakeListener(raw, name);
    const handOffTo = async (waiter: string) => {
      const holder = randomHex();
      expect((await run.attempt(holder, ""))[0]).toBe(1);
      const id = randomHex();
      expect((await run.attempt(id, waiter))[0]).toBe(0);
      expect(await run.release(holder)).toEqual([1, 0]);
      return id;
    };
    // The message reached the call while a later attempt was on its way: that attempt takes
    // the permit over under its own id, and the earlier id holds nothing any more.
    const first = await handOffTo("live0000:w1");
    const later = randomHex();
    expect(await run.attempt(later, "live0000:w1", 1, first)).toEqual([1, 0]);
    expect(await stored(`${replayKeys(name)[0]}:${first}`)).toBe("R");
    expect(await run.release(first)).toEqual([1, 0]);
    expect(await run.release(later)).toEqual([1, 1]);
    // A call that ended without taking it: its leave gives it back, and a second leave nothing.
    const ended = await handOffTo("live0000:w2");
    expect(await stored(name)).toBe("0");
    expect(await run.leave("live0000:w2")).toBe(2);
    expect(await stored(name)).toBe("1");
    expect(await run.leave("live0000:w2")).toBe(0);
    expect(await stored(name)).toBe("1");
    // Its id is spent: a late copy of its attempt, or a release of it, gives nothing.
    expect((await run.attempt(ended, ""))[0]).toBe(-1);
    expect(await run.release(ended)).toEqual([1, 1]);
    expect(await taken(name)).toBe(0);
    await listener.close();
  });

  it("scripts: a late copy of an earlier attempt of the waiter takes nothing over from a hand-off its call holds", async () => {
    // The CI failure this reproduces: a keyed release refused although its caller held a
    // permit. A hedged attempt's first copy reaches Redis after the call held a later
    // attempt's hand-off on the message (and gave it back by key), and before the cancel that
    // the hedged attempt's answer sent: it must not take that hand-off over, or the cancel
    // gives back a permit that another holder is counted for.
    const name = `${prefix}late-copy`;
    const run = await scriptsWith(name, 2);
    const other = randomHex();
    const holder = randomHex();
    expect((await run.attempt(other, ""))[0]).toBe(1);
    expect((await run.attempt(holder, ""))[0]).toBe(1);
    const listener = await wakeListener(raw, name);
    const waiter = "live0000:w1";
    const hedged = randomHex();
    expect((await run.attempt(hedged, waiter))[0]).toBe(0);
    const next = randomHex();
    expect((await run.attempt(next, waiter))[0]).toBe(0);
    expect(await run.release(holder)).toEqual([1, 0]);
    await expect.poll(() => listener.heard).toEqual([`${waiter}|${next}`]);
    // Held on the message, given back by key.
    expect(await run.release("k:done")).toEqual([1, 1]);
    expect(await taken(name)).toBe(1);
    // The hedged attempt's late copy: one permit is free, it takes that one, counted.
    expect((await run.attempt(hedged, waiter))[0]).toBe(1);
    expect(await stored(name)).toBe("0");
    expect(await taken(name)).toBe(2);
    // Its cancel gives back what it took, and only that.
    expect(await run.cancel(hedged)).toBe(1);
    expect(await stored(name)).toBe("1");
    expect(await taken(name)).toBe(1);
    // The other holder's release is never refused.
    expect(await run.release(other)).toEqual([1, 2]);
    expect(await taken(name)).toBe(0);
    await listener.close();
  });

  it("scripts: a release hands nothing to a cancelled attempt whose late copy registered its waiter: the permit stays in the pool", async () => {
    // A late copy of a cancelled attempt registers its waiter after the call ended, then the
    // cancel lands: permits handed to that attempt would be nobody's, for good.
    const name = `${prefix}cancelled`;
    const run = await scriptsWith(name, 1);
    const holder = randomHex();
    expect((await run.attempt(holder, ""))[0]).toBe(1);
    const listener = await wakeListener(raw, name);
    const waiter = "live0000:w1";
    const late = randomHex();
    expect((await run.attempt(late, waiter))[0]).toBe(0);
    expect(await run.cancel(late)).toBe(0);
    // The message goes out (a plain wake-up for a wait that no longer names that attempt); the
    // permit does not.
    expect(await run.release(holder)).toEqual([1, 1]);
    await expect.poll(() => listener.heard).toEqual([`${waiter}|${late}`]);
    expect(await stored(`${replayKeys(name)[0]}:${late}`)).toBe("C");
    expect(await raw.exists(`${replayKeys(name)[0]}:handed:${waiter}`)).toBe(0);
    expect(await taken(name)).toBe(0);
    expect(await raw.zCard(waitingKey(name))).toBe(0);
    // Anyone takes it.
    expect((await run.attempt(randomHex(), ""))[0]).toBe(1);
    await listener.close();
  });

  it("a hand-off that reaches a call after it ended is given back to the next waiter at once", async () => {
    // The ended call's leave reaches Redis 500 ms late, after the release that handed it the
    // permit: its leave passes the permit on to the next waiter.
    bridge = await startPrivateBridge();
    const name = `${prefix}ended`;
    const owner = recordingEdgeLock().edgelock.getSemaphore(name);
    await owner.trySetPermits(1);
    const held = await owner.tryAcquire();
    const ended = recordingEdgeLock({}, bridge.redis());
    const controller = new AbortController();
    const reason = new Error("gone");
    const endedCall = ended.edgelock
      .getSemaphore(name)
      .tryAcquire({ waitTime: 20_000, signal: controller.signal });
    await ended.until((_e, all) => waits(all) === 2);
    const next = recordingEdgeLock();
    const nextCall = next.edgelock.getSemaphore(name).tryAcquire({ waitTime: 20_000 });
    await next.until((_e, all) => waits(all) === 2);
    bridge.bridge.setFaults({ delayMs: 500 });
    controller.abort(reason);
    await expect(endedCall).rejects.toBe(reason);
    const released = Date.now();
    // Handed to the first registered waiter: the call that has ended.
    expect(await held?.release()).toBe(0);
    await Promise.all(ended.background);
    const permits = await nextCall;
    expect(permits).not.toBeNull();
    // Given back with the leave (500 ms late): far below the next waiter's 15 s bound.
    expect(Date.now() - released).toBeLessThan(5_000);
    expect(await permits?.release()).toBe(1);
    expect(await taken(name)).toBe(0);
  });
});
