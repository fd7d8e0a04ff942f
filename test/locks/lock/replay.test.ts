/**
 * Replay safety: the bridge applies a command, then drops the connection; the real
 * `@upstash/redis` client resends it (its default: up to 5 retries on network errors). The
 * second application must have the effect of none.
 */
import { afterEach, describe, expect, it } from "vitest";
import { LeaseLostError, TransportError } from "../../../src/index.js";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import { recordingEdgeLock, replayRecords } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();
afterEach(() => {
  bridge.bridge.clearFaults();
});

/** The next EVALSHA is applied by Redis and its response lost (connection closed). */
function loseNextEvalsha(times = 1) {
  bridge.bridge.setFaults({ rules: [{ action: "lose", mode: "close", match: "evalsha", times }] });
}

/** A client with the default retry count whose retry waits `ms` (default backoff is 50 ms). */
function slowRetryClient(ms: number) {
  return bridge.redis({ retry: { retries: 5, backoff: () => ms } });
}

/**
 * Watches `fetch` for the EVALSHA requests of the first script sent from now on (an acquire's
 * copies): `settled` resolves once every one of them has been answered or failed.
 */
function trackScriptRequests(): { settled(): Promise<void>; stop(): void } {
  const realFetch = globalThis.fetch;
  const inFlight: Promise<unknown>[] = [];
  let sha: unknown;
  globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) => {
    const sent = realFetch(input, init);
    const body = typeof init?.body === "string" && init.body.startsWith("[") ? init.body : "[]";
    const [command, script] = JSON.parse(body) as unknown[];
    if (command === "evalsha") {
      sha ??= script;
      if (script === sha) inFlight.push(sent.catch(() => undefined));
    }
    return sent;
  }) as typeof fetch;
  return {
    settled: async () => {
      if (inFlight.length === 0) throw new Error("no EVALSHA went through fetch");
      await Promise.all(inFlight);
    },
    stop: () => {
      globalThis.fetch = realFetch;
    },
  };
}

async function warm(rec: ReturnType<typeof recordingEdgeLock>) {
  await (await rec.edgelock.getLock(`${prefix}warm`).tryLock({ leaseTime: 1_000 }))?.release();
}

describe("replayed requests have the effect of once", () => {
  it("one tryLock never leaves hold count 2", async () => {
    const rec = recordingEdgeLock({}, bridge.redis());
    await warm(rec);
    const lock = rec.edgelock.getLock(`${prefix}acquire`);
    const before = bridge.bridge.stats().byCommand.evalsha ?? 0;
    loseNextEvalsha();
    const lease = await lock.tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    expect((bridge.bridge.stats().byCommand.evalsha ?? 0) - before).toBe(2); // applied, then replayed
    expect(await lock.getHoldCount(lease.owner)).toBe(1);
    expect(await lease.release()).toBe("released");
    expect(await lock.isLocked()).toBe(false);
  });

  it("a reentrant tryLock replayed adds exactly one hold", async () => {
    const rec = recordingEdgeLock({}, bridge.redis());
    await warm(rec);
    const lock = rec.edgelock.getLock(`${prefix}reenter`);
    const first = await lock.tryLock({ leaseTime: 10_000 });
    if (!first) throw new Error("not acquired");
    loseNextEvalsha();
    const second = await lock.tryLock({ leaseTime: 10_000, owner: first.owner });
    expect(second).not.toBeNull();
    expect(await lock.getHoldCount(first.owner)).toBe(2);
    await second?.release();
    await first.release();
  });

  it("a replayed release never decrements twice", async () => {
    const rec = recordingEdgeLock({}, bridge.redis());
    await warm(rec);
    const lock = rec.edgelock.getLock(`${prefix}release`);
    const first = await lock.tryLock({ leaseTime: 10_000 });
    if (!first) throw new Error("not acquired");
    const second = await lock.tryLock({ leaseTime: 10_000, owner: first.owner });
    if (!second) throw new Error("re-entry refused");
    loseNextEvalsha();
    expect(await second.release()).toBe("still-held");
    expect(await lock.getHoldCount(first.owner)).toBe(1);
    expect(await first.release()).toBe("released");
  });

  it("a replayed release never releases a new owner's lock", async () => {
    const a = recordingEdgeLock({}, slowRetryClient(400));
    // B talks to Redis through the shared bridge, so the fault can only hit A's release.
    const b = recordingEdgeLock();
    await warm(a);
    await warm(b);
    const name = `${prefix}new-owner`;
    const held = await a.edgelock.getLock(name).tryLock({ leaseTime: 10_000 });
    if (!held) throw new Error("not acquired");
    const waiting = b.edgelock.getLock(name).tryLock({ waitTime: 5_000, leaseTime: 10_000 });
    await b.until((e) => e.type === "waiting");
    loseNextEvalsha();
    // A's release is applied, its answer lost; during the 400 ms before A's client resends it,
    // B (polling every few ms) takes the lock. The resent release then arrives.
    const released = held.release();
    const newLease = await waiting;
    if (!newLease) throw new Error("B did not get the lock");
    expect(await released).toBe("released");
    expect(await b.edgelock.getLock(name).isHeldBy(newLease.owner)).toBe(true);
    expect(await b.edgelock.getLock(name).getHoldCount(newLease.owner)).toBe(1);
    await newLease.release();
  });

  it("a replayed renew never resurrects a released lock", async () => {
    const rec = recordingEdgeLock({}, slowRetryClient(400));
    const other = recordingEdgeLock();
    await warm(rec);
    const name = `${prefix}renew`;
    const lease = await rec.edgelock.getLock(name).tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    loseNextEvalsha();
    const renewing = lease.renew(20_000);
    // While the renew's resend is pending, the lock is released by another path.
    await other.edgelock.getLock(name).unlock(lease.owner);
    await expect(renewing).rejects.toBeInstanceOf(LeaseLostError);
    expect(await raw.exists(name)).toBe(0);
  });

  it("an acquire applied but answered 503 is resent once and holds exactly once", async () => {
    // @upstash/redis never retries an HTTP error; the transport resends, and the latch answers.
    const rec = recordingEdgeLock({}, bridge.redis());
    await warm(rec);
    const lock = rec.edgelock.getLock(`${prefix}resend`);
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "503", match: "evalsha", times: 1 }],
    });
    const lease = await lock.tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    expect(rec.events.filter((e) => e.type === "acquire").at(-1)?.requests).toBe(2);
    expect(await lock.getHoldCount(lease.owner)).toBe(1);
    expect(await lease.release()).toBe("released");
  });

  it("a release answered 503 twice is resent until Redis answers: definite, applied once", async () => {
    const rec = recordingEdgeLock({}, bridge.redis());
    await warm(rec);
    const lock = rec.edgelock.getLock(`${prefix}release-503`);
    const lease = await lock.tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "503", match: "evalsha", times: 2 }],
    });
    expect(await lease.release()).toBe("released"); // the third send reports the first result
    const releases = rec.events.filter((e) => e.type === "release" && e.name === lock.name);
    expect(releases.map((e) => e.requests)).toEqual([3]);
    expect(await lock.isLocked()).toBe(false);
  });

  it("with definiteWithin 0 a release answered 503 twice rejects as ambiguous and can be retried", async () => {
    const rec = recordingEdgeLock({ definiteWithin: 0 }, bridge.redis());
    await warm(rec);
    const lock = rec.edgelock.getLock(`${prefix}release-503-now`);
    const lease = await lock.tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "503", match: "evalsha", times: 2 }],
    });
    const error = await lease.release().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "TRANSPORT", ambiguous: true });
    expect(await lock.isLocked()).toBe(false); // it was applied
    expect(await lease.release()).toBe("released"); // the retry reports the first result
    // The background resend got Redis's answer as well.
    const settled = await rec.until((e) => e.type === "settle");
    expect(settled).toMatchObject({ operation: "release", outcome: "answered" });
  });

  it("an acquire applied but answered 503 twice resends its request: it holds, exactly once", async () => {
    // The transport resends once after a 503; the attempt then sends its request again itself.
    const rec = recordingEdgeLock({}, bridge.redis());
    await warm(rec);
    const lock = rec.edgelock.getLock(`${prefix}resend-twice`);
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "503", match: "evalsha", times: 2 }],
    });
    const lease = await lock.tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    expect(rec.events.filter((e) => e.type === "acquire").at(-1)?.requests).toBe(3);
    expect(await lock.getHoldCount(lease.owner)).toBe(1);
    expect(await lease.release()).toBe("released");
  });

  it("an acquire whose every copy is applied and unanswered is cancelled: no hold is left", async () => {
    // Every answer lost (503 after applying) for the attempt's whole budget, one requestTimeout:
    // the caller sees an ambiguous TransportError although the hold exists; the lock cancels it
    // in the background once Redis answers again.
    const rec = recordingEdgeLock({ requestTimeout: 300 }, bridge.redis());
    await warm(rec);
    const name = `${prefix}ambiguous`;
    bridge.bridge.setFaults({ rules: [{ action: "lose", mode: "503", match: "evalsha" }] });
    const error = await rec.edgelock
      .getLock(name)
      .tryLock({ leaseTime: 10_000 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransportError);
    expect((error as TransportError).ambiguous).toBe(true);
    expect(rec.events.filter((e) => e.type === "acquire").at(-1)?.requests).toBeGreaterThan(2);
    bridge.bridge.clearFaults();
    await Promise.all(rec.background);
    expect(await raw.exists(name)).toBe(0);
  });

  it("an acquire that failed before applying leaves a tombstone, so a late arrival is a no-op", async () => {
    const rec = recordingEdgeLock({ requestTimeout: 300 }, bridge.redis());
    await warm(rec);
    const name = `${prefix}tombstone`;
    // Each request is held 400 ms before the rule fails it, past the call's 300 ms: the call
    // gives up with copies still in flight. The faults stay until the bridge has answered every
    // copy of the acquire: one it took up after they were cleared could apply before the cancel
    // (which would then undo it: no hold either way, but a "U" record instead of the tombstone).
    bridge.bridge.setFaults({ delayMs: 400, rules: [{ action: "fail", match: "evalsha" }] });
    const copies = trackScriptRequests();
    try {
      await expect(
        rec.edgelock.getLock(name).tryLock({ leaseTime: 10_000 }),
      ).rejects.toBeInstanceOf(TransportError);
      await copies.settled();
    } finally {
      copies.stop();
    }
    bridge.bridge.clearFaults();
    await Promise.all(rec.background);
    expect(Object.values(await replayRecords(raw, name))).toEqual(["C"]);
    expect(await raw.exists(name)).toBe(0);
  });
});
