/**
 * Scenario 5: what replay safety leaves in Redis. Runs acquire/release cycles (on many names,
 * then on one hot name) and reports the keys and memory that remain right after: the lock keys
 * are gone, so what is left is replay records (and, with other libraries, their own state).
 * @module
 */

import { EdgeLock } from "edgelock";
import type { Redis as IORedis } from "ioredis";
import type { BenchEnv } from "../env.js";

/** Sizes of scenario 5. */
export interface FootprintOptions {
  /** Acquire/release cycles per shape. */
  cycles: number;
  /** Distinct names of the many-names shape. */
  names: number;
  /** Concurrent clients. */
  workers: number;
  prefix: string;
}

/** What one shape left behind. */
export interface FootprintShape {
  cycles: number;
  names: number;
  seconds: number;
  /** Keys in Redis after the cycles (DBSIZE delta), and how many of them have a TTL. */
  keys: number;
  volatileKeys: number;
  /** Keys by kind: replay records, lock keys, other. */
  byKind: { replay: number; lock: number; other: number };
  /** `used_memory` growth, bytes. */
  usedMemoryBytes: number;
}

/** Scenario 5 results: the live run, plus the same shapes measured once on the earlier design. */
export interface FootprintResult {
  manyNames: FootprintShape;
  oneName: FootprintShape;
}

/** Anything with the lock API of edgelock (this version or an earlier one). */
export interface FootprintLock {
  getLock(name: string): {
    tryLock(o: {
      leaseTime: number;
      waitTime: number;
    }): Promise<{ release(): Promise<unknown> } | null>;
  };
}

/** Runs scenario 5 on `env` with this edgelock. */
export async function runFootprint(
  env: BenchEnv,
  options: FootprintOptions,
  log: (line: string) => void,
): Promise<FootprintResult> {
  const make = () => new EdgeLock({ redis: env.http({ enableAutoPipelining: false }) });
  // Each shape starts from an empty Redis (the run's own), so its deltas are its alone.
  await env.admin.flushall();
  const manyNames = await measureShape(env.admin, make, { ...options }, `${options.prefix}fp:m:`);
  log(`  footprint: ${options.cycles} cycles on ${options.names} names done`);
  await env.admin.flushall();
  const oneName = await measureShape(
    env.admin,
    make,
    { ...options, names: 1 },
    `${options.prefix}fp:o:`,
  );
  log(`  footprint: ${options.cycles} cycles on one name done`);
  return { manyNames, oneName };
}

/**
 * Runs `cycles` acquire/release cycles spread over `names` names with `workers` clients made by
 * `make`, then counts what stays in Redis under `prefix`. Exported so that an earlier version of
 * the library can be measured the same way.
 */
export async function measureShape(
  admin: IORedis,
  make: () => FootprintLock,
  options: { cycles: number; names: number; workers: number },
  prefix: string,
): Promise<FootprintShape> {
  const before = await usage(admin);
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: options.workers }, async () => {
      const edge = make();
      for (;;) {
        const n = next++;
        if (n >= options.cycles) return;
        const lease = await edge
          .getLock(`${prefix}${n % options.names}`)
          .tryLock({ leaseTime: 10_000, waitTime: 10_000 });
        await lease?.release();
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const after = await usage(admin);
  const byKind = { replay: 0, lock: 0, other: 0 };
  let cursor = "0";
  do {
    const [nextCursor, keys] = await admin.scan(cursor, "MATCH", `*${prefix}*`, "COUNT", 1000);
    cursor = nextCursor;
    for (const key of keys) {
      if (key.startsWith("edgelock_replay:") || key.startsWith("edgelock_latch:")) byKind.replay++;
      else if (key.startsWith(prefix)) byKind.lock++;
      else byKind.other++;
    }
  } while (cursor !== "0");
  return {
    cycles: options.cycles,
    names: options.names,
    seconds: Math.round(seconds * 10) / 10,
    keys: after.keys - before.keys,
    volatileKeys: after.expires - before.expires,
    byKind,
    usedMemoryBytes: after.usedMemory - before.usedMemory,
  };
}

async function usage(admin: IORedis) {
  const memory = await admin.info("memory");
  const keyspace = await admin.info("keyspace");
  const field = (text: string, name: string) =>
    Number(new RegExp(`${name}(\\d+)`).exec(text)?.[1] ?? 0);
  return {
    usedMemory: field(memory, "used_memory:"),
    keys: field(keyspace, "keys="),
    expires: field(keyspace, "expires="),
  };
}
