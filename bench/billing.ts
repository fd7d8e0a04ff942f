/**
 * Billed commands: what Upstash charges for an operation, counted as Redis counts it. Upstash
 * bills a script as the EVAL/EVALSHA plus every call made inside it, which is exactly what
 * `INFO commandstats` adds up (calls made by scripts are counted per command). The difference of
 * two snapshots on a Redis that nothing else uses is the bill of what ran in between. Used by
 * the bench (every scenario's bill, every peer) and by test/billing.test.ts (the budgets).
 * @module
 */
import { createClient } from "@redis/client";

/** Calls per command name (lower case), e.g. `{ evalsha: 2, hget: 1 }`. */
export type CommandCounts = Record<string, number>;

/** Commands that change data, counted apart for global databases (each write billed per region). */
const READS = new Set([
  "get",
  "mget",
  "exists",
  "hget",
  "hmget",
  "hgetall",
  "hexists",
  "hlen",
  "pttl",
  "ttl",
  "zrange",
  "zscore",
  "zcard",
  "zcount",
  "zrangebyscore",
  "time",
  "scard",
  "smembers",
  "lrange",
  "llen",
  "strlen",
  "type",
  "zrank",
  "hkeys",
  "hvals",
  "sismember",
  "pubsub",
]);

/** Commands of the counting connection itself, never part of a bill. */
const OWN = new Set([
  "info",
  "config|resetstat",
  "config",
  "client",
  "client|setinfo",
  "hello",
  "ping",
]);

/** Parses `INFO commandstats` into calls per command. */
export function parseCommandStats(info: string): CommandCounts {
  const counts: CommandCounts = {};
  for (const line of info.split(/\r?\n/)) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (m?.[1] && m[2] && !OWN.has(m[1])) counts[m[1]] = Number(m[2]);
  }
  return counts;
}

/** A bill: calls per command, their total, and how many of them write. */
export interface Bill {
  total: number;
  writes: number;
  commands: CommandCounts;
}

/** The bill of `after - before`. `evalsha`/`eval` count as writes (a script may write). */
export function billOf(before: CommandCounts, after: CommandCounts): Bill {
  const commands: CommandCounts = {};
  let total = 0;
  let writes = 0;
  for (const [cmd, n] of Object.entries(after)) {
    const d = n - (before[cmd] ?? 0);
    if (d <= 0) continue;
    commands[cmd] = d;
    total += d;
    if (!READS.has(cmd)) writes += d;
  }
  return { total, writes, commands };
}

/** Counts the commands a Redis runs, through a connection of its own. */
export interface BillMeter {
  /** The bill of everything Redis ran while `fn` ran. */
  measure(fn: () => Promise<unknown>): Promise<Bill>;
  close(): Promise<void>;
}

/** A {@link BillMeter} on the redis-server at `url` (nothing else may use that Redis). */
export async function billMeter(url: string): Promise<BillMeter> {
  const client = createClient({ url, RESP: 2, disableClientInfo: true });
  client.on("error", () => undefined);
  await client.connect();
  const snapshot = async () => parseCommandStats(await client.info("commandstats"));
  return {
    async measure(fn) {
      const before = await snapshot();
      await fn();
      return billOf(before, await snapshot());
    },
    close: async () => {
      await client.close();
    },
  };
}

/** The bill of one operation: `fn` run `runs` times (after one warm-up run), divided by `runs`. */
export async function billPerRun(
  meter: BillMeter,
  fn: () => Promise<unknown>,
  runs = 10,
): Promise<Bill> {
  await fn();
  const bill = await meter.measure(async () => {
    for (let i = 0; i < runs; i++) await fn();
  });
  const commands: CommandCounts = {};
  for (const [c, n] of Object.entries(bill.commands)) commands[c] = n / runs;
  return { total: bill.total / runs, writes: bill.writes / runs, commands };
}
