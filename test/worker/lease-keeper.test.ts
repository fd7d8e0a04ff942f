/**
 * LeaseKeeper in real workerd, against the real bridge and redis-server: renewals across lease
 * times (self-firing alarms and runDurableObjectAlarm), release, loss, maxHoldTime, failed
 * renewals, at-least-once alarms and a release racing an in-flight renewal.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { Redis } from "@upstash/redis/cloudflare";
import { describe, expect, it } from "vitest";
import {
  EdgeLock,
  type Lease,
  LeaseLostError,
  ServiceLimitError,
  TransportError,
} from "../../src/index.js";
import { LeaseKeeper } from "../../worker/lease-keeper.js";
import {
  elapse,
  eventually,
  keeperAlarm,
  keeperKeys,
  keeperStatus,
  keeperStub,
  keyPrefix,
  parkAlarm,
  recordingEdgeLock,
  useKeeperInstance,
  workerBridge,
  workerBridgeControl,
} from "./support.js";

const prefix = keyPrefix();
const instance = useKeeperInstance();

/** Acquires a fresh lock in watchdog mode (TTL `leaseTime`), kept alive by the keeper only. */
async function hold(leaseTime: number, maxHoldTime = 60_000) {
  const rec = recordingEdgeLock({ watchdogTimeout: leaseTime });
  const lock = rec.edgelock.getLock(`${prefix}${crypto.randomUUID()}`);
  const lease = await lock.lock({ keepAlive: { maxHoldTime, instance: instance.name } });
  return { edgelock: rec.edgelock, events: rec.events, until: rec.until, lock, lease };
}

function aborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener("abort", () => resolve(signal.reason), { once: true });
  });
}

/** Samples the lock's PTTL every 20 ms for `ms` and returns the smallest value seen. */
async function minPttlOver(lock: { remainTimeToLive(): Promise<number> }, ms: number) {
  let min = Number.POSITIVE_INFINITY;
  const end = Date.now() + ms;
  while (Date.now() < end) {
    min = Math.min(min, await lock.remainTimeToLive());
    await elapse(20);
  }
  return min;
}

/** Waits until the registered lease is due (a period minus the batching slack has passed). */
const untilDue = (leaseTime: number) => elapse(Math.ceil(leaseTime / 6) + 100);

/**
 * After an alarm whose renewal failed: the lease is still renewing with one failure counted, and
 * the keeper's next alarm is a retry within `leaseTime / 9` (+50 ms), not a renewal period away.
 */
async function expectRetryScheduled(lease: Lease, leaseTime: number) {
  expect(await keeperStatus(instance.name, lease.id)).toMatchObject({
    state: "renewing",
    failures: 1,
  });
  const retryAt = await keeperAlarm(instance.name);
  expect(retryAt).not.toBeNull();
  expect((retryAt ?? 0) - Date.now()).toBeLessThanOrEqual(leaseTime / 9 + 50);
}

/**
 * Runs that retry by hand on a link that answers again: it renews (failures back to 0, the TTL
 * within 500 ms of `leaseTime`), and the lease then releases.
 */
async function expectRetryRenews(held: Awaited<ReturnType<typeof hold>>, leaseTime: number) {
  expect(await runDurableObjectAlarm(keeperStub(instance.name))).toBe(true);
  expect(await keeperStatus(instance.name, held.lease.id)).toMatchObject({
    state: "renewing",
    failures: 0,
  });
  expect(await held.lock.remainTimeToLive()).toBeGreaterThan(leaseTime - 500);
  expect(await held.lease.release()).toBe("released");
}

describe("renewal", () => {
  it("keeps a lease alive past five lease times with self-firing alarms, then stops on release", async () => {
    // 600 ms leases renewed every 200 ms: slack for a CI machine whose 2 cores run other tests.
    const { lock, lease, events } = await hold(600);
    await workerBridgeControl.resetStats();
    expect(await minPttlOver(lock, 3_000)).toBeGreaterThan(0);
    expect(await lock.isHeldBy(lease.owner)).toBe(true);
    expect(lease.signal.aborted).toBe(false);
    const renewals = (await workerBridgeControl.stats()).requests;
    expect(renewals).toBeGreaterThanOrEqual(5);
    // The lease learnt the keeper's renewals through status().
    expect(lease.expiresAt).toBeGreaterThan(Date.now());

    expect(await lease.release()).toBe("released");
    expect(await lock.remainTimeToLive()).toBe(-2);
    expect(await keeperStatus(instance.name, lease.id)).toEqual({ state: "unknown" });
    expect(await keeperKeys(instance.name)).toEqual([]);
    const after = (await workerBridgeControl.stats()).requests;
    await elapse(400);
    expect((await workerBridgeControl.stats()).requests).toBe(after);
    expect(await keeperAlarm(instance.name)).toBeNull();
    expect(events.filter((e) => e.type === "error")).toEqual([]);
  });

  it("renews only when an alarm runs: driven step by step with runDurableObjectAlarm", async () => {
    const leaseTime = 1_800; // steps of 600 ms: slack for a loaded CI machine
    const { lock, lease } = await hold(leaseTime);
    const stub = keeperStub(instance.name);
    // Park the real alarm far away; every step runs it by hand instead.
    await runInDurableObject(stub, (_, state) => parkAlarm(state));
    for (let step = 0; step < 10; step++) {
      await elapse(leaseTime / 3);
      const before = await lock.remainTimeToLive();
      expect(before).toBeGreaterThan(0);
      expect(before).toBeLessThan(leaseTime - 300);
      // Run the alarm by hand and park the real one again inside the same call, so the re-arm
      // it makes (leaseTime/3 ahead) can never fire on its own between two steps.
      await runInDurableObject(stub, async (keeper, state) => {
        await (keeper as LeaseKeeper).alarm();
        await parkAlarm(state);
      });
      // Renewed by this run: back above where it was, never above the lease.
      const after = await lock.remainTimeToLive();
      expect(after).toBeGreaterThan(before);
      expect(after).toBeLessThanOrEqual(leaseTime);
    }
    // 10 steps of leaseTime/3: the lock outlived three lease times.
    expect(await lock.isHeldBy(lease.owner)).toBe(true);
    expect(await lease.release()).toBe("released");
  });

  it("renews every due lease of an instance in one Redis request", async () => {
    const leases = await Promise.all([1, 2, 3, 4, 5].map(() => hold(3_000)));
    await untilDue(3_000);
    await leases[0]?.lease.renew(); // loads the renewal script into Redis' cache
    await workerBridgeControl.resetStats();
    expect(await runDurableObjectAlarm(keeperStub(instance.name))).toBe(true);
    expect((await workerBridgeControl.stats()).requests).toBe(1);
    for (const { lock } of leases) expect(await lock.remainTimeToLive()).toBeGreaterThan(2_500);
    await Promise.all(leases.map(({ lease }) => lease.release()));
  });

  it("keeps renewing after the Durable Object is evicted (state lives in storage)", async () => {
    const { lock, lease } = await hold(600);
    await abortAllDurableObjects();
    expect(await minPttlOver(lock, 1_800)).toBeGreaterThan(0);
    expect(lease.signal.aborted).toBe(false);
    expect(await lease.release()).toBe("released");
  });
});

describe("forgetting a lease", () => {
  it("stops when the lease is lost to another owner after a forced unlock; the holder's signal aborts", async () => {
    const { lock, lease, edgelock, until } = await hold(300);
    expect(await lock.forceUnlock()).toBe(true);
    const thief = await edgelock.getLock(lock.name).tryLock({ leaseTime: 5_000 });
    expect(thief).not.toBeNull();
    const reason = await aborted(lease.signal);
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect((reason as LeaseLostError).reason).toBe("lost");
    await until((e) => e.type === "lost");
    // The lost lease unregisters itself (dropping the keeper's tombstone) in the background.
    await eventually(async () =>
      (await keeperKeys(instance.name)).length === 0 ? true : undefined,
    );
    // The thief's lock kept its own TTL: the keeper never extended it.
    const ttl = await lock.remainTimeToLive();
    expect(ttl).toBeLessThanOrEqual(5_000);
    await elapse(200);
    expect(await lock.remainTimeToLive()).toBeLessThan(ttl);
    expect(await thief?.release()).toBe("released");
  });

  it("gives up at maxHoldTime: a crashed owner's lock is free within maxHoldTime + leaseTime", async () => {
    const started = Date.now();
    const { lock, lease } = await hold(300, 900);
    // The holder never releases (as if it crashed); its signal aborts when the keeper gives up.
    const reason = await aborted(lease.signal);
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    await eventually(async () => ((await lock.isLocked()) ? undefined : true), { everyMs: 5 });
    const freeAfter = Date.now() - started;
    expect(freeAfter).toBeGreaterThanOrEqual(900);
    expect(freeAfter).toBeLessThanOrEqual(900 + 300 + 1_000); // generous: CI shares 2 cores
  });
});

describe("failures", () => {
  it("abandons a renewal with no answer at leaseTime / 6 and retries it like any failure", async () => {
    const held = await hold(3_000);
    await untilDue(3_000);
    // The next renewal is applied but never answered.
    await workerBridgeControl.setFaults({
      rules: [{ action: "lose", mode: "hang", match: "evalsha", times: 1 }],
    });
    const stub = keeperStub(instance.name);
    const started = Date.now();
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    // Given up after a sixth of the lease, not the 3 s default nor never.
    expect(Date.now() - started).toBeLessThan(3_000 / 6 + 1_000);
    await expectRetryScheduled(held.lease, 3_000);
    await expectRetryRenews(held, 3_000);
  });

  it("retries a failed renewal on the next alarm, sooner than leaseTime/3", async () => {
    const held = await hold(3_000);
    await untilDue(3_000);
    await workerBridgeControl.resetStats();
    await workerBridgeControl.setFaults({ rules: [{ action: "fail", match: "evalsha" }] });
    expect(await runDurableObjectAlarm(keeperStub(instance.name))).toBe(true);
    await expectRetryScheduled(held.lease, 3_000);
    expect(await held.lock.remainTimeToLive()).toBeLessThan(2_500);
    expect((await workerBridgeControl.stats()).faultsInjected).toBe(2); // sent, resent once

    await workerBridgeControl.clearFaults();
    await expectRetryRenews(held, 3_000);
  });

  it("keeps retrying through an outage; the holder's signal aborts no later than the lock expires", async () => {
    const { lock, lease, until } = await hold(300);
    await workerBridgeControl.resetStats();
    await workerBridgeControl.setFaults({ rules: [{ action: "fail", match: "evalsha" }] });
    await eventually(async () => ((await lock.isLocked()) ? undefined : true), { everyMs: 5 });
    // The lock is gone from Redis: the holder already knows (no renewal confirmed a later expiry).
    expect(lease.signal.aborted).toBe(true);
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(lease.expiresAt).toBeLessThanOrEqual(Date.now());
    // The keeper kept renewing through the outage (each attempt refused by the bridge)...
    expect((await workerBridgeControl.stats()).faultsInjected).toBeGreaterThanOrEqual(2);
    await workerBridgeControl.clearFaults();
    await until((e) => e.type === "lost");
    // ...until the holder, knowing the lease gone, told it to stop.
    expect((await keeperStatus(instance.name, lease.id)).state).toBe("unknown");
    expect(await lease.release()).toBe("expired");
  });

  it("stops on a limit of the service: every lease of the batch `refused`, one request, the holders' signals abort with it", async () => {
    const held = await Promise.all([hold(3_000), hold(3_000)]);
    await untilDue(3_000);
    await workerBridgeControl.resetStats();
    await workerBridgeControl.setFaults({
      rules: [{ action: "fail", mode: "limit", limit: "requests", match: "evalsha" }],
    });
    expect(await runDurableObjectAlarm(keeperStub(instance.name))).toBe(true);
    // One request for the batch, not resent, and no retry scheduled for either lease.
    expect((await workerBridgeControl.stats()).requests).toBe(1);
    for (const { lease } of held) {
      expect(await keeperStatus(instance.name, lease.id)).toEqual({
        state: "refused",
        limit: "requests",
        error: expect.stringMatching(
          /^ERR max requests limit exceeded\. Limit: 500000, Usage: 500000\. See <url> for details$/,
        ),
      });
    }
    expect(await keeperKeys(instance.name)).toEqual(
      held.map(({ lease }) => `ended:${lease.id}`).sort(),
    );
    // Only the tombstones' purge is left to wake the keeper for.
    expect((await keeperAlarm(instance.name)) ?? 0).toBeGreaterThan(Date.now() + 30_000);
    for (const { lease, lock } of held) {
      // The holder's next poll of the keeper (every leaseTime / 3) learns it.
      const reason = await aborted(lease.signal);
      expect(reason).toBeInstanceOf(LeaseLostError);
      expect((reason as LeaseLostError).cause).toBeInstanceOf(ServiceLimitError);
      expect((reason as LeaseLostError).cause).toMatchObject({ limit: "requests" });
      expect((reason as Error).message).toMatch(
        /is no longer renewed: the service's "requests" limit refused its renewal/,
      );
      // Nobody renews it, and it runs until its expiry.
      expect(await lock.isHeldBy(lease.owner)).toBe(true);
    }
    await workerBridgeControl.clearFaults();
    for (const { lease } of held) expect(await lease.release()).toBe("released");
  });

  it("stops a read hold's own renewal on a limit as well", async () => {
    const rec = recordingEdgeLock({ watchdogTimeout: 3_000 });
    const rw = rec.edgelock.getReadWriteLock(`${prefix}${crypto.randomUUID()}`);
    const lease = await rw
      .readLock()
      .lock({ keepAlive: { maxHoldTime: 60_000, instance: instance.name } });
    await untilDue(3_000);
    await workerBridgeControl.resetStats();
    await workerBridgeControl.setFaults({
      rules: [{ action: "fail", mode: "limit", limit: "connections", match: "evalsha" }],
    });
    expect(await runDurableObjectAlarm(keeperStub(instance.name))).toBe(true);
    expect((await workerBridgeControl.stats()).requests).toBe(1);
    expect(await keeperStatus(instance.name, lease.id)).toEqual({
      state: "refused",
      limit: "connections",
      error: "ERR max concurrent connections exceeded",
    });
    await workerBridgeControl.clearFaults();
    expect(await lease.release()).toBe("released");
  });

  it("a client in workerd reports an HTTP answer's status (the Cloudflare entry of @upstash/redis)", async () => {
    const redis = new Redis({ url: `${workerBridge.url}/v2`, token: workerBridge.token });
    const error = await new EdgeLock({ redis })
      .getLock(`${prefix}wrong-path`)
      .tryLock()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransportError);
    expect(error).toMatchObject({ status: 404, ambiguous: false });
    expect((error as Error).message).toMatch(/failed: HTTP 404: bridge: no such endpoint/);
  });

  it("refuses a lease it cannot keep; the acquire gives the lock back", async () => {
    const { edgelock } = recordingEdgeLock();
    const lock = edgelock.getLock(`${prefix}${crypto.randomUUID()}`);
    const error = await lock
      .tryLock({ leaseTime: 20, keepAlive: { maxHoldTime: 1_000, instance: instance.name } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransportError);
    expect((error as TransportError).message).toMatch(/LeaseKeeper refused the lease.*leaseTime/);
    expect(await lock.isLocked()).toBe(false);
  });
});

describe("read-write holds and permits", () => {
  it("keeps a read hold and a write hold alive, one request each, then stops on release", async () => {
    const rec = recordingEdgeLock({ watchdogTimeout: 600 });
    const reads = rec.edgelock.getReadWriteLock(`${prefix}${crypto.randomUUID()}`);
    const writes = rec.edgelock.getReadWriteLock(`${prefix}${crypto.randomUUID()}`);
    const read = await reads
      .readLock()
      .lock({ keepAlive: { maxHoldTime: 60_000, instance: instance.name } });
    const write = await writes
      .writeLock()
      .lock({ keepAlive: { maxHoldTime: 60_000, instance: instance.name } });
    await workerBridgeControl.resetStats();
    await elapse(3_000); // five lease times
    expect(await reads.readLock().isHeldBy(read.owner)).toBe(true);
    expect(await writes.writeLock().isHeldBy(write.owner)).toBe(true);
    expect(read.signal.aborted || write.signal.aborted).toBe(false);
    expect(await reads.readLock().remainTimeToLive()).toBeGreaterThan(0);
    expect((await workerBridgeControl.stats()).requests).toBeGreaterThanOrEqual(10);
    expect(await read.release()).toBe("released");
    expect(await write.release()).toBe("released");
    expect(await keeperKeys(instance.name)).toEqual([]);
  });

  it("keeps permits alive until released; permits released by id are found lost", async () => {
    const rec = recordingEdgeLock({ watchdogTimeout: 600 });
    const semaphore = rec.edgelock.getPermitExpirableSemaphore(`${prefix}${crypto.randomUUID()}`);
    await semaphore.trySetPermits(3);
    const kept = await semaphore.acquire({
      permits: 2,
      keepAlive: { maxHoldTime: 60_000, instance: instance.name },
    });
    const dropped = await semaphore.acquire({
      keepAlive: { maxHoldTime: 60_000, instance: instance.name },
    });
    await elapse(3_000); // five lease times
    expect(await semaphore.acquiredPermits()).toBe(3);
    expect(kept.signal.aborted).toBe(false);
    await semaphore.release(dropped.permitIds[0] ?? "");
    // The keeper's next renewal finds the permit gone; the lease hears it through status().
    expect(await aborted(dropped.signal)).toBeInstanceOf(LeaseLostError);
    expect(await kept.release()).toBe("released");
    expect(await semaphore.availablePermits()).toBe(3);
    expect(await keeperStatus(instance.name, kept.id)).toEqual({ state: "unknown" });
  });
});

describe("at-least-once alarms and races", () => {
  it("an alarm run twice (concurrently, then again) renews once: PTTL never above leaseTime", async () => {
    const { lock, lease } = await hold(3_000);
    await untilDue(3_000);
    await lease.renew(); // loads the script; the keeper's schedule is unaffected
    await workerBridgeControl.resetStats();
    const stub = keeperStub(instance.name);
    await runInDurableObject(stub, (object) => {
      const keeper = object as unknown as LeaseKeeper;
      return Promise.all([keeper.alarm(), keeper.alarm()]);
    });
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await workerBridgeControl.stats()).requests).toBe(1);
    const ttl = await lock.remainTimeToLive();
    expect(ttl).toBeLessThanOrEqual(3_000);
    expect(ttl).toBeGreaterThan(2_500);
    expect(await lease.release()).toBe("released");
  });

  it("a release racing an in-flight renewal leaves no renewed lock behind", async () => {
    const { lock, lease } = await hold(3_000);
    await untilDue(3_000);
    await workerBridgeControl.resetStats();
    // Hold the keeper's renewal at the bridge for a second; the holder's release (on the other
    // bridge) overtakes it.
    await workerBridgeControl.setFaults({ delayMs: 1_000 });
    let alarmDone = false;
    const alarm = runDurableObjectAlarm(keeperStub(instance.name)).then((ran) => {
      alarmDone = true;
      return ran;
    });
    await eventually(async () =>
      (await workerBridgeControl.stats()).requests >= 1 ? true : undefined,
    );
    expect(await lease.release()).toBe("released");
    expect(alarmDone).toBe(false);
    expect(await alarm).toBe(true);
    expect(await lock.remainTimeToLive()).toBe(-2);
    expect(await keeperKeys(instance.name)).toEqual([]);
    expect(await keeperStatus(instance.name, lease.id)).toEqual({ state: "unknown" });
  });
});

describe("RPC input", () => {
  const good = {
    name: "wt:lock",
    owner: "client:task",
    id: "0123456789abcdef0123456789abcdef",
    leaseTime: 3_000,
    maxHoldTime: 60_000,
  };

  it.each([
    ["not an object", "nope", /object/],
    ["an unknown key", { ...good, extra: 1 }, /unknown registration key `extra`/],
    ["a bad name", { ...good, name: "a{b}" }, /`name`/],
    ["an empty owner", { ...good, owner: "" }, /`owner`/],
    ["a bad id", { ...good, id: "xyz" }, /`id`/],
    ["a lease too short for alarms", { ...good, leaseTime: 10 }, /`leaseTime`/],
    ["maxHoldTime 0", { ...good, maxHoldTime: 0 }, /`maxHoldTime`/],
    ["an unknown kind", { ...good, kind: "fair-lock" }, /`kind` must be one of/],
    ["permit ids without kind permit", { ...good, permitIds: [good.id] }, /`permitIds`/],
    ["kind permit without ids", { ...good, kind: "permit" }, /`permitIds`/],
    ["a bad permit id", { ...good, kind: "permit", permitIds: ["xyz"] }, /`permitIds`/],
  ])("register answers { ok: false } for %s, without throwing", async (_, input, message) => {
    const reply = await keeperStub(instance.name).register(input as typeof good);
    expect(reply.ok).toBe(false);
    expect(reply.error).toMatch(message);
    expect(reply.error).not.toContain("client:task");
    expect(await keeperKeys(instance.name)).toEqual([]);
  });

  it("unregister and status take only string ids", async () => {
    const stub = keeperStub(instance.name);
    expect(await stub.unregister(5 as unknown as string)).toEqual({
      ok: false,
      error: "`id` must be a string",
    });
    expect(await stub.status(5 as unknown as string)).toEqual({ state: "unknown" });
    expect(await stub.unregister("0123")).toEqual({ ok: true });
  });

  it("register refuses without Redis credentials in the object's env", async () => {
    const reply = await runInDurableObject(keeperStub(instance.name), (_, state) =>
      new LeaseKeeper(state, {}).register(good),
    );
    expect(reply).toEqual({
      ok: false,
      error: "UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN must be set for the LeaseKeeper",
    });
  });

  it("registering a lease again keeps its first maxHoldTime deadline", async () => {
    const stub = keeperStub(instance.name);
    expect(await stub.register({ ...good, maxHoldTime: 1_000 })).toEqual({ ok: true });
    expect(await stub.register({ ...good, maxHoldTime: 60_000 })).toEqual({ ok: true });
    const deadline: number = await runInDurableObject(stub, async (_, state) => {
      const entry = await state.storage.get<{ deadline: number }>(`lease:${good.id}`);
      return entry?.deadline ?? 0;
    });
    expect(deadline - Date.now()).toBeLessThanOrEqual(1_000);
    expect(await stub.unregister(good.id)).toEqual({ ok: true });
  });
});
