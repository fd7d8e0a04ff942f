/**
 * The SHA1 that EVALSHA addresses a script by, computed from its source once per script and
 * isolate with Web Crypto (Workers, Vercel's Edge runtime, Node ≥ 20) rather than shipped in the
 * bundle: 40 characters per script that gzip cannot shorten.
 * @module
 */
import type { LuaScript } from "../lua/script.js";
import { sentSource } from "./billed.js";

const digests = new WeakMap<LuaScript, Promise<string>>();

/** Lowercase hex SHA1 of the text sent for `script` (billed.ts), as SCRIPT LOAD returns it. */
export function sha1Of(script: LuaScript): Promise<string> {
  let digest = digests.get(script);
  if (!digest) {
    digest = crypto.subtle
      .digest("SHA-1", new TextEncoder().encode(sentSource(script)))
      .then((bytes) =>
        [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join(""),
      );
    digests.set(script, digest);
  }
  return digest;
}
