/**
 * A lease carries the incarnation of the lock (its epoch) through JSON. That a stale release or a
 * late cancel never undoes the owner's newer hold is part of the lease contract
 * (test/locks/lease-contract.ts), run by every kind.
 */
import { describe, expect, it } from "vitest";
import { keyPrefix } from "../../support/env.js";
import { recordingEdgeLock } from "../../support/locks.js";

const prefix = keyPrefix();

describe("epoch", () => {
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
