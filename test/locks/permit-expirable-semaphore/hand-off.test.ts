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
  permitExpirableSemaphoreLeave,
  permitExpirableSemaphoreRelease,
} from "../../../src/lua.gen.js";
import { keyPrefix, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock, replayKeys } from "../../support/locks.js";
import { semaphoreChannelOf } from "../../support/redisson-channel.js";

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
    /** An attempt with a 9 s lease; a waiter asks for a hand-off with a 2 s lease. */
    attempt: (r: Request, waiter = "") =>
      raw.eval(permitExpirableSemaphoreAcquire.source, {
        keys: writeKeys(name),
        arguments: ["9000", "30000", r.id, waiter, "30000", waiter ? "2000" : "0", ...r.permitIds],
      }) as Promise<number[]>,
    release: (r: Request, id = r.id) =>
      raw.eval(permitExpirableSemaphoreRelease.source, {
        keys: writeKeys(name),
        arguments: ["30000", id, "0", ...r.permitIds],
      }) as Promise<number>,
    leave: (waiter: string) =>
      raw.eval(permitExpirableSemaphoreLeave.source, {
        keys: writeKeys(name),
        arguments: [waiter, "30000"],
      }) as Promise<number>,
  };
}

/** Listens on the wake channel of client "live0000", as its client would. */
async function wakeListener(name: string) {
  const sub = raw.duplicate();
  await sub.connect();
  const heard: string[] = [];
  await sub.subscribe(`edgelock_wake:{${name}}:live0000`, (m) => heard.push(String(m)));
  return { heard, close: () => sub.destroy() };
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
    const listener = await wakeListener(name);
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
    const listener = await wakeListener(name);
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
    const listener = await wakeListener(name);
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
});
