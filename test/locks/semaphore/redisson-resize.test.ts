/**
 * A semaphore shared with Redisson clients that resize it: after Redisson's `addPermits`,
 * `reducePermits`, or `delete()` + `trySetPermits`, edgelock holders give back what they took
 * without an OverReleaseError and their permits come back, as in Redisson; the over-release
 * guard still refuses a release nobody took. Redisson's side runs its own scripts (fixtures).
 */
import { afterEach, describe, expect, it } from "vitest";
import { OverReleaseError } from "../../../src/index.js";
import {
  REDISSON_SEMAPHORE_ACQUIRE,
  REDISSON_SEMAPHORE_ADD_PERMITS,
  REDISSON_SEMAPHORE_TRY_SET_PERMITS,
} from "../../fixtures/redisson.js";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();
afterEach(() => {
  bridge.bridge.clearFaults();
});

const takenKey = (name: string) => `edgelock_taken:{${name}}`;
/** Permits edgelock callers hold: the count, without the waiter mark (lua/lib/taken.lua). */
const taken = async (name: string) => Number((await raw.get(takenKey(name))) ?? 0) % 1e15;

/** A Redisson client on the same Redis: its scripts, its keys. */
function jvm(name: string) {
  const channel = `redisson_sc:{${name}}`;
  return {
    addPermits: async (n: number) =>
      Number(
        await raw.eval(REDISSON_SEMAPHORE_ADD_PERMITS, {
          keys: [name, channel],
          arguments: [String(n)],
        }),
      ),
    reducePermits: (n: number) =>
      raw.eval(REDISSON_SEMAPHORE_ADD_PERMITS, { keys: [name, channel], arguments: [String(-n)] }),
    delete: () => raw.del(name),
    trySetPermits: (n: number) =>
      raw.eval(REDISSON_SEMAPHORE_TRY_SET_PERMITS, {
        keys: [name, channel],
        arguments: [String(n)],
      }),
    tryAcquire: (n: number) =>
      raw.eval(REDISSON_SEMAPHORE_ACQUIRE, { keys: [name], arguments: [String(n)] }),
  };
}

describe("semaphore resized by a Redisson client", () => {
  it("after Redisson's addPermits, holders give back what they took; a release nobody took is still refused", async () => {
    const name = `${prefix}add`;
    const a = recordingEdgeLock().edgelock.getSemaphore(name);
    const b = recordingEdgeLock().edgelock.getSemaphore(name);
    await a.trySetPermits(2);
    expect(await a.tryAcquire()).not.toBeNull();
    expect(await b.tryAcquire()).not.toBeNull();
    expect(await jvm(name).addPermits(3)).toBe(3);
    expect(await a.release()).toBe(4);
    expect(await b.release()).toBe(5); // 2 set + 3 added: all back
    expect(await taken(name)).toBe(0);
    const over = await a.release().catch((e: unknown) => e);
    expect(over).toBeInstanceOf(OverReleaseError);
    expect(over).toMatchObject({ permits: 1, available: 5, limit: 2 });
    expect(await jvm(name).tryAcquire(5)).toBe(1);
  });

  it("after Redisson's delete() + trySetPermits(5) on a name edgelock set to 2, both holders' permits come back", async () => {
    const name = `${prefix}reset`;
    const s = recordingEdgeLock().edgelock.getSemaphore(name);
    await s.trySetPermits(2);
    expect(await s.tryAcquire({ permits: 2 })).not.toBeNull();
    expect(await jvm(name).delete()).toBe(1);
    expect(await jvm(name).trySetPermits(5)).toBe(1);
    expect(await s.release()).toBe(6);
    expect(await s.release()).toBe(7); // Redisson's semantics: releases add to the new value
    expect(await jvm(name).tryAcquire(7)).toBe(1);
  });

  it("after Redisson's delete() alone, a holder's release recreates the semaphore with its permits", async () => {
    const name = `${prefix}deleted`;
    const s = recordingEdgeLock().edgelock.getSemaphore(name);
    await s.trySetPermits(1);
    expect(await s.tryAcquire()).not.toBeNull();
    await jvm(name).delete();
    expect(await s.release()).toBe(1);
    expect(await jvm(name).tryAcquire(1)).toBe(1);
  });

  it("after Redisson's reducePermits, holders' releases return their permits to the smaller semaphore", async () => {
    const name = `${prefix}reduce`;
    const s = recordingEdgeLock().edgelock.getSemaphore(name);
    await s.trySetPermits(3);
    expect(await s.tryAcquire({ permits: 2 })).not.toBeNull();
    await jvm(name).reducePermits(2);
    expect(await s.availablePermits()).toBe(-1);
    expect(await s.release(2)).toBe(1); // 3 - 2 reduced = 1 in all, all of it available
    expect(await jvm(name).tryAcquire(1)).toBe(1);
    expect(await jvm(name).tryAcquire(1)).toBe(0);
  });

  it("drained permits count as taken; edgelock's delete forgets what was taken", async () => {
    const name = `${prefix}drain`;
    const s = recordingEdgeLock().edgelock.getSemaphore(name);
    await s.trySetPermits(2);
    expect(await s.drainPermits()).toBe(2);
    expect(await taken(name)).toBe(2);
    await jvm(name).addPermits(1);
    expect(await s.release(2)).toBe(3);
    expect(await s.tryAcquire()).not.toBeNull();
    expect(await s.delete()).toBe(true);
    expect(await raw.exists(takenKey(name))).toBe(0);
    await s.trySetPermits(1);
    await expect(s.release()).rejects.toBeInstanceOf(OverReleaseError);
  });

  it("permits a Redisson client took, released through edgelock beyond the recorded set, need overRelease", async () => {
    const name = `${prefix}jvm-took`;
    const s = recordingEdgeLock().edgelock.getSemaphore(name);
    await s.trySetPermits(1);
    await jvm(name).addPermits(2);
    expect(await jvm(name).tryAcquire(1)).toBe(1);
    const refused = await s.release().catch((e: unknown) => e);
    expect(refused).toMatchObject({ permits: 1, available: 2, limit: 1 });
    expect(await s.release(1, { overRelease: true })).toBe(3);
  });

  it("a resent release and a cancelled acquire count what was taken once", async () => {
    const name = `${prefix}replay`;
    const rec = recordingEdgeLock({}, bridge.redis());
    const s = rec.edgelock.getSemaphore(name);
    await s.trySetPermits(3);
    expect(await s.tryAcquire({ permits: 2 })).not.toBeNull();
    expect(await s.tryAcquire()).not.toBeNull();
    expect(await taken(name)).toBe(3);
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "close", match: "evalsha", times: 1 }],
    });
    expect(await s.release(2)).toBe(2);
    expect(bridge.bridge.stats().faultsInjected).toBeGreaterThan(0);
    expect(await taken(name)).toBe(1);
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "hang", match: "evalsha", times: 1 }],
    });
    const controller = new AbortController();
    const pending = s.tryAcquire({ permits: 2, signal: controller.signal });
    await expect.poll(() => taken(name), { timeout: 3_000, interval: 10 }).toBe(3);
    controller.abort(new Error("gave up"));
    await expect(pending).rejects.toThrow("gave up");
    await Promise.all(rec.background);
    expect(await taken(name)).toBe(1);
    expect(await s.release()).toBe(3);
    expect(await taken(name)).toBe(0);
  });
});
