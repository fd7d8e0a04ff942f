/**
 * Scenario 3d: HTTP requests and latency per operation of each edgelock lock kind, one client
 * on a warm script cache: acquire on a free lock, re-entry, renewal, release, and the acquire of
 * a waiter that the release it waits for wakes (busy attempt, subscription, attempt, then the
 * hand-off message or a last attempt);
 * then the same for the semaphore, the permit-expirable semaphore and the count-down latch.
 * @module
 */
import { EdgeLock, type Lease, type PermitLease } from "edgelock";
import { billOf } from "../billing.js";
import type { BenchEnv } from "../env.js";
import { LEASE_MS } from "../libraries.js";
import { percentile, round } from "../stats.js";

/** One operation's cost: HTTP requests per call (mean) and latency p50, ms. */
export interface OperationCost {
  requests: number | null;
  /**
   * Billed commands per call (the EVALSHA plus every call inside the script: `INFO
   * commandstats`), and the writes among them; null where the window also holds another
   * party's request (a release that ends a wait).
   */
  billed: number | null;
  billedWrites: number | null;
  p50Ms: number | null;
}

/** "<lock>: <operation>" -> cost, in the order measured. */
export type OperationsResult = Record<string, OperationCost>;

/** What a lock kind offers the scenario. */
interface Kind {
  label: string;
  /** The side a waiter acquires, on name `n`. */
  lock(e: EdgeLock, n: string): { tryLock(o: object): Promise<Lease | null> };
  /** The side that keeps that waiter out while held. */
  blocker(e: EdgeLock, n: string): { tryLock(o: object): Promise<Lease | null> };
}

const KINDS: Kind[] = [
  { label: "reentrant lock", lock: (e, n) => e.getLock(n), blocker: (e, n) => e.getLock(n) },
  {
    label: "fenced lock",
    lock: (e, n) => e.getFencedLock(n),
    blocker: (e, n) => e.getFencedLock(n),
  },
  {
    label: "read lock",
    lock: (e, n) => e.getReadWriteLock(n).readLock(),
    blocker: (e, n) => e.getReadWriteLock(n).writeLock(),
  },
  {
    label: "write lock",
    lock: (e, n) => e.getReadWriteLock(n).writeLock(),
    blocker: (e, n) => e.getReadWriteLock(n).readLock(),
  },
];

function held<L extends Lease>(lease: L | null): L {
  if (!lease) throw new Error("bench: an acquire that should succeed did not");
  return lease;
}

function check(ok: unknown, what: string): void {
  if (!ok) throw new Error(`bench: ${what} did not succeed`);
}

/**
 * A fresh client (its own HTTP client, as another isolate) whose `waits` resolves at its first
 * `waiting` event: its waiter found the primitive busy, registered, and is about to block.
 */
function waiterClient(env: BenchEnv): { edge: EdgeLock; waits: Promise<void> } {
  let waiting!: () => void;
  const waits = new Promise<void>((resolve) => {
    waiting = resolve;
  });
  const edge = new EdgeLock({
    redis: env.http(),
    onEvent: (e) => {
      if (e.type === "waiting") waiting();
    },
  });
  return { edge, waits };
}

/** Runs scenario 3d: `repeats` calls of each operation of each kind. */
export async function runOperations(
  env: BenchEnv,
  options: { repeats: number; prefix: string },
  log: (line: string) => void,
): Promise<OperationsResult> {
  const edgelock = new EdgeLock({ redis: env.http() });
  const other = new EdgeLock({ redis: env.http() });
  const out: OperationsResult = {};
  /**
   * Times and counts `op` only: `setup` before it and what it returns after it are not.
   * `excluded`: requests per call that `op` makes for another party (the holder's release that
   * ends a wait), counted by the bridge but not the operation's; they are taken off before the
   * result is stored and logged (the latency still includes them).
   */
  const measure = async <S, R>(
    label: string,
    setup: (i: number) => Promise<S>,
    op: (s: S) => Promise<R>,
    cleanup: (s: S, r: R) => Promise<void>,
    excluded = 0,
  ) => {
    const ms: number[] = [];
    let requests = 0;
    let billed = 0;
    let billedWrites = 0;
    for (let i = 0; i < options.repeats; i++) {
      const s = await setup(i);
      const before = await env.counters();
      const started = performance.now();
      const r = await op(s);
      ms.push(performance.now() - started);
      const after = await env.counters();
      requests += after.httpRequests - before.httpRequests - excluded;
      const bill = billOf(before.commandStats, after.commandStats);
      billed += bill.total;
      billedWrites += bill.writes;
      await cleanup(s, r);
    }
    const cost: OperationCost = {
      requests: round(requests / options.repeats, 2),
      // With another party's request inside the window, the bill is not the operation's alone.
      billed: excluded ? null : round(billed / options.repeats, 2),
      billedWrites: excluded ? null : round(billedWrites / options.repeats, 2),
      p50Ms: round(percentile(ms, 50)),
    };
    out[label] = cost;
    log(
      `  ${label}: ${cost.requests} requests, ${cost.billed ?? "-"} billed, p50 ${cost.p50Ms} ms`,
    );
  };
  const name = (kind: Kind, op: string, i: number) =>
    `${options.prefix}op:${kind.label.replace(" ", "-")}:${op}:${i}`;
  const lease = { leaseTime: 10_000 };
  for (const kind of KINDS) {
    // Warm the client's script cache for this kind.
    await held(await kind.lock(edgelock, name(kind, "warm", 0)).tryLock(lease)).release();
    await held(await kind.blocker(other, name(kind, "warm", 1)).tryLock(lease)).release();
    await measure(
      `${kind.label}: acquire, free`,
      async (i) => name(kind, "acquire", i),
      async (n) => held(await kind.lock(edgelock, n).tryLock(lease)),
      async (_, l) => void (await l.release()),
    );
    await measure(
      `${kind.label}: re-entry`,
      async (i) => {
        const n = name(kind, "reentry", i);
        return { n, first: held(await kind.lock(edgelock, n).tryLock(lease)) };
      },
      async ({ n, first }) =>
        held(await kind.lock(edgelock, n).tryLock({ ...lease, owner: first.owner })),
      async ({ first }, again) => {
        await again.release();
        await first.release();
      },
    );
    await measure(
      `${kind.label}: renew`,
      async (i) => held(await kind.lock(edgelock, name(kind, "renew", i)).tryLock(lease)),
      (l) => l.renew(),
      async (l) => void (await l.release()),
    );
    await measure(
      `${kind.label}: release`,
      async (i) => held(await kind.lock(edgelock, name(kind, "release", i)).tryLock(lease)),
      (l) => l.release(),
      async () => {},
    );
    // A waiter blocked behind the other side (or another owner): counted from its first attempt
    // to its lease, minus the holder's release, which the run makes once the waiter waits.
    await measure(
      `${kind.label}: acquire after a wait (woken by the release)`,
      async (i) => {
        const n = name(kind, "wait", i);
        return { n, holder: held(await kind.blocker(other, n).tryLock(lease)) };
      },
      async ({ holder, n }) => {
        const waiter = waiterClient(env);
        const pending = kind.lock(waiter.edge, n).tryLock({ ...lease, waitTime: WAIT_MS });
        await waiter.waits;
        await holder.release();
        return held(await pending);
      },
      async (_, l) => void (await l.release()),
      // The holder's release is not the waiter's.
      1,
    );
  }
  const rows: Rows = { env, edgelock, other, prefix: options.prefix, measure };
  await semaphoreRows(rows);
  await permitRows(rows);
  await latchRows(rows);
  return out;
}

/** Wait budget of every waiter here: far more than a wake-up takes. */
const WAIT_MS = 10_000;

type Measure = <S, R>(
  label: string,
  setup: (i: number) => Promise<S>,
  op: (s: S) => Promise<R>,
  cleanup: (s: S, r: R) => Promise<void>,
  excluded?: number,
) => Promise<void>;

/** What the rows of the semaphores and the latch need: two clients on one bridge, `measure`. */
interface Rows {
  env: BenchEnv;
  /** The measured client. */
  edgelock: EdgeLock;
  /** Another client (another isolate): the holder a waiter waits for. */
  other: EdgeLock;
  prefix: string;
  measure: Measure;
}

const drop = async (p: { delete(): Promise<boolean> }) => void (await p.delete());

/**
 * Semaphore (getSemaphore): tryAcquire of an available permit, release, and a tryAcquire that
 * waits until another client's release (busy attempt, subscription, attempt, attempt). Each call on its own name,
 * set to 1 permit; the name is deleted afterwards.
 */
async function semaphoreRows({ env, edgelock, other, prefix, measure }: Rows): Promise<void> {
  const label = "semaphore";
  const fresh = async (op: string, i: number) => {
    const s = edgelock.getSemaphore(`${prefix}op:semaphore:${op}:${i}`);
    check(await s.trySetPermits(1), "semaphore trySetPermits");
    return s;
  };
  // Warm Redis's script cache for the scripts below.
  const warm = await fresh("warm", 0);
  check(await warm.tryAcquire(), "semaphore tryAcquire");
  await warm.release();
  await drop(warm);
  await measure(
    `${label}: tryAcquire, permit available`,
    (i) => fresh("acquire", i),
    async (s) => check(await s.tryAcquire(), "semaphore tryAcquire"),
    (s) => drop(s),
  );
  await measure(
    `${label}: release`,
    async (i) => {
      const s = await fresh("release", i);
      check(await s.tryAcquire(), "semaphore tryAcquire");
      return s;
    },
    (s) => s.release(),
    (s) => drop(s),
  );
  // The only permit is held by another client, whose release ends the wait.
  await measure(
    `${label}: tryAcquire after a wait (woken by the release)`,
    async (i) => {
      const s = await fresh("wait", i);
      const holder = other.getSemaphore(s.name);
      check(await holder.tryAcquire(), "semaphore tryAcquire");
      return { s, holder };
    },
    async ({ s, holder }) => {
      const waiter = waiterClient(env);
      const pending = waiter.edge.getSemaphore(s.name).tryAcquire({ waitTime: WAIT_MS });
      await waiter.waits;
      await holder.release();
      check(await pending, "semaphore tryAcquire after a wait");
    },
    ({ s }) => drop(s),
    // The holder's release is not the waiter's.
    1,
  );
}

/**
 * Permit-expirable semaphore (getPermitExpirableSemaphore, leaseTime given, so no keep-alive
 * timer): tryAcquire of an available permit, lease.renew(), lease.release(), and an acquire()
 * that waits until another client's lease.release(). Each call on its own name, 1 permit.
 */
async function permitRows({ env, edgelock, other, prefix, measure }: Rows): Promise<void> {
  const label = "permit-expirable semaphore";
  const lease = { leaseTime: LEASE_MS };
  const fresh = async (op: string, i: number) => {
    const s = edgelock.getPermitExpirableSemaphore(`${prefix}op:permit:${op}:${i}`);
    check(await s.trySetPermits(1), "permit-expirable semaphore trySetPermits");
    return s;
  };
  const take = async (s: { tryAcquire(o: object): Promise<PermitLease | null> }) =>
    held(await s.tryAcquire(lease));
  const warm = await fresh("warm", 0);
  const w = await take(warm);
  await w.renew();
  await w.release();
  await drop(warm);
  await measure(
    `${label}: tryAcquire, permit available`,
    (i) => fresh("acquire", i),
    (s) => take(s),
    async (s, l) => {
      await l.release();
      await drop(s);
    },
  );
  await measure(
    `${label}: lease.renew()`,
    async (i) => {
      const s = await fresh("renew", i);
      return { s, l: await take(s) };
    },
    ({ l }) => l.renew(),
    async ({ s, l }) => {
      await l.release();
      await drop(s);
    },
  );
  await measure(
    `${label}: lease.release()`,
    async (i) => {
      const s = await fresh("release", i);
      return { s, l: await take(s) };
    },
    async ({ l }) => check((await l.release()) === "released", "permit lease.release()"),
    ({ s }) => drop(s),
  );
  await measure(
    `${label}: acquire after a wait (woken by the release)`,
    async (i) => {
      const s = await fresh("wait", i);
      return { s, holder: await take(other.getPermitExpirableSemaphore(s.name)) };
    },
    async ({ s, holder }) => {
      const waiter = waiterClient(env);
      const pending = waiter.edge.getPermitExpirableSemaphore(s.name).acquire(lease);
      await waiter.waits;
      await holder.release();
      return pending;
    },
    async ({ s }, l) => {
      await l.release();
      await drop(s);
    },
    1,
  );
}

/**
 * Count-down latch (getCountDownLatch): trySetCount, countDown, getCount, await on an open latch,
 * and an await that the last countDown (by another client) ends. Each call on its own name.
 */
async function latchRows({ env, edgelock, other, prefix, measure }: Rows): Promise<void> {
  const label = "count-down latch";
  const latch = (op: string, i: number) =>
    edgelock.getCountDownLatch(`${prefix}op:latch:${op}:${i}`);
  const set = async (op: string, i: number, count: number) => {
    const l = latch(op, i);
    check(await l.trySetCount(count), "latch trySetCount");
    return l;
  };
  const warm = await set("warm", 0, 1);
  await warm.getCount();
  check(await warm.await({ waitTime: 0 }).then((open) => !open), "latch await on a closed latch");
  await warm.countDown();
  await drop(warm);
  await measure(
    `${label}: trySetCount`,
    async (i) => latch("set", i),
    async (l) => check(await l.trySetCount(2), "latch trySetCount"),
    (l) => drop(l),
  );
  await measure(
    `${label}: countDown`,
    (i) => set("down", i, 2),
    async (l) => check((await l.countDown()) === 1, "latch countDown"),
    (l) => drop(l),
  );
  await measure(
    `${label}: getCount`,
    (i) => set("count", i, 2),
    async (l) => check((await l.getCount()) === 2, "latch getCount"),
    (l) => drop(l),
  );
  await measure(
    `${label}: await, open`,
    async (i) => latch("open", i),
    async (l) => check(await l.await({ waitTime: WAIT_MS }), "latch await on an open latch"),
    async () => {},
  );
  // The count is 1; another client's countDown opens the latch and wakes the waiter.
  await measure(
    `${label}: await woken by the last countDown`,
    (i) => set("wait", i, 1),
    async (l) => {
      const waiter = waiterClient(env);
      const pending = waiter.edge.getCountDownLatch(l.name).await({ waitTime: WAIT_MS });
      await waiter.waits;
      check((await other.getCountDownLatch(l.name).countDown()) === 0, "latch countDown");
      check(await pending, "latch await after a wait");
    },
    async () => {},
    // The countDown is not the waiter's.
    1,
  );
}
