/**
 * Guards of the lease and of withLock: no renewal once a release is under way or the lease
 * ended, and a failed release inside withLock is reported, not thrown.
 */
import { afterEach, describe, expect, it } from "vitest";
import { LeaseLostError, TransportError } from "../../../src/index.js";
import { keyPrefix, usePrivateBridge } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const bridge = usePrivateBridge();
afterEach(() => {
  bridge.bridge.clearFaults();
});

describe("lease guards", () => {
  it("renew while the release is in flight rejects as released and sends nothing", async () => {
    const rec = recordingEdgeLock();
    const lease = await rec.edgelock
      .getLock(`${prefix}renew-in-release`)
      .lock({ leaseTime: 5_000 });
    const releasing = lease.release();
    const error = await lease.renew().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect((error as LeaseLostError).reason).toBe("released");
    expect(await releasing).toBe("released");
    expect(rec.events.filter((e) => e.type === "renew")).toHaveLength(0);
  });

  it("renew after the release rejects as released and sends nothing", async () => {
    const rec = recordingEdgeLock();
    const lease = await rec.edgelock.getLock(`${prefix}renew-after`).lock({ leaseTime: 5_000 });
    await lease.release();
    await expect(lease.renew()).rejects.toMatchObject({ reason: "released" });
    expect(rec.events.filter((e) => e.type === "renew")).toHaveLength(0);
  });
});

describe("withLock", () => {
  it("a release that fails is reported as an error event and the callback's value returned", async () => {
    const rec = recordingEdgeLock({}, bridge.redis({ retry: { retries: 0 } }));
    const value = await rec.edgelock.withLock(
      `${prefix}release-fails`,
      () => {
        // Every later request fails with HTTP 503, the transport's resend included.
        bridge.bridge.setFaults({ rules: [{ action: "fail", mode: "503", match: "evalsha" }] });
        return 42;
      },
      { leaseTime: 2_000 },
    );
    expect(value).toBe(42);
    const error = rec.events.find((e) => e.type === "error");
    expect(error).toMatchObject({ type: "error", operation: "release" });
    if (error?.type !== "error") throw new Error("unreachable");
    expect(error.error).toBeInstanceOf(TransportError);
  });
});
