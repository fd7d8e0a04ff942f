/**
 * MultiLock (Redisson RedissonMultiLock) over members of different kinds on two independent
 * endpoints: all or nothing, release of what was taken on partial failure, one lease whose
 * expiresAt is the earliest member's, per-member release outcomes, keep-alive of every member,
 * loss of a member, abort, validation.
 */
import { afterEach, describe, expect, it } from "vitest";
import { LeaseLostError, TransportError } from "../../../src/index.js";
import { type Endpoint, useEndpoints } from "../../support/endpoints.js";
import { keyPrefix } from "../../support/env.js";

const prefix = keyPrefix();
const endpoints = useEndpoints(2);
const a = () => endpoints[0] as Endpoint;
const b = () => endpoints[1] as Endpoint;
const background: Promise<unknown>[] = [];
afterEach(async () => {
  for (const e of endpoints) e.bridge.clearFaults();
  await Promise.allSettled(background.splice(0));
});

/** A MultiLock over a reentrant lock on A, a fair lock on B and a write lock on A. */
function mixed(name: string, options = {}) {
  const onA = a().edgelock({ waitUntil: (p) => background.push(p), ...options });
  const onB = b().edgelock({ waitUntil: (p) => background.push(p), ...options });
  const locks = [
    onA.getLock(`${name}:x`),
    onB.getFairLock(`${name}:y`),
    onA.getReadWriteLock(`${name}:z`).writeLock(),
  ] as const;
  return { locks, multi: onA.getMultiLock(...locks), onA, onB };
}

describe("MultiLock", () => {
  it("takes every member as one owner; one lease, expiresAt the earliest member's; release frees all", async () => {
    const { locks, multi } = mixed(`${prefix}all`);
    const lease = await multi.tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    expect(lease.name).toBe(locks.map((l) => l.name).join("+"));
    expect(lease.members).toHaveLength(3);
    for (const [i, member] of lease.members.entries()) {
      expect(member.owner).toBe(lease.owner);
      expect(await locks[i]?.isHeldBy(lease.owner)).toBe(true);
    }
    expect(lease.expiresAt).toBe(Math.min(...lease.members.map((m) => m.expiresAt)));
    expect(() => JSON.stringify(lease)).toThrow(/cannot be serialized/);
    expect(await lease.release()).toBe("released");
    for (const lock of locks) expect(await lock.isLocked()).toBe(false);
    expect(await lease.release()).toBe("released"); // once
  });

  it("all or nothing: a busy member fails the call and the members taken are released", async () => {
    const { locks, multi, onB } = mixed(`${prefix}none`);
    const blocker = await onB.getFairLock(locks[1].name).lock({ leaseTime: 10_000 });
    expect(await multi.tryLock({ leaseTime: 10_000, waitTime: 200 })).toBeNull();
    expect(await locks[0].isLocked()).toBe(false);
    expect(await locks[2].isLocked()).toBe(false);
    // Freed while waiting: the call gets them all.
    const pending = multi.tryLock({ leaseTime: 10_000, waitTime: 10_000 });
    await new Promise((r) => setTimeout(r, 100));
    await blocker.release();
    const lease = await pending;
    expect(lease?.members).toHaveLength(3);
    await lease?.release();
  });

  it("a member whose Redis fails: the error propagates and the members taken are released", async () => {
    const { locks, multi } = mixed(`${prefix}error`);
    b().bridge.setFaults({ rules: [{ action: "fail", mode: "503" }] });
    const error = await multi.tryLock({ leaseTime: 10_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransportError);
    b().bridge.clearFaults();
    expect(await locks[0].isLocked()).toBe(false);
  });

  it("releaseAll reports each member's outcome instead of stopping at the first failure", async () => {
    // definiteWithin 0: a member's release gives up after its first send (and the transport's
    // one resend after a 5xx), so the failure reaches releaseAll.
    const { locks, multi } = mixed(`${prefix}outcomes`, { definiteWithin: 0 });
    const lease = await multi.tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    await locks[0].forceUnlock();
    b().bridge.setFaults({ rules: [{ action: "fail", mode: "503", times: 2 }] });
    const outcomes = await lease.releaseAll();
    expect(outcomes[0]).toEqual({ name: locks[0].name, result: "expired" });
    expect(outcomes[1]?.name).toBe(locks[1].name);
    expect((outcomes[1] as { error: unknown }).error).toBeInstanceOf(TransportError);
    expect(outcomes[2]).toEqual({ name: locks[2].name, result: "released" });
    // The failed member is retried; the others answer what they did.
    const again = await lease.releaseAll();
    expect(again.map((o) => ("result" in o ? o.result : "error"))).toEqual([
      "expired",
      "released",
      "released",
    ]);
    expect(await locks[1].isLocked()).toBe(false);
  });

  it("watchdog mode: the timer renews every member past the lease", async () => {
    const { locks, multi } = mixed(`${prefix}watchdog`, { watchdogTimeout: 300 });
    const lease = await multi.lock();
    expect(lease.watchdog).toBe(true);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(lease.signal.aborted).toBe(false);
    for (const lock of locks) expect(await lock.isHeldBy(lease.owner)).toBe(true);
    expect(lease.expiresAt).toBeGreaterThan(Date.now());
    await lease.release();
  });

  it("a member found lost loses the whole lease", async () => {
    const { locks, multi } = mixed(`${prefix}lost`);
    const lease = await multi.tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    await locks[2].forceUnlock();
    await expect(lease.renew()).rejects.toBeInstanceOf(LeaseLostError);
    expect(lease.signal.aborted).toBe(true);
    expect((await lease.releaseAll()).map((o) => ("result" in o ? o.result : "error"))).toEqual([
      "released",
      "released",
      "expired",
    ]);
  });

  it("an abort while waiting rejects with the reason and leaves no member taken", async () => {
    const { locks, multi, onA } = mixed(`${prefix}abort`);
    const blocker = await onA
      .getReadWriteLock(`${prefix}abort:z`)
      .readLock()
      .lock({ leaseTime: 10_000 });
    const controller = new AbortController();
    const reason = new Error("stop");
    const pending = multi.lock({ signal: controller.signal, leaseTime: 10_000 });
    await new Promise((r) => setTimeout(r, 150));
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    await Promise.allSettled(background.splice(0));
    expect(await locks[0].isLocked()).toBe(false);
    expect(await locks[1].isLocked()).toBe(false);
    await blocker.release();
  });

  it("rejects bad members and options with a typed error before any request", async () => {
    const { multi, onA } = mixed(`${prefix}bad`);
    expect(() => onA.getMultiLock()).toThrow(RangeError);
    expect(() => onA.getMultiLock({} as never)).toThrow(/member 0 is not a lock/);
    const before = a().bridge.stats().requests;
    await expect(multi.tryLock({ waitTime: -1 })).rejects.toThrow(RangeError);
    await expect(multi.tryLock({ leaseTime: 0 })).rejects.toThrow(RangeError);
    await expect(multi.tryLock({ owner: "" })).rejects.toThrow(RangeError);
    await expect(multi.tryLock({ keepAlive: { maxHoldTime: 1_000 } as never })).rejects.toThrow(
      /not by a LeaseKeeper/,
    );
    await expect(multi.tryLock({ wait: 1 } as never)).rejects.toThrow(/unknown option `wait`/);
    await expect(multi.lock({ waitTime: 1 } as never)).rejects.toThrow(/unknown option/);
    expect(a().bridge.stats().requests).toBe(before);
  });
});
