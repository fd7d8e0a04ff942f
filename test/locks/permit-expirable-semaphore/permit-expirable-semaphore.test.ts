/**
 * Permit-expirable semaphore behaviours from Redisson's RedissonPermitExpirableSemaphoreTest over
 * the real client and the bridge, and what edgelock adds: permits taken as leases (renewed by
 * the timer, released once), an expired permit returning to the pool and waking a waiter,
 * replay-safe grants and releases, cancellation, contention, Redisson's byte layout for ids,
 * validation, inspection, and no key left behind.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  EdgeLock,
  LeaseLostError,
  type PermitExpirableSemaphore,
  type PermitLease,
  PermitNotHeldError,
} from "../../../src/index.js";
import { permitExpirableSemaphoreAcquire } from "../../../src/lua/permit-expirable-semaphore.gen.js";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import { isReplayRecord, recordingEdgeLock, replayKeys } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();
afterEach(() => {
  bridge.bridge.clearFaults();
});

const timeouts = (name: string) => `{${name}}:timeout`;
const stored = async (name: string) => String(await raw.get(name));
/** Keys of `name` other than its replay records. */
const keysOf = async (name: string) =>
  (await raw.keys(`*${name}*`))
    .map(String)
    .filter((k) => !isReplayRecord(name, k))
    .sort();

/** The default replay window, in ms (recordingEdgeLock leaves it). */
const WINDOW_MS = 30_000;

/**
 * A copy of the acquire that took `lease`'s permits arriving late (it was in flight all along),
 * sent behind the library's back with the same request id and permit ids: its reply.
 */
async function lateCopy(name: string, lease: PermitLease, leaseTime: number) {
  return raw.eval(permitExpirableSemaphoreAcquire.source, {
    keys: [
      name,
      timeouts(name),
      ...replayKeys(name),
      `redisson_sc:{${name}}`,
      `edgelock_waiting:{${name}}`,
      `edgelock_wake:{${name}}`,
      `edgelock_waiting:{${name}}:any`,
    ],
    arguments: [
      String(leaseTime),
      String(WINDOW_MS),
      lease.id,
      "",
      "30000",
      "0",
      "",
      ...lease.permitIds,
    ],
  });
}

function held<T>(lease: T | null): T {
  if (lease === null) throw new Error("no permits");
  return lease;
}

/** A semaphore on the fault bridge, every script it runs loaded (so faults hit EVALSHA). */
async function onFaultBridge(name: string) {
  const rec = recordingEdgeLock({}, bridge.redis());
  const warm = rec.edgelock.getPermitExpirableSemaphore(`${prefix}warm`);
  await warm.trySetPermits(1);
  const lease = held(await warm.tryAcquire({ leaseTime: 5_000 }));
  await lease.renew();
  await lease.release();
  await warm.tryRelease(lease.permitIds[0] ?? "");
  await warm.availablePermits();
  return { rec, semaphore: rec.edgelock.getPermitExpirableSemaphore(name) };
}

describe("permit-expirable semaphore", () => {
  it("Redisson's basics: permits with ids and leases, release by lease or by id, counts", async () => {
    const name = `${prefix}basics`;
    const s = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    expect(await s.tryAcquire({ leaseTime: 5_000 })).toBeNull();
    expect(await s.trySetPermits(3)).toBe(true);
    expect(await s.trySetPermits(1)).toBe(false);
    const two = held(await s.tryAcquire({ permits: 2, leaseTime: 5_000 }));
    expect(two.permitIds).toHaveLength(2);
    for (const id of two.permitIds) expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(await s.tryAcquire({ permits: 2, leaseTime: 5_000 })).toBeNull(); // all or none
    expect(await s.availablePermits()).toBe(1);
    expect(await s.acquiredPermits()).toBe(2);
    const one = held(await s.tryAcquire({ leaseTime: 5_000 }));
    expect(await s.tryRelease(one.permitIds[0] ?? "")).toBe(true);
    expect(await s.tryRelease(one.permitIds[0] ?? "")).toBe(false);
    await expect(s.release(one.permitIds[0] ?? "")).rejects.toBeInstanceOf(PermitNotHeldError);
    // The lease finds its permit gone: "expired", and it ends.
    expect(await one.release()).toBe("expired");
    expect(await two.release()).toBe("released");
    expect(await two.release()).toBe("released"); // once
    expect(await s.availablePermits()).toBe(3);
    expect(await s.acquiredPermits()).toBe(0);
    expect(await s.addPermits(-1)).toBe(2);
    expect(await keysOf(name)).toEqual([`edgelock_permits:{${name}}`, name].sort());
  });

  it("an expired permit returns to the pool and wakes a waiter when its lease runs out", async () => {
    const name = `${prefix}expires`;
    const crashed = recordingEdgeLock();
    const s = crashed.edgelock.getPermitExpirableSemaphore(name);
    await s.trySetPermits(1);
    const lost = held(await s.tryAcquire({ leaseTime: 400 })); // never released: a crash
    const waiter = recordingEdgeLock();
    const started = Date.now();
    const lease = held(
      await waiter.edgelock.getPermitExpirableSemaphore(name).tryAcquire({
        waitTime: 10_000,
        leaseTime: 5_000,
      }),
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(Date.now() - started).toBeLessThan(3_000);
    // An attempt, the subscription, an attempt, one wait bounded by the lease that was running
    // out, one attempt.
    expect(waiter.requests("acquire")).toBe(4);
    expect(lost.signal.aborted).toBe(true); // the local expiry passed too
    expect(await s.tryRelease(lost.permitIds[0] ?? "")).toBe(false);
    expect(await lease.release()).toBe("released");
    expect(await s.availablePermits()).toBe(1);
  });

  it("a release hands the permit to a blocked waiter: held on the message, its lease exact, confirmed within the claim window", async () => {
    const name = `${prefix}woken`;
    const s = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await s.trySetPermits(1);
    const first = held(await s.tryAcquire({ leaseTime: 20_000 }));
    const waiter = recordingEdgeLock();
    const pending = waiter.edgelock
      .getPermitExpirableSemaphore(name)
      .tryAcquire({ waitTime: 20_000, leaseTime: 5_000 });
    // Subscribed and registered: its second wait.
    await waiter.waited(2);
    const started = Date.now();
    await first.release();
    // Straight after the release, before the waiter's answer: the permit is already taken, with
    // the claim window's lease (2 s), not the waiter's 5 s.
    const handed = await s.inspect();
    expect(handed.acquired).toBe(1);
    expect(handed.holders[0]?.ttl).toBeLessThanOrEqual(2_000);
    const second = held(await pending);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(second.permitIds).toEqual([handed.holders[0]?.id]);
    // An attempt, the subscription, an attempt; the hand-off's message took no request.
    expect(waiter.requests("acquire")).toBe(3);
    // Its lease never believes it holds longer than Redis does: at most the claim window from
    // its busy attempt, which came before the hand-off.
    expect(second.expiresAt - Date.now()).toBeLessThanOrEqual(2_000);
    // Confirmed within the claim window: the full lease.
    await waiter.until((e) => e.type === "renew" && e.renewed);
    expect((await s.inspect()).holders[0]?.ttl).toBeGreaterThan(2_000);
    expect(second.expiresAt - Date.now()).toBeGreaterThan(2_000);
    expect(await second.release()).toBe("released");
    expect((await s.inspect()).waiters).toBe(0);
    expect(await s.availablePermits()).toBe(1);
  });

  it("the timer keeps permits without leaseTime alive; renew() and updateLeaseTime extend, never shorten", async () => {
    const name = `${prefix}keep`;
    const rec = recordingEdgeLock({ watchdogTimeout: 300 });
    const s = rec.edgelock.getPermitExpirableSemaphore(name);
    await s.trySetPermits(1);
    const lease = held(await s.tryAcquire());
    expect(lease.watchdog).toBe(true);
    await rec.until((_e, all) => all.filter((e) => e.type === "renew").length >= 4);
    expect(lease.signal.aborted).toBe(false);
    expect(await s.acquiredPermits()).toBe(1);
    await lease.renew(10_000);
    const id = lease.permitIds[0] ?? "";
    const ttlAfterRenew = (await s.inspect()).holders[0]?.ttl ?? 0;
    expect(ttlAfterRenew).toBeGreaterThan(9_000);
    expect(await s.updateLeaseTime(id, 1_000)).toBe(true); // never shortens
    expect((await s.inspect()).holders[0]?.ttl).toBeGreaterThan(8_000);
    expect(await s.updateLeaseTime(id, 60_000)).toBe(true);
    expect((await s.inspect()).holders[0]?.ttl).toBeGreaterThan(50_000);
    expect(await lease.release()).toBe("released");
    expect(await s.updateLeaseTime(id, 1_000)).toBe(false);
    await expect(lease.renew()).rejects.toBeInstanceOf(LeaseLostError);
  });

  it("a lease found lost at renewal aborts its signal", async () => {
    const name = `${prefix}lost`;
    const s = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await s.trySetPermits(1);
    const lease = held(await s.tryAcquire({ leaseTime: 10_000 }));
    await s.release(lease.permitIds[0] ?? ""); // someone else released it by id
    await expect(lease.renew()).rejects.toBeInstanceOf(LeaseLostError);
    expect(lease.signal.aborted).toBe(true);
  });

  it("a lease travels to another invocation (toJSON / restoreLease) and is released there", async () => {
    const name = `${prefix}restore`;
    const s = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await s.trySetPermits(2);
    const lease = held(await s.tryAcquire({ permits: 2, leaseTime: 10_000 }));
    const json = JSON.parse(JSON.stringify(lease));
    expect(json).toMatchObject({ kind: "permit", permitIds: [...lease.permitIds] });
    const other = recordingEdgeLock().edgelock;
    const restored = other.restoreLease(json);
    expect(restored.permitIds).toEqual(lease.permitIds);
    await restored.renew(20_000);
    expect(await restored.release()).toBe("released");
    expect(await s.availablePermits()).toBe(2);
    expect(() => other.restoreLease({ ...json, permitIds: ["xyz"] })).toThrow(/permitIds/);
    expect(() => other.restoreLease({ ...json, permitIds: [] })).toThrow(/permitIds/);
    const { permitIds: _, ...withoutIds } = json;
    expect(() => other.restoreLease(withoutIds)).toThrow(/needs `lease.permitIds`/);
  });

  it("10 concurrent holders on 3 permits never exceed 3", async () => {
    const name = `${prefix}ten`;
    await recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name).trySetPermits(3);
    let inside = 0;
    let most = 0;
    const started = Date.now();
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        const s = recordingEdgeLock({}, bridge.redis()).edgelock.getPermitExpirableSemaphore(name);
        for (let i = 0; i < 4; i++) {
          const lease = held(await s.tryAcquire({ waitTime: 20_000, leaseTime: 10_000 }));
          inside += 1;
          most = Math.max(most, inside);
          expect(inside).toBeLessThanOrEqual(3);
          await new Promise((r) => setTimeout(r, 20));
          inside -= 1;
          expect(await lease.release()).toBe("released");
        }
      }),
    );
    expect(most).toBe(3);
    // About 1 s when every release wakes whom it frees a permit for; a lost wake-up leaves a
    // waiter to the holder's 10 s lease.
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(await stored(name)).toBe("3");
    expect(await raw.exists(timeouts(name))).toBe(0);
  });

  it("replay: a resent grant takes its permits once; a resent release answers true and adds once", async () => {
    const name = `${prefix}replay`;
    const { semaphore: s } = await onFaultBridge(name);
    await s.trySetPermits(2);
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "close", match: "evalsha", times: 1 }],
    });
    const lease = held(await s.tryAcquire({ leaseTime: 10_000 }));
    expect(await s.acquiredPermits()).toBe(1);
    expect(await stored(name)).toBe("1");
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "close", match: "evalsha", times: 1 }],
    });
    expect(await s.tryRelease(lease.permitIds[0] ?? "")).toBe(true);
    expect(await stored(name)).toBe("2");
    expect(await s.acquiredPermits()).toBe(0);
  });

  it("replay with a lease at least the replay window: the permits are their own record (the last permit too)", async () => {
    const name = `${prefix}replay-long`;
    const { semaphore: s } = await onFaultBridge(name);
    await s.trySetPermits(1);
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "close", match: "evalsha", times: 1 }],
    });
    // The resend finds no permit left, and the one it took under its own id.
    const lease = held(await s.tryAcquire({ leaseTime: 60_000 }));
    expect(await stored(name)).toBe("0");
    expect(await s.acquiredPermits()).toBe(1);
    expect(await raw.exists(`edgelock_replay:{${name}}:${lease.id}`)).toBe(0);
    expect(await lease.release()).toBe("released");
    expect(await stored(name)).toBe("1");
  });

  it("a late copy of an acquire takes nothing once its permits went: released, released by id, expired and reclaimed", async () => {
    const name = `${prefix}late-copy`;
    const s = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await s.trySetPermits(2);
    // While the permits are held, a copy answers them and takes nothing more.
    const long = held(await s.tryAcquire({ leaseTime: 60_000 }));
    expect(await lateCopy(name, long, 60_000)).toEqual([1, 1]);
    expect(await s.acquiredPermits()).toBe(1);
    // The lease's release records under the acquire's id.
    expect(await long.release()).toBe("released");
    expect(await lateCopy(name, long, 60_000)).toEqual([-1, 0]);
    // A release by id is another request: it tells the acquire.
    const byId = held(await s.tryAcquire({ leaseTime: 60_000 }));
    expect(await s.tryRelease(byId.permitIds[0] ?? "")).toBe(true);
    expect(await lateCopy(name, byId, 60_000)).toEqual([-1, 0]);
    // A lease shorter than the replay window records its acquire: after it expired and was
    // reclaimed, a copy still finds that record.
    const short = held(await s.tryAcquire({ leaseTime: 200 }));
    await new Promise((r) => setTimeout(r, 300));
    const both = held(await s.tryAcquire({ permits: 2, leaseTime: 10_000 }));
    expect(await s.tryRelease(short.permitIds[0] ?? "")).toBe(false);
    expect(await both.release()).toBe("released");
    expect(await lateCopy(name, short, 200)).toEqual([-1, 0]);
    expect(await stored(name)).toBe("2");
    expect(await s.acquiredPermits()).toBe(0);
    expect(await raw.exists(timeouts(name))).toBe(0);
  });

  it("a release reads no clock before the lease's expiresAt; after it, an expired permit counts as not held", async () => {
    const name = `${prefix}release-clock`;
    const s = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await s.trySetPermits(1);
    // Its lease ran out in Redis but nobody reclaimed the permit: given back, not held.
    const stale = held(await s.tryAcquire({ leaseTime: 200 }));
    await new Promise((r) => setTimeout(r, 300));
    expect(await raw.zCard(timeouts(name))).toBe(1);
    expect(await stale.release()).toBe("expired");
    expect(await stored(name)).toBe("1");
    expect(await raw.exists(timeouts(name))).toBe(0);
  });

  it("an attempt applied but unanswered when aborted gives its permits back", async () => {
    const name = `${prefix}cancel`;
    const { rec, semaphore } = await onFaultBridge(name);
    await semaphore.trySetPermits(1);
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "hang", match: "evalsha", times: 1 }],
    });
    const controller = new AbortController();
    const pending = semaphore.tryAcquire({ leaseTime: 30_000, signal: controller.signal });
    await expect.poll(() => stored(name), { timeout: 3_000, interval: 10 }).toBe("0");
    controller.abort(new Error("gave up"));
    await expect(pending).rejects.toThrow("gave up");
    await Promise.all(rec.background);
    expect(await stored(name)).toBe("1");
    expect(await semaphore.acquiredPermits()).toBe(0);
  });

  it("interop: ids are Redisson's 16 raw bytes; a JVM-taken permit is listed and released by id", async () => {
    const name = `${prefix}jvm`;
    const s = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    await s.trySetPermits(2);
    const lease = held(await s.tryAcquire({ leaseTime: 10_000 }));
    const members = await raw.sendCommand(["ZRANGE", timeouts(name), "0", "-1"], {
      returnBuffers: true,
    } as never);
    expect((members as unknown as Buffer[]).map((b) => b.toString("hex"))).toEqual([
      ...lease.permitIds,
    ]);
    // A Redisson client takes the other permit without a lease (the non-expirable score).
    const jvmId = "0123456789abcdef0123456789abcdef";
    await raw.decr(name);
    await raw.sendCommand([
      "ZADD",
      timeouts(name),
      "922337203685477",
      Buffer.from(jvmId, "hex") as never,
    ]);
    const inspection = await s.inspect();
    expect(inspection.acquired).toBe(2);
    expect(inspection.holders).toContainEqual({ owner: jvmId, id: jvmId, ttl: -1 });
    // Busy, and no lease will run out: the waiter is told -1 and waits for a release.
    expect(await s.tryAcquire({ leaseTime: 1_000 })).toBeNull();
    expect(await s.tryRelease(jvmId)).toBe(true);
    expect(await lease.release()).toBe("released");
    expect(await stored(name)).toBe("2");
  });

  it("inspect reads the state in one request; delete removes every key", async () => {
    const name = `${prefix}inspect`;
    const s = recordingEdgeLock().edgelock.getPermitExpirableSemaphore(name);
    expect(await s.inspect()).toEqual({
      kind: "permit-expirable-semaphore",
      name,
      ttl: -2,
      exists: false,
      available: 0,
      acquired: 0,
      permits: null,
      waiters: 0,
      holders: [],
    });
    await s.trySetPermits(3);
    const lease = held(await s.tryAcquire({ leaseTime: 10_000 }));
    const inspection = await s.inspect();
    expect(inspection).toMatchObject({
      ttl: -1,
      exists: true,
      available: 2,
      acquired: 1,
      permits: 3,
    });
    expect(inspection.holders).toHaveLength(1);
    expect(inspection.holders[0]?.id).toBe(lease.permitIds[0]);
    expect(inspection.holders[0]?.ttl).toBeGreaterThan(9_000);
    expect(await s.delete()).toBe(true);
    expect(await s.delete()).toBe(false);
    expect(await keysOf(name)).toEqual([]);
    expect(await lease.release()).toBe("expired");
  });

  it("rejects bad input with a typed error before any request", async () => {
    let requests = 0;
    const edgelock = new EdgeLock({
      redis: bridge.redis(),
      onEvent: (e) => {
        requests += e.requests;
      },
    });
    const before = bridge.bridge.stats().requests;
    const s: PermitExpirableSemaphore = edgelock.getPermitExpirableSemaphore(`${prefix}bad`);
    expect(() => edgelock.getPermitExpirableSemaphore("")).toThrow(RangeError);
    await expect(s.tryAcquire({ permits: 0 })).rejects.toThrow(RangeError);
    await expect(s.tryAcquire({ permits: 1_001 })).rejects.toThrow(/at most 1000/);
    await expect(s.tryAcquire({ leaseTime: 0 })).rejects.toThrow(RangeError);
    await expect(s.tryAcquire({ waitTime: 1.5 })).rejects.toThrow(RangeError);
    await expect(s.tryAcquire({ owner: "" })).rejects.toThrow(RangeError);
    await expect(s.tryAcquire({ keepAlive: "forever" as never })).rejects.toThrow(TypeError);
    // A keeper keep-alive needs a keeper: none given, none configured.
    await expect(s.tryAcquire({ keepAlive: { maxHoldTime: 1_000 } })).rejects.toThrow(
      /`keepAlive.keeper` is required/,
    );
    await expect(s.tryAcquire({ permit: 1 } as never)).rejects.toThrow(/unknown option `permit`/);
    await expect(s.acquire({ waitTime: 1 } as never)).rejects.toThrow(/unknown option/);
    await expect(s.tryRelease("nope")).rejects.toThrow(/32 lowercase hex/);
    await expect(s.release(42 as never)).rejects.toThrow(TypeError);
    await expect(s.updateLeaseTime("nope", 1_000)).rejects.toThrow(TypeError);
    await expect(s.updateLeaseTime("0".repeat(32), -5)).rejects.toThrow(RangeError);
    await expect(s.trySetPermits(-1)).rejects.toThrow(RangeError);
    await expect(s.addPermits(0)).rejects.toThrow(RangeError);
    expect(requests).toBe(0);
    expect(bridge.bridge.stats().requests).toBe(before);
  });
});
