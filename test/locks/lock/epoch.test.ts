/**
 * A hold belongs to one incarnation of the lock (its epoch): a background cancel, or the release
 * of a stale lease, never undoes a newer hold that the same owner made after the first expired.
 */
import { afterEach, describe, expect, it } from "vitest";
import { keyPrefix, usePrivateBridge, useRawRedis } from "../../support/env.js";
import { aborted, recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();
afterEach(() => {
  bridge.bridge.clearFaults();
});

describe("epoch", () => {
  it("a background cancel that lands after the hold expired and was re-made leaves the new hold alone", async () => {
    const name = `${prefix}late-cancel`;
    const owner = "tenant-7:job-42";
    // A talks through the fault bridge; the retry comes from another client with the same owner.
    const a = recordingEdgeLock({}, bridge.redis());
    await (await a.edgelock.getLock(`${prefix}warm`).tryLock({ leaseTime: 1_000 }))?.release();
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "hang", match: "evalsha", times: 1 }],
    });
    const controller = new AbortController();
    const pending = a.edgelock
      .getLock(name)
      .tryLock({ leaseTime: 300, owner, signal: controller.signal });
    for (;;) {
      if (bridge.bridge.stats().faultsInjected === 1) break;
      await new Promise((r) => setImmediate(r));
    }
    expect(await raw.exists(name)).toBe(1); // applied, answer held back
    // The cancel A sends on abort is held at the bridge until long after the hold expired.
    bridge.bridge.setFaults({ delayMs: 1_500 });
    controller.abort(new Error("gave up"));
    await expect(pending).rejects.toThrow("gave up");
    expect(a.background).toHaveLength(1);
    await expect.poll(() => raw.exists(name), { timeout: 3_000, interval: 20 }).toBe(0);
    const b = recordingEdgeLock();
    const retry = await b.edgelock.getLock(name).tryLock({ leaseTime: 10_000, owner });
    if (!retry) throw new Error("retry not acquired");
    await Promise.all(a.background); // the cancel lands now
    expect(await b.edgelock.getLock(name).getHoldCount(owner)).toBe(1);
    const intruder = await b.edgelock.getLock(name).tryLock({ leaseTime: 1_000 });
    expect(intruder).toBeNull();
    expect(retry.signal.aborted).toBe(false);
    expect(await retry.release()).toBe("released");
  });

  it("releasing a lease whose hold expired leaves the owner's newer hold alone", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}stale-release`;
    const lock = edgelock.getLock(name);
    const stale = await lock.lock({ leaseTime: 200 });
    await aborted(stale.signal);
    await expect.poll(() => raw.exists(name), { timeout: 2_000, interval: 20 }).toBe(0);
    const fresh = await lock.lock({ leaseTime: 10_000, owner: stale.owner });
    expect(fresh.epoch).not.toBe(stale.epoch);
    expect(await stale.release()).toBe("expired");
    expect(await lock.getHoldCount(stale.owner)).toBe(1);
    expect(await fresh.release()).toBe("released");
  });

  it("a restored lease keeps its epoch; one serialized without it releases any hold of the owner", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}restore`;
    const lock = edgelock.getLock(name);
    const lease = await lock.lock({ leaseTime: 10_000 });
    const json = lease.toJSON();
    expect(json.epoch).toBe(lease.epoch);
    expect(edgelock.restoreLease(JSON.stringify(json)).epoch).toBe(lease.epoch);
    const { epoch: _, ...old } = json;
    const legacy = edgelock.restoreLease(old);
    expect(legacy.epoch).toBe(0);
    expect(await legacy.release()).toBe("released");
    expect(await lock.isLocked()).toBe(false);
  });
});
