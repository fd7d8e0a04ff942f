/**
 * Conversion of raw RESP2 replies (as decoded by `@redis/client` with bulk strings mapped to
 * `Buffer`) into the JSON values of the Upstash REST protocol.
 *
 * @module
 */

import { ErrorReply } from "@redis/client";

/** A JSON value as it appears in a REST `result`: integer, string, null or nested arrays. */
export type JsonReply = number | string | null | JsonReply[];

/** One entry of a `/pipeline` or `/multi-exec` response. */
export type ReplyEntry = { result: JsonReply } | { error: string };

/** Options for {@link toJsonReply}. */
export interface EncodeOptions {
  /**
   * `true` when the request carried `Upstash-Encoding: base64`: every string at any depth becomes
   * the base64 of its raw bytes, except a top-level simple-string `OK`.
   */
  base64: boolean;
}

/** `true` for the error replies (`-ERR ...`) that `@redis/client` hands back as values. */
export function isErrorReply(value: unknown): value is ErrorReply {
  return value instanceof ErrorReply;
}

/**
 * Converts a successful reply into its REST JSON form.
 *
 * - bulk strings (`Buffer`): base64 of the raw bytes, or UTF-8 text (invalid sequences become
 *   U+FFFD) without base64;
 * - simple strings (JS `string`, e.g. `OK`, `PONG`, `QUEUED`): like bulk strings, except that a
 *   top-level `OK` always stays plain (the client keeps a plain top-level `OK` but would
 *   base64-decode a nested one);
 * - integers: JSON numbers (values beyond 2^53 lose precision, as they would in the client);
 * - nil: `null`; arrays: recursively converted;
 * - an error reply nested inside an array (a Lua table holding `redis.error_reply(...)`): its
 *   message, converted like a string. Only a reply that is itself an error becomes an `error`
 *   field, see {@link toReplyEntry}.
 */
export function toJsonReply(reply: unknown, options: EncodeOptions): JsonReply {
  return convert(reply, options, true);
}

/**
 * Converts one reply into a pipeline/multi-exec entry: an error reply becomes `{ error }`
 * (never encoded), anything else `{ result }` via {@link toJsonReply}.
 */
export function toReplyEntry(reply: unknown, options: EncodeOptions): ReplyEntry {
  if (isErrorReply(reply)) return { error: reply.message };
  return { result: toJsonReply(reply, options) };
}

function convert(value: unknown, options: EncodeOptions, topLevel: boolean): JsonReply {
  if (value === null || value === undefined) return null;
  if (Buffer.isBuffer(value)) {
    return options.base64 ? value.toString("base64") : value.toString("utf8");
  }
  if (typeof value === "string") {
    if (!options.base64 || (topLevel && value === "OK")) return value;
    return Buffer.from(value, "utf8").toString("base64");
  }
  if (typeof value === "number") return value;
  if (Array.isArray(value)) return value.map((item) => convert(item, options, false));
  if (isErrorReply(value)) return convert(value.message, options, false);
  // Not produced by RESP2; kept total so an unexpected reply shape cannot crash the bridge.
  if (typeof value === "boolean") return value ? 1 : 0;
  if (typeof value === "bigint") return Number(value);
  return convert(String(value), options, false);
}
