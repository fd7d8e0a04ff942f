/**
 * Validation of REST request bodies into Redis command argument lists.
 *
 * @module
 */

import { createHash } from "node:crypto";

/** A command ready for Redis: the name first, then its arguments, all strings. */
export type Command = string[];

/** Outcome of parsing a request body: the commands, or a message for a 400 response. */
export type ParseResult = { ok: true; commands: Command[] } | { ok: false; error: string };

/**
 * Commands refused with 400 because they would wedge or alter a connection that later requests
 * reuse (the shared one, or a pooled one a blocking request borrows): pub/sub and MONITOR switch
 * the connection mode; transaction and connection-state commands would leak into other
 * requests; replication commands take the stream over.
 */
const REFUSED = new Set([
  "subscribe",
  "psubscribe",
  "ssubscribe",
  "unsubscribe",
  "punsubscribe",
  "sunsubscribe",
  "monitor",
  "sync",
  "psync",
  "replconf",
  "multi",
  "exec",
  "discard",
  "watch",
  "unwatch",
  "quit",
  "reset",
  "hello",
  "select",
  "auth",
]);

/**
 * Position of the timeout argument for each blocking command: a negative index counts from the
 * end of the argument list (after the name). A zero timeout blocks forever.
 */
const BLOCKING_TIMEOUT_INDEX = new Map<string, number>([
  ["blpop", -1],
  ["brpop", -1],
  ["brpoplpush", -1],
  ["blmove", -1],
  ["bzpopmin", -1],
  ["bzpopmax", -1],
  ["blmpop", 0],
  ["bzmpop", 0],
  ["wait", 1],
  ["waitaof", 2],
]);

/**
 * How the bridge answers blocking commands (see {@link isBlocking}): `"refuse"` with 400, as the
 * Upstash REST API lists them as not supported; `"instant"` at once, as their non-blocking forms
 * would (the element, or null); `"block"` held open until they return, on the blocking pool.
 */
export type BlockingMode = "refuse" | "instant" | "block";

/**
 * The command with its timeout cut to the shortest Redis accepts (1 ms), so that it answers at
 * once: what a server that does not hold blocking commands open would answer.
 */
export function instantForm(command: Command): Command {
  const name = commandName(command);
  const out = [...command];
  const at = BLOCKING_TIMEOUT_INDEX.get(name);
  if (at !== undefined) {
    const i = at < 0 ? out.length + at : at + 1;
    // Seconds for the pops, ms for WAIT/WAITAOF.
    out[i] = name === "wait" || name === "waitaof" ? "1" : "0.001";
    return out;
  }
  const blockAt = out.findIndex((arg, i) => i > 0 && arg.toLowerCase() === "block");
  if (blockAt > 0) out[blockAt + 1] = "1";
  return out;
}

/**
 * Whether a command can hold its connection (a blocking list/sorted-set pop, `WAIT`/`WAITAOF`,
 * or `XREAD`/`XREADGROUP` with `BLOCK`): such commands run on a connection of their own, taken
 * from the blocking pool, so that they never stall the shared connection.
 */
export function isBlocking(command: Command): boolean {
  const name = commandName(command);
  if (BLOCKING_TIMEOUT_INDEX.has(name)) return true;
  if (name === "xread" || name === "xreadgroup") {
    return command.slice(1).some((arg) => arg.toLowerCase() === "block");
  }
  return false;
}

/** Lower-cased name of a command (its first element). */
export function commandName(command: Command): string {
  return (command[0] ?? "").toLowerCase();
}

/**
 * The SHA1 (lower-case hex) of the script a command runs: EVALSHA's and EVALSHA_RO's first
 * argument, the digest of EVAL's and EVAL_RO's body; `undefined` for any other command.
 */
export function scriptSha(command: Command): string | undefined {
  const name = commandName(command);
  const script = command[1];
  if (script === undefined) return undefined;
  if (name === "evalsha" || name === "evalsha_ro") return script.toLowerCase();
  if (name === "eval" || name === "eval_ro") {
    return createHash("sha1").update(script, "utf8").digest("hex");
  }
  return undefined;
}

/**
 * Why a command may not run on the shared connection, or `undefined` when it may. Refused: the
 * commands in {@link REFUSED}, `CLIENT REPLY|TRACKING|PAUSE`, blocking commands with a zero
 * timeout, and `XREAD`/`XREADGROUP` with `BLOCK 0`.
 */
export function refusalReason(command: Command): string | undefined {
  const name = commandName(command);
  const args = command.slice(1);
  const refused = `ERR bridge: '${name}' is not supported (it would block or change the shared connection)`;
  if (REFUSED.has(name)) return refused;
  if (name === "client") {
    const sub = (args[0] ?? "").toLowerCase();
    if (sub === "reply" || sub === "tracking" || sub === "pause") return refused;
  }
  const timeoutIndex = BLOCKING_TIMEOUT_INDEX.get(name);
  if (timeoutIndex !== undefined) {
    const timeout = args.at(timeoutIndex);
    if (timeout !== undefined && Number(timeout) === 0) {
      return `ERR bridge: '${name}' with a zero timeout would block forever`;
    }
  }
  if (name === "xread" || name === "xreadgroup") {
    const blockAt = args.findIndex((arg) => arg.toLowerCase() === "block");
    if (blockAt >= 0 && Number(args[blockAt + 1]) === 0) {
      return `ERR bridge: '${name}' with BLOCK 0 would block forever`;
    }
  }
  return undefined;
}

/**
 * Validates one command array as sent by `@upstash/redis`: a non-empty array whose first element
 * is a non-empty string and whose other elements are strings, numbers or booleans (numbers and
 * booleans are stringified with `String()`, e.g. `30000` -> `"30000"`, `true` -> `"true"`).
 * Objects, arrays and `null` are rejected.
 */
export function parseCommand(value: unknown): { ok: true; command: Command } | ParseError {
  if (!Array.isArray(value) || value.length === 0) {
    return { ok: false, error: "ERR bridge: a command must be a non-empty JSON array" };
  }
  const command: Command = [];
  for (const [index, arg] of value.entries()) {
    if (typeof arg === "string") command.push(arg);
    else if (typeof arg === "number" || typeof arg === "boolean") command.push(String(arg));
    else {
      return {
        ok: false,
        error: `ERR bridge: argument ${index} must be a string, number or boolean`,
      };
    }
  }
  if (command[0] === "") return { ok: false, error: "ERR bridge: empty command name" };
  const reason = refusalReason(command);
  if (reason !== undefined) return { ok: false, error: reason };
  return { ok: true, command };
}

type ParseError = { ok: false; error: string };

/**
 * Parses the body of `POST /`: one command array, e.g. `["SET","k","v","PX",1000]`.
 */
export function parseSingleBody(body: unknown): ParseResult {
  const parsed = parseCommand(body);
  return parsed.ok ? { ok: true, commands: [parsed.command] } : parsed;
}

/**
 * Parses the body of `POST /pipeline` or `POST /multi-exec`: a non-empty array of command arrays.
 * One invalid or refused command rejects the whole request (nothing is sent to Redis).
 */
export function parseBatchBody(body: unknown): ParseResult {
  if (!Array.isArray(body) || body.length === 0) {
    return { ok: false, error: "ERR bridge: expected a non-empty JSON array of command arrays" };
  }
  const commands: Command[] = [];
  for (const [index, item] of body.entries()) {
    const parsed = parseCommand(item);
    if (!parsed.ok) return { ok: false, error: `${parsed.error} (command ${index + 1})` };
    commands.push(parsed.command);
  }
  return { ok: true, commands };
}
