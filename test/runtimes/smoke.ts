/**
 * The runtime smoke suite: every primitive of the built package (`dist/`, imported by its
 * package name through the `exports` map, as an application would), a push wake-up, lock
 * hand-offs and the webhook helper, against a real Redis behind an Upstash-compatible REST
 * endpoint. `test/runtimes/run.ts` runs this one file under each runtime (Node 20, 22 and 24,
 * Bun, Deno) with the runtime's own TypeScript support (tsx on Node 20).
 *
 * Environment: UPSTASH_REDIS_REST_URL, UPSTASH_REDIS_REST_TOKEN, EDGELOCK_SMOKE_PREFIX (a fresh
 * key prefix per run, so runtimes can share one Redis). Prints one line per check and exits 1
 * if any failed.
 */

import { env, exit } from "node:process";
import { Redis } from "@upstash/redis";
import { EdgeLock, type EdgeLockOptions, type LockEvent, RedLock } from "edgelock";
import { lockConsole } from "edgelock/console";
import { lockWebhook } from "edgelock/vercel";
import { Hono } from "hono";

const url = env.UPSTASH_REDIS_REST_URL;
const token = env.UPSTASH_REDIS_REST_TOKEN;
const prefix = env.EDGELOCK_SMOKE_PREFIX ?? "smoke:";
if (!url || !token) {
  console.error("smoke: set UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN");
  exit(2);
}

/** Longest a single check may take: a wake-up that never comes fails the check, not the run. */
const CHECK_TIMEOUT_MS = 20_000;

/** An EdgeLock with a client of its own that records its events. */
interface Recorder {
  edgelock: EdgeLock;
  events: LockEvent[];
  /** Resolves with the first event (recorded before or after the call) matching `predicate`. */
  until(predicate: (event: LockEvent, all: readonly LockEvent[]) => boolean): Promise<LockEvent>;
  /**
   * Resolves once a wait of this client on `name` is subscribed and listening for a release's
   * message (a wait that fell back to polling instead fails the check through {@link noPolling}).
   */
  subscribed(name: string): Promise<LockEvent>;
}

function recorder(options: Partial<EdgeLockOptions> = {}): Recorder {
  const events: LockEvent[] = [];
  const listeners = new Set<() => void>();
  const edgelock = new EdgeLock({
    redis: new Redis({ url: url as string, token: token as string }),
    // Push only: a client that could not subscribe here fails at construction, and a wait that
    // fell back to polling shows as a `wait-strategy` event the checks refuse. A wait that polls
    // without saying so (a latch's, on Redisson's channel) sleeps at least 5 s with this backoff,
    // which the checks' 3 s bound on a wake-up refuses.
    wait: "subscribe",
    backoff: { initialDelay: 10_000, maxDelay: 10_000 },
    onEvent: (event) => {
      events.push(event);
      for (const listener of [...listeners]) listener();
    },
    ...options,
  });
  const until: Recorder["until"] = (predicate) =>
    new Promise((resolve) => {
      const check = () => {
        const found = events.find((e) => predicate(e, events));
        if (!found) return false;
        listeners.delete(listener);
        resolve(found);
        return true;
      };
      const listener = () => void check();
      if (!check()) listeners.add(listener);
    });
  return {
    edgelock,
    events,
    until,
    // Redisson's order: a busy attempt, the `waiting` event, the subscription (confirmed), a
    // second attempt, then the `waiting` event before it listens for a release's message.
    subscribed: (name) => until((e) => e.type === "waiting" && e.name === name && e.attempt >= 2),
  };
}

function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

function equal<T>(actual: T, expected: T, what: string): void {
  assert(
    Object.is(actual, expected),
    `${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`,
  );
}

function noPolling(r: Recorder): void {
  const fallback = r.events.find((e) => e.type === "wait-strategy" && e.strategy === "poll");
  assert(!fallback, `a wait fell back to polling: ${JSON.stringify(fallback)}`);
}

const checks: [string, () => Promise<string>][] = [];
const check = (name: string, body: () => Promise<string>) => checks.push([name, body]);

check("lock: reentrant acquire, exclusion, release", async () => {
  const { edgelock } = recorder();
  const lock = edgelock.getLock(`${prefix}lock`);
  const lease = await lock.tryLock({ leaseTime: 10_000 });
  assert(lease, "first tryLock did not acquire");
  const again = await lock.tryLock({ leaseTime: 10_000, owner: lease.owner });
  assert(again, "re-entry with the same owner did not acquire");
  equal(await lock.getHoldCount(lease.owner), 2, "hold count after re-entry");
  equal(await lock.tryLock({ leaseTime: 10_000 }), null, "another owner's tryLock");
  equal(await again.release(), "still-held", "first release");
  equal(await lease.release(), "released", "second release");
  equal(await lock.isLocked(), false, "isLocked after the last release");
  return "held twice, excluded another owner, released";
});

check("lock: push wake-up and hand-off to a subscribed waiter", async () => {
  const name = `${prefix}lock-wake`;
  const holder = recorder();
  const waiter = recorder();
  const held = await holder.edgelock.getLock(name).tryLock({ leaseTime: 30_000 });
  assert(held, "holder did not acquire");
  const pending = waiter.edgelock.getLock(name).tryLock({ waitTime: 15_000, leaseTime: 10_000 });
  await waiter.subscribed(name);
  const released = performance.now();
  equal(await held.release(), "released", "holder's release");
  const lease = await pending;
  const wokenMs = performance.now() - released;
  assert(lease, "the waiter did not get the lock");
  // The holder's lease had 30 s left and the wait 15 s: only the release's message is this fast.
  assert(wokenMs < 3_000, `the waiter took ${Math.round(wokenMs)} ms after the release`);
  noPolling(waiter);
  equal(await waiter.edgelock.getLock(name).isHeldBy(lease.owner), true, "waiter holds the lock");
  equal(await lease.release(), "released", "waiter's release");
  return `woken ${Math.round(wokenMs)} ms after the release`;
});

check("fair lock: hand-offs in arrival order", async () => {
  const name = `${prefix}fair`;
  const holder = recorder();
  const first = recorder();
  const second = recorder();
  const held = await holder.edgelock.getFairLock(name).tryLock({ leaseTime: 30_000 });
  assert(held, "holder did not acquire");
  const order: string[] = [];
  const a = first.edgelock
    .getFairLock(name)
    .tryLock({ waitTime: 15_000, leaseTime: 10_000 })
    .then((lease) => {
      order.push("first");
      return lease;
    });
  await first.subscribed(name);
  const b = second.edgelock
    .getFairLock(name)
    .tryLock({ waitTime: 15_000, leaseTime: 10_000 })
    .then((lease) => {
      order.push("second");
      return lease;
    });
  await second.subscribed(name);
  equal(await held.release(), "released", "holder's release");
  const leaseA = await a;
  assert(leaseA, "the first waiter did not get the lock");
  equal(order.join(","), "first", "who holds the lock after the first release");
  equal(await leaseA.release(), "released", "first waiter's release");
  const leaseB = await b;
  assert(leaseB, "the second waiter did not get the lock");
  equal(order.join(","), "first,second", "hand-off order");
  equal(await leaseB.release(), "released", "second waiter's release");
  noPolling(first);
  noPolling(second);
  return "holder -> first -> second";
});

check("fenced lock: tokens strictly increase", async () => {
  const { edgelock } = recorder();
  const lock = edgelock.getFencedLock(`${prefix}fenced`);
  const one = await lock.lock({ leaseTime: 10_000 });
  const tokenOne = one.fencingToken;
  await one.release();
  const two = await lock.lock({ leaseTime: 10_000 });
  const tokenTwo = two.fencingToken;
  await two.release();
  assert(typeof tokenOne === "number" && typeof tokenTwo === "number", "no fencing token");
  assert(tokenTwo > tokenOne, `tokens ${tokenOne} then ${tokenTwo}`);
  return `tokens ${tokenOne} < ${tokenTwo}`;
});

check("read-write lock: readers share, a writer excludes", async () => {
  const { edgelock } = recorder();
  const rw = edgelock.getReadWriteLock(`${prefix}rw`);
  const r1 = await rw.readLock().tryLock({ leaseTime: 10_000 });
  const r2 = await rw.readLock().tryLock({ leaseTime: 10_000 });
  assert(r1 && r2, "two readers could not hold the lock together");
  equal(await rw.writeLock().tryLock({ leaseTime: 10_000 }), null, "writer beside readers");
  await r1.release();
  await r2.release();
  const w = await rw.writeLock().tryLock({ leaseTime: 10_000 });
  assert(w, "writer did not acquire once the readers left");
  equal(await rw.readLock().tryLock({ leaseTime: 10_000 }), null, "reader beside the writer");
  equal(await w.release(), "released", "writer's release");
  return "2 readers, then 1 writer";
});

check("semaphore: permits, and a waiter woken by a release", async () => {
  const name = `${prefix}semaphore`;
  const owner = recorder();
  const waiter = recorder();
  const slots = owner.edgelock.getSemaphore(name);
  equal(await slots.trySetPermits(2), true, "trySetPermits");
  const p1 = await slots.tryAcquire();
  const p2 = await slots.tryAcquire();
  assert(p1 && p2, "two permits not taken");
  equal(await slots.tryAcquire(), null, "a third permit");
  const pending = waiter.edgelock.getSemaphore(name).tryAcquire({ waitTime: 15_000 });
  await waiter.subscribed(name);
  const released = performance.now();
  await p1.release();
  const p3 = await pending;
  const wokenMs = performance.now() - released;
  assert(p3, "the waiter did not get the freed permit");
  // Without the release's message the waiter would be back after 15 s.
  assert(wokenMs < 3_000, `the waiter took ${Math.round(wokenMs)} ms after the release`);
  noPolling(waiter);
  await p1.release(); // a second release of one handle gives nothing back
  equal(await slots.availablePermits(), 0, "permits after a repeated release");
  await p2.release();
  await p3.release();
  equal(await slots.availablePermits(), 2, "permits at the end");
  await slots.delete();
  return `2 permits, waiter woken ${Math.round(wokenMs)} ms after a release, repeated release ignored`;
});

check("permit-expirable semaphore: leased permits", async () => {
  const { edgelock } = recorder();
  const renders = edgelock.getPermitExpirableSemaphore(`${prefix}renders`);
  equal(await renders.trySetPermits(1), true, "trySetPermits");
  const permit = await renders.tryAcquire({ leaseTime: 10_000 });
  assert(permit, "permit not taken");
  equal(await renders.tryAcquire({ leaseTime: 10_000 }), null, "a second permit");
  equal(await renders.acquiredPermits(), 1, "acquired permits");
  await permit.release();
  equal(await renders.availablePermits(), 1, "available after release");
  await renders.delete();
  return "1 permit leased and returned";
});

check("count-down latch: a subscribed awaiter opened by the last countDown", async () => {
  const name = `${prefix}latch`;
  const counter = recorder();
  const awaiter = recorder();
  const latch = counter.edgelock.getCountDownLatch(name);
  equal(await latch.trySetCount(2), true, "trySetCount");
  const opened = awaiter.edgelock.getCountDownLatch(name).await({ waitTime: 15_000 });
  await awaiter.subscribed(name);
  equal(await latch.countDown(), 1, "count after the first countDown");
  const last = performance.now();
  equal(await latch.countDown(), 0, "count after the second countDown");
  equal(await opened, true, "await");
  const wokenMs = performance.now() - last;
  // Without the count-down's message the awaiter would be back after 15 s.
  assert(wokenMs < 3_000, `the awaiter took ${Math.round(wokenMs)} ms after the last countDown`);
  noPolling(awaiter);
  return `opened ${Math.round(wokenMs)} ms after the second countDown`;
});

check("multi-lock and RedLock: all or none", async () => {
  const [a, b, c] = [recorder().edgelock, recorder().edgelock, recorder().edgelock];
  const multi = a.getMultiLock(a.getLock(`${prefix}multi:1`), b.getLock(`${prefix}multi:2`));
  const both = await multi.tryLock({ leaseTime: 10_000 });
  assert(both, "multi-lock not acquired");
  equal(await b.getLock(`${prefix}multi:2`).isLocked(), true, "second lock of the multi-lock");
  await both.release();
  equal(await a.getLock(`${prefix}multi:1`).isLocked(), false, "multi-lock released");
  const redlock = new RedLock([a, b, c].map((e, i) => e.getLock(`${prefix}redlock:${i}`)));
  const quorum = await redlock.tryLock({ leaseTime: 10_000 });
  assert(quorum, "RedLock not acquired");
  const held = async () =>
    (
      await Promise.all([a, b, c].map((e, i) => e.getLock(`${prefix}redlock:${i}`).isLocked()))
    ).filter(Boolean).length;
  // RedLock answers once a quorum (2 of 3) granted; the third grant may still be on its way.
  assert((await held()) >= 2, "RedLock answered without a quorum of its locks held");
  const until = Date.now() + 3_000;
  while ((await held()) < 3 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  equal(await c.getLock(`${prefix}redlock:2`).isLocked(), true, "RedLock's third lock");
  await quorum.release();
  equal(await c.getLock(`${prefix}redlock:2`).isLocked(), false, "RedLock released");
  return "2 locks, then a 3-lock quorum";
});

check("idempotency key: claim, complete, duplicate", async () => {
  const first = recorder().edgelock.getIdempotencyKey(`${prefix}payment`);
  const second = recorder().edgelock.getIdempotencyKey(`${prefix}payment`);
  const claim = await first.claim({ leaseTime: 10_000 });
  equal(claim.status, "acquired", "first claim");
  equal((await second.claim({ leaseTime: 10_000 })).status, "locked", "concurrent claim");
  if (claim.status === "acquired") await first.complete(claim.lease, 60_000);
  equal((await second.claim({ leaseTime: 10_000 })).status, "completed", "claim after completion");
  return "acquired, locked, completed";
});

check("webhook (edgelock/vercel): 5 at once, then 2 redeliveries", async () => {
  const id = `evt_${prefix}`;
  let processed = 0;
  let locked = 0;
  let open = () => {};
  const allAnswered = new Promise<void>((resolve) => {
    open = resolve;
  });
  const post = lockWebhook(
    {
      edgelock: recorder().edgelock,
      key: async (request) => {
        const event = (await request.json()) as { id?: unknown };
        return typeof event.id === "string" ? `${prefix}webhook:${event.id}` : null;
      },
      leaseTime: 30_000,
      completionTtl: 60_000,
    },
    async (request) => {
      const event = (await request.json()) as { id: string };
      processed += 1;
      // Hold the delivery's lock until the 4 duplicates have been answered.
      await allAnswered;
      return Response.json({ received: true, processed: event.id });
    },
  );
  const deliver = async () => {
    const response = await post(
      new Request("http://127.0.0.1/webhook", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ id, type: "invoice.paid" }),
      }),
    );
    if (response.status === 409 && ++locked === 4) open();
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  const concurrent = await Promise.all(Array.from({ length: 5 }, deliver));
  const later = [await deliver(), await deliver()];
  const statuses = concurrent.map((r) => r.status).sort();
  equal(statuses.join(","), "200,409,409,409,409", "5 concurrent deliveries");
  equal(
    later.filter((r) => r.status === 200 && r.body.duplicate === true).length,
    2,
    "redeliveries acknowledged as duplicates",
  );
  equal(processed, 1, "times the handler ran");
  const missing = await post(
    new Request("http://127.0.0.1/webhook", { method: "POST", body: "{}" }),
  );
  equal(missing.status, 400, "a delivery without an id");
  return "1x200 + 4x409, 2x200 duplicate, 400 without an id";
});

check("lock console (edgelock/console): a holder and its waiter on the page", async () => {
  const name = `${prefix}console`;
  const lease = await recorder().edgelock.getLock(name).tryLock({ leaseTime: 30_000 });
  assert(lease, "the lock was not acquired");
  const waiter = recorder();
  const stop = new AbortController();
  const waiting = waiter.edgelock
    .getLock(name)
    .tryLock({ waitTime: 15_000, leaseTime: 5_000, signal: stop.signal })
    .catch(() => null);
  await waiter.subscribed(name);
  const app = new Hono();
  app.route(
    "/locks",
    lockConsole({
      redis: new Redis({ url: url as string, token: token as string }),
      authorize: (request) => request.headers.get("x-ops") === "yes",
      names: [name],
      scan: false,
    }),
  );
  try {
    equal((await app.request("/locks")).status, 403, "a request authorize refuses");
    const page = await app.request("/locks", { headers: { "x-ops": "yes" } });
    const html = await page.text();
    equal(page.status, 200, "the page");
    assert(html.includes(`data-owner="${lease.owner}"`), "the holder is not on the page");
    equal(html.match(/<li class="waiter"/g)?.length, 1, "waiters on the page");
    const billed = /Last refresh: <b>(\d+)<\/b>/.exec(html)?.[1];
    return `403, then 200 with the holder and 1 waiter, ${billed} billed commands`;
  } finally {
    stop.abort();
    await waiting;
    await lease.release();
  }
});

let failed = 0;
const started = performance.now();
for (const [name, body] of checks) {
  const t0 = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const detail = await Promise.race([
      body(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`timed out after ${CHECK_TIMEOUT_MS} ms`)),
          CHECK_TIMEOUT_MS,
        );
      }),
    ]);
    console.log(`ok   ${name} (${Math.round(performance.now() - t0)} ms): ${detail}`);
  } catch (error) {
    failed += 1;
    const message = error instanceof Error ? error.message : String(error);
    console.log(`FAIL ${name} (${Math.round(performance.now() - t0)} ms): ${message}`);
  } finally {
    clearTimeout(timer);
  }
}
const total = Math.round(performance.now() - started);
console.log(`${checks.length - failed}/${checks.length} checks passed in ${total} ms`);
// Subscriptions close a second after their last wait; exit now rather than wait for them.
exit(failed === 0 ? 0 : 1);
