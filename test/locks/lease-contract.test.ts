/**
 * Every kind that issues leases keeps the lease contract (lease-contract.ts): the reentrant, fair
 * and fenced locks, both sides of a read-write lock and a permit-expirable semaphore on the first
 * of three endpoints, a MultiLock over members on the first two, a RedLock over all three. Each
 * kind says how long Redis still keeps a hold and what a grant left there.
 */
import { expect } from "vitest";
import { type EdgeLock, type Lease, RedLock } from "../../src/index.js";
import { type Endpoint, useEndpoints } from "../support/endpoints.js";
import type { RawRedis } from "../support/env.js";
import { describeLeaseContract, type LeaseUnderContract } from "./lease-contract.js";

const endpoints = useEndpoints(3);
const at = (i: number) => endpoints[i] as Endpoint;

/** Acquire options as the kinds take them. */
type AcquireOptions = Parameters<LeaseUnderContract["acquire"]>[0];

/** A client on endpoint `i` with the client's own retries (so a lost answer is resent). */
function client(i: number, background: Promise<unknown>[]): EdgeLock {
  return at(i).edgelock({ redis: at(i).redis(), waitUntil: (p) => background.push(p) });
}

/** A reply read as a number (`null` for none). */
const num = (value: unknown) =>
  value === null || value === undefined ? null : Number(String(value));

/** Ms a key still lives: 0 once gone (PTTL −2), unbounded without a TTL (−1). */
async function ttl(raw: RawRedis, key: string): Promise<number> {
  const ms = Number(await raw.pTTL(key));
  return ms === -1 ? Number.POSITIVE_INFINITY : Math.max(0, ms);
}

/** Redis's clock, in epoch ms. */
async function redisNow(raw: RawRedis): Promise<number> {
  const [seconds, micros] = (await raw.sendCommand(["TIME"])) as unknown[];
  return Number(String(seconds)) * 1_000 + Math.floor(Number(String(micros)) / 1_000);
}

/** The read holds' timeout keys of `owner` on `name`. */
async function readTimeouts(raw: RawRedis, name: string, owner: string): Promise<string[]> {
  return (await raw.keys(`{${name}}:${owner}:rwlock_timeout:*`)).map(String);
}

interface HashLock {
  tryLock(options: AcquireOptions & { leaseTime: number }): Promise<Lease | null>;
}

/**
 * A single-node kind on the first endpoint. `field` is the owner's HASH field; `epoch` reads
 * the incarnation; `extra` adds what else a grant leaves (a fenced lock's token).
 */
function singleNode(
  lockOf: (edgelock: EdgeLock, name: string) => HashLock,
  rivalOf: (edgelock: EdgeLock, name: string) => HashLock,
  o: {
    field: (owner: string) => string;
    epoch: (raw: RawRedis, name: string) => Promise<unknown>;
    remaining?: (raw: RawRedis, name: string, lease: Lease) => Promise<number>;
    extra?: (
      lease: Lease,
      raw: RawRedis,
      name: string,
    ) => Promise<{ claimed: object; stored: object }>;
  },
) {
  return async (name: string): Promise<LeaseUnderContract> => {
    const background: Promise<unknown>[] = [];
    const edgelock = client(0, background);
    const { raw, bridge } = at(0);
    return {
      bridges: [bridge],
      replayBridge: bridge,
      background,
      acquire: (options) => lockOf(edgelock, name).tryLock(options),
      rival: () => rivalOf(client(0, background), name).tryLock({ leaseTime: 10_000 }),
      remaining: (lease) => (o.remaining ?? ((r, n) => ttl(r, n)))(raw, name, lease),
      anyHold: async () => (await raw.exists(name)) === 1,
      grant: async (lease) => {
        const extra = (await o.extra?.(lease, raw, name)) ?? { claimed: {}, stored: {} };
        return {
          claimed: { epoch: lease.epoch, holds: 1, ...extra.claimed },
          stored: {
            epoch: num(await o.epoch(raw, name)),
            holds: num(await raw.hGet(name, o.field(lease.owner))),
            ...extra.stored,
          },
        };
      },
    };
  };
}

const byValue = (p: number | null, q: number | null) => (p ?? 0) - (q ?? 0);
const hashEpoch = (raw: RawRedis, name: string) => raw.hGet(name, "edgelock:epoch");
/**
 * A read-write lock's epoch, read from what `edgelock_epoch:{<name>}` keeps: the request id that
 * created the incarnation (lua/lib/rw.lua: its first 13 hex digits plus 1; a '+' after the id
 * marks registered waiters).
 */
const rwEpoch = async (raw: RawRedis, name: string) => {
  const by = await raw.get(`edgelock_epoch:{${name}}`);
  return by === null ? null : Number.parseInt(String(by).slice(0, 13), 16) + 1;
};
const sameField = (owner: string) => owner;
const writeField = (owner: string) => `${owner}:write`;

describeLeaseContract(
  "reentrant lock",
  { cancel: "own" },
  singleNode(
    (e, n) => e.getLock(n),
    (e, n) => e.getLock(n),
    { field: sameField, epoch: hashEpoch },
  ),
);

describeLeaseContract(
  "fair lock",
  { cancel: "own" },
  singleNode(
    (e, n) => e.getFairLock(n),
    (e, n) => e.getFairLock(n),
    { field: sameField, epoch: hashEpoch },
  ),
);

describeLeaseContract(
  "fenced lock",
  { cancel: "own" },
  singleNode(
    (e, n) => e.getFencedLock(n),
    (e, n) => e.getFencedLock(n),
    {
      field: sameField,
      epoch: hashEpoch,
      extra: async (lease, raw, name) => ({
        claimed: { token: lease.fencingToken },
        stored: { token: num(await raw.get(`redisson_lock_token:{${name}}`)) },
      }),
    },
  ),
);

describeLeaseContract(
  "read lock",
  { cancel: "own" },
  singleNode(
    (e, n) => e.getReadWriteLock(n).readLock(),
    // Readers share: a writer of another owner is what a read hold excludes.
    (e, n) => e.getReadWriteLock(n).writeLock(),
    {
      field: sameField,
      epoch: rwEpoch,
      // A read hold lives while both the HASH and its own timeout key do.
      remaining: async (raw, name, lease) => {
        const keys = await readTimeouts(raw, name, lease.owner);
        const own = Math.max(0, ...(await Promise.all(keys.map((k) => ttl(raw, k)))));
        return Math.min(await ttl(raw, name), own);
      },
      extra: async (lease, raw, name) => ({
        claimed: { timeoutKeys: 1 },
        stored: { timeoutKeys: (await readTimeouts(raw, name, lease.owner)).length },
      }),
    },
  ),
);

describeLeaseContract(
  "write lock",
  { cancel: "own" },
  singleNode(
    (e, n) => e.getReadWriteLock(n).writeLock(),
    (e, n) => e.getReadWriteLock(n).readLock(),
    { field: writeField, epoch: rwEpoch },
  ),
);

describeLeaseContract("permit", { cancel: "own" }, async (name) => {
  const background: Promise<unknown>[] = [];
  const edgelock = client(0, background);
  const { raw, bridge } = at(0);
  const timeouts = `{${name}}:timeout`;
  const semaphore = edgelock.getPermitExpirableSemaphore(name);
  await semaphore.trySetPermits(1);
  /** Each permit id in the ZSET (stored as the 16 bytes it encodes) and its expiry. */
  const permits = async () => {
    const flat = (await raw.sendCommand(["ZRANGE", timeouts, "0", "-1", "WITHSCORES"])) as Buffer[];
    const out = new Map<string, number>();
    for (let i = 0; i < flat.length; i += 2) {
      out.set((flat[i] as Buffer).toString("hex"), Number(String(flat[i + 1])));
    }
    return out;
  };
  return {
    bridges: [bridge],
    replayBridge: bridge,
    background,
    acquire: (options) => semaphore.tryAcquire(options),
    rival: () =>
      client(0, background).getPermitExpirableSemaphore(name).tryAcquire({ leaseTime: 10_000 }),
    remaining: async (lease) => {
      const [held, now] = await Promise.all([permits(), redisNow(raw)]);
      const left = (lease.permitIds ?? []).map((id) => (held.get(id) ?? now) - now);
      return Math.min(...left);
    },
    anyHold: async () => (await raw.zCard(timeouts)) > 0,
    grant: async (lease) => ({
      claimed: { permitIds: [...(lease.permitIds ?? [])].sort(), available: 0 },
      stored: {
        permitIds: [...(await permits()).keys()].sort(),
        available: num(await raw.get(name)),
      },
    }),
  };
});

describeLeaseContract("MultiLock", { cancel: "members" }, async (name) => {
  const background: Promise<unknown>[] = [];
  const x = `${name}:x`;
  const y = `${name}:y`;
  /** A reentrant lock on the first endpoint and a write lock on the second, as one. */
  const multiOf = () => {
    const onA = client(0, background);
    return onA.getMultiLock(onA.getLock(x), client(1, background).getReadWriteLock(y).writeLock());
  };
  const multi = multiOf();
  const [a, b] = [at(0), at(1)];
  return {
    bridges: [a.bridge, b.bridge],
    replayBridge: b.bridge,
    background,
    acquire: (options) => multi.tryLock(options),
    rival: () => multiOf().tryLock({ leaseTime: 10_000 }),
    remaining: async () => Math.min(await ttl(a.raw, x), await ttl(b.raw, y)),
    anyHold: async () => (await a.raw.exists(x)) + (await b.raw.exists(y)) > 0,
    grant: async (lease) => {
      const members = (lease as Lease & { members: readonly Lease[] }).members;
      return {
        claimed: { epochs: members.map((m) => m.epoch), holds: [1, 1] },
        stored: {
          epochs: [num(await hashEpoch(a.raw, x)), num(await rwEpoch(b.raw, y))],
          holds: [
            num(await a.raw.hGet(x, lease.owner)),
            num(await b.raw.hGet(y, writeField(lease.owner))),
          ],
        },
      };
    },
  };
});

describeLeaseContract("RedLock", { cancel: "members" }, async (name) => {
  const background: Promise<unknown>[] = [];
  const nodes = [0, 1, 2].map(at);
  // A generous time limit per endpoint: the latency step adds 300 ms to every request.
  const redlockOf = () =>
    new RedLock(
      nodes.map((_, i) => client(i, background).getLock(name)),
      { endpointTimeout: 2_000 },
    );
  const redlock = redlockOf();
  return {
    bridges: nodes.map((n) => n.bridge),
    replayBridge: at(0).bridge,
    background,
    acquire: (options) => redlock.tryLock(options),
    rival: () => redlockOf().tryLock({ leaseTime: 10_000 }),
    // Held while a quorum keeps it: the quorum-th longest TTL.
    remaining: async () => {
      const ttls = await Promise.all(nodes.map((n) => ttl(n.raw, name)));
      return ttls.sort((p, q) => q - p)[redlock.quorum - 1] ?? 0;
    },
    anyHold: async () =>
      (await Promise.all(nodes.map((n) => n.raw.exists(name)))).some((e) => e === 1),
    grant: async (lease) => {
      const composite = lease as Lease & { members: readonly Lease[] };
      // Grants after the quorum join the lease as they arrive.
      await expect.poll(() => composite.members.length, { timeout: 3_000 }).toBe(nodes.length);
      const epochs = await Promise.all(nodes.map(async (n) => num(await hashEpoch(n.raw, name))));
      const holds = await Promise.all(
        nodes.map(async (n) => num(await n.raw.hGet(name, lease.owner))),
      );
      return {
        claimed: { epochs: composite.members.map((m) => m.epoch).sort(byValue), holds: [1, 1, 1] },
        stored: { epochs: [...epochs].sort(byValue), holds },
      };
    },
  };
});
