/**
 * The `edgelock` admin CLI: see what a name holds (any primitive), force-unlock or delete it,
 * list names in use. It talks to the database named by `UPSTASH_REDIS_REST_URL` /
 * `UPSTASH_REDIS_REST_TOKEN` through `@upstash/redis` (the package's peer dependency) and
 * edgelock's own scripts.
 *
 * ```
 * edgelock inspect <name> [--kind <kind>] [--json]
 * edgelock unlock <name> --yes [--kind <kind>] [--json]
 * edgelock list [pattern] [--limit <n>] [--all] [--json]
 * ```
 *
 * Exit codes: 0 done, 1 Redis could not be reached (or answered an error), 2 usage or
 * configuration error (including `unlock` without `--yes`), 3 refused: the name holds another
 * kind than asked (or one no edgelock primitive uses), e.g. `unlock` of a semaphore without
 * `--kind semaphore`.
 * @module
 */

import { parseArgs } from "node:util";
import {
  type AdminRedis,
  deleteAs,
  detectKind,
  doneKey,
  ForeignKeyError,
  type Found,
  inspectAs,
  inUse,
  isCandidate,
  KIND_LABEL,
  KINDS,
  type Kind,
  LOCK_KINDS,
  MARK_KINDS,
  mayBe,
} from "../admin/kinds.js";
import { MAX_LISTED_WAITERS } from "../admin/queues.js";
import { adminRedis } from "../admin/redis.js";
import { EdgeLock } from "../client.js";
import { EdgeLockError } from "../errors.js";

/** The Redis client the CLI reads through (`connect` of {@link runCli} returns one). */
export type CliRedis = AdminRedis;
export type { Found, Kind } from "../admin/kinds.js";
export type { QueuedWaiter, RegisteredWaiter, Waiters } from "../admin/queues.js";

/** Where the CLI reads its configuration and writes its output (the process, or a test). */
export interface CliIo {
  env: Record<string, string | undefined>;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

/** Default and largest `--limit` of `edgelock list`. */
export const LIST_DEFAULT_LIMIT = 100;
export const LIST_MAX_LIMIT = 10_000;
/** Keys asked of Redis per SCAN call, and the most SCAN calls one `list` makes. */
const SCAN_COUNT = 200;
const MAX_SCAN_CALLS = 1_000;
/** Names inspected at the same time by `list`. */
const INSPECT_CONCURRENCY = 8;

/** Exit codes (documented in the help and docs/operations.md). */
export const EXIT = { ok: 0, redis: 1, usage: 2, refused: 3 } as const;

const USAGE = `usage: edgelock inspect <name> [--kind <kind>] [--json]
       edgelock unlock <name> --yes [--kind <kind>] [--json]
       edgelock list [pattern] [--limit <n>] [--all] [--json]`;

const HELP = `${USAGE}

Admin commands for edgelock (and Redisson) primitives in an Upstash Redis database.

  inspect <name>     what the name holds (its kind, read from its keys), its holders or
                     permits or count, its remaining TTL, and who waits: a fair lock's queue
                     and the other locks' registered waiters, in the order they are served
                     (the first ${MAX_LISTED_WAITERS}, and how many more)
  unlock <name>      delete the lock whoever holds it (Redisson's forceUnlock); the holder is
                     not told and keeps running unprotected, so it refuses without --yes.
                     Anything that is not a lock (a semaphore, a latch, a webhook mark) is
                     refused unless --kind names it; then it is deleted (waiters are woken)
  list [pattern]     names in use matching a glob pattern (default *), found with SCAN, with
                     their kind; edgelock's and Redisson's helper keys are left out, and the
                     cron guard's and webhook marks too unless --all

  --kind <kind>      ${KINDS.join(", ")}: what inspect reports
  --json             print JSON instead of text; a failure too, as { "error": { exit, reason,
                     message, code? } } on stdout
  --limit <n>        list: stop after <n> names (default ${LIST_DEFAULT_LIMIT}, at most ${LIST_MAX_LIMIT})
  --all              list: include cron and webhook marks
  --yes              unlock: confirm
  -h, --help         print this help

Environment: UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN, the database's REST URL and
token (for a local edgelock-bridge: http://127.0.0.1:8079 and its --token).
Exit codes: 0 done, 1 Redis unreachable or failed, 2 usage or configuration error,
3 refused: the name holds another kind than asked.`;

/** A usage or configuration error: the CLI prints it with the usage and exits with 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** The name holds another kind than asked: the CLI prints it and exits with 3. */
export class KindError extends Error {
  override readonly name = "KindError";
}

/**
 * An `@upstash/redis` client for the CLI, imported on demand (it is the package's peer
 * dependency, installed next to edgelock). Its failures carry edgelock's hints (a wrong token,
 * a refused connection), never the raw command.
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
  return adminRedis(redis);
}

/**
 * Runs one CLI command with the configuration in `io.env`.
 * @param connect builds the Redis client from the URL and token. @default {@link connectUpstash}
 * @returns the exit code, one of {@link EXIT}.
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
      return EXIT.ok;
    }
    const [command, ...rest] = positionals;
    if (command === undefined) throw new UsageError("a command is required");
    if (!["inspect", "unlock", "list"].includes(command)) {
      throw new UsageError(`unknown command "${command}"`);
    }
    const arg = rest[0];
    if (rest.length > 1) throw new UsageError(`unexpected argument "${rest[1]}"`);
    if (command !== "list" && arg === undefined) {
      throw new UsageError(`${command}: the name is required`);
    }
    if (values.limit !== undefined && command !== "list") {
      throw new UsageError("--limit only applies to list");
    }
    if (values.all && command !== "list") throw new UsageError("--all only applies to list");
    if (values.kind !== undefined && command === "list") {
      throw new UsageError("--kind only applies to inspect and unlock");
    }
    const kind = kindOption(values.kind);
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
    const edgelock = new EdgeLock({ redis: redis.scripts ?? redis });
    const json = values.json === true;
    const print = (value: unknown, text: string) =>
      io.stdout(json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);

    if (command === "inspect") {
      const name = checkedName(arg);
      const stored = await detectKind(redis, name);
      if (kind !== undefined && stored !== null && !mayBe(stored, kind)) {
        throw mismatch(name, stored, kind);
      }
      const as = kind ?? stored;
      if (as === null) {
        // Nothing stored and no kind asked: no primitive to name (as `unlock` reports it).
        print({ name, kind: null, ttl: -2, holders: [] }, `"${name}" is free (nothing stored)`);
        return EXIT.ok;
      }
      const seen = await inspectAs(edgelock, redis, name, as, true);
      print(seen, stored === null ? `"${name}" is free (nothing stored)` : describe(seen));
    } else if (command === "unlock") {
      const name = checkedName(arg);
      const stored = await detectKind(redis, name);
      if (stored === null) {
        print({ name, kind: null, deleted: false }, `"${name}" was not locked: nothing to do`);
        return EXIT.ok;
      }
      if (kind !== undefined && !mayBe(stored, kind)) throw mismatch(name, stored, kind);
      if (kind === undefined && !LOCK_KINDS.includes(stored)) {
        throw new KindError(
          `"${name}" is a ${KIND_LABEL[stored]}, not a lock: pass --kind ${stored} to delete it`,
        );
      }
      const as = kind ?? stored;
      const deleted = await deleteAs(edgelock, redis, name, as);
      print(
        { name, kind: as, deleted },
        deleted
          ? `deleted ${KIND_LABEL[as]} "${name}"`
          : `${KIND_LABEL[as]} "${name}" was not locked: nothing to do`,
      );
    } else {
      const found = await listNames(redis, edgelock, arg ?? "*", limit, values.all === true);
      const lines = found.entries.map(
        (f) => `${f.name}  ${f.kind}  ${describeTtl(f.ttl)}  ${details(f)}`,
      );
      if (found.truncated) {
        lines.push(`(stopped after ${plural(found.entries.length, "name")}: more may match)`);
      } else if (found.entries.length === 0) {
        lines.push("nothing found");
      }
      print(found, lines.join("\n"));
    }
    return EXIT.ok;
  } catch (error) {
    const failure = classify(error);
    // Under --json (looked up in argv: parsing itself may be what failed) the error is a JSON
    // document on stdout too, so a script reads one document whatever happened.
    if (argv.includes("--json")) {
      io.stdout(`${JSON.stringify({ error: failure }, null, 2)}\n`);
    } else {
      const usage = failure.exit === EXIT.usage ? `\n${USAGE}` : "";
      io.stderr(`edgelock: ${failure.message}${usage}\n`);
    }
    return failure.exit;
  }
}

/** What `--json` prints for a failure: `{ "error": CliFailure }`. */
export interface CliFailure {
  /** The exit code, one of {@link EXIT}. */
  exit: number;
  /** `"usage"` (exit 2), `"refused"` (3), or `"redis"` (1). */
  reason: "usage" | "refused" | "redis";
  /** An `EdgeLockError`'s code (`TRANSPORT`, `CONFIGURATION`, …), when the failure is one. */
  code?: string;
  message: string;
}

function classify(error: unknown): CliFailure {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof UsageError || error instanceof TypeError || error instanceof RangeError) {
    return { exit: EXIT.usage, reason: "usage", message };
  }
  if (error instanceof KindError || error instanceof ForeignKeyError) {
    return { exit: EXIT.refused, reason: "refused", message };
  }
  if (error instanceof EdgeLockError) {
    return { exit: EXIT.redis, reason: "redis", code: error.code, message };
  }
  return { exit: EXIT.redis, reason: "redis", message };
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
        all: { type: "boolean" },
        kind: { type: "string" },
        limit: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

function kindOption(text: string | undefined): Kind | undefined {
  if (text === undefined) return undefined;
  if (!(KINDS as readonly string[]).includes(text)) {
    throw new UsageError(`--kind must be one of ${KINDS.join(", ")}`);
  }
  return text as Kind;
}

function mismatch(name: string, stored: Kind, asked: Kind): KindError {
  return new KindError(
    `"${name}" is a ${KIND_LABEL[stored]}, not a ${KIND_LABEL[asked]}: nothing was changed`,
  );
}

function listLimit(text: string | undefined): number {
  if (text === undefined) return LIST_DEFAULT_LIMIT;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > LIST_MAX_LIMIT) {
    throw new UsageError(`--limit must be an integer from 1 to ${LIST_MAX_LIMIT}`);
  }
  return n;
}

/** A name the primitives accept (1–512 characters, no braces), checked before any request. */
function checkedName(arg: string | undefined): string {
  if (arg === undefined) throw new UsageError("the name is required");
  if (arg.length === 0 || arg.length > 512 || /[{}]/.test(arg)) {
    throw new UsageError("the name must be 1 to 512 characters, without { or }");
  }
  return arg;
}

/** What `edgelock list` found. */
export interface ListResult {
  /** Names in use matching the pattern, in SCAN order, each inspected as its kind. */
  entries: Found[];
  /** True when `--limit` (or the SCAN call bound) stopped the scan before its end. */
  truncated: boolean;
}

/**
 * SCANs keys matching `pattern` and keeps the names in use: a valid name (no `{`/`}`, which also
 * leaves out Redisson's `redisson_*:{name}` and edgelock's `edgelock_*:{name}` helper keys)
 * whose kind is detected and whose state is held or set. With `all`, also the cron guard's marks
 * and the webhook marks (`edgelock_done:{<key>}` keys matching `edgelock_done:{<pattern>}`).
 * Bounded by `limit` names and {@link MAX_SCAN_CALLS} SCAN requests per pattern.
 */
async function listNames(
  redis: CliRedis,
  edgelock: EdgeLock,
  pattern: string,
  limit: number,
  all: boolean,
): Promise<ListResult> {
  const entries: Found[] = [];
  const add = async (names: string[], as?: Kind): Promise<boolean> => {
    for (let i = 0; i < names.length; i += INSPECT_CONCURRENCY) {
      const batch = names.slice(i, i + INSPECT_CONCURRENCY);
      const seen = await Promise.all(
        batch.map(async (name) => {
          // A name holding something that is not ours is left out, not an error.
          const kind =
            as ??
            (await detectKind(redis, name).catch((error: unknown) => {
              if (error instanceof ForeignKeyError) return null;
              throw error;
            }));
          if (kind === null || (!all && MARK_KINDS.includes(kind))) return null;
          return inspectAs(edgelock, redis, name, kind);
        }),
      );
      for (const found of seen) {
        if (!found || !inUse(found)) continue;
        if (entries.length === limit) return false;
        entries.push(found);
      }
    }
    return true;
  };
  const scans: [string, (key: string) => string | undefined, Kind | undefined][] = [
    [pattern, (key) => (isCandidate(key) ? key : undefined), undefined],
  ];
  if (all) {
    const prefix = doneKey("");
    scans.push([doneKey(pattern), (key) => unwrapDone(key, prefix), "webhook-mark"]);
  }
  for (const [match, toName, as] of scans) {
    let cursor = "0";
    let calls = 0;
    for (; calls < MAX_SCAN_CALLS; calls++) {
      const [next, keys] = await redis.scan(cursor, { match, count: SCAN_COUNT });
      cursor = String(next);
      const names = keys.map((k) => toName(String(k))).filter((n): n is string => n !== undefined);
      if (!(await add(names, as))) return { entries, truncated: true };
      if (cursor === "0") break;
    }
    if (calls === MAX_SCAN_CALLS) return { entries, truncated: true };
  }
  return { entries, truncated: false };
}

/** The key of an `edgelock_done:{<key>}` record, or `undefined` for anything else. */
function unwrapDone(key: string, prefix: string): string | undefined {
  // prefix is "edgelock_done:{}": the name sits between its braces.
  const open = prefix.slice(0, -1);
  if (!key.startsWith(open) || !key.endsWith("}")) return undefined;
  const name = key.slice(open.length, -1);
  return name.length > 0 && !/[{}]/.test(name) ? name : undefined;
}

/** The multi-line text of `inspect`. */
function describe(f: Found): string {
  const label = KIND_LABEL[f.kind];
  const head = `"${f.name}" (${label})`;
  const ttl = describeTtl(f.ttl);
  switch (f.kind) {
    case "semaphore":
    case "permit-expirable-semaphore":
    case "count-down-latch":
    case "webhook-mark":
      return `${head}: ${details(f)}, ${ttl}${holderLines(f)}`;
    default: {
      const mode = typeof f.mode === "string" ? ` for ${f.mode}` : "";
      const state = f.holders.length === 0 ? "is free" : `is locked${mode}, ${ttl}`;
      return `${head} ${state}${holderLines(f)}${waiterLines(f)}`;
    }
  }
}

/** Who waits, one line each in the order they are served, after a line with their count. */
function waiterLines(f: Found): string {
  const lines: string[] = [];
  if (f.queue && f.queue.count > 0) {
    lines.push(`queue: ${plural(f.queue.count, "owner")} waiting, served in this order`);
    for (const [i, q] of f.queue.entries.entries()) {
      const who = q.waiter === null ? "(a Redisson client)" : `waiter ${q.waiter}`;
      lines.push(`${i + 1}. owner ${q.owner}  ${who}  ${lapses("place", q.ttl)}`);
    }
    lines.push(...more(f.queue));
  }
  if (f.waiting && f.waiting.count > 0) {
    lines.push(`waiters: ${f.waiting.count} registered, woken in this order`);
    for (const [i, w] of f.waiting.entries.entries()) {
      const grant = w.owner === null ? "" : `  hand-off to owner ${w.owner} for ${w.leaseTime} ms`;
      const raw = w.entry === undefined ? "" : `  (entry ${JSON.stringify(w.entry)})`;
      lines.push(`${i + 1}. waiter ${w.waiter}${grant}  ${lapses("registration", w.ttl)}${raw}`);
    }
    lines.push(...more(f.waiting));
  }
  return lines.map((line) => `\n  ${line}`).join("");
}

function lapses(what: string, ttl: number | null): string {
  if (ttl === null) return `${what}: no time recorded`;
  if (ttl <= 0) return `${what} lapsed`;
  return `${what} lapses in ${ttl} ms`;
}

function more(w: { count: number; entries: unknown[] }): string[] {
  const rest = w.count - w.entries.length;
  return rest > 0 ? [`(and ${rest} more)`] : [];
}

function holderLines(f: Found): string {
  return f.holders
    .map((h) => {
      // A permit-expirable semaphore's permits have an id, not an owner.
      if (!("owner" in h)) return `\n  permit ${h.id}  ${describeTtl(h.ttl)}`;
      const holds = (h as { holdCount?: unknown }).holdCount;
      const lease = (h as { ttl?: unknown }).ttl;
      if (typeof holds === "number") return `\n  owner ${h.owner}  holds ${plural(holds, "time")}`;
      if (typeof lease === "number") return `\n  owner ${h.owner}  ${describeTtl(lease)}`;
      return `\n  owner ${h.owner}`;
    })
    .join("");
}

/** The one-line summary of `list` (and of `inspect` for the kinds without holds). */
function details(f: Found): string {
  const permits = typeof f.permits === "number" ? f.permits : "?";
  switch (f.kind) {
    case "semaphore":
      return `${f.available} of ${permits} permits available, ${plural(Number(f.waiters), "waiter")}`;
    case "permit-expirable-semaphore":
      return `${f.available} of ${permits} permits available, ${f.acquired} acquired, ${plural(Number(f.waiters), "waiter")}`;
    case "count-down-latch":
      return `count ${f.count}, ${plural(Number(f.waiters), "waiter")}`;
    case "webhook-mark":
      return "delivery completed";
    default:
      return plural(f.holders.length, "holder");
  }
}

function describeTtl(ttl: number): string {
  if (ttl === -1) return "no expiry";
  if (ttl < 0) return "gone";
  return `expires in ${ttl} ms`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}
