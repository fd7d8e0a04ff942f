import { describe, expect, it } from "vitest";
import { EdgeLockClient } from "../src/core.js";
import { LEASE_KINDS } from "../src/lease/json.js";
import type { Lease, SerializedLease } from "../src/lease/lease.js";
import { getFairLock, restoreFairLockLease } from "../src/locks/fair-lock/entry.js";
import { getFencedLock, restoreFencedLockLease } from "../src/locks/fenced-lock/entry.js";
import { getIdempotencyKey, restoreClaimLease } from "../src/locks/idempotency/entry.js";
import { getLock, restoreLockLease } from "../src/locks/lock/entry.js";
import {
  getPermitExpirableSemaphore,
  restorePermitLease,
} from "../src/locks/permit-expirable-semaphore/entry.js";
import { getReadWriteLock, restoreReadWriteLockLease } from "../src/locks/read-write-lock/entry.js";
import { bridgeRedis, keyPrefix, useRawRedis } from "./support/env.js";
import { countingRedis } from "./support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();

/** A client on the shared bridge that counts the requests it sends. */
function countingClient(): { client: EdgeLockClient; calls: () => number } {
  const { redis, calls } = countingRedis();
  return { client: new EdgeLockClient({ redis }), calls };
}

const client = () => new EdgeLockClient({ redis: bridgeRedis() });

/** A lease in another invocation: its JSON, restored on a client of its own. */
function handOver<L extends Lease>(
  lease: L | null,
  restore: (c: EdgeLockClient, s: string) => L,
): L {
  if (!lease) throw new Error("not acquired");
  const restored = restore(client(), JSON.stringify(lease));
  expect(restored.toJSON()).toEqual(lease.toJSON());
  return restored;
}

/** The restored lease renews the hold (PTTL past its first lease) and releases it. */
async function renewsAndReleases(restored: Lease, key: string, isLocked: () => Promise<boolean>) {
  await restored.renew(60_000);
  expect(await raw.pTTL(key)).toBeGreaterThan(30_000);
  expect(await restored.release()).toBe("released");
  expect(await isLocked()).toBe(false);
}

describe("each entry restores its own kind's leases", () => {
  it("restoreLockLease: a reentrant lock's lease", async () => {
    const lock = getLock(client(), `${prefix}lock`);
    const restored = handOver(await lock.tryLock({ leaseTime: 10_000 }), restoreLockLease);
    await renewsAndReleases(restored, lock.name, () => lock.isLocked());
  });

  it("restoreFairLockLease: a fair lock's lease", async () => {
    const lock = getFairLock(client(), `${prefix}fair`);
    const restored = handOver(await lock.tryLock({ leaseTime: 10_000 }), restoreFairLockLease);
    await renewsAndReleases(restored, lock.name, () => lock.isLocked());
  });

  it("restoreFencedLockLease: a fenced lock's lease, with its token", async () => {
    const lock = getFencedLock(client(), `${prefix}fenced`);
    const lease = await lock.tryLock({ leaseTime: 10_000 });
    const restored = handOver(lease, restoreFencedLockLease);
    expect(restored.fencingToken).toBe(lease?.fencingToken);
    await renewsAndReleases(restored, lock.name, () => lock.isLocked());
  });

  it("restoreReadWriteLockLease: a read lease and a write lease", async () => {
    const rw = getReadWriteLock(client(), `${prefix}rw`);
    const read = handOver(
      await rw.readLock().tryLock({ leaseTime: 10_000 }),
      restoreReadWriteLockLease,
    );
    expect(await rw.writeLock().tryLock()).toBeNull();
    await renewsAndReleases(read, rw.name, () => rw.readLock().isLocked());

    const write = handOver(
      await rw.writeLock().tryLock({ leaseTime: 10_000 }),
      restoreReadWriteLockLease,
    );
    expect(await rw.readLock().tryLock()).toBeNull();
    await renewsAndReleases(write, rw.name, () => rw.writeLock().isLocked());
  });

  it("restorePermitLease: a permit lease gives its permits back", async () => {
    const semaphore = getPermitExpirableSemaphore(client(), `${prefix}pes`);
    expect(await semaphore.trySetPermits(2)).toBe(true);
    const lease = await semaphore.tryAcquire({ permits: 2, leaseTime: 10_000 });
    const restored = handOver(lease, restorePermitLease);
    expect(restored.permitIds).toEqual(lease?.permitIds);
    await restored.renew(60_000);
    expect(await restored.release()).toBe("released");
    expect(await semaphore.availablePermits()).toBe(2);
  });

  it("edgelock/idempotency: a claim's lease, restored, completes the key", async () => {
    const c = client();
    const name = `${prefix}claim`;
    const claim = await getIdempotencyKey(c, name).claim({ leaseTime: 10_000 });
    if (claim.status !== "acquired") throw new Error(`claim: ${claim.status}`);
    const restored = handOver(claim.lease, restoreClaimLease);
    expect(await getIdempotencyKey(client(), name).complete(restored, 60_000)).toBe("released");
    expect((await getIdempotencyKey(c, name).claim()).status).toBe("completed");
  });
});

describe("a lease of another kind is refused before any request", () => {
  const serialized = (kind: SerializedLease["kind"]): SerializedLease => ({
    v: 1,
    kind,
    name: `${prefix}other`,
    owner: "a:b",
    id: "0".repeat(32),
    leaseTime: 10_000,
    watchdog: false,
    expiresAt: Date.now() + 10_000,
    ...(kind === "fenced-lock" ? { fencingToken: 7 } : {}),
    ...(kind === "permit" ? { permitIds: ["1".repeat(32)] } : {}),
  });
  const all = LEASE_KINDS;
  const restorers: [string, string, (c: EdgeLockClient, s: SerializedLease) => Lease, string[]][] =
    [
      ["restoreLockLease", "edgelock/lock", restoreLockLease, ["lock"]],
      ["restoreClaimLease", "edgelock/idempotency", restoreClaimLease, ["lock"]],
      ["restoreFairLockLease", "edgelock/fair-lock", restoreFairLockLease, ["fair-lock"]],
      ["restoreFencedLockLease", "edgelock/fenced-lock", restoreFencedLockLease, ["fenced-lock"]],
      [
        "restoreReadWriteLockLease",
        "edgelock/read-write-lock",
        restoreReadWriteLockLease,
        ["read-lock", "write-lock"],
      ],
      ["restorePermitLease", "edgelock/permit-expirable-semaphore", restorePermitLease, ["permit"]],
    ];
  const cases = restorers.flatMap(([fn, entry, restore, own]) =>
    all.filter((k) => !own.includes(k)).map((k) => [fn, k, entry, restore] as const),
  );

  it.each(cases)("%s refuses a %s lease", (fn, kind, entry, restore) => {
    const { client: c, calls } = countingClient();
    expect(() => restore(c, serialized(kind))).toThrow(
      new RegExp(`^${fn}: a "${kind}" lease; ${entry} restores .* leases only`),
    );
    expect(() => restore(c, serialized(kind))).toThrow(TypeError);
    expect(calls()).toBe(0);
  });

  it.each(restorers)("%s restores its own kind without a request", (_, __, restore, own) => {
    const { client: c, calls } = countingClient();
    for (const kind of own) expect(restore(c, serialized(kind as never)).owner).toBe("a:b");
    expect(calls()).toBe(0);
  });

  it.each(restorers)("%s names itself for a malformed lease", (fn, _, restore) => {
    const { client: c, calls } = countingClient();
    expect(() => restore(c, "not json" as never)).toThrow(
      new TypeError(`${fn}: the string is not JSON from lease.toJSON()`),
    );
    expect(() => restore(c, { v: 2 } as never)).toThrow(`${fn}: unknown lease format`);
    expect(calls()).toBe(0);
  });

  it.each(restorers)("%s refuses a client that is not an EdgeLockClient", (_, __, restore, own) => {
    const notAClient = { redis: bridgeRedis() } as unknown as EdgeLockClient;
    expect(() => restore(notAClient, serialized(own[0] as never))).toThrow(
      new TypeError("expected an EdgeLockClient or EdgeLock created by this copy of edgelock"),
    );
  });

  it("restoreFencedLockLease refuses a fenced lease without its token", () => {
    const { client: c, calls } = countingClient();
    const { fencingToken: _, ...tokenless } = serialized("fenced-lock");
    expect(() => restoreFencedLockLease(c, tokenless)).toThrow(
      new TypeError("restoreFencedLockLease: a fenced-lock lease needs `lease.fencingToken`"),
    );
    expect(calls()).toBe(0);
  });
});
