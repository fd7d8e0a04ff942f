/**
 * What a script costs on the bill, reported by the script itself. Upstash bills a script as the
 * EVAL/EVALSHA plus every `redis.call` (and `redis.pcall`) made inside it (its own cost table for
 * `@upstash/ratelimit`: "EVAL, INCR, PEXPIRE" = 3). Each script is sent inside a wrapper that
 * counts those calls in Lua, where they happen, and answers `{billed, reply}`: the count costs no
 * command of its own, and the client learns the exact figure of every path a script took.
 *
 * The wrapper shadows `redis` with a table whose `call`/`pcall` count and forward (every other
 * field reads through to the real `redis`), and runs the script's body as a function so that its
 * `return` becomes the reply's second element. A `redis.error_reply(...)` answer passes through
 * unwrapped (Redis answers it as an error, which carries no count).
 *
 * Scripts are counted only where the count is read: a client with an `onEvent` listener (the
 * only place it surfaces) sends the wrapped text; any other sends each script's own source,
 * whose reply is the script's reply. The bill is the same either way; the wrapper costs Redis a table,
 * two closures and a nested reply per call (about 30 µs of a loopback lock cycle).
 * @module
 */
import type { LuaScript } from "../lua/script.js";

// `_R`, `_N` and `_V` cannot clash with a script's locals: lua/gen.mjs shortens those to names
// that start with a letter. No space Lua does not need: the text ships in every bundle.
const PRELUDE =
  "local _R,_N=redis,1 local redis=setmetatable({" +
  "call=function(...)_N=_N+1 return _R.call(...)end," +
  "pcall=function(...)_N=_N+1 return _R.pcall(...)end},{__index=_R})" +
  "local _V=(function()\n";
const EPILOGUE = "\nend)()if type(_V)=='table'and _V.err then return _V end return{_N,_V}\n";

const wrapped = new WeakMap<LuaScript, string>();

/**
 * The text sent to Redis for `script`: its source inside the counting wrapper when `counted`,
 * else the source itself.
 */
export function sentSource(script: LuaScript, counted = true): string {
  if (!counted) return script.source;
  let text = wrapped.get(script);
  if (text === undefined) {
    text = PRELUDE + script.source + EPILOGUE;
    wrapped.set(script, text);
  }
  return text;
}

/**
 * Splits a wrapped script's reply into the commands it was billed for and the script's own
 * reply (`null` for Lua's nil or false: Redis drops a trailing nil from an array and answers
 * false as nil). `undefined` when the reply is not a wrapped script's.
 */
export function splitBilled(reply: unknown): { billed: number; reply: unknown } | undefined {
  if (!Array.isArray(reply) || reply.length < 1 || reply.length > 2) return undefined;
  const billed = typeof reply[0] === "string" ? Number(reply[0]) : reply[0];
  if (typeof billed !== "number" || !Number.isSafeInteger(billed) || billed < 1) return undefined;
  return { billed, reply: reply.length === 2 ? (reply[1] ?? null) : null };
}
