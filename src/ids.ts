/** Random identifiers from Web Crypto (available in Workers, Vercel, Node ≥ 20 and browsers). */

/** Each byte's two hex digits: several ids are made per lock cycle. */
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));

/** `bytes` random bytes as lowercase hex (16 bytes = 128 bits = 32 characters). */
export function randomHex(bytes = 16): string {
  const buf = crypto.getRandomValues(new Uint8Array(bytes));
  let out = "";
  for (let i = 0; i < buf.length; i++) out += HEX[buf[i] as number];
  return out;
}
