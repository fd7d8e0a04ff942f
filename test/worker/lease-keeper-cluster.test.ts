/**
 * The LeaseKeeper reads `EDGELOCK_REDIS_CLUSTER` from its own environment (in real workerd): with
 * it on, the alarm's batched renewal goes out as one request per hash slot of the leases' names,
 * as a Redis Cluster needs; off, as one request. (The flag's parsing is tested in
 * test/cluster/cluster.test.ts; this is the keeper's wiring of it.)
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { keySlot } from "../../src/slot.js";
import { LeaseKeeper } from "../../worker/lease-keeper.js";
import {
  elapse,
  keeperStub,
  keyPrefix,
  parkAlarm,
  recordingEdgeLock,
  useKeeperInstance,
  workerBridgeControl,
} from "./support.js";

const prefix = keyPrefix();
const LEASE_TIME = 1_200;
const instance = useKeeperInstance();

/** `n` lock names of `prefix` in `n` different hash slots. */
function namesInDistinctSlots(n: number): string[] {
  const names: string[] = [];
  const slots = new Set<number>();
  while (names.length < n) {
    const name = `${prefix}${crypto.randomUUID()}`;
    if (slots.has(keySlot(name))) continue;
    slots.add(keySlot(name));
    names.push(name);
  }
  return names;
}

/**
 * Three fixed leases on names in three slots, registered with a keeper built on `flag` as its
 * `EDGELOCK_REDIS_CLUSTER`; the keeper's alarm is run once by hand when they are due.
 * @returns the Redis requests that alarm sent, and the locks.
 */
async function renewByKeeperWith(flag: string) {
  const { edgelock } = recordingEdgeLock();
  const locks = namesInDistinctSlots(3).map((name) => edgelock.getLock(name));
  const leases = await Promise.all(locks.map((lock) => lock.lock({ leaseTime: LEASE_TIME })));
  const keeperEnv = { ...env, EDGELOCK_REDIS_CLUSTER: flag };
  const stub = keeperStub(instance.name);
  await runInDurableObject(stub, async (_, state) => {
    const keeper = new LeaseKeeper(state, keeperEnv);
    for (const lease of leases) {
      const { name, owner, id } = lease;
      expect(
        await keeper.register({ name, owner, id, leaseTime: LEASE_TIME, maxHoldTime: 60_000 }),
      ).toEqual({ ok: true });
    }
    // Park the real alarm in the same call: it would run with the Worker's own env.
    await parkAlarm(state);
  });
  // Due once half a renewal period (LEASE_TIME / 6) has passed since registration.
  await elapse(LEASE_TIME / 6 + 100);
  await leases[0]?.renew(); // loads the renewal script into Redis' cache
  await workerBridgeControl.resetStats();
  await runInDurableObject(stub, async (_, state) => {
    await new LeaseKeeper(state, keeperEnv).alarm();
    await parkAlarm(state);
  });
  const requests = (await workerBridgeControl.stats()).requests;
  for (const lock of locks) expect(await lock.remainTimeToLive()).toBeGreaterThan(LEASE_TIME - 200);
  await Promise.all(leases.map((lease) => lease.release()));
  return requests;
}

describe("LeaseKeeper EDGELOCK_REDIS_CLUSTER", () => {
  it("with the flag on, the alarm renews leases of three hash slots in one request per slot", async () => {
    expect(await renewByKeeperWith("true")).toBe(3);
  });

  it("with the flag off, the same leases go in one request", async () => {
    expect(await renewByKeeperWith("false")).toBe(1);
  });
});
