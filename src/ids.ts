/** Random identifiers from Web Crypto (available in Workers, Vercel, Node ≥ 20 and browsers). */

/** Each byte's two hex digits: several ids are made per lock cycle. */
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));

/**
 * Random bytes are drawn 1 KiB at a time and handed out in order, each byte once: one
 * `getRandomValues` call serves about 30 ids instead of one (a call costs tens of µs in Node).
 * The whole draw is turned into hex at once, so that an id is one slice of it: one loop of 1,024
 * rounds, which the engine optimizes within the first draw, instead of a loop per id that a
 * short-lived isolate runs unoptimized. Filled at the first id, never at module load (Workers
 * refuse random values in global scope).
 */
const POOL = 1_024;
let pool: Uint8Array | undefined;
let poolHex = "";
let used = POOL;

/** `bytes` random bytes as lowercase hex (16 bytes = 128 bits = 32 characters). */
export function randomHex(bytes = 16): string {
  if (bytes > POOL) return toHex(crypto.getRandomValues(new Uint8Array(bytes)));
  if (used + bytes > POOL) {
    pool = crypto.getRandomValues(pool ?? new Uint8Array(POOL));
    poolHex = toHex(pool);
    used = 0;
  }
  const out = poolHex.slice(2 * used, 2 * (used + bytes));
  used += bytes;
  return out;
}

/**
 * Appended, not joined: a 1 KiB draw takes about 40 µs either way while the isolate is cold, and
 * once optimized 4 µs appended against 14 joined (Node 20).
 */
function toHex(buf: Uint8Array): string {
  let out = "";
  for (let i = 0; i < buf.length; i++) out += HEX[buf[i] as number] as string;
  return out;
}
