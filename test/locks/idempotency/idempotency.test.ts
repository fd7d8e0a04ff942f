/** The idempotency key primitive: claim / complete, its Redis layout, replay and cancel paths. */
import { describe, expect, it } from "vitest";
import {
  EdgeLock,
  LeaseLostError,
  MAX_COMPLETION_TTL_MS,
  TransportError,
} from "../../../src/index.js";
import { bridgeRedis, keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import { isReplayRecord, recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const done = (name: string) => `edgelock_done:{${name}}`;
const raw = useRawRedis();

/** Every key of ours under `name`: the lock, the marker and the replay latches. */
async function keysOf(name: string): Promise<string[]> {
  const found = [...(await raw.keys(name)), ...(await raw.keys(`edgelock_*{${name}}*`))].map(
    String,
  );
  return found.sort();
}

describe("idempotency key", () => {
  it("claims, excludes a concurrent claim, completes, then reports completed", async () => {
    const rec = recordingEdgeLock();
    const name = `${prefix}basic`;
    const key = rec.edgelock.getIdempotencyKey(name);
    const first = await key.claim({ leaseTime: 10_000 });
    if (first.status !== "acquired") throw new Error(`expected acquired, got ${first.status}`);
    // Redisson layout: a HASH at the name with the owner's hold count.
    expect(String(await raw.type(name))).toBe("hash");
    expect(String(await raw.hGet(name, first.lease.owner))).toBe("1");

    const busy = await rec.edgelock.getIdempotencyKey(name).claim();
    expect(busy.status).toBe("locked");
    if (busy.status === "locked") {
      expect(busy.holderTtl).toBeGreaterThan(9_000);
      expect(busy.holderTtl).toBeLessThanOrEqual(10_000);
    }
    // A Redisson-layout lock on the same name is excluded too.
    expect(await rec.edgelock.getLock(name).tryLock()).toBeNull();

    expect(await key.complete(first.lease, 60_000)).toBe("released");
    expect(first.lease.signal.aborted).toBe(true);
    expect(first.lease.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(await raw.exists(name)).toBe(0);
    const markerTtl = await raw.pTTL(done(name));
    expect(markerTtl).toBeGreaterThan(59_000);
    expect(markerTtl).toBeLessThanOrEqual(60_000);

    const later = await key.claim();
    expect(later.status).toBe("completed");
    if (later.status === "completed") {
      expect(later.completedTtl).toBeGreaterThan(59_000);
      expect(later.completedTtl).toBeLessThanOrEqual(60_000);
    }
    // A completed key is not locked: only the marker remains (plus latches that expire).
    expect(await rec.edgelock.getLock(name).isLocked()).toBe(false);
    await raw.del(done(name));
  });

  it("makes one request per claim and per completion on a warm client", async () => {
    const rec = recordingEdgeLock();
    const warm = rec.edgelock.getIdempotencyKey(`${prefix}warm`);
    const w = await warm.claim({ leaseTime: 1_000 });
    if (w.status !== "acquired") throw new Error("not acquired");
    await warm.complete(w.lease, 1_000);
    rec.events.length = 0;

    const key = rec.edgelock.getIdempotencyKey(`${prefix}requests`);
    const claim = await key.claim({ leaseTime: 5_000 });
    if (claim.status !== "acquired") throw new Error("not acquired");
    await key.complete(claim.lease, 5_000);
    expect(rec.events.map((e) => [e.type, e.requests])).toEqual([
      ["acquire", 1],
      ["release", 1],
    ]);
    await key.claim();
    expect(rec.events.at(-1)).toMatchObject({ type: "acquire", acquired: false, requests: 1 });
  });

  it("a released (not completed) claim can be claimed again", async () => {
    const { edgelock } = recordingEdgeLock();
    const key = edgelock.getIdempotencyKey(`${prefix}retry`);
    const first = await key.claim({ leaseTime: 10_000 });
    if (first.status !== "acquired") throw new Error("not acquired");
    expect(await first.lease.release()).toBe("released");
    expect(await raw.exists(done(key.name))).toBe(0);
    const second = await key.claim({ leaseTime: 10_000 });
    expect(second.status).toBe("acquired");
    if (second.status === "acquired") await key.complete(second.lease, 1_000);
  });

  it("completing an already released lease still records completion", async () => {
    const { edgelock } = recordingEdgeLock();
    const key = edgelock.getIdempotencyKey(`${prefix}late-complete`);
    const claim = await key.claim({ leaseTime: 10_000 });
    if (claim.status !== "acquired") throw new Error("not acquired");
    await claim.lease.release();
    expect(await key.complete(claim.lease, 30_000)).toBe("released");
    expect(await raw.exists(done(key.name))).toBe(1);
    expect((await key.claim()).status).toBe("completed");
  });

  it("any key object of the name completes a lease (one request), and so does a lock lease", async () => {
    const rec = recordingEdgeLock();
    const name = `${prefix}other-object`;
    const claim = await rec.edgelock.getIdempotencyKey(name).claim({ leaseTime: 10_000 });
    if (claim.status !== "acquired") throw new Error("not acquired");
    rec.events.length = 0;
    expect(await rec.edgelock.getIdempotencyKey(name).complete(claim.lease, 30_000)).toBe(
      "released",
    );
    expect(rec.events.map((e) => [e.type, e.requests])).toEqual([["release", 1]]);
    await raw.del(done(name));

    const lockLease = await rec.edgelock.getLock(name).tryLock({ leaseTime: 10_000 });
    if (!lockLease) throw new Error("not acquired");
    expect(await rec.edgelock.getIdempotencyKey(name).complete(lockLease, 30_000)).toBe("released");
    expect(await raw.exists(name)).toBe(0);
    expect(await raw.exists(done(name))).toBe(1);
    await raw.del(done(name));
  });

  it("records completion even when the lease was lost, and keeps the first record", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}lost`;
    const key = edgelock.getIdempotencyKey(name);
    const first = await key.claim({ leaseTime: 10_000 });
    if (first.status !== "acquired") throw new Error("not acquired");
    await edgelock.getLock(name).forceUnlock();
    const second = await key.claim({ leaseTime: 10_000 });
    if (second.status !== "acquired") throw new Error("not acquired");
    expect(await key.complete(first.lease, 50_000)).toBe("not-owner");
    expect(await raw.pTTL(done(name))).toBeGreaterThan(49_000);
    // The second completion releases its hold but does not extend the first record.
    expect(await key.complete(second.lease, 500_000)).toBe("released");
    expect(await raw.pTTL(done(name))).toBeLessThanOrEqual(50_000);
    await raw.del(done(name));
  });

  it("re-enters with the same owner and completes only the last hold", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}reentrant`;
    const key = edgelock.getIdempotencyKey(name);
    const outer = await key.claim({ leaseTime: 10_000 });
    if (outer.status !== "acquired") throw new Error("not acquired");
    const inner = await key.claim({ leaseTime: 10_000, owner: outer.lease.owner });
    if (inner.status !== "acquired") throw new Error("re-entry refused");
    expect(String(await raw.hGet(name, outer.lease.owner))).toBe("2");
    expect(await key.complete(inner.lease, 30_000)).toBe("still-held");
    expect(await outer.lease.release()).toBe("released");
    expect(await raw.exists(name)).toBe(0);
    await raw.del(done(name));
  });

  it("leaves only the marker and expiring replay records; keys share the name's hash slot", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}layout`;
    const key = edgelock.getIdempotencyKey(name);
    const claim = await key.claim({ leaseTime: 10_000 });
    if (claim.status !== "acquired") throw new Error("not acquired");
    await key.complete(claim.lease, 30_000);
    const left = await keysOf(name);
    expect(left).toContain(done(name));
    for (const k of left) {
      expect(k === done(name) || isReplayRecord(name, k), k).toBe(true);
      const ttl = await raw.pTTL(k);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(Math.max(30_000, 2 * edgelock.replayWindow));
    }
    await raw.del(done(name));
  });

  it("a watchdog claim is kept alive by the timer until completed", async () => {
    const rec = recordingEdgeLock({ watchdogTimeout: 300 });
    const name = `${prefix}watchdog`;
    const key = rec.edgelock.getIdempotencyKey(name);
    const claim = await key.claim();
    if (claim.status !== "acquired") throw new Error("not acquired");
    await rec.until(
      (_, all) =>
        all.filter((e) => e.type === "renew" && e.renewed && e.by === "timer").length >= 3,
    );
    expect(await raw.hExists(name, claim.lease.owner)).toBe(1);
    expect(await key.complete(claim.lease, 10_000)).toBe("released");
    expect(claim.lease.signal.aborted).toBe(true);
    await raw.del(done(name));
  });

  describe("replay and cancel", () => {
    const bridge = usePrivateBridge();

    async function warmed() {
      const rec = recordingEdgeLock({}, bridge.redis());
      const w = rec.edgelock.getIdempotencyKey(`${prefix}warm-bridge`);
      const c = await w.claim({ leaseTime: 1_000 });
      if (c.status === "acquired") await c.lease.release();
      return rec;
    }

    it("a claim applied twice (lost response, client retry) holds once", async () => {
      const rec = await warmed();
      const name = `${prefix}replay-claim`;
      const before = bridge.bridge.stats().byCommand.evalsha ?? 0;
      bridge.bridge.setFaults({
        rules: [{ action: "lose", mode: "close", match: "evalsha", times: 1 }],
      });
      const claim = await rec.edgelock.getIdempotencyKey(name).claim({ leaseTime: 10_000 });
      bridge.bridge.clearFaults();
      if (claim.status !== "acquired") throw new Error("not acquired");
      expect((bridge.bridge.stats().byCommand.evalsha ?? 0) - before).toBe(2);
      expect(String(await raw.hGet(name, claim.lease.owner))).toBe("1");
      expect(await rec.edgelock.getIdempotencyKey(name).complete(claim.lease, 30_000)).toBe(
        "released",
      );
      expect(await raw.exists(name)).toBe(0);
      await raw.del(done(name));
    });

    it("a completion applied twice releases once and reports the first result", async () => {
      const rec = await warmed();
      const name = `${prefix}replay-complete`;
      const key = rec.edgelock.getIdempotencyKey(name);
      const outer = await key.claim({ leaseTime: 10_000 });
      if (outer.status !== "acquired") throw new Error("not acquired");
      const inner = await key.claim({ leaseTime: 10_000, owner: outer.lease.owner });
      if (inner.status !== "acquired") throw new Error("re-entry refused");
      bridge.bridge.setFaults({
        rules: [{ action: "lose", mode: "close", match: "evalsha", times: 1 }],
      });
      expect(await key.complete(inner.lease, 30_000)).toBe("still-held");
      bridge.bridge.clearFaults();
      expect(String(await raw.hGet(name, outer.lease.owner))).toBe("1");
      expect(await outer.lease.release()).toBe("released");
      await raw.del(done(name));
    });

    it("a claim whose answer is lost once sends its request again: acquired, once", async () => {
      const rec = await warmed();
      const name = `${prefix}resent`;
      bridge.bridge.setFaults({
        rules: [{ action: "lose", mode: "503", match: "evalsha", times: 2 }],
      });
      const claimed = await rec.edgelock.getIdempotencyKey(name).claim({ leaseTime: 10_000 });
      expect(claimed.status).toBe("acquired");
      expect(rec.background).toEqual([]);
      if (claimed.status === "acquired") expect(await claimed.lease.release()).toBe("released");
    });

    it("a claim whose answer is lost for good is cancelled in the background", async () => {
      const rec = recordingEdgeLock(
        { requestTimeout: 300 },
        bridge.redis({ retry: { retries: 0 } }),
      );
      const w = await rec.edgelock
        .getIdempotencyKey(`${prefix}warm-noretry`)
        .claim({ leaseTime: 1_000 });
      if (w.status === "acquired") await w.lease.release();
      const name = `${prefix}cancel`;
      bridge.bridge.setFaults({ rules: [{ action: "lose", mode: "close", match: "evalsha" }] });
      const failed = await rec.edgelock
        .getIdempotencyKey(name)
        .claim({ leaseTime: 10_000 })
        .catch((e: unknown) => e);
      bridge.bridge.clearFaults();
      expect(failed).toBeInstanceOf(TransportError);
      expect((failed as TransportError).ambiguous).toBe(true);
      expect(rec.background).toHaveLength(1);
      await Promise.all(rec.background);
      expect(await raw.exists(name)).toBe(0);
      expect((await rec.edgelock.getIdempotencyKey(name).claim({ leaseTime: 1_000 })).status).toBe(
        "acquired",
      );
    });

    it("an aborted claim rejects with the reason and leaves no hold", async () => {
      const rec = await warmed();
      const name = `${prefix}abort`;
      bridge.bridge.setFaults({ delayMs: 200 });
      const controller = new AbortController();
      const pending = rec.edgelock
        .getIdempotencyKey(name)
        .claim({ leaseTime: 10_000, signal: controller.signal });
      controller.abort(new Error("stop"));
      await expect(pending).rejects.toThrow("stop");
      bridge.bridge.clearFaults();
      await Promise.all(rec.background);
      expect(await raw.exists(name)).toBe(0);
    });
  });

  describe("invalid arguments throw before any request", () => {
    const edgelock = new EdgeLock({
      redis: {
        eval: () => Promise.reject(new Error("no request expected")),
        evalsha: () => Promise.reject(new Error("no request expected")),
      },
    });
    const key = edgelock.getIdempotencyKey(`${prefix}valid`);
    const other = recordingEdgeLock({}, bridgeRedis());

    it.each([
      ["name with {", () => edgelock.getIdempotencyKey("a{b"), RangeError, /`name`/],
      ["empty name", () => edgelock.getIdempotencyKey(""), RangeError, /`name`/],
      ["non-string name", () => edgelock.getIdempotencyKey(1 as never), TypeError, /`name`/],
    ])("%s", (_, call, type, message) => {
      expect(call).toThrow(type);
      expect(call).toThrow(message);
    });

    it.each([
      [
        "unknown option",
        () => key.claim({ waitTime: 1 } as never),
        TypeError,
        /unknown option `waitTime`/,
      ],
      ["leaseTime 0", () => key.claim({ leaseTime: 0 }), RangeError, /`leaseTime`/],
      ["empty owner", () => key.claim({ owner: "" }), RangeError, /`owner`/],
      ["bad signal", () => key.claim({ signal: {} as never }), TypeError, /`signal`/],
      ["bad keepAlive", () => key.claim({ keepAlive: "x" as never }), TypeError, /`keepAlive`/],
      [
        "keeper keep-alive without keeper",
        () => key.claim({ keepAlive: { maxHoldTime: 1_000 } }),
        TypeError,
        /keeper/,
      ],
      ["complete without a lease", () => key.complete({} as never, 1_000), TypeError, /`lease`/],
    ])("%s", async (_, call, type, message) => {
      await expect(call()).rejects.toThrow(type);
      await expect(call()).rejects.toThrow(message);
    });

    it("complete checks the ttl and the lease's name", async () => {
      const name = `${prefix}valid-complete`;
      const real = other.edgelock.getIdempotencyKey(name);
      const claim = await real.claim({ leaseTime: 10_000 });
      if (claim.status !== "acquired") throw new Error("not acquired");
      await expect(real.complete(claim.lease, 0)).rejects.toThrow(/`ttl`/);
      await expect(real.complete(claim.lease, 1.5)).rejects.toThrow(RangeError);
      await expect(real.complete(claim.lease, MAX_COMPLETION_TTL_MS + 1)).rejects.toThrow(
        RangeError,
      );
      await expect(real.complete(claim.lease, "1" as never)).rejects.toThrow(TypeError);
      await expect(
        other.edgelock.getIdempotencyKey(`${name}-other`).complete(claim.lease, 1_000),
      ).rejects.toThrow(/another name/);
      // None of the refused calls touched the lease.
      expect(claim.lease.signal.aborted).toBe(false);
      expect(await raw.hExists(name, claim.lease.owner)).toBe(1);
      expect(await raw.exists(done(name))).toBe(0);
      await claim.lease.release();
    });
  });
});
