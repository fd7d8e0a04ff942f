/**
 * The bill of every operation: billed commands (the EVAL/EVALSHA plus every call inside the
 * script, as Upstash bills them), counted from `INFO commandstats` on a private redis-server
 * that nothing else uses, warm client, uncontended. Each test fails above its budget: the cost
 * issue's (a lock cycle 10, Redisson's own scripts 9), or what is reached where that is lower,
 * so that any call added to a common path is a decision (docs/cost.md).
 */
import { createClient } from "@redis/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startBridge } from "../src/bridge/index.js";
import { renewLeasesOf } from "../src/client.js";
import { EdgeLock, type Lease } from "../src/index.js";
import { lockAcquire, lockRelease } from "../src/lua.gen.js";
import { sha1Of } from "../src/transport/sha1.js";
import { type Bill, type BillMeter, billMeter, billPerRun } from "./support/billing.js";
import { bridgeRedis } from "./support/env.js";
import { type RedisServer, startRedisServer } from "./support/redis-server.js";

let redis: RedisServer;
let bridge: Awaited<ReturnType<typeof startBridge>>;
let meter: BillMeter;
let edgelock: EdgeLock;
/** Commands billed, as the events report them (LockEvent.billed), summed. */
let reported = 0;
let n = 0;
const fresh = (what: string) => `bill:${what}:${n++}`;

beforeAll(async () => {
  redis = await startRedisServer();
  bridge = await startBridge({ redisUrl: redis.url, token: "bill-token" });
  meter = await billMeter(redis.url);
  edgelock = new EdgeLock({
    redis: bridgeRedis({}, { url: bridge.url, token: "bill-token" }),
    onEvent: (event) => {
      reported += event.billed;
    },
  });
});

afterAll(async () => {
  await meter?.close();
  await bridge?.close();
  await redis?.stop();
});

const bills: Record<string, Bill> = {};
afterAll(() => {
  for (const [op, b] of Object.entries(bills)) {
    console.log(`${op}: ${b.total} (${b.writes} writes) ${JSON.stringify(b.commands)}`);
  }
});

/**
 * Fails above `budget`, and when the events' `billed` over the same runs is not exactly what
 * Redis counted: what users see of their bill is the bill.
 */
async function expectBill(op: string, budget: number, fn: () => Promise<unknown>): Promise<void> {
  let seen = 0;
  const bill = await billPerRun(meter, async () => {
    const before = reported;
    await fn();
    seen = reported - before;
  });
  bills[op] = bill;
  expect(bill.total, `${op}: ${JSON.stringify(bill.commands)}`).toBeLessThanOrEqual(budget);
  expect(seen, `${op}: billed as the events report it`).toBe(bill.total);
}

describe("billed commands per operation", () => {
  it("lock tryLock + release", async () => {
    const lock = edgelock.getLock(fresh("lock"));
    await expectBill("lock cycle", 9, async () => {
      const lease = await lock.tryLock();
      if (!lease) throw new Error("not acquired");
      expect(await lease.release()).toBe("released");
    });
  });

  it("lock tryLock + release with a lease shorter than the replay window", async () => {
    const lock = edgelock.getLock(fresh("lock-fixed"));
    await expectBill("lock cycle, leaseTime 10 s", 10, async () => {
      const lease = await lock.tryLock({ leaseTime: 10_000 });
      expect(await lease?.release()).toBe("released");
    });
  });

  it("withLock", async () => {
    const name = fresh("with");
    await expectBill("withLock", 9, () => edgelock.withLock(name, async () => 1));
  });

  it("lease.renew()", async () => {
    const lease = await edgelock.getLock(fresh("renew")).tryLock();
    if (!lease) throw new Error("not acquired");
    await expectBill("renew", 3, () => lease.renew());
    await lease.release();
  });

  it("fair lock cycle", async () => {
    const lock = edgelock.getFairLock(fresh("fair"));
    await expectBill("fair cycle", 10, async () => {
      const lease = await lock.tryLock();
      expect(await lease?.release()).toBe("released");
    });
  });

  it("fenced lock cycle", async () => {
    const lock = edgelock.getFencedLock(fresh("fenced"));
    await expectBill("fenced cycle", 10, async () => {
      const lease = await lock.tryLock();
      expect(await lease?.release()).toBe("released");
    });
  });

  it("read lock cycle", async () => {
    const lock = edgelock.getReadWriteLock(fresh("rw")).readLock();
    await expectBill("read cycle", 12, async () => {
      const lease = await lock.tryLock();
      expect(await lease?.release()).toBe("released");
    });
  });

  it("write lock cycle", async () => {
    const lock = edgelock.getReadWriteLock(fresh("rw")).writeLock();
    await expectBill("write cycle", 11, async () => {
      const lease = await lock.tryLock();
      expect(await lease?.release()).toBe("released");
    });
  });

  it("semaphore acquire + release", async () => {
    const sem = edgelock.getSemaphore(fresh("sem"));
    await sem.trySetPermits(3);
    await expectBill("semaphore cycle", 10, async () => {
      const permits = await sem.tryAcquire();
      if (!permits) throw new Error("no permit");
      await permits.release();
    });
  });

  it("permit-expirable semaphore acquire + release", async () => {
    const sem = edgelock.getPermitExpirableSemaphore(fresh("pes"));
    await sem.trySetPermits(3);
    await expectBill("permit-expirable cycle", 12, async () => {
      const lease = await sem.tryAcquire();
      if (!lease) throw new Error("no permit");
      await lease.release();
    });
    // A lease shorter than the replay window may lapse (and its permit be reclaimed) while a
    // copy of the acquire is in flight: it is recorded (one SET).
    await expectBill("permit-expirable cycle, leaseTime 10 s", 13, async () => {
      const lease = await sem.tryAcquire({ leaseTime: 10_000 });
      if (!lease) throw new Error("no permit");
      await lease.release();
    });
  });

  it("latch countDown", async () => {
    const latch = edgelock.getCountDownLatch(fresh("latch"));
    await latch.trySetCount(1_000);
    await expectBill("countDown", 4, () => latch.countDown());
    let k = 0;
    await expectBill("countDown with key", 4, () => latch.countDown({ idempotencyKey: `p${k++}` }));
  });

  it("idempotency key claim + complete", async () => {
    await expectBill("idempotency", 11, async () => {
      const key = edgelock.getIdempotencyKey(fresh("idem"));
      const claim = await key.claim();
      if (claim.status !== "acquired") throw new Error(claim.status);
      await key.complete(claim.lease, 60_000);
    });
  });

  it("a hand-off under contention: the waiter's busy attempt and the release that hands over", async () => {
    // Three clients take turns: while one holds, the other two wait, and each release hands the
    // lock to the waiter registered first, which holds it on the message (no request of its own);
    // the releaser then waits again. Once every client's subscription is open, a turn is the
    // waiter's registering busy attempt (EVALSHA, EXISTS, HMGET, ZADD, TIME, PTTL, and ZRANK: its
    // place, since the holder's lease, a hand-off's claim window here, ends before the waiter's
    // longest block: the second is back a claim window after a crashed holder's expiry; the
    // registry's TTL already covers it) and the release (EVALSHA, HMGET, DEL, SET, ZPOPMIN, TIME,
    // HSET, PEXPIREAT, PUBLISH, and the notice to the waiter now first, ZRANGE and PUBLISH, so
    // that it is back by the new holder's expiry if that holder dies): 18 (docs/cost.md).
    const name = fresh("hand-off");
    const waits = [0, 0, 0];
    const subscribed = [false, false, false];
    const clients = waits.map(
      (_, i) =>
        new EdgeLock({
          redis: bridgeRedis({}, { url: bridge.url, token: "bill-token" }),
          onEvent: (event) => {
            reported += event.billed;
            if (event.type === "waiting") waits[i] = (waits[i] ?? 0) + 1;
            if (event.type === "wait-strategy" && event.strategy === "subscribe")
              subscribed[i] = true;
          },
        }),
    );
    const pending: Promise<Lease | null>[] = [];
    const wait = async (i: number) => {
      // A client's first wait registers before it has subscribed (a release only wakes that
      // registration), and again, asking for hand-offs, once subscribed; later waits at once.
      const seen = (waits[i] ?? 0) + (subscribed[i] ? 0 : 1);
      const call = clients[i]?.getLock(name).tryLock({ waitTime: 5_000, leaseTime: 10_000 });
      if (!call) throw new Error("no client");
      pending[i] = call;
      // Its busy attempt has registered it: a release may hand it the lock.
      while ((waits[i] ?? 0) <= seen) await new Promise((resolve) => setTimeout(resolve, 2));
    };
    let holder = 0;
    let lease = await clients[0]?.getLock(name).tryLock({ leaseTime: 10_000 });
    await wait(1);
    await wait(2);
    const turn = async () => {
      const next = (holder + 1) % 3;
      expect(await lease?.release()).toBe("released");
      lease = await pending[next];
      if (!lease) throw new Error("not handed over");
      await wait(holder);
      holder = next;
    };
    // The first turns open every client's subscription (SUBSCRIBE, and the attempt after it).
    for (let i = 0; i < 3; i++) await turn();
    await expectBill("hand-off, per turn", 18, turn);
    await lease?.release();
    // The two still waiting: each is handed the lock in turn and lets it go.
    await Promise.all(pending.map((p) => p.then((l) => l?.release())));
  });

  it("every other call is reported once: the events' billed sum is the bill", async () => {
    const name = fresh("calls");
    const before = reported;
    const bill = await meter.measure(async () => {
      const lock = edgelock.getLock(`${name}:lock`);
      const lease = await lock.tryLock();
      if (!lease) throw new Error("not acquired");
      await lock.isLocked();
      await lock.isHeldBy(lease.owner);
      await lock.getHoldCount(lease.owner);
      await lock.remainTimeToLive();
      await lock.inspect();
      await lock.unlock(lease.owner);
      await lock.tryLock();
      await lock.forceUnlock();
      const fenced = edgelock.getFencedLock(`${name}:fenced`);
      await fenced.getToken();
      const rw = edgelock.getReadWriteLock(`${name}:rw`);
      await rw.readLock().isLocked();
      await rw.writeLock().inspect();
      await rw.writeLock().forceUnlock();
      const sem = edgelock.getSemaphore(`${name}:sem`);
      await sem.trySetPermits(3);
      await sem.addPermits(1);
      await sem.tryAcquire();
      await sem.release(1);
      await sem.availablePermits();
      await sem.drainPermits();
      await sem.inspect();
      await sem.delete();
      const pes = edgelock.getPermitExpirableSemaphore(`${name}:pes`);
      await pes.trySetPermits(2);
      const permit = await pes.tryAcquire();
      const id = permit?.permitIds?.[0];
      if (!id) throw new Error("no permit");
      await pes.updateLeaseTime(id, 20_000);
      await pes.tryRelease(id);
      await pes.availablePermits();
      await pes.acquiredPermits();
      await pes.delete();
      const latch = edgelock.getCountDownLatch(`${name}:latch`);
      await latch.trySetCount(1);
      await latch.getCount();
      await latch.countDown();
      await latch.await();
      await latch.inspect();
      await latch.delete();
    });
    expect(bill.total).toBeGreaterThan(40);
    expect(reported - before, JSON.stringify(bill.commands)).toBe(bill.total);
  });

  it("a client without onEvent sends each script as it is, uncounted, and is billed the same", async () => {
    const plain = new EdgeLock({
      redis: bridgeRedis({}, { url: bridge.url, token: "bill-token" }),
    });
    const cycle = async (client: EdgeLock, name: string) => {
      const lease = await client.getLock(name).tryLock({ leaseTime: 10_000 });
      expect(await lease?.release()).toBe("released");
    };
    await cycle(plain, fresh("plain-warm"));
    const uncounted = await billPerRun(meter, () => cycle(plain, fresh("plain")));
    const counted = await billPerRun(meter, () => cycle(edgelock, fresh("counted")));
    expect(uncounted.commands).toEqual(counted.commands);
    // Only a client that sends the scripts' own sources puts their SHA1s in Redis's cache.
    const admin = createClient({ url: redis.url, RESP: 2, disableClientInfo: true });
    await admin.connect();
    try {
      const shas = [
        await sha1Of(lockAcquire, false),
        await sha1Of(lockRelease, false),
        await sha1Of(lockAcquire, true),
      ];
      expect(await admin.sendCommand(["SCRIPT", "EXISTS", ...shas])).toEqual([1, 1, 1]);
    } finally {
      await admin.close();
    }
  });

  it("the LeaseKeeper's batched renewal, per lease", async () => {
    const leases = [];
    for (let i = 0; i < 10; i++) {
      const lease = await edgelock.getLock(fresh("keep")).tryLock();
      if (!lease) throw new Error("not acquired");
      leases.push(lease);
    }
    const batch = leases.map((l) => ({ name: l.name, owner: l.owner, leaseTime: 30_000 }));
    const bill = await billPerRun(meter, () => renewLeasesOf(edgelock, batch));
    bills["keeper renewal per lease"] = { ...bill, total: bill.total / 10 };
    // One EVALSHA for the batch, then HMGET and PEXPIRE per lease.
    expect(bill.total / 10).toBeLessThanOrEqual(2.1);
    for (const l of leases) await l.release();
  });
});
