/**
 * Redis Cluster hash slots: which of the 16 384 slots a key lives in, as Redis computes it
 * (`CLUSTER KEYSLOT`), so that requests touching several names can be split per slot. The
 * bridge's cluster routing checks use it too (src/bridge/keys.ts). Written here rather than
 * taken from `cluster-key-slot`: the library has no runtime dependencies, and that package
 * (1.1.2) disagrees with Redis on keys such as `foo{}{bar}`, where an empty first tag means the
 * whole key is hashed.
 * @module
 */

/** Number of hash slots of a Redis Cluster. */
export const CLUSTER_SLOTS = 16_384;

/** CRC16-XMODEM (polynomial 0x1021, initial value 0), one table entry per byte value. */
const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte << 8;
    for (let bit = 0; bit < 8; bit++) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    table[byte] = crc;
  }
  return table;
})();

const encoder = new TextEncoder();

/** CRC16-XMODEM of `bytes` (the checksum Redis Cluster hashes keys with). */
export function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ byte) & 0xff] ?? 0);
  }
  return crc;
}

/**
 * The hash slot of `key` (its UTF-8 bytes), as Redis Cluster computes it: CRC16 of the key mod
 * 16 384, or of its hash tag, the part between the first `{` and the first `}` after it when
 * that part is not empty. So `edgelock_replay:{orders}` and the lock `orders` share a slot.
 */
export function keySlot(key: string): number {
  const bytes = encoder.encode(key);
  const open = bytes.indexOf(0x7b); // {
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // }
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % CLUSTER_SLOTS;
  }
  return crc16(bytes) % CLUSTER_SLOTS;
}
