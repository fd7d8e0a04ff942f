/**
 * Every script call has a local time limit (`requestTimeout`): a request that never answers
 * (the bridge's `hang` fault) fails as an ambiguous TransportError, keep-alive retries after it,
 * a lease nobody could renew sees its signal abort by `expiresAt`, and `tryLock` settles within
 * `waitTime + requestTimeout` whatever the network does.
 */
import { afterEach, describe, expect, it } from "vitest";
import { LeaseLostError, TransportError } from "../../src/index.js";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../support/env.js";
import { aborted, recordingEdgeLock } from "../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();
afterEach(() => {
  bridge.bridge.clearFaults();
});

/** Every later EVALSHA is applied by Redis and never answered (socket kept open). */
const hangApplied = (times?: number) =>
  bridge.bridge.setFaults({
    rules: [{ action: "lose", mode: "hang", match: "evalsha", ...(times ? { times } : {}) }],
  });

async function warm(rec: ReturnType<typeof recordingEdgeLock>) {
  await (await rec.edgelock.getLock(`${prefix}warm`).tryLock({ leaseTime: 1_000 }))?.release();
}

describe("requestTimeout", () => {
  it("an acquire whose answer hangs sends its request again: the copy answers, one hold", async () => {
    const rec = recordingEdgeLock({ requestTimeout: 300 }, bridge.redis());
    await warm(rec);
    const name = `${prefix}hedged-acquire`;
    hangApplied(1);
    const started = Date.now();
    const lease = await rec.edgelock.getLock(name).tryLock({ leaseTime: 10_000 });
    if (!lease) throw new Error("not acquired");
    // The copy goes a third of requestTimeout (at most) after the first: not after the timeout.
    expect(Date.now() - started).toBeLessThan(300);
    expect(rec.events.filter((e) => e.type === "acquire").at(-1)?.requests).toBe(2);
    expect(await rec.edgelock.getLock(name).getHoldCount(lease.owner)).toBe(1);
    expect(rec.background).toEqual([]);
    expect(await lease.release()).toBe("released");
  });

  it("an acquire with no answer for its whole budget fails as an ambiguous TransportError after requestTimeout; it is cancelled", async () => {
    const rec = recordingEdgeLock({ requestTimeout: 300 }, bridge.redis());
    await warm(rec);
    const name = `${prefix}hung-acquire`;
    hangApplied();
    const started = Date.now();
    const error = await rec.edgelock
      .getLock(name)
      .tryLock({ leaseTime: 10_000 })
      .catch((e: unknown) => e);
    const took = Date.now() - started;
    expect(error).toBeInstanceOf(TransportError);
    expect((error as TransportError).ambiguous).toBe(true);
    // The configured requestTimeout and the sends, not what was left of the last send's time.
    expect((error as TransportError).message).toMatch(
      /got no answer: sent [2-9] times in \d+ ms, each waiting at most requestTimeout \(300 ms\); it may still be applied; cancelled in the background$/,
    );
    expect((error as TransportError).status).toBeUndefined();
    expect(took).toBeGreaterThanOrEqual(290);
    expect(took).toBeLessThan(2_000);
    // The acquire was applied; the background cancel undoes it once Redis answers again.
    expect(rec.background).toHaveLength(1);
    bridge.bridge.clearFaults();
    await Promise.all(rec.background);
    expect(await raw.exists(name)).toBe(0);
  });

  it("tryLock settles within waitTime + requestTimeout when a poll hangs", async () => {
    const holder = recordingEdgeLock({}, bridge.redis());
    const name = `${prefix}hung-poll`;
    const held = await holder.edgelock.getLock(name).tryLock({ leaseTime: 20_000 });
    if (!held) throw new Error("not acquired");
    const rec = recordingEdgeLock({ requestTimeout: 400 }, bridge.redis());
    await warm(rec);
    const waiting = rec.edgelock.getLock(name).tryLock({ waitTime: 500, leaseTime: 1_000 });
    await rec.until((e) => e.type === "waiting");
    // The next poll is never answered (and never applied: the lock stays busy anyway).
    bridge.bridge.setFaults({ rules: [{ action: "fail", mode: "hang", match: "evalsha" }] });
    const started = Date.now();
    const outcome = await waiting.then(
      (lease) => ({ lease }),
      (error: unknown) => ({ error }),
    );
    bridge.bridge.clearFaults();
    expect(Date.now() - started).toBeLessThan(500 + 400 + 500);
    expect("error" in outcome && outcome.error).toBeInstanceOf(TransportError);
    expect(await held.release()).toBe("released");
  });

  it("the timer keep-alive retries after a hung renewal, so the lease survives it", async () => {
    const rec = recordingEdgeLock({ watchdogTimeout: 1_200 }, bridge.redis());
    const name = `${prefix}hung-renewal`;
    const lease = await rec.edgelock.getLock(name).lock();
    hangApplied(1);
    // The first renewal hangs and is abandoned at leaseTime / 6; a retry follows at leaseTime / 9.
    const error = await rec.until((e) => e.type === "error");
    expect(error).toMatchObject({ operation: "renew" });
    await rec.until((e) => e.type === "renew" && e.renewed);
    expect(lease.signal.aborted).toBe(false);
    expect(await raw.pTTL(name)).toBeGreaterThan(0);
    expect(await lease.release()).toBe("released");
  });

  it("when no renewal is answered, the signal aborts by expiresAt and renewals go on until then", async () => {
    const rec = recordingEdgeLock({ watchdogTimeout: 900 }, bridge.redis());
    const name = `${prefix}all-hung`;
    const lease = await rec.edgelock.getLock(name).lock();
    const expiresAt = lease.expiresAt;
    const before = bridge.bridge.stats().byCommand.evalsha ?? 0;
    hangApplied();
    const reason = await aborted(lease.signal);
    const late = Date.now() - expiresAt;
    expect(reason).toBeInstanceOf(LeaseLostError);
    // Aborted no later than expiresAt (the timer fires at it; allow for a busy event loop).
    expect(late).toBeLessThan(500);
    expect(lease.expiresAt).toBe(expiresAt); // no renewal confirmed a later expiry
    // The first renewal and at least one retry were sent.
    expect((bridge.bridge.stats().byCommand.evalsha ?? 0) - before).toBeGreaterThanOrEqual(2);
    await rec.until((e) => e.type === "lost");
    bridge.bridge.clearFaults();
    // The hung renewals did apply: whatever Redis says now, the holder already stopped.
    expect(await lease.release()).not.toBe("not-owner");
  });
});
