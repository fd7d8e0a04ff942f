/**
 * Hand-offs of a permit-expirable semaphore's permits (lua/lib/permit-hand-off.lua,
 * lib/permits.lua handed_as_leased), at the scripts: a release gives the permits it frees to
 * the first registered waiter as its busy attempt's permit ids, with the lease the waiter asked
 * for (at most the claim window); one nobody hears gets nothing; a call that ended gives them
 * back, once; a replayed release hands nothing twice.
 */
import { describe, expect, it } from "vitest";
import { randomHex } from "../../../src/ids.js";
import {
  permitExpirableSemaphoreAcquire,
  permitExpirableSemaphoreCancel,
  permitExpirableSemaphoreLeave,
  permitExpirableSemaphoreRelease,
} from "../../../src/lua.gen.js";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock, replayKeys } from "../../support/locks.js";
import { semaphoreChannelOf, wakeListener } from "../../support/redisson-channel.js";

const prefix = keyPrefix();
const raw = useRawRedis();

const timeouts = (name: string) => `{${name}}:timeout`;
const writeKeys = (name: string) => [
  name,
  timeouts(name),
  ...replayKeys(name),
  semaphoreChannelOf(name),
  `edgelock_waiting:{${name}}`,
  `edgelock_wake:{${name}}`,
  `edgelock_waiting:{${name}}:any`,
];
/** An acquire's request id and its permits' ids, as the client makes them. */
function request(count = 1) {
  const stem = randomHex(11);
  return {
    id: `${stem}0000ed9e10`,
    permitIds: Array.from(
      { length: count },
      (_, i) => `${stem}${(i + 1).toString(16).padStart(4, "0")}ed9e10`,
    ),
  };
}
type Request = ReturnType<typeof request>;

function scripts(name: string) {
  return {
    /**
     * An attempt with a 9 s lease; a waiter asks for a hand-off with a 2 s lease. `follows`: the
     * call's previous attempt, whose hand-off this one may take over.
     */
    attempt: (r: Request, waiter = "", follows?: Request) =>
      raw.eval(permitExpirableSemaphoreAcquire.source, {
        keys: writeKeys(name),
        arguments: [
          "9000",
          "30000",
          r.id,
          waiter,
          "30000",
          waiter ? "2000" : "0",
          follows?.id ?? "",
          ...r.permitIds,
        ],
      }) as Promise<number[]>,
    release: (r: Request, id = r.id) =>
      raw.eval(permitExpirableSemaphoreRelease.source, {
        keys: writeKeys(name),
        arguments: ["30000", id, "0", ...r.permitIds],
      }) as Promise<number>,
    cancel: (r: Request) =>
      raw.eval(permitExpirableSemaphoreCancel.source, {
        keys: writeKeys(name),
        arguments: ["30000", r.id, ...r.permitIds],
      }) as Promise<number>,
    leave: (waiter: string) =>
      raw.eval(permitExpirableSemaphoreLeave.source, {
        keys: writeKeys(name),
        arguments: [waiter, "30000"],
      }) as Promise<number>,
  };
}

/** The permit ids taken now, with their remaining lease in ms. */
async function leases(name: string) {
  return (await recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name).inspect()).holders;
}

describe("permit-expirable semaphore hand-off (scripts)", () => {
  it("a release hands the permit to the first live waiter as its attempt's id, with the lease it asked for; one nobody hears gets nothing", async () => {
    const name = `${prefix}handed`;
    const run = scripts(name);
    await recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name).trySetPermits(1);
    const holder = request();
    expect((await run.attempt(holder))[0]).toBe(1);
    // A waiter whose client is gone (nobody listens on its channel), then a live one.
    expect((await run.attempt(request(), "gone0000:w1"))[0]).toBe(0);
    const listener = await wakeListener(raw, name);
    const live = request();
    expect((await run.attempt(live, "live0000:w1"))[0]).toBe(0);
    const release = randomHex();
    expect(await run.release(holder, release)).toBe(1);
    await expect.poll(() => listener.heard).toEqual([`live0000:w1|${live.id}|2000`]);
    const [permit, ...others] = await leases(name);
    expect(others).toEqual([]);
    expect(permit?.id).toBe(live.permitIds[0]);
    expect(permit?.ttl).toBeLessThanOrEqual(2_000);
    expect(permit?.ttl).toBeGreaterThan(0);
    // Replayed, the release hands nothing more and frees nothing more.
    expect(await run.release(holder, release)).toBe(1);
    expect(listener.heard).toHaveLength(1);
    expect(String(await raw.get(name))).toBe("0");
    // A late copy of the waiter's busy attempt finds its permit: acquired, nothing more taken,
    // and the permit's lease becomes that attempt's (9 s), which its answer promises.
    expect(await run.attempt(live, "live0000:w1")).toEqual([1, 0]);
    expect((await leases(name))[0]?.ttl).toBeGreaterThan(8_000);
    // The waiter's lease gives it back under its id.
    expect(await run.release(live)).toBe(1);
    expect(String(await raw.get(name))).toBe("1");
    await listener.close();
  });

  it("a hand-off its waiter heard but never takes comes back when its claim-window lease runs out", async () => {
    const name = `${prefix}unclaimed`;
    const run = scripts(name);
    await recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name).trySetPermits(1);
    const holder = request();
    expect((await run.attempt(holder))[0]).toBe(1);
    const listener = await wakeListener(raw, name);
    expect((await run.attempt(request(), "live0000:w1"))[0]).toBe(0);
    const released = Date.now();
    expect(await run.release(holder)).toBe(1);
    await expect.poll(() => listener.heard.length).toBe(1);
    // Nobody takes it: the next attempt gets it once its 2 s lease has run out, not later.
    const next = request();
    await expect
      .poll(async () => (await run.attempt(next))[0], { timeout: 5_000, interval: 100 })
      .toBe(1);
    const waited = Date.now() - released;
    expect(waited).toBeGreaterThanOrEqual(1_900);
    expect(waited).toBeLessThan(4_000);
    expect((await leases(name)).map((p) => p.id)).toEqual(next.permitIds);
    await listener.close();
  });

  it("a call that ended gives the permits handed to it back, once; a late copy of its attempt then takes nothing", async () => {
    const name = `${prefix}ended`;
    const run = scripts(name);
    await recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name).trySetPermits(2);
    const holder = request(2);
    expect((await run.attempt(holder))[0]).toBe(1);
    const listener = await wakeListener(raw, name);
    const ended = request(2);
    expect((await run.attempt(ended, "live0000:w1"))[0]).toBe(0);
    expect(await run.release(holder)).toBe(2);
    await expect.poll(() => listener.heard.length).toBe(1);
    expect(String(await raw.get(name))).toBe("0");
    expect(await run.leave("live0000:w1")).toBe(2);
    expect(String(await raw.get(name))).toBe("2");
    expect(await leases(name)).toEqual([]);
    expect(await run.leave("live0000:w1")).toBe(0);
    expect(String(await raw.get(name))).toBe("2");
    expect((await run.attempt(ended))[0]).toBe(-1);
    expect(String(await raw.get(name))).toBe("2");
    await listener.close();
  });

  it("a later attempt of the waiting call takes over a hand-off it did not hold; the earlier attempt's late copy and cancel then find nothing", async () => {
    const name = `${prefix}taken-over`;
    const run = scripts(name);
    await recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name).trySetPermits(1);
    const holder = request();
    expect((await run.attempt(holder))[0]).toBe(1);
    const listener = await wakeListener(raw, name);
    const earlier = request();
    expect((await run.attempt(earlier, "live0000:w1"))[0]).toBe(0);
    expect(await run.release(holder)).toBe(1);
    await expect.poll(() => listener.heard).toEqual([`live0000:w1|${earlier.id}|2000`]);
    // Another waiting call cannot take it over: it finds the permit held.
    expect((await run.attempt(request(), "live0000:w2"))[0]).toBe(0);
    // Nor can a late copy of an attempt before the one it was handed as (it follows another).
    const older = request();
    expect((await run.attempt(older, "live0000:w1", request()))[0]).toBe(0);
    expect(await run.cancel(older)).toBe(0);
    // The call's next attempt takes it over with its own permit id and its 9 s lease.
    const later = request();
    expect(await run.attempt(later, "live0000:w1", earlier)).toEqual([1, 0]);
    const [permit, ...others] = await leases(name);
    expect(others).toEqual([]);
    expect(permit?.id).toBe(later.permitIds[0]);
    expect(permit?.ttl).toBeGreaterThan(8_000);
    // The earlier attempt's cancel gives nothing back; its late copy takes nothing.
    expect(await run.cancel(earlier)).toBe(2);
    expect((await run.attempt(earlier, "live0000:w1"))[0]).toBe(-1);
    expect(String(await raw.get(name))).toBe("0");
    // Taken over once: a copy of the later attempt is its replay.
    expect(await run.attempt(later, "live0000:w1", earlier)).toEqual([1, 0]);
    // Its release hands the permit on to the other waiting call, whose end gives it back.
    expect(await run.release(later)).toBe(1);
    await expect.poll(() => listener.heard.length).toBe(2);
    expect(listener.heard[1]).toMatch(/^live0000:w2\|/);
    expect(await run.leave("live0000:w2")).toBe(2);
    expect(String(await raw.get(name))).toBe("1");
    await listener.close();
  });
});

describe("permit-expirable semaphore hand-off to a long wait", () => {
  it("a waiter whose last attempt is too old to hold the hand-off on the message takes it over with one attempt, not after its claim window", async () => {
    const name = `${prefix}long-wait`;
    const owner = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await owner.trySetPermits(1);
    const held = await owner.tryAcquire({ leaseTime: 10_000 });
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock
      .getPermitExpirableSemaphore(name)
      .tryAcquire({ waitTime: 10_000, leaseTime: 10_000 });
    // Busy, subscribed, busy again: registered for a hand-off with a 2 s lease.
    await waiter.until((_e, all) => all.filter((e) => e.type === "waiting").length === 2);
    // The scenario, not a synchronisation: the waiter's last attempt is 1.8 s old, so less than
    // a quarter of the hand-off's 2 s is known to be left and the waiter confirms it instead.
    await new Promise((r) => setTimeout(r, 1_800));
    const released = Date.now();
    await held?.release();
    const lease = await pending;
    expect(lease).not.toBeNull();
    // Taken over at once, not left to run out with its claim window (about 2 s).
    expect(Date.now() - released).toBeLessThan(1_000);
    // Busy attempt, subscription, registering attempt, the attempt that took it over.
    expect(waiter.events.filter((e) => e.type === "acquire")).toMatchObject([{ requests: 4 }]);
    expect((await owner.inspect()).holders.map((h) => h.id)).toEqual(lease?.permitIds);
    expect(lease?.expiresAt).toBeGreaterThan(Date.now() + 9_000);
    await lease?.release();
    expect(await owner.availablePermits()).toBe(1);
  });
});
