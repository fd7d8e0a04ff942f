/**
 * The service's limits (Upstash answers them as Redis errors: the request budget, concurrent
 * connections, request, record and key size, the data quota), injected by the bridge as the
 * service words them: each reaches the caller as a definite `ServiceLimitError` naming the limit,
 * is never resent, and stops the keep-alive renewals of a lease, whose signal aborts with it.
 * The `LeaseKeeper`'s side runs in workerd (test/worker/lease-keeper.test.ts).
 */
import { afterEach, describe, expect, it } from "vitest";
import type { FaultLimit } from "../../src/bridge/index.js";
import {
  EdgeLockError,
  type LeaseKeeperBinding,
  LeaseLostError,
  type LockEvent,
  type ServiceLimit,
  ServiceLimitError,
  TransportError,
} from "../../src/index.js";
import { toTransportError } from "../../src/transport/scrub.js";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../support/env.js";
import { aborted, recordingEdgeLock } from "../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();
afterEach(() => {
  bridge.bridge.clearFaults();
});

/** Every EVALSHA (and EVAL) from now on is refused as the service refuses it at `limit`. */
const refuse = (limit: FaultLimit, extra: { status?: number; times?: number } = {}) => {
  bridge.bridge.setFaults({
    rules: [
      { action: "fail", mode: "limit", limit, match: "evalsha", ...extra },
      { action: "fail", mode: "limit", limit, match: "eval", ...extra },
    ],
  });
};

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e,
  );
}

/** A recording EdgeLock on the private bridge whose scripts are in Redis's cache already. */
async function warmed(options: Parameters<typeof recordingEdgeLock>[0] = {}) {
  const rec = recordingEdgeLock(options, bridge.redis());
  await (await rec.edgelock.getLock(`${prefix}warm`).tryLock({ leaseTime: 1_000 }))?.release();
  rec.events.length = 0;
  bridge.bridge.resetStats();
  return rec;
}

const errorsOf = (events: readonly LockEvent[]) =>
  events.flatMap((e) => (e.type === "error" ? [e] : []));

const limits: [ServiceLimit, RegExp][] = [
  [
    "requests",
    /^ERR max requests limit exceeded\. Limit: 500000, Usage: 500000\. See <url> for details$/,
  ],
  ["connections", /^ERR max concurrent connections exceeded$/],
  ["request-size", /^ERR max request size exceeded$/],
  ["record-size", /^ERR max single record size exceeded$/],
  ["key-size", /^ERR max key size exceeded$/],
  ["storage", /^ERR DB capacity quota exceeded$/],
];

describe("a limit of the service", () => {
  it.each(limits)(
    "%s: a definite ServiceLimitError at once, one request, nothing resent or cancelled",
    async (limit, reply) => {
      const rec = await warmed();
      const name = `${prefix}refused-${limit}`;
      refuse(limit);
      const started = Date.now();
      const error = await rejection(rec.edgelock.getLock(name).tryLock());
      expect(Date.now() - started).toBeLessThan(500);
      expect(error).toBeInstanceOf(ServiceLimitError);
      expect(error).toBeInstanceOf(TransportError);
      expect(error).toBeInstanceOf(EdgeLockError);
      if (!(error instanceof ServiceLimitError)) return;
      expect(error).toMatchObject({
        name: "ServiceLimitError",
        code: "SERVICE_LIMIT",
        limit,
        ambiguous: false,
        status: 400,
        resource: name,
      });
      expect(error.reply).toMatch(reply);
      expect(error.message).toContain(
        `Redis request for "${name}" refused by the service's "${limit}" limit (`,
      );
      expect(error.message).toContain(error.reply);
      expect(error.message).toMatch(/nothing was applied, and it is not resent$/);
      expect(error.message).not.toMatch(/may still be applied|https?:/);
      expect(bridge.bridge.stats().requests).toBe(1);
      expect(rec.background).toEqual([]);
      expect(await raw.exists(name)).toBe(0);
    },
  );

  it("ends a wait at its first attempt; nothing is resent", async () => {
    const rec = await warmed();
    refuse("requests");
    const started = Date.now();
    const error = await rejection(
      rec.edgelock.getLock(`${prefix}limit-wait`).tryLock({ waitTime: 5_000 }),
    );
    expect(Date.now() - started).toBeLessThan(500);
    expect(error).toMatchObject({ code: "SERVICE_LIMIT", limit: "requests" });
    expect(rec.events.some((e) => e.type === "waiting")).toBe(false);
    // At most the wait's leave follows it (refused as well, and not resent).
    await Promise.all(rec.background);
    expect(bridge.bridge.stats().requests).toBeLessThanOrEqual(2);
  });

  it("is not resent whatever status it comes with (here 503, which is resent otherwise)", async () => {
    const rec = await warmed();
    refuse("connections", { status: 503 });
    const error = await rejection(rec.edgelock.getLock(`${prefix}limit-503`).tryLock());
    expect(error).toMatchObject({ limit: "connections", status: 503, ambiguous: false });
    expect(bridge.bridge.stats().requests).toBe(1);
    expect(rec.background).toEqual([]);
  });

  it("a release refused by one fails definite at once, with no background resend; it can be called again", async () => {
    const rec = await warmed();
    const name = `${prefix}release-refused`;
    const lease = await rec.edgelock.getLock(name).tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    bridge.bridge.resetStats();
    refuse("requests");
    const started = Date.now();
    const error = await rejection(lease.release());
    expect(Date.now() - started).toBeLessThan(500);
    expect(error).toMatchObject({ code: "SERVICE_LIMIT", limit: "requests", ambiguous: false });
    expect(bridge.bridge.stats().requests).toBe(1);
    expect(rec.background).toEqual([]);
    expect(rec.events.some((e) => e.type === "settle")).toBe(false);
    // Nothing was applied: the lock is still held, and the release goes through once allowed.
    expect(await raw.hExists(name, lease.owner)).toBe(1);
    bridge.bridge.clearFaults();
    expect(await lease.release()).toBe("released");
  });

  it("an explicit renew() throws it and leaves the lease as it was", async () => {
    const rec = await warmed();
    const lease = await rec.edgelock.getLock(`${prefix}renew-call`).tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    refuse("storage");
    await expect(lease.renew()).rejects.toMatchObject({ limit: "storage" });
    expect(lease.signal.aborted).toBe(false);
    bridge.bridge.clearFaults();
    expect(await lease.release()).toBe("released");
  });

  it("a client the transport cannot detach (wrapped in a Proxy, auto-pipelining) gets it too", async () => {
    // As a wrapper that counts or logs calls: its eval and evalsha are not the client's own.
    const wrapped = new Proxy(bridge.redis(), {
      get(target, key) {
        const value: unknown = Reflect.get(target, key, target);
        if (key !== "eval" && key !== "evalsha") return value;
        const fn = value as (...args: unknown[]) => unknown;
        return (...args: unknown[]) => fn.apply(target, args);
      },
    });
    const rec = recordingEdgeLock({}, wrapped);
    bridge.bridge.setFaults({
      rules: [{ action: "fail", mode: "limit", limit: "requests", match: "evalsha" }],
    });
    const error = await rejection(rec.edgelock.getLock(`${prefix}wrapped`).tryLock());
    expect(error).toMatchObject({ code: "SERVICE_LIMIT", limit: "requests", ambiguous: false });
    // Such a client does not report the HTTP status.
    expect((error as ServiceLimitError).status).toBeUndefined();
  });

  it.each([
    ["ERR max daily request limit exceeded. Limit: 10000, Usage: 10001", "requests"],
    ["ERR max requests limit exceeded.", "requests"],
    ["ERR max concurrent connections exceeded", "connections"],
    ["ERR max request size exceeded", "request-size"],
    ["ERR max single record size exceeded", "record-size"],
    ["ERR max key size exceeded", "key-size"],
    ["ERR DB capacity quota exceeded", "storage"],
    ["ERR max number of clients reached", undefined],
  ])("the service's text %j, answered by Redis itself, is limit %s", async (text, limit) => {
    // A script's error reply: 400 for a single command, and a pipeline's entry (200) is worded
    // `Command failed: …` by the client.
    const script = `return redis.error_reply('${text}')`;
    for (const pipelined of [false, true]) {
      const redis = bridge.redis({ retry: { retries: 0 }, enableAutoPipelining: pipelined });
      const failed = await rejection(redis.eval(script, [], []));
      if (pipelined) expect((failed as Error).message).toMatch(/^Command failed: ERR /);
      const error = toTransportError(failed, "n", []);
      expect(error.ambiguous).toBe(false);
      if (limit === undefined) expect(error).not.toBeInstanceOf(ServiceLimitError);
      else expect(error).toMatchObject({ name: "ServiceLimitError", limit, reply: text });
    }
  });
});

describe("a keep-alive renewal refused by a limit", () => {
  /** The lease's signal: a LeaseLostError whose cause is the ServiceLimitError of `limit`. */
  async function expectRefusedSignal(signal: AbortSignal, name: string, limit: ServiceLimit) {
    const reason = await aborted(signal);
    expect(reason).toBeInstanceOf(LeaseLostError);
    if (!(reason instanceof LeaseLostError)) return;
    expect(reason.reason).toBe("lost");
    expect(reason.cause).toBeInstanceOf(ServiceLimitError);
    expect(reason.cause).toMatchObject({ limit });
    expect(reason.message).toBe(
      `lease on lock "${name}" is no longer renewed: the service's "${limit}" limit refused its renewal; treat it as lost, it runs out at its expiry`,
    );
  }

  it("the timer stops renewing: one refused request, the signal aborts at once with it", async () => {
    const rec = await warmed({ watchdogTimeout: 900 });
    const name = `${prefix}timer-refused`;
    const lease = await rec.edgelock.getLock(name).lock();
    bridge.bridge.resetStats();
    refuse("requests");
    const started = Date.now();
    await expectRefusedSignal(lease.signal, name, "requests");
    // At the first renewal (a third of the lease), long before the lease runs out.
    expect(Date.now() - started).toBeLessThan(600);
    expect(rec.events.filter((e) => e.type === "lost")).toHaveLength(1);
    expect(errorsOf(rec.events)).toEqual([
      expect.objectContaining({ operation: "renew", error: expect.any(ServiceLimitError) }),
    ]);
    // No retry after it, though retries come every ninth of the lease after other failures.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(bridge.bridge.stats().requests).toBe(1);
    // The lock itself still runs until its expiry.
    expect(Number(await raw.pTTL(name))).toBeGreaterThan(0);
    bridge.bridge.clearFaults();
    expect(await lease.release()).toBe("released");
  });

  it("a hand-off's confirming renewal stops too: the signal aborts with it, nothing resent", async () => {
    const name = `${prefix}hand-off-refused`;
    const holder = recordingEdgeLock({}, bridge.redis());
    const held = await holder.edgelock.getLock(name).lock({ leaseTime: 20_000 });
    const waiter = recordingEdgeLock({}, bridge.redis());
    const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 20_000, leaseTime: 9_000 });
    await waiter.until((_e, all) => all.filter((e) => e.type === "waiting").length === 2);
    expect(await held.release()).toBe("released");
    const lease = await pending;
    if (!lease) throw new Error("not handed off");
    // Held for the claim window; its renewal to the full lease comes a third before its end.
    expect(Number(await raw.pTTL(name))).toBeLessThanOrEqual(2_000);
    bridge.bridge.resetStats();
    refuse("connections");
    await expectRefusedSignal(lease.signal, name, "connections");
    expect(waiter.events.filter((e) => e.type === "lost")).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(bridge.bridge.stats().requests).toBe(1);
    bridge.bridge.clearFaults();
    expect(await lease.release()).toBe("released");
  });

  it("a keeper's status `refused` without a limit still ends the lease, with no cause", async () => {
    const binding: LeaseKeeperBinding = {
      getByName: () => ({
        register: async () => ({ ok: true }),
        unregister: async () => ({ ok: true }),
        status: async () => ({ state: "refused" }),
      }),
    };
    const rec = recordingEdgeLock({ keeper: binding, watchdogTimeout: 300 }, bridge.redis());
    const lease = await rec.edgelock
      .getLock(`${prefix}keeper-refused-bare`)
      .lock({ keepAlive: { maxHoldTime: 5_000 } });
    const reason = await aborted(lease.signal);
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect((reason as LeaseLostError).cause).toBeUndefined();
    expect(await lease.release()).toBe("released");
  });

  it("the keeper's status `refused` aborts the holder's signal with the keeper's limit", async () => {
    // The real LeaseKeeper's side is tested in workerd; here its status answer, as it gives it.
    const binding: LeaseKeeperBinding = {
      getByName: () => ({
        register: async () => ({ ok: true }),
        unregister: async () => ({ ok: true }),
        status: async () => ({
          state: "refused",
          limit: "requests",
          error: "ERR max requests limit exceeded",
        }),
      }),
    };
    const rec = recordingEdgeLock({ keeper: binding, watchdogTimeout: 300 }, bridge.redis());
    const name = `${prefix}keeper-refused`;
    const lease = await rec.edgelock.getLock(name).lock({ keepAlive: { maxHoldTime: 5_000 } });
    await expectRefusedSignal(lease.signal, name, "requests");
    expect((lease.signal.reason as LeaseLostError).cause).toMatchObject({
      reply: "ERR max requests limit exceeded",
      resource: name,
    });
    expect(await lease.release()).toBe("released");
  });
});
