/**
 * What the console tests share: a redis-server and a bridge of their own (so that a scan sees
 * only what a test wrote, and Redis's command counts are the console's bill), and every kind of
 * primitive held and waited on, as an application leaves them.
 */
import { randomBytes } from "node:crypto";
import { Redis } from "@upstash/redis";
import { type Bridge, startBridge } from "../../src/bridge/index.js";
import { EdgeLock, type Lease } from "../../src/index.js";
import { type RedisServer, startRedisServer } from "../support/redis-server.js";

/** A redis-server with a bridge in front of it, for one test file. */
export interface Stack {
  redis: RedisServer;
  bridge: Bridge;
  url: string;
  token: string;
  /** A real `@upstash/redis` client on the bridge (replies decoded, the client's default). */
  client(options?: { automaticDeserialization?: boolean }): Redis;
  close(): Promise<void>;
}

export async function startStack(): Promise<Stack> {
  const redis = await startRedisServer();
  const token = randomBytes(16).toString("hex");
  const bridge = await startBridge({ redisUrl: redis.url, token });
  return {
    redis,
    bridge,
    url: bridge.url,
    token,
    client: (options = {}) =>
      new Redis({ url: bridge.url, token, enableTelemetry: false, ...options }),
    close: async () => {
      await bridge.close();
      await redis.stop();
    },
  };
}

/** Resolves once `check` holds, polling every 20 ms; throws after `ms`. */
export async function until(
  check: () => Promise<boolean>,
  what = "condition",
  ms = 5_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`${what}: not met in ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The names {@link seedEveryKind} writes, under a prefix. */
export function kindNames(prefix: string) {
  return {
    fair: `${prefix}cron:nightly`,
    lock: `${prefix}invoice:42`,
    fenced: `${prefix}ledger`,
    rw: `${prefix}catalog`,
    semaphore: `${prefix}exports`,
    pes: `${prefix}renders`,
    latch: `${prefix}import:7`,
  };
}

/** Every kind, held and waited on; `stop()` ends the waits (the holds stay until they expire). */
export interface Seeded {
  names: ReturnType<typeof kindNames>;
  /** The leases of the holders, by name. */
  leases: Record<string, Lease>;
  stop(): Promise<void>;
}

const LONG_WAIT = 60_000;

/**
 * Writes one name of each kind with holders and at least one waiter in Redis, each through
 * edgelock's own calls on clients `client` makes (waiters are real calls waiting, ended by
 * `stop()`). Every lease is fixed, so that nothing renews in the background.
 */
export async function seedEveryKind(client: () => Redis, prefix: string): Promise<Seeded> {
  const names = kindNames(prefix);
  const app = (clientId: string) => new EdgeLock({ redis: client(), clientId });
  const holder = app("worker-eu");
  // One client per waiting call: a client subscribes for at most 4 waits at a time, and a wait
  // beyond that polls, unregistered.
  let waiters = 0;
  const waiter = () => app(`worker-us-${++waiters}`);
  const raw = client();
  const abort = new AbortController();
  const signal = abort.signal;
  const waits: Promise<unknown>[] = [];
  const wait = (p: Promise<unknown>) => waits.push(p.catch(() => undefined));
  const leases: Record<string, Lease> = {};
  const take = async (name: string, lease: Lease | null) => {
    if (!lease) throw new Error(`${name} is busy`);
    leases[name] = lease;
    return lease;
  };

  // A fair lock with two owners queued, in this order.
  await take(names.fair, await holder.getFairLock(names.fair).tryLock({ leaseTime: 120_000 }));
  for (const n of [1, 2]) {
    wait(
      waiter().getFairLock(names.fair).tryLock({ waitTime: LONG_WAIT, leaseTime: 5_000, signal }),
    );
    await until(async () => (await raw.llen(`redisson_lock_queue:{${names.fair}}`)) === n);
  }

  // A lock held twice by its owner (re-entered), with a waiter registered.
  const lock = holder.getLock(names.lock);
  const held = await take(names.lock, await lock.tryLock({ leaseTime: 90_000 }));
  await lock.tryLock({ leaseTime: 90_000, owner: held.owner });
  wait(waiter().getLock(names.lock).tryLock({ waitTime: LONG_WAIT, leaseTime: 10_000, signal }));

  // A fenced lock, a waiter on it.
  await take(names.fenced, await holder.getFencedLock(names.fenced).tryLock({ leaseTime: 60_000 }));
  wait(
    waiter()
      .getFencedLock(names.fenced)
      .tryLock({ waitTime: LONG_WAIT, leaseTime: 10_000, signal }),
  );

  // Two readers, and a writer waiting for them.
  const rw = holder.getReadWriteLock(names.rw);
  await take(names.rw, await rw.readLock().tryLock({ leaseTime: 45_000 }));
  await rw.readLock().tryLock({ leaseTime: 45_000 });
  wait(
    waiter()
      .getReadWriteLock(names.rw)
      .writeLock()
      .tryLock({ waitTime: LONG_WAIT, leaseTime: 10_000, signal }),
  );

  // A semaphore of 3, all taken, a waiter asking for 2.
  const semaphore = holder.getSemaphore(names.semaphore);
  await semaphore.trySetPermits(3);
  await semaphore.tryAcquire({ permits: 3 });
  wait(
    waiter().getSemaphore(names.semaphore).tryAcquire({ permits: 2, waitTime: LONG_WAIT, signal }),
  );

  // A permit-expirable semaphore of 2, both leased, a waiter.
  const pes = holder.getPermitExpirableSemaphore(names.pes);
  await pes.trySetPermits(2);
  await pes.tryAcquire({ permits: 2, leaseTime: 75_000 });
  wait(
    waiter()
      .getPermitExpirableSemaphore(names.pes)
      .tryAcquire({ waitTime: LONG_WAIT, leaseTime: 30_000, signal }),
  );

  // A latch at 3, one call awaiting it.
  const latch = holder.getCountDownLatch(names.latch);
  await latch.trySetCount(3);
  wait(waiter().getCountDownLatch(names.latch).await({ waitTime: LONG_WAIT, signal }));

  // Every wait registered (the fair queue was waited for above).
  for (const name of [
    names.lock,
    names.fenced,
    names.rw,
    names.semaphore,
    names.pes,
    names.latch,
  ]) {
    await until(async () => (await raw.zcard(`edgelock_waiting:{${name}}`)) > 0, `${name} waits`);
  }
  return {
    names,
    leases,
    stop: async () => {
      abort.abort(new Error("test over"));
      await Promise.all(waits);
    },
  };
}
