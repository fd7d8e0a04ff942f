/**
 * What the `LeaseKeeper` alarm renews leases with: the renewal of each kind of lease and nothing
 * else of the primitives, over the core client.
 * @module
 */
import { contextOf, type EdgeLockClient } from "./core.js";
import type { KeeperLeaseKind } from "./keeper.js";
import { type LeaseToRenew, renewLeases } from "./locks/lock/index.js";
import { renewPermitHolds } from "./locks/permit-expirable-semaphore/index.js";
import { reportCall, reportRenew } from "./locks/protocol.js";
import { renewReadWriteHold } from "./locks/read-write-lock/index.js";
import { checkMs, checkName, checkOwner } from "./validate.js";

/**
 * Internal (the `LeaseKeeper` alarm): renews one lease of a kind that the batch of
 * {@link renewLeasesOf} cannot (a read or write hold, permits), in one HTTP request.
 * @returns true when renewed, false when no longer held.
 * @throws TypeError / RangeError for a bad lease, before any request.
 * @throws {TransportError} when Redis could not be reached.
 */
export async function renewLeaseOf(
  edgelock: EdgeLockClient,
  lease: {
    kind: KeeperLeaseKind;
    name: string;
    owner: string;
    leaseTime: number;
    permitIds?: readonly string[] | undefined;
  },
): Promise<boolean> {
  const ctx = contextOf(edgelock);
  const name = checkName(lease.name, "lease.name");
  const owner = checkOwner(lease.owner, "lease.owner");
  const leaseTime = checkMs(lease.leaseTime, "lease.leaseTime", 1);
  switch (lease.kind) {
    case "read-lock":
    case "write-lock":
      return renewReadWriteHold(
        ctx,
        name,
        lease.kind === "read-lock" ? "read" : "write",
        owner,
        leaseTime,
      );
    case "permit":
      if (!lease.permitIds?.length) throw new TypeError("a permit lease needs `permitIds`");
      {
        const ids = lease.permitIds;
        return reportRenew(
          ctx,
          name,
          "timer",
          async (counter) =>
            (await renewPermitHolds(ctx, name, ids, leaseTime, undefined, counter)) === ids.length,
        );
      }
  }
}

/**
 * Internal (the `LeaseKeeper` alarm): renews many leases in one HTTP request (one per hash slot
 * of their names with `cluster: true`). Each lease is renewed only if its owner still holds it.
 * @returns per lease, true when renewed, false when no longer held.
 * @throws TypeError / RangeError for a bad lease, before any request.
 * @throws {TransportError} when Redis could not be reached.
 */
export async function renewLeasesOf(
  edgelock: EdgeLockClient,
  leases: readonly LeaseToRenew[],
): Promise<boolean[]> {
  for (const l of leases) {
    checkName(l.name, "lease.name");
    checkOwner(l.owner, "lease.owner");
    checkMs(l.leaseTime, "lease.leaseTime", 1);
  }
  const ctx = contextOf(edgelock);
  // One event for the whole batch: its requests renew many leases at once.
  return reportCall(ctx, leases[0]?.name ?? "", "renew", (counter) =>
    renewLeases(ctx, leases, counter),
  );
}
