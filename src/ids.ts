/** Random identifiers from Web Crypto (available in Workers, Vercel, Node ≥ 20 and browsers). */

/** Each byte's two hex digits: several ids are made per lock cycle. */
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));

/**
 * Random bytes are drawn 1 KiB at a time and handed out in order, each byte once: one
 * `getRandomValues` call serves about 30 ids instead of one (a call costs tens of µs in Node).
 * Filled at the first id, never at module load (Workers refuse random values in global scope).
 */
const POOL = 1_024;
let pool: Uint8Array | undefined;
let used = POOL;

/** `bytes` random bytes as lowercase hex (16 bytes = 128 bits = 32 characters). */
export function randomHex(bytes = 16): string {
  if (bytes > POOL) {
    const buf = crypto.getRandomValues(new Uint8Array(bytes));
    let out = "";
    for (let i = 0; i < buf.length; i++) out += HEX[buf[i] as number];
    return out;
  }
  if (pool === undefined || used + bytes > POOL) {
    pool = crypto.getRandomValues(pool ?? new Uint8Array(POOL));
    used = 0;
  }
  let out = "";
  for (let i = used; i < used + bytes; i++) out += HEX[pool[i] as number];
  used += bytes;
  return out;
}
