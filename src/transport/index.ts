/**
 * Script transport: the only module that talks to `@upstash/redis`. EVALSHA first, EVAL when
 * Redis answers NOSCRIPT (the Redisson `useScriptCache` behaviour), every HTTP request counted,
 * the caller's AbortSignal raced locally (never handed to the client: an aborted command there
 * resolves with a fake result), errors scrubbed, replies checked against the script's shape.
 * @module
 */

import { raceAbort } from "../abort.js";
import type { LuaScript } from "../lua.gen.js";
import type { RedisLike } from "./redis.js";
import { isNoScriptError, malformedReply, toTransportError } from "./scrub.js";

export type { RedisLike } from "./redis.js";
export { isNoScriptError } from "./scrub.js";

/** One script call: what to run and on behalf of which lock. */
export interface ScriptCall {
  script: LuaScript;
  /** Lock name, for error messages. */
  lockName: string;
  keys: string[];
  args: (string | number)[];
  /** Raced locally: on abort the call rejects with `signal.reason` while the request finishes. */
  signal?: AbortSignal | undefined;
}

/** Counts the HTTP requests of one operation; {@link ScriptRunner.run} adds to it. */
export interface RequestCounter {
  requests: number;
}

/** Runs the project's Lua scripts over one `@upstash/redis` client. */
export class ScriptRunner {
  readonly #redis: RedisLike;

  constructor(redis: RedisLike) {
    this.#redis = redis;
  }

  /**
   * Runs a script and decodes its reply with `decode` (which returns `undefined` for a reply of
   * the wrong shape). Makes one HTTP request when Redis has the script cached, two otherwise; each one is
   * added to `counter`.
   * @throws signal.reason when `signal` aborts first (the request may still apply).
   * @throws {TransportError} on HTTP/Redis failure or a reply of the wrong shape.
   */
  async run<T>(
    call: ScriptCall,
    decode: (reply: unknown) => T | undefined,
    counter: RequestCounter,
  ): Promise<T> {
    const { script, keys, args, signal, lockName } = call;
    signal?.throwIfAborted();
    let reply: unknown;
    counter.requests += 1;
    try {
      try {
        reply = await raceAbort(this.#redis.evalsha(script.sha1, keys, args), signal);
      } catch (error) {
        if (!isNoScriptError(error)) throw error;
        counter.requests += 1;
        reply = await raceAbort(this.#redis.eval(script.source, keys, args), signal);
      }
    } catch (error) {
      if (signal?.aborted && error === signal.reason) throw error;
      const secrets = [...keys, ...args.filter((a): a is string => typeof a === "string")];
      throw toTransportError(error, lockName, secrets);
    }
    const decoded = decode(reply);
    if (decoded === undefined) throw malformedReply(lockName, script.name);
    return decoded;
  }
}

/** Reads a reply that must be a safe integer. */
export function asInteger(reply: unknown): number | undefined {
  const n = typeof reply === "string" && /^-?\d+$/.test(reply) ? Number(reply) : reply;
  return typeof n === "number" && Number.isSafeInteger(n) ? n : undefined;
}

/** Reads a reply that must be an array of `length` safe integers (any length when omitted). */
export function asIntegers(reply: unknown, length?: number): number[] | undefined {
  if (!Array.isArray(reply) || (length !== undefined && reply.length !== length)) return undefined;
  const out: number[] = [];
  for (const item of reply) {
    const n = asInteger(item);
    if (n === undefined) return undefined;
    out.push(n);
  }
  return out;
}
