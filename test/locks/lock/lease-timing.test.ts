/**
 * The lease's clock: `signal` aborts promptly at `expiresAt` when no renewal confirmed a later
 * one (the contract says within 50 ms; the bound here is 150 ms, for a loaded machine), and a
 * renewal's `expiresAt` counts from when its request was sent, not from when the answer came.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type Lease, LeaseLostError } from "../../../src/index.js";
import { keyPrefix, usePrivateBridge } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const bridge = usePrivateBridge();
afterEach(() => {
  bridge.bridge.clearFaults();
});

/** Most lateness accepted of the expiry timer, in ms. */
const EXPIRY_SLACK_MS = 150;

/** Resolves with `Date.now()` at the moment `lease.signal` aborts, and the reason. */
function abortTime(lease: Lease): Promise<{ at: number; reason: unknown }> {
  return new Promise((resolve) => {
    lease.signal.addEventListener(
      "abort",
      () => resolve({ at: Date.now(), reason: lease.signal.reason }),
      { once: true },
    );
  });
}

describe("lease timing", () => {
  it("a lease nobody renews aborts its signal within 150 ms of expiresAt", async () => {
    const { edgelock } = recordingEdgeLock();
    const lease = await edgelock.getLock(`${prefix}expiry`).lock({ leaseTime: 300 });
    const { at, reason } = await abortTime(lease);
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(at).toBeGreaterThanOrEqual(lease.expiresAt);
    expect(at - lease.expiresAt).toBeLessThan(EXPIRY_SLACK_MS);
  });

  it("after a confirmed renewal, the lease aborts within 150 ms of the new expiresAt", async () => {
    const { edgelock } = recordingEdgeLock();
    const lease = await edgelock.getLock(`${prefix}expiry-renewed`).lock({ leaseTime: 300 });
    const first = lease.expiresAt;
    await lease.renew(600);
    expect(lease.expiresAt).toBeGreaterThan(first);
    const { at, reason } = await abortTime(lease);
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(at).toBeGreaterThanOrEqual(lease.expiresAt);
    expect(at - lease.expiresAt).toBeLessThan(EXPIRY_SLACK_MS);
  });

  it("a renewal's expiresAt counts from when the request was sent, not from its late answer", async () => {
    const { edgelock } = recordingEdgeLock({}, bridge.redis());
    const lease = await edgelock.getLock(`${prefix}renew-sent`).lock({ leaseTime: 10_000 });
    // Every request now takes 500 ms at the bridge before Redis applies it.
    bridge.bridge.setFaults({ delayMs: 500 });
    const sent = Date.now();
    await lease.renew(10_000);
    const answered = Date.now();
    expect(answered - sent).toBeGreaterThanOrEqual(500);
    expect(lease.expiresAt).toBeGreaterThanOrEqual(sent + 10_000);
    // Measured from the answer it would be at least answered + 10 000.
    expect(lease.expiresAt).toBeLessThan(sent + 10_000 + 200);
    expect(lease.expiresAt).toBeLessThan(answered + 10_000);
    bridge.bridge.clearFaults();
    expect(await lease.release()).toBe("released");
  });
});
