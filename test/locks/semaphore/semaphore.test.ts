/**
 * Semaphore behaviours from Redisson's RedissonSemaphoreTest over the real client and the bridge,
 * and what edgelock adds: replay-safe mutations (the bridge applies a command and loses its
 * answer; the client resends it), releases bounded by the permits set, waiters woken by the
 * release that frees permits, contention, cancellation, validation, interop with Redisson's own
 * scripts, inspection, and no key left behind.
 */
import { afterEach, describe, expect, it } from "vitest";
import { EdgeLock, OverReleaseError, type Semaphore } from "../../../src/index.js";
import { semaphoreAcquire } from "../../../src/lua/semaphore.gen.js";
import { REDISSON_SEMAPHORE_ACQUIRE, REDISSON_SEMAPHORE_RELEASE } from "../../fixtures/redisson.js";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import {
  isReplayRecord,
  recordingEdgeLock,
  replayKeys,
  replayRecords,
} from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();
afterEach(() => {
  bridge.bridge.clearFaults();
});

const limitKey = (name: string) => `edgelock_permits:{${name}}`;
/**
 * Permits edgelock callers hold, plus 10^15 while a waiter may be registered (lua/lib/taken.lua):
 * kept at 0 once all are given back, deleted with the semaphore.
 */
const takenKey = (name: string) => `edgelock_taken:{${name}}`;
const taken = async (name: string) => Number((await raw.get(takenKey(name))) ?? 0) % 1e15;
/** Keys of `name` other than its replay records. */
const keysOf = async (name: string) =>
  (await raw.keys(`*${name}*`))
    .map(String)
    .filter((k) => !isReplayRecord(name, k))
    .sort();

/** The semaphore's counter as stored (Redisson's STRING). */
const stored = async (name: string) => String(await raw.get(name));

/** A semaphore on the fault bridge, every script it runs loaded (so faults hit EVALSHA). */
async function onFaultBridge(name: string) {
  const rec = recordingEdgeLock({}, bridge.redis());
  const warm = rec.edgelock.getSemaphore(`${prefix}warm`);
  await warm.trySetPermits(1);
  await warm.tryAcquire();
  await warm.release();
  await warm.addPermits(1);
  await warm.drainPermits();
  await warm.availablePermits();
  return { rec, semaphore: rec.edgelock.getSemaphore(name) };
}

/** The next EVALSHA is applied by Redis and its answer lost; the client resends it. */
function loseNextEvalsha() {
  bridge.bridge.setFaults({
    rules: [{ action: "lose", mode: "close", match: "evalsha", times: 1 }],
  });
}

describe("semaphore", () => {
  it("Redisson's basics: trySetPermits once, acquire and release, drain, addPermits, availablePermits", async () => {
    const s = recordingEdgeLock().edgelock.getSemaphore(`${prefix}basics`);
    expect(await s.availablePermits()).toBe(0);
    expect(await s.tryAcquire()).toBeNull(); // a missing semaphore has no permits
    expect(await s.trySetPermits(3)).toBe(true);
    expect(await s.trySetPermits(5)).toBe(false);
    expect(await s.availablePermits()).toBe(3);
    expect(await s.tryAcquire({ permits: 2 })).not.toBeNull();
    expect(await s.tryAcquire({ permits: 2 })).toBeNull(); // all or none
    expect(await s.availablePermits()).toBe(1);
    expect(await s.release(2)).toBe(3);
    expect(await s.drainPermits()).toBe(3);
    expect(await s.drainPermits()).toBe(0);
    expect(await s.release(3)).toBe(3);
    expect(await s.addPermits(2)).toBe(5);
    expect(await s.addPermits(-6)).toBe(-1); // below 0, as Redisson allows
    expect(await s.drainPermits()).toBe(0); // a negative count is left alone
    expect(await s.tryAcquire()).toBeNull();
    expect(await s.addPermits(1)).toBe(0);
    expect(await s.inspect()).toMatchObject({ available: 0, permits: 0 });
  });

  it("refuses a release beyond the permits set, and one on a semaphore never set, unless overRelease", async () => {
    const name = `${prefix}over`;
    const s = recordingEdgeLock().edgelock.getSemaphore(name);
    const never = await s.release().catch((e: unknown) => e);
    expect(never).toBeInstanceOf(OverReleaseError);
    expect(never).toMatchObject({ code: "OVER_RELEASE", limit: null, permits: 1, resource: name });
    expect(await raw.exists(name)).toBe(0);
    await s.trySetPermits(2);
    expect(await s.tryAcquire()).not.toBeNull();
    const over = await s.release(2).catch((e: unknown) => e);
    expect(over).toBeInstanceOf(OverReleaseError);
    expect(over).toMatchObject({ permits: 2, available: 1, limit: 2 });
    expect((over as Error).message).toContain("more than the 2 set");
    expect(await s.availablePermits()).toBe(1); // nothing changed
    expect(await s.release(1)).toBe(2);
    expect(await s.release(1, { overRelease: true })).toBe(3);
    expect(await s.inspect()).toMatchObject({ available: 3, permits: 2 });
  });

  it("a semaphore set by a Redisson client keeps Redisson's unbounded release", async () => {
    const name = `${prefix}jvm-set`;
    await raw.set(name, "1");
    const s = recordingEdgeLock().edgelock.getSemaphore(name);
    expect(await s.release(5)).toBe(6);
    expect(await s.addPermits(1)).toBe(7);
    expect(await raw.exists(limitKey(name))).toBe(0);
    expect(await s.inspect()).toMatchObject({ available: 7, permits: null, exists: true });
  });

  it("interop: Redisson's scripts take and give the permits edgelock set, and the reverse", async () => {
    const name = `${prefix}interop`;
    const s = recordingEdgeLock().edgelock.getSemaphore(name);
    await s.trySetPermits(2);
    const jvmAcquire = (n: number) =>
      raw.eval(REDISSON_SEMAPHORE_ACQUIRE, { keys: [name], arguments: [String(n)] });
    const jvmRelease = (n: number) =>
      raw.eval(REDISSON_SEMAPHORE_RELEASE, {
        keys: [name, `redisson_sc:{${name}}`],
        arguments: [String(n)],
      });
    expect(await jvmAcquire(2)).toBe(1);
    expect(await s.tryAcquire()).toBeNull();
    await jvmRelease(1);
    expect(await s.tryAcquire()).not.toBeNull();
    expect(await jvmAcquire(2)).toBe(0);
    await s.release();
    expect(await jvmAcquire(1)).toBe(1);
    await jvmRelease(1);
    expect(await stored(name)).toBe("1"); // the same STRING counter
    expect(await s.availablePermits()).toBe(1);
  });

  it("10 concurrent holders on 3 permits never exceed 3, and every one gets its turn", async () => {
    const name = `${prefix}ten`;
    await recordingEdgeLock().edgelock.getSemaphore(name).trySetPermits(3);
    let inside = 0;
    let most = 0;
    let turns = 0;
    const started = Date.now();
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        const s = recordingEdgeLock({}, bridge.redis()).edgelock.getSemaphore(name);
        for (let i = 0; i < 5; i++) {
          expect(await s.tryAcquire({ waitTime: 20_000 })).not.toBeNull();
          inside += 1;
          most = Math.max(most, inside);
          expect(inside).toBeLessThanOrEqual(3);
          await new Promise((r) => setTimeout(r, 20));
          inside -= 1;
          turns += 1;
          await s.release();
        }
      }),
    );
    expect(turns).toBe(50);
    // About 1 s when every release wakes whom it frees a permit for; a lost wake-up leaves a
    // waiter to its 15 s bound.
    expect(Date.now() - started).toBeLessThan(12_000);
    expect(most).toBe(3);
    expect(await stored(name)).toBe("3");
    expect(await keysOf(name)).toEqual([limitKey(name), takenKey(name), name].sort());
    expect(await taken(name)).toBe(0);
  });

  it("a waiter is woken by the release that frees its permits: one attempt, one wait, one attempt", async () => {
    const name = `${prefix}woken`;
    const owner = recordingEdgeLock().edgelock.getSemaphore(name);
    await owner.trySetPermits(2);
    expect(await owner.tryAcquire({ permits: 2 })).not.toBeNull();
    const waiter = recordingEdgeLock();
    const started = Date.now();
    const pending = waiter.edgelock.getSemaphore(name).tryAcquire({ permits: 2, waitTime: 20_000 });
    // Subscribed and registered (its second `waiting` event): only a wake-up lets it in before its bound.
    await waiter.waited(2);
    expect((await owner.inspect()).waiters).toBe(1);
    await owner.release(1);
    await owner.release(1);
    expect(await pending).not.toBeNull();
    expect(Date.now() - started).toBeLessThan(5_000); // far below the 15 s a lost wake-up costs
    // The first release woke it too early (1 of 2 permits): at most one more wait, never a poll loop.
    expect(waiter.requests("acquire")).toBeLessThanOrEqual(5);
    expect(await keysOf(name)).toEqual([limitKey(name), takenKey(name), name].sort()); // 2 held
  });

  it("a release of several permits wakes as many waiters as it can serve", async () => {
    const name = `${prefix}many`;
    const owner = recordingEdgeLock().edgelock.getSemaphore(name);
    await owner.trySetPermits(3);
    await owner.tryAcquire({ permits: 3 });
    const waiters = Array.from({ length: 3 }, () => recordingEdgeLock());
    const pending = waiters.map((w) =>
      w.edgelock.getSemaphore(name).tryAcquire({ waitTime: 20_000 }),
    );
    // Each subscribed and registered (its second `waiting` event).
    await Promise.all(waiters.map((w) => w.waited(2)));
    await owner.release(3);
    expect((await Promise.all(pending)).map((p) => p?.permits)).toEqual([1, 1, 1]);
    // An attempt, the subscription, an attempt, then the release's hand-off: no attempt more.
    for (const w of waiters) expect(w.requests("acquire")).toBe(3);
  });

  it("with wait: 'poll' a waiter polls with backoff and still gets the permit", async () => {
    const name = `${prefix}poll`;
    const owner = recordingEdgeLock().edgelock.getSemaphore(name);
    await owner.trySetPermits(1);
    await owner.tryAcquire();
    const poller = recordingEdgeLock({ wait: "poll" });
    const pending = poller.edgelock.getSemaphore(name).tryAcquire({ waitTime: 10_000 });
    await poller.until((_e, all) => all.filter((e) => e.type === "waiting").length >= 2);
    await owner.release();
    expect(await pending).not.toBeNull();
    expect(await raw.exists(`edgelock_waiting:{${name}}`)).toBe(0); // a poller never registers
  });

  it("waitTime runs out: false, and the waiter leaves nothing registered", async () => {
    const name = `${prefix}timeout`;
    const s = recordingEdgeLock().edgelock.getSemaphore(name);
    await s.trySetPermits(1);
    await s.tryAcquire();
    const waiter = recordingEdgeLock();
    expect(await waiter.edgelock.getSemaphore(name).tryAcquire({ waitTime: 200 })).toBeNull();
    await Promise.all(waiter.background);
    expect(await keysOf(name)).toEqual([limitKey(name), takenKey(name), name].sort()); // 1 held
  });

  it("acquire() waits until permits come; an abort rejects with the reason and unregisters", async () => {
    const name = `${prefix}abort`;
    const s = recordingEdgeLock().edgelock.getSemaphore(name);
    await s.trySetPermits(1);
    await s.tryAcquire();
    const waiter = recordingEdgeLock();
    const controller = new AbortController();
    const reason = new Error("gone");
    const aborted = waiter.edgelock.getSemaphore(name).acquire({ signal: controller.signal });
    await waiter.until((e) => e.type === "waiting");
    controller.abort(reason);
    await expect(aborted).rejects.toBe(reason);
    await Promise.all(waiter.background);
    expect((await s.inspect()).waiters).toBe(0);
    const next = waiter.edgelock.getSemaphore(name).acquire();
    await waiter.waited(2);
    await s.release();
    await expect(next).resolves.toMatchObject({ permits: 1, released: false });
    expect(await s.availablePermits()).toBe(0);
  });

  it("an attempt applied but unanswered when aborted gives its permits back", async () => {
    const name = `${prefix}cancel`;
    const { rec, semaphore } = await onFaultBridge(name);
    await semaphore.trySetPermits(2);
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "hang", match: "evalsha", times: 1 }],
    });
    const controller = new AbortController();
    const pending = semaphore.tryAcquire({ permits: 2, signal: controller.signal });
    await expect.poll(() => stored(name), { timeout: 3_000, interval: 10 }).toBe("0");
    controller.abort(new Error("gave up"));
    await expect(pending).rejects.toThrow("gave up");
    expect(rec.background).toHaveLength(1);
    await Promise.all(rec.background);
    expect(await stored(name)).toBe("2");
    expect(await semaphore.tryAcquire({ permits: 2 })).not.toBeNull();
  });

  it("replay: a resent grant, release, addPermits, trySetPermits or drain applies once", async () => {
    const name = `${prefix}replay`;
    const { semaphore: s } = await onFaultBridge(name);
    const faultsBefore = bridge.bridge.stats().faultsInjected;
    loseNextEvalsha();
    expect(await s.trySetPermits(3)).toBe(true); // the resend answers what the first copy did
    loseNextEvalsha();
    expect(await s.tryAcquire({ permits: 2 })).not.toBeNull();
    expect(await stored(name)).toBe("1");
    loseNextEvalsha();
    expect(await s.release(2)).toBe(3);
    expect(await stored(name)).toBe("3");
    loseNextEvalsha();
    expect(await s.addPermits(2)).toBe(5);
    expect(await s.inspect()).toMatchObject({ available: 5, permits: 5 });
    loseNextEvalsha();
    expect(await s.drainPermits()).toBe(5);
    expect(await stored(name)).toBe("0");
    expect(bridge.bridge.stats().faultsInjected - faultsBefore).toBe(5);
  });

  it("a handle's release sends its acquire's request id: a late copy of the acquire then takes nothing", async () => {
    const name = `${prefix}late-copy`;
    const rec = recordingEdgeLock();
    const s = rec.edgelock.getSemaphore(name);
    await s.trySetPermits(2);
    const handle = await s.tryAcquire();
    const acquired = Object.entries(await replayRecords(raw, name)).find(([, v]) => v === "A1");
    if (!handle || !acquired) throw new Error("not acquired");
    const [id] = acquired;
    /** A copy of that acquire reaching Redis again (an HTTP retry after a lost answer). */
    const late = () =>
      raw.eval(semaphoreAcquire.source, {
        keys: [
          name,
          ...replayKeys(name),
          `edgelock_waiting:{${name}}`,
          `edgelock_wake:{${name}}`,
          takenKey(name),
          limitKey(name),
        ],
        arguments: ["1", String(rec.edgelock.replayWindow), id, "", "0"],
      });
    expect(await late()).toEqual([1, 1]); // held: answered, nothing more taken
    expect(await handle.release()).toBe(2);
    expect((await replayRecords(raw, name))[id]).toBe("R");
    const ttl = Number(await raw.pTTL(`edgelock_replay:{${name}}:${id}`));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(rec.edgelock.replayWindow);
    expect(await late()).toEqual([-1, 0]); // released: the late copy takes nothing
    expect(await stored(name)).toBe("2");
    expect(await taken(name)).toBe(0);
    expect(await handle.release()).toBe(2); // the handle's own resend: nothing more
    expect(await stored(name)).toBe("2");
  });

  it("a waiter's registration marks the count, so releases with nobody registered skip the registry", async () => {
    const name = `${prefix}mark`;
    const owner = recordingEdgeLock().edgelock.getSemaphore(name);
    await owner.trySetPermits(1);
    const held = await owner.tryAcquire();
    expect(await stored(takenKey(name))).toBe("1"); // 1 taken, nobody waiting
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getSemaphore(name).tryAcquire({ waitTime: 20_000 });
    await waiter.waited(2); // registered
    expect(await stored(takenKey(name))).toBe("1000000000000001"); // 1 taken, the mark
    const released = Date.now();
    // The permit went straight to the waiter: none is left available.
    expect(await held?.release()).toBe(0);
    const next = await pending;
    expect(next).not.toBeNull();
    expect(Date.now() - released).toBeLessThan(2_000); // handed over, not back at its 15 s bound
    // The release handed the permit to the only registered waiter and, finding nobody left,
    // cleared the mark.
    expect(await stored(takenKey(name))).toBe("1");
    expect(await raw.exists(`edgelock_waiting:{${name}}`)).toBe(0);
    expect(await next?.release()).toBe(1);
    expect(await stored(takenKey(name))).toBe("0"); // kept at 0: no DEL per release
  });

  it("delete wakes the registered waiters: they wait on Redisson's channel until the semaphore is set again", async () => {
    const name = `${prefix}delete-waiters`;
    const owner = recordingEdgeLock().edgelock.getSemaphore(name);
    await owner.trySetPermits(1);
    await owner.tryAcquire();
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock.getSemaphore(name).tryAcquire({ waitTime: 20_000 });
    await waiter.waited(2);
    expect((await owner.inspect()).waiters).toBe(1);
    expect(await owner.delete()).toBe(true);
    expect(await raw.exists(`edgelock_waiting:{${name}}`)).toBe(0);
    expect(await raw.exists(takenKey(name))).toBe(0);
    // Woken, it finds no permits set: it listens on Redisson's channel (a third wait).
    await waiter.waited(3);
    const started = Date.now();
    expect(await owner.trySetPermits(1)).toBe(true);
    expect(await pending).not.toBeNull();
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(await taken(name)).toBe(1);
  });

  it("inspect reads the state in one request; delete removes the semaphore", async () => {
    const name = `${prefix}inspect`;
    const rec = recordingEdgeLock();
    const s = rec.edgelock.getSemaphore(name);
    expect(await s.inspect()).toEqual({
      kind: "semaphore",
      name,
      ttl: -2,
      holders: [],
      exists: false,
      available: 0,
      permits: null,
      waiters: 0,
    });
    await s.trySetPermits(4);
    await s.tryAcquire({ permits: 3 });
    expect(await s.inspect()).toEqual({
      kind: "semaphore",
      name,
      ttl: -1,
      holders: [],
      exists: true,
      available: 1,
      permits: 4,
      waiters: 0,
    });
    expect(await s.delete()).toBe(true);
    expect(await s.delete()).toBe(false);
    expect(await keysOf(name)).toEqual([]);
  });

  it("a name-level release repeated with its idempotencyKey gives the permits back once", async () => {
    const name = `${prefix}keyed-release`;
    const [a, b] = [recordingEdgeLock(), recordingEdgeLock()];
    const s = a.edgelock.getSemaphore(name);
    expect(await s.trySetPermits(2)).toBe(true);
    // Two callers hold the two permits; one gives its permit back, and repeats the call (its
    // first answer was lost, say), from another client too.
    await s.acquire();
    await b.edgelock.getSemaphore(name).acquire();
    expect(await s.release(1, { idempotencyKey: "job:1" })).toBe(1);
    expect(await s.release(1, { idempotencyKey: "job:1" })).toBe(1);
    expect(await b.edgelock.getSemaphore(name).release(1, { idempotencyKey: "job:1" })).toBe(1);
    // The other holder is still counted: its own release works, and one caller gets in, not two.
    expect(await s.tryAcquire()).not.toBeNull();
    expect(await s.tryAcquire()).toBeNull();
    expect(await b.edgelock.getSemaphore(name).release(1, { idempotencyKey: "job:2" })).toBe(1);
    // Another key is another release: refused once nothing more is held than the permits set.
    expect(await s.release(1, { idempotencyKey: "job:3" })).toBe(2);
    await expect(s.release(1, { idempotencyKey: "job:4" })).rejects.toBeInstanceOf(
      OverReleaseError,
    );
    // Without a key, a repeated call is a new release (Redisson's).
    expect(await s.tryAcquire()).not.toBeNull();
    expect(await s.tryAcquire()).not.toBeNull();
    expect(await s.release()).toBe(1);
    expect(await s.release()).toBe(2);
    expect(await s.inspect()).toMatchObject({ available: 2, permits: 2 });
  });

  it("a permit handle's release takes no idempotencyKey: it is one already", async () => {
    const s = recordingEdgeLock().edgelock.getSemaphore(`${prefix}handle-key`);
    await s.trySetPermits(1);
    const handle = await s.acquire();
    expect(() => handle.release({ idempotencyKey: "k" } as never)).toThrow(
      /unknown option `idempotencyKey`/,
    );
    expect(await handle.release()).toBe(1);
  });

  it("rejects bad input with a typed error before any request", async () => {
    let requests = 0;
    const counting = bridge.redis();
    const edgelock = new EdgeLock({
      redis: counting,
      onEvent: (e) => {
        requests += e.requests;
      },
    });
    const before = bridge.bridge.stats().requests;
    const s: Semaphore = edgelock.getSemaphore(`${prefix}bad`);
    expect(() => edgelock.getSemaphore("a{b}")).toThrow(RangeError);
    await expect(s.trySetPermits(-1)).rejects.toThrow(RangeError);
    await expect(s.trySetPermits(1.5)).rejects.toThrow(RangeError);
    await expect(s.trySetPermits("3" as unknown as number)).rejects.toThrow(TypeError);
    await expect(s.trySetPermits(2 ** 31)).rejects.toThrow(RangeError);
    await expect(s.addPermits(0)).rejects.toThrow(/non-zero/);
    await expect(s.addPermits(-(2 ** 31))).rejects.toThrow(RangeError);
    await expect(s.addPermits(Number.NaN)).rejects.toThrow(RangeError);
    await expect(s.addPermits(null as unknown as number)).rejects.toThrow(TypeError);
    await expect(s.release(0)).rejects.toThrow(RangeError);
    await expect(s.release(1, { overRelease: "yes" as unknown as boolean })).rejects.toThrow(
      TypeError,
    );
    await expect(s.release(1, { force: true } as never)).rejects.toThrow(/unknown option `force`/);
    await expect(s.release(1, { idempotencyKey: "" })).rejects.toThrow(RangeError);
    await expect(s.release(1, { idempotencyKey: "k".repeat(201) })).rejects.toThrow(RangeError);
    await expect(s.release(1, { idempotencyKey: 7 as unknown as string })).rejects.toThrow(
      /`idempotencyKey` must be a string/,
    );
    await expect(s.tryAcquire({ permits: 0 })).rejects.toThrow(RangeError);
    await expect(s.tryAcquire({ waitTime: -1 })).rejects.toThrow(RangeError);
    await expect(s.tryAcquire({ signal: {} as AbortSignal })).rejects.toThrow(TypeError);
    await expect(s.tryAcquire({ leaseTime: 5 } as never)).rejects.toThrow(/unknown option/);
    await expect(s.acquire({ waitTime: 5 } as never)).rejects.toThrow(/unknown option `waitTime`/);
    await expect(s.tryAcquire([] as never)).rejects.toThrow(TypeError);
    const controller = new AbortController();
    const reason = new Error("already");
    controller.abort(reason);
    await expect(s.tryAcquire({ signal: controller.signal })).rejects.toBe(reason);
    expect(requests).toBe(0);
    expect(bridge.bridge.stats().requests).toBe(before);
  });
});
