/**
 * The `edgelock` admin CLI: see who holds a lock, force-unlock it, list lock names. It talks to
 * the database named by `UPSTASH_REDIS_REST_URL` / `UPSTASH_REDIS_REST_TOKEN` through
 * `@upstash/redis` (the package's peer dependency) and edgelock's own scripts.
 *
 * ```
 * edgelock inspect <name> [--json]
 * edgelock unlock <name> --yes [--json]
 * edgelock list [pattern] [--limit <n>] [--json]
 * ```
 *
 * Exit codes: 0 done, 1 Redis could not be reached (or answered an error), 2 usage or
 * configuration error (including `unlock` without `--yes`).
 * @module
 */

import { parseArgs } from "node:util";
import { EdgeLock } from "../client.js";
import { EdgeLockError } from "../errors.js";
import type { LockInspection } from "../locks/lock/index.js";
import type { RedisLike } from "../transport/redis.js";

/** Where the CLI reads its configuration and writes its output (the process, or a test). */
export interface CliIo {
  env: Record<string, string | undefined>;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

/** The part of an `@upstash/redis` client the CLI uses: edgelock's scripts plus SCAN. */
export interface CliRedis extends RedisLike {
  scan(
    cursor: string | number,
    options: { match: string; count: number; type: string },
  ): Promise<[string | number, unknown[]]>;
}

/** Default and largest `--limit` of `edgelock list`. */
export const LIST_DEFAULT_LIMIT = 100;
export const LIST_MAX_LIMIT = 10_000;
/** Keys asked of Redis per SCAN call, and the most SCAN calls one `list` makes. */
const SCAN_COUNT = 200;
const MAX_SCAN_CALLS = 1_000;
/** Locks inspected at the same time by `list`. */
const INSPECT_CONCURRENCY = 8;

const USAGE = `usage: edgelock inspect <name> [--json]
       edgelock unlock <name> --yes [--json]
       edgelock list [pattern] [--limit <n>] [--json]`;

const HELP = `${USAGE}

Admin commands for edgelock (and Redisson) locks in an Upstash Redis database.

  inspect <name>     who holds the lock, with hold counts, and its remaining TTL
  unlock <name>      delete the lock whoever holds it (Redisson's forceUnlock); the holder is
                     not told and keeps running unprotected, so it refuses without --yes
  list [pattern]     names of locks matching a glob pattern (default *), found with SCAN:
                     HASH keys with at least one hold-count field, leaving out edgelock's and
                     Redisson's helper keys

  --json             print JSON instead of text
  --limit <n>        list: stop after <n> names (default ${LIST_DEFAULT_LIMIT}, at most ${LIST_MAX_LIMIT})
  --yes              unlock: confirm
  -h, --help         print this help

Environment: UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN, the database's REST URL and
token (for a local edgelock-bridge: http://127.0.0.1:8079 and its --token).
Exit codes: 0 done, 1 Redis unreachable or failed, 2 usage or configuration error.`;

/** A usage or configuration error: the CLI prints it with the usage and exits with 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/**
 * An `@upstash/redis` client for the CLI, imported on demand (it is the package's peer
 * dependency, installed next to edgelock).
 * @throws {UsageError} when `@upstash/redis` is not installed.
 */
export async function connectUpstash(url: string, token: string): Promise<CliRedis> {
  let upstash: typeof import("@upstash/redis");
  try {
    upstash = await import("@upstash/redis");
  } catch {
    throw new UsageError("@upstash/redis is not installed: npm install @upstash/redis");
  }
  const redis = new upstash.Redis({
    url,
    token,
    // Keys and owners exactly as stored: no JSON decoding of reply strings.
    automaticDeserialization: false,
    // An admin command should fail fast on a wrong URL, not after ~4 s of retries.
    retry: { retries: 2, backoff: (attempt) => 100 * 2 ** attempt },
    enableTelemetry: false,
  });
  return {
    eval: (script, keys, args) => redis.eval(script, keys, args),
    evalsha: (sha1, keys, args) => redis.evalsha(sha1, keys, args),
    scan: (cursor, options) => redis.scan(cursor, options),
  };
}

/**
 * Runs one CLI command with the configuration in `io.env`.
 * @param connect builds the Redis client from the URL and token. @default {@link connectUpstash}
 * @returns the exit code: 0 done, 1 Redis failure, 2 usage or configuration error.
 */
export async function runCli(
  argv: readonly string[],
  io: CliIo,
  connect: (url: string, token: string) => CliRedis | Promise<CliRedis> = connectUpstash,
): Promise<number> {
  try {
    const { values, positionals } = parse(argv);
    if (values.help) {
      io.stdout(`${HELP}\n`);
      return 0;
    }
    const [command, ...rest] = positionals;
    if (command === undefined) throw new UsageError("a command is required");
    if (!["inspect", "unlock", "list"].includes(command)) {
      throw new UsageError(`unknown command "${command}"`);
    }
    const arg = rest[0];
    if (rest.length > 1) throw new UsageError(`unexpected argument "${rest[1]}"`);
    if (command !== "list" && arg === undefined) {
      throw new UsageError(`${command}: the lock name is required`);
    }
    if (values.limit !== undefined && command !== "list") {
      throw new UsageError("--limit only applies to list");
    }
    if (values.yes && command !== "unlock") throw new UsageError("--yes only applies to unlock");
    if (command === "unlock" && !values.yes) {
      throw new UsageError(
        `unlock: refusing to delete "${arg}" without --yes (its holder is not told and keeps running unprotected)`,
      );
    }
    const limit = listLimit(values.limit);

    const url = io.env.UPSTASH_REDIS_REST_URL;
    const token = io.env.UPSTASH_REDIS_REST_TOKEN;
    if (!url || !token) {
      const missing = [
        url ? undefined : "UPSTASH_REDIS_REST_URL",
        token ? undefined : "UPSTASH_REDIS_REST_TOKEN",
      ].filter(Boolean);
      throw new UsageError(
        `set ${missing.join(" and ")} (the database's REST URL and token; for a local edgelock-bridge: http://127.0.0.1:8079 and its --token)`,
      );
    }
    const redis = await connect(url, token);
    const edgelock = new EdgeLock({ redis });
    const json = values.json === true;
    const print = (value: unknown, text: string) =>
      io.stdout(json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);

    if (command === "inspect") {
      const seen = await edgelock.getLock(lockName(arg)).inspect();
      print(seen, describeLock(seen));
    } else if (command === "unlock") {
      const name = lockName(arg);
      const unlocked = await edgelock.getLock(name).forceUnlock();
      print(
        { name, unlocked },
        unlocked ? `unlocked "${name}"` : `"${name}" was not locked: nothing to do`,
      );
    } else {
      const found = await listLocks(redis, edgelock, arg ?? "*", limit);
      const lines = found.locks.map(
        (l) => `${l.name}  ${describeTtl(l.ttl)}  ${plural(l.holders.length, "holder")}`,
      );
      if (found.truncated) {
        lines.push(`(stopped after ${plural(found.locks.length, "name")}: more may match)`);
      } else if (found.locks.length === 0) {
        lines.push("no locks found");
      }
      print(found, lines.join("\n"));
    }
    return 0;
  } catch (error) {
    if (error instanceof UsageError || error instanceof TypeError || error instanceof RangeError) {
      io.stderr(`edgelock: ${error.message}\n${USAGE}\n`);
      return 2;
    }
    if (error instanceof EdgeLockError) {
      io.stderr(`edgelock: ${error.message}\n`);
      return 1;
    }
    io.stderr(`edgelock: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

function parse(argv: readonly string[]) {
  try {
    return parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: true,
      options: {
        json: { type: "boolean" },
        yes: { type: "boolean" },
        limit: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

function listLimit(text: string | undefined): number {
  if (text === undefined) return LIST_DEFAULT_LIMIT;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > LIST_MAX_LIMIT) {
    throw new UsageError(`--limit must be an integer from 1 to ${LIST_MAX_LIMIT}`);
  }
  return n;
}

function lockName(arg: string | undefined): string {
  if (arg === undefined) throw new UsageError("the lock name is required");
  return arg;
}

/** What `edgelock list` found. */
export interface ListResult {
  /** Locks matching the pattern, in SCAN order. */
  locks: LockInspection[];
  /** True when `--limit` (or the SCAN call bound) stopped the scan before its end. */
  truncated: boolean;
}

/**
 * SCANs HASH keys matching `pattern` and keeps those that look like locks: a valid lock name
 * (no `{`/`}`, which also leaves out Redisson's `redisson_*:{name}` and edgelock's
 * `edgelock_*:{name}` helper keys) with at least one hold-count field. Bounded by `limit` names
 * and {@link MAX_SCAN_CALLS} SCAN requests.
 */
async function listLocks(
  redis: CliRedis,
  edgelock: EdgeLock,
  pattern: string,
  limit: number,
): Promise<ListResult> {
  const locks: LockInspection[] = [];
  let cursor = "0";
  for (let calls = 0; calls < MAX_SCAN_CALLS; calls++) {
    const [next, keys] = await redis.scan(cursor, {
      match: pattern,
      count: SCAN_COUNT,
      type: "hash",
    });
    cursor = String(next);
    const candidates = keys.map(String).filter(isCandidate);
    for (let i = 0; i < candidates.length; i += INSPECT_CONCURRENCY) {
      const batch = candidates.slice(i, i + INSPECT_CONCURRENCY);
      const seen = await Promise.all(batch.map((name) => edgelock.getLock(name).inspect()));
      for (const lock of seen) {
        if (lock.holders.length === 0) continue;
        if (locks.length === limit) return { locks, truncated: true };
        locks.push(lock);
      }
    }
    if (cursor === "0") return { locks, truncated: false };
  }
  return { locks, truncated: true };
}

function isCandidate(name: string): boolean {
  return (
    name.length > 0 &&
    name.length <= 512 &&
    !/[{}]/.test(name) &&
    !name.startsWith("edgelock_") &&
    !name.startsWith("redisson_")
  );
}

function describeLock(l: LockInspection): string {
  if (!l.locked) return `"${l.name}" is free`;
  const lines = [`"${l.name}" is locked, ${describeTtl(l.ttl)}`];
  for (const h of l.holders) lines.push(`  owner ${h.owner}  holds ${plural(h.holdCount, "time")}`);
  if (l.holders.length === 0) lines.push("  (the key exists but holds no hold-count field)");
  return lines.join("\n");
}

function describeTtl(ttl: number): string {
  if (ttl === -1) return "no expiry";
  if (ttl < 0) return "gone";
  return `expires in ${ttl} ms`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}
