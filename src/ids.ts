/** Random identifiers from Web Crypto (available in Workers, Vercel, Node ≥ 20 and browsers). */

/** `bytes` random bytes as lowercase hex (16 bytes = 128 bits = 32 characters). */
export function randomHex(bytes = 16): string {
  const buf = crypto.getRandomValues(new Uint8Array(bytes));
  let out = "";
  for (const b of buf) out += b.toString(16).padStart(2, "0");
  return out;
}
