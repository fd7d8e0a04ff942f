/**
 * Every primitive on a local 3-master Redis Cluster, through the bridge in cluster mode and the
 * real `@upstash/redis` client: the whole life cycle of each (acquire, re-enter, renew, release,
 * a waiter subscribed over SSE and woken by the release, a waiter giving up, forceUnlock, inspect,
 * cancel of an unanswered acquire) on names owned by every master, with no CROSSSLOT, MOVED or
 * ASK error ever reaching the library; every script of src/lua.gen.ts runs at least once; every
 * key a script touches (those computed inside Lua included) lies in the name's hash slot; the
 * batched renewal is split per slot with `cluster: true`; slots match `CLUSTER KEYSLOT`.
 */

import { createHash, randomBytes } from "node:crypto";
import { createClient } from "@redis/client";
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startBridge } from "../../src/bridge/index.js";
import { keySlot as bridgeKeySlot } from "../../src/bridge/keys.js";
import { renewLeasesOf } from "../../src/client.js";
import {
  EdgeLock,
  type EdgeLockOptions,
  type Lease,
  type LockEvent,
  LockNotHeldError,
  LockUpgradeError,
  TransportError,
} from "../../src/index.js";
import { isClusterFlag } from "../../src/lease/renewal.js";
import * as lua from "../../src/lua.gen.js";
import { crc16, keySlot } from "../../src/slot.js";
import { sentSource } from "../../src/transport/billed.js";
import type { RedisLike } from "../../src/transport/index.js";
import { isReplayRecord } from "../support/locks.js";
import { type RedisCluster, startRedisCluster } from "../support/redis-cluster.js";

const TOKEN = randomBytes(16).toString("hex");
const P = `t:${randomBytes(4).toString("hex")}:`;

/** Every script constant of src/lua.gen.ts. */
const SCRIPTS = Object.values(lua).filter(
  (v): v is lua.LuaScript => typeof v === "object" && v !== null && "name" in v && "source" in v,
);
const digestOf = (text: string) => createHash("sha1").update(text).digest("hex");
/**
 * The SHA1s of each script as sent: inside the billing wrapper (a client with `onEvent`) and as
 * it is (any other client), src/transport/billed.ts.
 */
const SHAS_OF_SCRIPT = new Map(
  SCRIPTS.map((s) => [s, [digestOf(sentSource(s, true)), digestOf(sentSource(s, false))]]),
);
/** Indexes of the masters: every life cycle runs on a name owned by each. */
const MASTERS = [0, 1, 2];

let cluster: RedisCluster;
let bridge: Awaited<ReturnType<typeof startBridge>>;
/** A direct RESP2 client on one master. */
async function connectNode(url: string) {
  const client = createClient({ url, RESP: 2, disableClientInfo: true });
  client.on("error", () => undefined);
  await client.connect();
  return client;
}
let nodes: { url: string; client: Awaited<ReturnType<typeof connectNode>> }[];

beforeAll(async () => {
  cluster = await startRedisCluster(MASTERS.length);
  bridge = await startBridge({ cluster: { rootNodes: cluster.urls }, token: TOKEN });
  nodes = await Promise.all(
    cluster.urls.map(async (url) => ({ url, client: await connectNode(url) })),
  );
  // Every node's script cache starts empty: each script meets NOSCRIPT on each node once.
  await bridgeRedis().scriptFlush();
}, 60_000);

afterAll(async () => {
  await Promise.all((nodes ?? []).map(({ client }) => client.close()));
  await bridge?.close();
  await cluster?.stop();
});

/** What went through the recording clients: scripts that ran, errors, wake-up messages. */
const traffic = {
  /** SHA1 of every script that ran (EVALSHA or EVAL answered without error). */
  ran: new Set<string>(),
  /** Messages of every failed client call, except those sent while a fault was injected. */
  errors: [] as string[],
  /** Wake-up messages that reached a waiter's subscription (a waiter woken). */
  woken: 0,
  /** True while a test provokes a failure: failures of requests sent then are expected. */
  faulty: false,
  /** Script calls in flight now, and the most seen at once since the last reset. */
  scriptsInFlight: 0,
  mostScriptsInFlight: 0,
  /** Set by {@link holdNextAnswer}: the next script call reaches Redis, its answer waits. */
  hold: undefined as { answered: () => void; release: Promise<void> } | undefined,
};

/**
 * The next script call (EVALSHA or EVAL) of any recording client is sent and applied, but its
 * answer is held back until `release()`: an answer lost on the way, as the library sees it.
 */
function holdNextAnswer(): { answered: Promise<void>; release: () => void } {
  let answered = () => {};
  let release = () => {};
  const reached = new Promise<void>((resolve) => {
    answered = resolve;
  });
  traffic.hold = { answered, release: new Promise<void>((resolve) => (release = resolve)) };
  return { answered: reached, release };
}

function bridgeRedis(): Redis {
  return new Redis({ url: bridge.url, token: TOKEN });
}

/** Script calls in flight of one client, the most seen at once, and how many were made. */
interface InFlight {
  now: number;
  most: number;
  calls: number;
}

/**
 * An `@upstash/redis` client on the cluster bridge that records into {@link traffic} (and into
 * `own`, when given: this client's calls only, whatever other clients' background work sends).
 */
function recordingRedis(own?: InFlight): RedisLike {
  const redis = bridgeRedis();
  const observe = async <T>(call: () => Promise<T>): Promise<T> => {
    const faulty = traffic.faulty;
    try {
      return await call();
    } catch (error) {
      if (!faulty) traffic.errors.push(error instanceof Error ? error.message : String(error));
      throw error;
    }
  };
  /** Runs a script call; a held answer (see holdNextAnswer) waits after it was applied. */
  const script = async (call: () => Promise<unknown>, sha1: string): Promise<unknown> => {
    const hold = traffic.hold;
    traffic.hold = undefined;
    let reply: unknown;
    traffic.scriptsInFlight += 1;
    traffic.mostScriptsInFlight = Math.max(traffic.mostScriptsInFlight, traffic.scriptsInFlight);
    if (own) {
      own.calls += 1;
      own.now += 1;
      own.most = Math.max(own.most, own.now);
    }
    try {
      reply = await observe(call);
    } catch (error) {
      traffic.hold ??= hold; // e.g. NOSCRIPT: hold the EVAL that follows instead
      throw error;
    } finally {
      traffic.scriptsInFlight -= 1;
      if (own) own.now -= 1;
    }
    traffic.ran.add(sha1);
    if (hold) {
      hold.answered();
      await hold.release;
    }
    return reply;
  };
  return {
    eval: (source, keys, args) => script(() => redis.eval(source, keys, args), digestOf(source)),
    evalsha: (sha1, keys, args) => script(() => redis.evalsha(sha1, keys, args), sha1),
    subscribe: (channels) => {
      const subscriber = redis.subscribe(channels);
      subscriber.on("message", () => {
        traffic.woken += 1;
      });
      return subscriber;
    },
  };
}

interface Client {
  edgelock: EdgeLock;
  events: LockEvent[];
  background: Promise<unknown>[];
  /** Resolves at the first event (past or future) matching `predicate`. */
  until(predicate: (event: LockEvent, all: readonly LockEvent[]) => boolean): Promise<void>;
}

/** An EdgeLock (`cluster: true`) on a recording client, collecting events and background work. */
function client(options: Partial<EdgeLockOptions> = {}, own?: InFlight): Client {
  const events: LockEvent[] = [];
  const background: Promise<unknown>[] = [];
  const listeners = new Set<() => void>();
  const edgelock = new EdgeLock({
    redis: recordingRedis(own),
    cluster: true,
    onEvent: (event) => {
      events.push(event);
      for (const listener of [...listeners]) listener();
    },
    waitUntil: (task) => background.push(task),
    ...options,
  });
  return {
    edgelock,
    events,
    background,
    until: (predicate) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (!events.some((e) => predicate(e, events))) return;
          listeners.delete(check);
          resolve();
        };
        listeners.add(check);
        check();
      }),
  };
}

/** One name owned by each master, in the order of `cluster.urls`. */
function namesOnEveryNode(label: string): string[] {
  const found = new Map<string, string>();
  for (let i = 0; found.size < cluster.urls.length; i++) {
    const name = `${P}${label}:${i}`;
    const url = cluster.masterOf(name);
    if (!found.has(url)) found.set(url, name);
  }
  return cluster.urls.map((url) => found.get(url) as string);
}

/** Every key of `name`'s primitive (the name itself, or a key with `{name}` in it) on any node. */
async function keysOf(name: string): Promise<{ url: string; key: string }[]> {
  const all = await Promise.all(
    nodes.map(async ({ url, client: node }) =>
      (await node.keys(`*${name}*`))
        .filter((key) => key === name || key.includes(`{${name}}`))
        .map((key) => ({ url, key })),
    ),
  );
  return all.flat();
}

/**
 * Asserts that every key of `name` lives in `name`'s slot on the master owning it (so one script
 * can touch them all) and returns them, sorted.
 */
async function expectKeysInOneSlot(name: string): Promise<string[]> {
  const found = await keysOf(name);
  for (const { url, key } of found) {
    expect({ key, slot: keySlot(key), url }).toEqual({
      key,
      slot: keySlot(name),
      url: cluster.masterOf(name),
    });
  }
  return found.map(({ key }) => key).sort();
}

/**
 * Keys of `name` left once everything is released, apart from the documented ones and the
 * replay records (each lives one replay window).
 */
async function leftovers(name: string, documented: string[] = []): Promise<string[]> {
  return (await keysOf(name))
    .map(({ key }) => key)
    .filter((key) => !isReplayRecord(name, key) && !documented.includes(key));
}

function held<T extends Lease>(lease: T | null): T {
  if (!lease) throw new Error("not acquired");
  return lease;
}

/**
 * Runs `acquire` while the answer of its request is held back (applied in Redis, never seen by
 * the library), aborts it, and waits for the background cancel; `applied` checks that the
 * acquire did take effect meanwhile.
 */
async function cancelUnanswered(
  c: Client,
  acquire: (signal: AbortSignal) => Promise<unknown>,
  applied: () => Promise<void>,
): Promise<void> {
  const { answered, release } = holdNextAnswer();
  const controller = new AbortController();
  const pending = acquire(controller.signal);
  try {
    await answered;
    await applied();
    controller.abort(new Error("gave up"));
    await expect(pending).rejects.toThrow("gave up");
  } finally {
    release();
  }
  expect(c.background.length).toBeGreaterThan(0);
  await Promise.all(c.background);
}

/** A waiter was woken by a release's message (over the cluster's pub/sub), not by a poll. */
function expectWokenByRelease(before: { woken: number }): void {
  expect(traffic.woken).toBeGreaterThan(before.woken);
}

const wakeCounts = () => ({ woken: traffic.woken });

describe("hash slots", () => {
  it("crc16 is CRC16-XMODEM", () => {
    expect(crc16(new TextEncoder().encode("123456789"))).toBe(0x31c3);
  });

  it("keySlot (library and bridge) agrees with CLUSTER KEYSLOT", async () => {
    const keys = [
      "",
      "foo",
      "bar",
      "orders:42",
      "{user1000}.following",
      "foo{}{bar}",
      "foo{{bar}}zap",
      "foo{bar}{zap}",
      "{}",
      "}{",
      "naïve:ключ:鍵",
      `edgelock_replay:{${P}x}`,
      `{${P}x}:owner:rwlock_timeout:1`,
      ...Array.from({ length: 50 }, (_, i) => `${P}${i}`),
    ];
    const node = nodes[0]?.client;
    for (const key of keys) {
      const expected = Number(await node?.sendCommand(["CLUSTER", "KEYSLOT", key]));
      expect({ key, slot: keySlot(key) }).toEqual({ key, slot: expected });
      expect({ key, slot: bridgeKeySlot(key) }).toEqual({ key, slot: expected });
    }
  });

  it("EDGELOCK_REDIS_CLUSTER: true or 1 turn the keeper's cluster mode on", () => {
    for (const on of ["true", "TRUE", " 1 ", "True"]) expect(isClusterFlag(on)).toBe(true);
    for (const off of [undefined, "", "false", "0", "yes", "on", 1, true]) {
      expect(isClusterFlag(off)).toBe(false);
    }
  });
});

describe("every primitive on every master", () => {
  it("names spread over all masters", () => {
    const names = namesOnEveryNode("spread");
    expect(new Set(names.map((n) => cluster.masterOf(n))).size).toBe(cluster.urls.length);
  });

  it("a script NOSCRIPT on a node is sent with EVAL there, after another node ran it", async () => {
    const [a, b] = namesOnEveryNode("noscript");
    const c = client();
    await held(await c.edgelock.getLock(a as string).tryLock({ leaseTime: 5_000 })).release();
    const errors = traffic.errors.length;
    const lease = held(await c.edgelock.getLock(b as string).tryLock({ leaseTime: 5_000 }));
    // EVALSHA (NOSCRIPT on b's node, which never ran it) + EVAL: never an error to the caller.
    const acquire = c.events.filter((e) => e.type === "acquire").at(-1);
    expect(acquire?.requests).toBe(2);
    expect(traffic.errors.slice(errors)).toEqual([expect.stringMatching(/NOSCRIPT/)]);
    await lease.release();
  });

  it.each(MASTERS)("reentrant lock on master %i", async (master) => {
    const name = namesOnEveryNode("lock")[master] as string;
    const a = client();
    const lock = a.edgelock.getLock(name);
    const lease = held(await lock.tryLock({ leaseTime: 10_000 }));
    const again = held(await lock.tryLock({ leaseTime: 10_000, owner: lease.owner }));
    expect(await lock.getHoldCount(lease.owner)).toBe(2);
    expect(await lock.isHeldBy(lease.owner)).toBe(true);
    await lease.renew(20_000);
    expect(await lock.remainTimeToLive()).toBeGreaterThan(10_000);
    expect((await lock.inspect()).holders).toEqual([{ owner: lease.owner, holdCount: 2 }]);
    // A waiter subscribes to its client's wake channel and is woken by the last release.
    const b = client();
    const counts = wakeCounts();
    const waiting = b.edgelock.getLock(name).tryAcquire({ waitTime: 10_000, leaseTime: 10_000 });
    await b.until((_e, all) => all.filter((x) => x.type === "waiting").length === 2);
    // The registration (which carries the hand-off it asks for), in the name's slot, with the
    // re-entry's replay record (the registry needs no mark of its own).
    expect(await expectKeysInOneSlot(name)).toEqual(
      [
        name,
        // The first lease is shorter than the replay window, the second a re-entry.
        `edgelock_replay:{${name}}:${lease.id}`,
        `edgelock_replay:{${name}}:${again.id}`,
        `edgelock_waiting:{${name}}`,
      ].sort(),
    );
    expect(await again.release()).toBe("still-held");
    expect(await lease.release()).toBe("released");
    const woken = await waiting;
    expect(woken.attempts).toBe(3);
    expectWokenByRelease(counts);
    // A waiter that gives up unregisters (leave.lua).
    const c = client();
    expect(await c.edgelock.getLock(name).tryLock({ waitTime: 50, leaseTime: 1_000 })).toBeNull();
    await Promise.all(c.background);
    expect(await lock.forceUnlock()).toBe(true);
    expect(await lock.isLocked()).toBe(false);
    expect(await held(woken.lease).release()).toBe("expired");
    held(await lock.tryLock({ leaseTime: 10_000, owner: "svc:1" }));
    await expect(lock.unlock("svc:2")).rejects.toBeInstanceOf(LockNotHeldError);
    await lock.unlock("svc:1");
    await cancelUnanswered(
      a,
      (signal) => lock.tryLock({ leaseTime: 10_000, signal }),
      async () => expect(await lock.isLocked()).toBe(true),
    );
    expect(await lock.isLocked()).toBe(false);
    expect(await leftovers(name)).toEqual([]);
  });

  it.each(MASTERS)("fenced lock on master %i", async (master) => {
    const name = namesOnEveryNode("fenced")[master] as string;
    const a = client();
    const lock = a.edgelock.getFencedLock(name);
    const lease = held(await lock.tryLock({ leaseTime: 10_000 }));
    expect(await lock.getToken()).toBe(lease.fencingToken);
    const again = held(await lock.tryLock({ leaseTime: 10_000, owner: lease.owner }));
    await lease.renew();
    expect(again.fencingToken).toBeGreaterThan(lease.fencingToken);
    expect((await lock.inspect()).fencingToken).toBe(again.fencingToken);
    const b = client();
    const counts = wakeCounts();
    const waiting = b.edgelock.getFencedLock(name).tryLock({ waitTime: 10_000, leaseTime: 10_000 });
    await b.until((_e, all) => all.filter((x) => x.type === "waiting").length === 2);
    await expectKeysInOneSlot(name);
    await again.release();
    await lease.release();
    const next = held(await waiting);
    expect(next.fencingToken).toBeGreaterThan(lease.fencingToken);
    expectWokenByRelease(counts);
    expect(await lock.forceUnlock()).toBe(true);
    await cancelUnanswered(
      a,
      (signal) => lock.tryLock({ leaseTime: 10_000, signal }),
      async () => expect(await lock.isLocked()).toBe(true),
    );
    expect(await lock.isLocked()).toBe(false);
    expect(await leftovers(name, [`redisson_lock_token:{${name}}`])).toEqual([]);
  });

  it.each(MASTERS)("fair lock on master %i", async (master) => {
    const name = namesOnEveryNode("fair")[master] as string;
    const a = client();
    const lock = a.edgelock.getFairLock(name);
    const lease = held(await lock.tryLock({ leaseTime: 10_000 }));
    const again = held(await lock.tryLock({ leaseTime: 10_000, owner: lease.owner }));
    await lease.renew();
    expect((await lock.inspect()).holders).toEqual([{ owner: lease.owner, holdCount: 2 }]);
    // The queued waiter listens on its client's wake channel, which the release script publishes
    // to when it hands the lock over (Redis Cluster delivers a PUBLISH to every node).
    const b = client();
    const counts = wakeCounts();
    const owner = "waiter:b";
    const waiting = b.edgelock
      .getFairLock(name)
      .tryLock({ waitTime: 10_000, leaseTime: 10_000, owner });
    await b.until((_e, all) => all.filter((x) => x.type === "waiting").length === 2);
    const queued = await expectKeysInOneSlot(name);
    expect(queued).toEqual(
      expect.arrayContaining([
        name,
        `redisson_lock_queue:{${name}}`,
        `redisson_lock_timeout:{${name}}`,
        `edgelock_waiters:{${name}}`,
      ]),
    );
    expect(await again.release()).toBe("still-held");
    expect(await lease.release()).toBe("released");
    const next = held(await waiting);
    expect(next.owner).toBe(owner);
    expectWokenByRelease(counts);
    // A waiter that gives up leaves the queue (cancel.lua).
    const c = client();
    expect(
      await c.edgelock.getFairLock(name).tryLock({ waitTime: 50, leaseTime: 1_000 }),
    ).toBeNull();
    expect(await lock.forceUnlock()).toBe(true);
    expect(await next.release()).toBe("expired");
    await cancelUnanswered(
      a,
      (signal) => lock.tryLock({ leaseTime: 10_000, signal }),
      async () => expect(await lock.isLocked()).toBe(true),
    );
    expect(await lock.isLocked()).toBe(false);
    expect(await leftovers(name)).toEqual([]);
  });

  it.each(MASTERS)("read-write lock on master %i", async (master) => {
    const name = namesOnEveryNode("rw")[master] as string;
    const a = client();
    const rw = a.edgelock.getReadWriteLock(name);
    const r1 = held(await rw.readLock().tryLock({ leaseTime: 10_000 }));
    const r2 = held(await rw.readLock().tryLock({ leaseTime: 10_000 }));
    const r1again = held(await rw.readLock().tryLock({ leaseTime: 10_000, owner: r1.owner }));
    expect(await rw.readLock().getHoldCount(r1.owner)).toBe(2);
    await r1.renew(15_000);
    // One `{name}:<owner>:rwlock_timeout:<n>` key per read hold, named inside Lua.
    const reading = await expectKeysInOneSlot(name);
    expect(reading).toEqual(
      expect.arrayContaining([
        name,
        `{${name}}:${r1.owner}:rwlock_timeout:1`,
        `{${name}}:${r1.owner}:rwlock_timeout:2`,
        `{${name}}:${r2.owner}:rwlock_timeout:1`,
      ]),
    );
    expect((await rw.inspect()).holders).toHaveLength(2);
    // A writer blocked behind the readers is woken by the last reader's release.
    const b = client();
    const counts = wakeCounts();
    const writing = b.edgelock
      .getReadWriteLock(name)
      .writeLock()
      .tryLock({ waitTime: 10_000, leaseTime: 10_000 });
    await b.until((_e, all) => all.filter((x) => x.type === "waiting").length === 2);
    await r1again.release();
    await r1.release();
    await r2.release();
    const w = held(await writing);
    expectWokenByRelease(counts);
    await expect(
      rw.writeLock().tryLock({ leaseTime: 1_000, owner: "reader-only" }),
    ).resolves.toBeNull();
    // Downgrade: the writer takes the read lock, then lets the write lock go.
    const wr = b.edgelock.getReadWriteLock(name);
    const down = held(await wr.readLock().tryLock({ leaseTime: 10_000, owner: w.owner }));
    await w.renew();
    expect(await w.release()).toBe("released");
    expect(await wr.readLock().isLocked()).toBe(true);
    expect(await wr.writeLock().isLocked()).toBe(false);
    await expect(
      wr.writeLock().tryLock({ owner: w.owner, leaseTime: 1_000 }),
    ).rejects.toBeInstanceOf(LockUpgradeError);
    await down.release();
    held(await rw.writeLock().tryLock({ leaseTime: 10_000 }));
    expect(await rw.writeLock().forceUnlock()).toBe(true);
    await cancelUnanswered(
      a,
      (signal) => rw.readLock().tryLock({ leaseTime: 10_000, signal }),
      async () => expect(await rw.readLock().isLocked()).toBe(true),
    );
    await cancelUnanswered(
      a,
      (signal) => rw.writeLock().tryLock({ leaseTime: 10_000, signal }),
      async () => expect(await rw.writeLock().isLocked()).toBe(true),
    );
    expect(await rw.readLock().isLocked()).toBe(false);
    expect(await leftovers(name)).toEqual([]);
  });

  it.each(MASTERS)("idempotency key on master %i", async (master) => {
    const name = namesOnEveryNode("idem")[master] as string;
    const a = client();
    const key = a.edgelock.getIdempotencyKey(name);
    const claim = await key.claim({ leaseTime: 10_000 });
    if (claim.status !== "acquired") throw new Error(`claim: ${claim.status}`);
    expect((await key.claim({ leaseTime: 10_000 })).status).toBe("locked");
    await claim.lease.renew();
    expect(await key.complete(claim.lease, 60_000)).toBe("released");
    expect((await key.claim()).status).toBe("completed");
    expect(await expectKeysInOneSlot(name)).toContain(`edgelock_done:{${name}}`);
    expect(await leftovers(name, [`edgelock_done:{${name}}`])).toEqual([]);
  });

  it.each(MASTERS)("semaphore on master %i", async (master) => {
    const name = namesOnEveryNode("sem")[master] as string;
    const a = client();
    const semaphore = a.edgelock.getSemaphore(name);
    expect(await semaphore.trySetPermits(2)).toBe(true);
    expect(await semaphore.tryAcquire({ permits: 2 })).not.toBeNull();
    const b = client();
    const counts = wakeCounts();
    const waiting = b.edgelock.getSemaphore(name).tryAcquire({ waitTime: 10_000 });
    await b.until((_e, all) => all.filter((x) => x.type === "waiting").length === 2);
    await expectKeysInOneSlot(name);
    // Handed to the registered waiter, whose stream the slot's node counts: none left.
    expect(await semaphore.release(1)).toBe(0);
    expect(await waiting).not.toBeNull();
    expectWokenByRelease(counts);
    // A waiter that gives up unregisters.
    const c = client();
    expect(await c.edgelock.getSemaphore(name).tryAcquire({ waitTime: 50 })).toBeNull();
    await Promise.all(c.background);
    expect(await semaphore.addPermits(1)).toBe(1);
    expect(await semaphore.availablePermits()).toBe(1);
    await cancelUnanswered(
      a,
      (signal) => semaphore.tryAcquire({ signal }),
      async () => expect(await semaphore.availablePermits()).toBe(0),
    );
    expect(await semaphore.availablePermits()).toBe(1);
    expect(await semaphore.drainPermits()).toBe(1);
    expect((await semaphore.inspect()).permits).toBe(3);
    expect(await semaphore.delete()).toBe(true);
    // Replay records are one STRING per request id, each gone within its window.
    const records = `edgelock_replay:{${name}}:`;
    expect((await leftovers(name)).filter((key) => !key.startsWith(records))).toEqual([]);
  });

  it.each(MASTERS)("permit-expirable semaphore on master %i", async (master) => {
    const name = namesOnEveryNode("psem")[master] as string;
    const a = client();
    const semaphore = a.edgelock.getPermitExpirableSemaphore(name);
    expect(await semaphore.trySetPermits(1)).toBe(true);
    const lease = held(await semaphore.tryAcquire({ leaseTime: 10_000 }));
    await lease.renew(15_000);
    expect(await semaphore.updateLeaseTime(lease.permitIds[0] as string, 20_000)).toBe(true);
    expect(await semaphore.acquiredPermits()).toBe(1);
    const b = client();
    const counts = wakeCounts();
    const waiting = b.edgelock
      .getPermitExpirableSemaphore(name)
      .tryAcquire({ waitTime: 10_000, leaseTime: 10_000 });
    await b.until((_e, all) => all.filter((x) => x.type === "waiting").length === 2);
    expect(await expectKeysInOneSlot(name)).toContain(`{${name}}:timeout`);
    expect(await lease.release()).toBe("released");
    const next = held(await waiting);
    expectWokenByRelease(counts);
    expect((await semaphore.inspect()).holders.map((h) => h.id)).toEqual(next.permitIds);
    // A waiter that gives up unregisters (leave.lua).
    const c = client();
    expect(
      await c.edgelock
        .getPermitExpirableSemaphore(name)
        .tryAcquire({ waitTime: 50, leaseTime: 1_000 }),
    ).toBeNull();
    expect(await semaphore.tryRelease(next.permitIds[0] as string)).toBe(true);
    await cancelUnanswered(
      a,
      (signal) => semaphore.tryAcquire({ leaseTime: 10_000, signal }),
      async () => expect(await semaphore.acquiredPermits()).toBe(1),
    );
    expect(await semaphore.availablePermits()).toBe(1);
    expect(await semaphore.delete()).toBe(true);
    // The waiters' marker lapses with the last registration (lua/lib/permits.lua).
    expect(await leftovers(name, [`edgelock_waiting:{${name}}:any`])).toEqual([]);
  });

  it.each(MASTERS)("count-down latch on master %i", async (master) => {
    const name = namesOnEveryNode("latch")[master] as string;
    const a = client();
    const latch = a.edgelock.getCountDownLatch(name);
    expect(await latch.trySetCount(2)).toBe(true);
    const b = client();
    const counts = wakeCounts();
    const waiting = b.edgelock.getCountDownLatch(name).await({ waitTime: 10_000 });
    await b.until((_e, all) => all.filter((x) => x.type === "waiting").length === 2);
    await expectKeysInOneSlot(name);
    expect(await latch.countDown()).toBe(1);
    expect(await latch.getCount()).toBe(1);
    expect(await latch.countDown()).toBe(0);
    expect(await waiting).toBe(true);
    expectWokenByRelease(counts);
    expect(await latch.trySetCount(1)).toBe(true);
    // A waiter that gives up unregisters.
    const c = client();
    expect(await c.edgelock.getCountDownLatch(name).await({ waitTime: 50 })).toBe(false);
    await Promise.all(c.background);
    expect((await latch.inspect()).count).toBe(1);
    expect(await latch.delete()).toBe(true);
    expect(await leftovers(name)).toEqual([]);
  });
});

describe("several names at once", () => {
  it("a multi-lock over names on every master: all or none, renewed and released per member", async () => {
    const names = namesOnEveryNode("multi");
    const a = client();
    const multi = a.edgelock.getMultiLock(
      a.edgelock.getLock(names[0] as string),
      a.edgelock.getFairLock(names[1] as string),
      a.edgelock.getFencedLock(names[2] as string),
    );
    const lease = held(await multi.tryLock({ leaseTime: 10_000 }));
    await lease.renew(20_000);
    for (const name of names) {
      expect(await a.edgelock.getLock(name).remainTimeToLive()).toBeGreaterThan(10_000);
    }
    // One member busy: the others are given back and the call fails.
    const other = client();
    expect(
      await other.edgelock
        .getMultiLock(
          other.edgelock.getLock(`${P}multi-free`),
          other.edgelock.getLock(names[0] as string),
        )
        .tryLock({ leaseTime: 1_000 }),
    ).toBeNull();
    expect(await other.edgelock.getLock(`${P}multi-free`).isLocked()).toBe(false);
    expect(await lease.release()).toBe("released");
    for (const name of names)
      expect(await leftovers(name, [`redisson_lock_token:{${name}}`])).toEqual([]);
  });
});

describe("batched renewal (renewLeasesOf, the LeaseKeeper alarm)", () => {
  /** Two names sharing a hash slot (found by search), plus one name on every master. */
  function spreadNames(): string[] {
    const bySlot = new Map<number, string>();
    let pair: string[] | undefined;
    for (let i = 0; !pair; i++) {
      const name = `${P}renew:${i}`;
      const other = bySlot.get(keySlot(name));
      if (other) pair = [other, name];
      else bySlot.set(keySlot(name), name);
    }
    return [...pair, ...namesOnEveryNode("renew-spread")];
  }

  it("with cluster: true, one request per hash slot, results in the caller's order", async () => {
    const names = spreadNames();
    const holder = client();
    const leases = await Promise.all(
      names.map(async (name) =>
        held(await holder.edgelock.getLock(name).tryLock({ leaseTime: 5_000 })),
      ),
    );
    // The fourth lease is gone: renewing it reports false at its own position.
    await leases[3]?.release();
    const before = bridge.stats().byCommand;
    const renewed = await renewLeasesOf(
      holder.edgelock,
      leases.map((l) => ({ name: l.name, owner: l.owner, leaseTime: 30_000 })),
    );
    expect(renewed).toEqual(names.map((_, i) => i !== 3));
    const after = bridge.stats().byCommand;
    const scripts = (s: Record<string, number>) => (s.evalsha ?? 0) + (s.eval ?? 0);
    // 4 slots: the pair shares one. A node that never ran the script costs one EVAL more.
    const slots = new Set(names.map(keySlot)).size;
    expect(slots).toBe(names.length - 1);
    expect(scripts(after) - scripts(before)).toBeGreaterThanOrEqual(slots);
    expect(scripts(after) - scripts(before)).toBeLessThanOrEqual(2 * slots);
    for (const [i, lease] of leases.entries()) {
      const ttl = await holder.edgelock.getLock(lease.name).remainTimeToLive();
      if (i === 3) expect(ttl).toBe(-2);
      else expect(ttl).toBeGreaterThan(10_000);
    }
    // Warm now: exactly one request per slot.
    const warm = bridge.stats().byCommand;
    await renewLeasesOf(
      holder.edgelock,
      leases.map((l) => ({ name: l.name, owner: l.owner, leaseTime: 30_000 })),
    );
    expect(scripts(bridge.stats().byCommand) - scripts(warm)).toBe(slots);
    await Promise.all(leases.map((l) => l.release()));
  });

  it("more slot groups than requests in flight: at most 8 at once, every lease renewed", async () => {
    const names: string[] = [];
    const slots = new Set<number>();
    for (let i = 0; names.length < 20; i++) {
      const name = `${P}renew-many:${i}`;
      if (slots.has(keySlot(name))) continue;
      slots.add(keySlot(name));
      names.push(name);
    }
    // Counted on this client alone: another test's background work may be in flight too.
    const own: InFlight = { now: 0, most: 0, calls: 0 };
    const holder = client({}, own);
    const leases: Lease[] = [];
    for (const name of names) {
      leases.push(held(await holder.edgelock.getLock(name).tryLock({ leaseTime: 5_000 })));
    }
    own.most = 0;
    own.calls = 0;
    const renewed = await renewLeasesOf(
      holder.edgelock,
      leases.map((l) => ({ name: l.name, owner: l.owner, leaseTime: 30_000 })),
    );
    expect(renewed).toEqual(names.map(() => true));
    expect(own.most).toBe(8);
    expect(own.calls).toBe(names.length);
    for (const lease of leases) {
      expect(await holder.edgelock.getLock(lease.name).remainTimeToLive()).toBeGreaterThan(10_000);
    }
    await Promise.all(leases.map((l) => l.release()));
  });

  it("names in one slot still make one request", async () => {
    const [first, second] = spreadNames();
    const holder = client();
    const a = held(await holder.edgelock.getLock(first as string).tryLock({ leaseTime: 5_000 }));
    const b = held(await holder.edgelock.getLock(second as string).tryLock({ leaseTime: 5_000 }));
    const before = bridge.stats().byCommand.evalsha ?? 0;
    expect(
      await renewLeasesOf(holder.edgelock, [
        { name: a.name, owner: a.owner, leaseTime: 30_000 },
        { name: b.name, owner: b.owner, leaseTime: 30_000 },
      ]),
    ).toEqual([true, true]);
    expect((bridge.stats().byCommand.evalsha ?? 0) - before).toBe(1);
    await a.release();
    await b.release();
  });

  it("without cluster: true the batch fails with CROSSSLOT as a definite TransportError", async () => {
    const names = namesOnEveryNode("renew-plain");
    const holder = client();
    const leases = await Promise.all(
      names.map(async (name) =>
        held(await holder.edgelock.getLock(name).tryLock({ leaseTime: 5_000 })),
      ),
    );
    const plain = new EdgeLock({ redis: bridgeRedis() });
    const failure = await renewLeasesOf(
      plain,
      leases.map((l) => ({ name: l.name, owner: l.owner, leaseTime: 30_000 })),
    ).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TransportError);
    expect((failure as TransportError).message).toMatch(/CROSSSLOT/);
    expect((failure as TransportError).ambiguous).toBe(false);
    // Nothing was renewed.
    for (const lease of leases) {
      expect(await holder.edgelock.getLock(lease.name).remainTimeToLive()).toBeLessThanOrEqual(
        5_000,
      );
    }
    await Promise.all(leases.map((l) => l.release()));
  });

  it("a failing slot group fails the call after every group was tried", async () => {
    const names = namesOnEveryNode("renew-fail");
    const holder = client();
    const leases = await Promise.all(
      names
        .slice(0, 2)
        .map(async (name) =>
          held(await holder.edgelock.getLock(name).tryLock({ leaseTime: 5_000 })),
        ),
    );
    // The third name holds a string: its group's script fails with WRONGTYPE.
    const broken = names[2] as string;
    await nodes.find(({ url }) => url === cluster.masterOf(broken))?.client.set(broken, "x");
    traffic.faulty = true;
    try {
      const failure = await renewLeasesOf(holder.edgelock, [
        ...leases.map((l) => ({ name: l.name, owner: l.owner, leaseTime: 30_000 })),
        { name: broken, owner: "nobody", leaseTime: 30_000 },
      ]).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(TransportError);
      expect((failure as TransportError).message).toMatch(/WRONGTYPE/);
    } finally {
      traffic.faulty = false;
    }
    // The other groups were renewed all the same.
    for (const lease of leases) {
      expect(await holder.edgelock.getLock(lease.name).remainTimeToLive()).toBeGreaterThan(10_000);
    }
    await Promise.all(leases.map((l) => l.release()));
    await nodes.find(({ url }) => url === cluster.masterOf(broken))?.client.del(broken);
  });
});

describe("coverage", () => {
  it("no CROSSSLOT, MOVED or ASK error ever reached the library; only NOSCRIPT (then EVAL)", () => {
    expect(traffic.errors.filter((m) => !/NOSCRIPT/.test(m))).toEqual([]);
    expect(traffic.errors.join("\n")).not.toMatch(/CROSSSLOT|MOVED|ASK /);
  });

  it("every script of src/lua.gen.ts ran on the cluster", () => {
    expect(SCRIPTS.length).toBeGreaterThan(30);
    const missing = SCRIPTS.filter(
      (s) => !SHAS_OF_SCRIPT.get(s)?.some((sha) => traffic.ran.has(sha)),
    ).map((s) => s.name);
    expect(missing).toEqual([]);
  });
});
