/**
 * Scenario 4: does acquiring get dearer as the number of distinct locks in Redis grows? Fills
 * Redis with held locks (Redisson-layout hashes with a TTL, written by a pipelined TCP client),
 * then times acquire+release on fresh keys at each size; and measures Redis memory per lock.
 * @module
 */
import { EdgeLock } from "edgelock";
import type { BenchEnv } from "../env.js";
import type { Held, LibClient, Library, LibraryName } from "../libraries.js";
import { now, percentile, round } from "../stats.js";
import { rotate } from "./uncontended.js";

/** Sizes of scenario 4. */
export interface ScaleOptions {
  /** Numbers of held locks in Redis, ascending (e.g. 1, 1 000, 10 000, 100 000). */
  sizes: number[];
  /** Timed acquire+release cycles per library and size. */
  cycles: number;
  /** Locks acquired at once per library for the memory measurement. */
  memoryLocks: number;
  prefix: string;
  libs: readonly Library[];
}

/** Per library: one value per size, in the order of `sizes`. */
export interface ScaleResult {
  sizes: number[];
  acquireP50Ms: Record<LibraryName, (number | null)[]>;
  cycleP50Ms: Record<LibraryName, (number | null)[]>;
  /** Redis `used_memory` growth per held lock, and what stays per lock after release (bytes). */
  memory: Record<
    LibraryName,
    { bytesPerHeldLock: number | null; bytesAfterRelease: number | null }
  >;
  /** Lock primitives the scale scenario would also cover, and whether edgelock has them yet. */
  primitives: { fairLock: boolean; permitExpirableSemaphore: boolean };
}

const FILL_BATCH = 5_000;
const FILL_TTL_MS = 3_600_000;
const MEMORY_CONCURRENCY = 16;

/** Runs scenario 4. */
export async function runScale(
  env: BenchEnv,
  options: ScaleOptions,
  log: (line: string) => void,
): Promise<ScaleResult> {
  const { libs } = options;
  const clients = new Map<LibraryName, LibClient>();
  for (const lib of libs) clients.set(lib.name, await lib.client(env, "default"));
  const acquire = {} as ScaleResult["acquireP50Ms"];
  const cycle = {} as ScaleResult["cycleP50Ms"];
  for (const lib of libs) {
    acquire[lib.name] = [];
    cycle[lib.name] = [];
  }
  try {
    let filled = 0;
    for (const [s, size] of options.sizes.entries()) {
      filled = await fill(env, options.prefix, filled, size);
      for (const lib of rotate(libs, s)) {
        const client = clients.get(lib.name) as LibClient;
        const a: number[] = [];
        const c: number[] = [];
        for (let i = -Math.min(20, options.cycles); i < options.cycles; i++) {
          const t0 = now();
          const held = await client.acquire(`${options.prefix}scale:${lib.name}:${size}:${i}`);
          const t1 = now();
          if (!held) throw new Error(`${lib.name}: acquire of a fresh key failed`);
          await held.release();
          if (i < 0) continue; // warm-up
          a.push(t1 - t0);
          c.push(now() - t0);
        }
        acquire[lib.name].push(round(percentile(a, 50)));
        cycle[lib.name].push(round(percentile(c, 50)));
      }
      log(`  scale: ${size} locks done`);
    }
    const memory = {} as ScaleResult["memory"];
    for (const lib of libs) {
      memory[lib.name] = await measureMemory(
        env,
        clients.get(lib.name) as LibClient,
        `${options.prefix}mem:${lib.name}:`,
        options.memoryLocks,
      );
    }
    log("  scale: memory per lock done");
    return {
      sizes: options.sizes,
      acquireP50Ms: acquire,
      cycleP50Ms: cycle,
      memory,
      primitives: {
        fairLock: "getFairLock" in EdgeLock.prototype,
        permitExpirableSemaphore: "getPermitExpirableSemaphore" in EdgeLock.prototype,
      },
    };
  } finally {
    for (const client of clients.values()) await client.close();
  }
}

/** Adds held locks `from`…`to - 1` (Redisson layout: HASH owner → 1, PEXPIRE) in pipelines. */
async function fill(env: BenchEnv, prefix: string, from: number, to: number): Promise<number> {
  for (let start = from; start < to; start += FILL_BATCH) {
    const pipeline = env.admin.pipeline();
    for (let i = start; i < Math.min(to, start + FILL_BATCH); i++) {
      const key = `${prefix}fill:${i}`;
      pipeline.hset(key, "filler:1", 1);
      pipeline.pexpire(key, FILL_TTL_MS);
    }
    await pipeline.exec();
  }
  return Math.max(from, to);
}

async function usedMemory(env: BenchEnv): Promise<number> {
  const info = await env.admin.info("memory");
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? Number.NaN);
}

/** Holds `count` distinct locks at once, then releases them, reading `used_memory` around. */
async function measureMemory(
  env: BenchEnv,
  client: LibClient,
  prefix: string,
  count: number,
): Promise<{ bytesPerHeldLock: number | null; bytesAfterRelease: number | null }> {
  const m0 = await usedMemory(env);
  const held: Held[] = [];
  await pool(count, async (i) => {
    const h = await client.acquire(`${prefix}${i}`);
    if (!h) throw new Error("acquire of a fresh key failed");
    held.push(h);
  });
  const m1 = await usedMemory(env);
  await pool(held.length, (i) => (held[i] as Held).release());
  const m2 = await usedMemory(env);
  return {
    bytesPerHeldLock: round((m1 - m0) / count, 0),
    bytesAfterRelease: round((m2 - m0) / count, 0),
  };
}

/** Runs `task(0 … n-1)` with at most {@link MEMORY_CONCURRENCY} in flight. */
async function pool(n: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(MEMORY_CONCURRENCY, n) }, worker));
}
