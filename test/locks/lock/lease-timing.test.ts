/**
 * The lease's clock: `signal` aborts promptly at `expiresAt` when no renewal confirmed a later
 * one (the contract says within 50 ms; the bound here is 150 ms, for a loaded machine), and a
 * renewal's `expiresAt` counts from when its request was sent, not from when the answer came.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { LeaseLostError } from "../../../src/index.js";
import { keyPrefix, usePrivateBridge } from "../../support/env.js";
import { abortTime, recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const bridge = usePrivateBridge();
afterEach(() => {
  bridge.bridge.clearFaults();
});

/** Most lateness accepted of the expiry timer, in ms. */
const EXPIRY_SLACK_MS = 150;

describe("lease timing", () => {
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

  it("a wall clock stepped back while the lease runs: signal still aborts at the monotonic deadline", async () => {
    // The one fake here, as below: this process's wall clock, stepped back by a minute once the
    // lease is made. A lease timed on the wall clock alone would outlive Redis's lock by that.
    const { edgelock } = recordingEdgeLock();
    const lease = await edgelock.getLock(`${prefix}expiry-step`).lock({ leaseTime: 400 });
    const deadline = performance.now() + (lease.expiresAt - Date.now());
    const wall = Date.now.bind(Date);
    const clock = vi.spyOn(Date, "now").mockImplementation(() => wall() - 60_000);
    try {
      const reason = await new Promise<unknown>((resolve) =>
        lease.signal.addEventListener("abort", () => resolve(lease.signal.reason), { once: true }),
      );
      expect(reason).toBeInstanceOf(LeaseLostError);
      expect(performance.now() - deadline).toBeLessThan(EXPIRY_SLACK_MS);
    } finally {
      clock.mockRestore();
    }
  });

  it("a wall clock stepped back while a renewal is on its way leaves expiresAt no later than Redis's expiry", async () => {
    // The one fake here: this process's wall clock, stepped back by an hour while the renewal
    // is on its way (as an NTP step would); the monotonic clock runs on.
    const { edgelock } = recordingEdgeLock({}, bridge.redis());
    const lease = await edgelock.getLock(`${prefix}renew-step`).lock({ leaseTime: 5_000 });
    const wall = Date.now.bind(Date);
    let offset = 0;
    const clock = vi.spyOn(Date, "now").mockImplementation(() => wall() + offset);
    try {
      bridge.bridge.setFaults({ delayMs: 120 });
      setTimeout(() => (offset -= 3_600_000), 40);
      await lease.renew(8_000);
      expect(lease.expiresAt).toBeLessThanOrEqual(Date.now() + 8_000);
      expect(lease.expiresAt).toBeGreaterThan(Date.now() + 7_000);
      bridge.bridge.clearFaults();
      expect(await lease.release()).toBe("released");
    } finally {
      clock.mockRestore();
    }
  });
});
