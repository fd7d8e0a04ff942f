/**
 * Scenario 3d: HTTP requests and latency per operation of each edgelock lock kind, one client
 * on a warm script cache: acquire on a free lock, re-entry, renewal, release, and the acquire of
 * a waiter that the release it waits for wakes (blocking wait: busy attempt, BLPOP, attempt).
 * @module
 */
import { EdgeLock, type Lease } from "../../src/index.js";
import type { BenchEnv } from "../env.js";
import { percentile, round } from "../stats.js";

/** One operation's cost: HTTP requests per call (mean) and latency p50, ms. */
export interface OperationCost {
  requests: number | null;
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

function held(lease: Lease | null): Lease {
  if (!lease) throw new Error("bench: an acquire that should succeed did not");
  return lease;
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
  /** Times and counts `op` only: `setup` before it and what it returns after it are not. */
  const measure = async <S, R>(
    label: string,
    setup: (i: number) => Promise<S>,
    op: (s: S) => Promise<R>,
    cleanup: (s: S, r: R) => Promise<void>,
  ) => {
    const ms: number[] = [];
    let requests = 0;
    for (let i = 0; i < options.repeats; i++) {
      const s = await setup(i);
      const before = (await env.counters()).httpRequests;
      const started = performance.now();
      const r = await op(s);
      ms.push(performance.now() - started);
      requests += (await env.counters()).httpRequests - before;
      await cleanup(s, r);
    }
    out[label] = {
      requests: round(requests / options.repeats, 2),
      p50Ms: round(percentile(ms, 50)),
    };
    log(`  ${label}: ${out[label]?.requests} requests, p50 ${out[label]?.p50Ms} ms`);
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
        let waiting!: () => void;
        const waits = new Promise<void>((resolve) => {
          waiting = resolve;
        });
        const waiter = new EdgeLock({
          redis: env.http(),
          onEvent: (e) => {
            if (e.type === "wait") waiting();
          },
        });
        const pending = kind.lock(waiter, n).tryLock({ ...lease, waitTime: 10_000 });
        await waits;
        await holder.release();
        return held(await pending);
      },
      async (_, l) => void (await l.release()),
    );
    // The holder's release is one of the requests counted above.
    const w = out[`${kind.label}: acquire after a wait (woken by the release)`];
    if (w?.requests != null) w.requests = round(w.requests - 1, 2);
  }
  return out;
}
