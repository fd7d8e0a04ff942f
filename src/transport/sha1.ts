/**
 * The SHA1 that EVALSHA addresses a script by, computed from its source once per script and
 * isolate with Web Crypto (Workers, Vercel's Edge runtime, Node ≥ 20) rather than shipped in the
 * bundle: 40 characters per script that gzip cannot shorten.
 * @module
 */
import type { LuaScript } from "../lua/script.js";
import { sentSource } from "./billed.js";

// Keyed by the text sent: each script's own source, or its counted form (billed.ts). The digest
// replaces its promise once computed, so that a warm call awaits nothing for it.
const digests = new Map<string, string | Promise<string>>();

/**
 * Lowercase hex SHA1 of the text sent for `script` (billed.ts; `counted`: inside the counting
 * wrapper), as SCRIPT LOAD returns it: the string itself once computed in this isolate.
 */
export function sha1Of(script: LuaScript, counted = true): string | Promise<string> {
  const text = sentSource(script, counted);
  let digest = digests.get(text);
  if (digest === undefined) {
    const computed = sha1Hex(text);
    digest = computed;
    digests.set(text, computed);
    // A failed digest stays the rejected promise: every call then fails the same way.
    computed.then(
      (hex) => digests.set(text, hex),
      () => {},
    );
  }
  return digest;
}

/** Lowercase hex SHA1 of the UTF-8 bytes of `text`, as a script's `redis.sha1hex` gives it. */
export async function sha1Hex(text: string): Promise<string> {
  const bytes = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(text));
  return [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
}
