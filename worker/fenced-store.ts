/**
 * `FencedStore`: a Durable Object that guards a small key-value resource with fencing tokens,
 * the resource side of `edgelock.getFencedLock(name)`.
 *
 * A lock alone cannot stop a holder that was paused (a GC pause, a frozen isolate, a slow
 * network) past its lease: it wakes up believing it still holds the lock and writes after the
 * next holder did. The fix is at the resource: every write carries the writer's fencing token
 * (`lease.fencingToken`, which grows with every grant), and the resource remembers the highest
 * token it has accepted per key and refuses anything not above it. Source: Martin Kleppmann,
 * "How to do distributed locking" (2016), section "Making the lock safe with fencing".
 *
 * **Token rule: strictly greater.** A write to `key` is accepted only if its token is greater
 * than the highest token accepted for `key` before; an equal token is rejected too. Every grant
 * of a fenced lock has its own token (re-entries included), so one token authorises one write
 * per key: a holder that writes again re-enters (`tryLock({ owner: lease.owner })`) for a new
 * token, which also proves it still holds the lock. A re-sent write (an HTTP retry after a lost
 * answer) is therefore rejected, and the rejection says whether the first copy landed:
 * `highest === token` means a write with this very token was accepted, and no other grant can
 * have used it.
 *
 * Atomicity: the comparison and the write are one SQL statement (an upsert whose update only
 * applies `WHERE excluded.token > fenced_entries.token`), run synchronously inside
 * `transactionSync` in a single-threaded Durable Object, so no other write can come between
 * them. Data lives in the object's SQLite storage and survives eviction and restarts.
 * @module
 */

import { DurableObject } from "cloudflare:workers";

/** Longest key, in characters. */
export const FENCED_KEY_MAX_LENGTH = 256;
/** Largest value, in bytes of UTF-8. */
export const FENCED_VALUE_MAX_BYTES = 64 * 1024;

/** Keys: 1 to 256 of `A-Z a-z 0-9 . _ : -` (safe in a URL path and in a lock name). */
const KEY_PATTERN = /^[A-Za-z0-9._:-]+$/;

/** What a key holds: the value of the accepted write with the highest token. */
export interface FencedEntry {
  key: string;
  value: string;
  /** Highest token accepted for this key (the token of the write that set `value`). */
  token: number;
}

/**
 * Outcome of {@link FencedStore.write}. Never thrown: Durable Object RPC drops the fields of
 * custom errors, so the outcome travels as data.
 * - `ok: true`: written; `token` is now the key's highest.
 * - `reason: "stale"`: rejected, nothing changed; `highest` is the key's highest token
 *   (`highest >= token`; equal means a write with this token was already accepted).
 * - `reason: "invalid"`: rejected before any storage access; `error` says which argument.
 */
export type FencedWriteResult =
  | { ok: true; key: string; token: number }
  | { ok: false; reason: "stale"; key: string; token: number; highest: number }
  | { ok: false; reason: "invalid"; error: string };

/**
 * `key` as a FencedStore key.
 * @throws TypeError unless it is 1 to 256 characters of `A-Z a-z 0-9 . _ : -`.
 */
export function checkFencedKey(key: unknown): string {
  if (
    typeof key !== "string" ||
    key.length === 0 ||
    key.length > FENCED_KEY_MAX_LENGTH ||
    !KEY_PATTERN.test(key)
  ) {
    throw new TypeError(
      `\`key\` must be 1 to ${FENCED_KEY_MAX_LENGTH} characters of A-Z a-z 0-9 . _ : -`,
    );
  }
  return key;
}

/**
 * `value` as a FencedStore value.
 * @throws TypeError unless it is a string; RangeError when it is over 64 KiB of UTF-8.
 */
export function checkFencedValue(value: unknown): string {
  if (typeof value !== "string") throw new TypeError("`value` must be a string");
  if (new TextEncoder().encode(value).byteLength > FENCED_VALUE_MAX_BYTES) {
    throw new RangeError(`\`value\` must be at most ${FENCED_VALUE_MAX_BYTES} bytes of UTF-8`);
  }
  return value;
}

/**
 * `token` as a fencing token.
 * @throws TypeError unless it is a positive safe integer (a number: `"5"` is not a token).
 */
export function checkFencedToken(token: unknown): number {
  if (typeof token !== "number" || !Number.isSafeInteger(token) || token < 1) {
    throw new TypeError("`token` must be a positive safe integer (a fencing token)");
  }
  return token;
}

const SCHEMA = `CREATE TABLE IF NOT EXISTS fenced_entries (
  key TEXT PRIMARY KEY,
  token INTEGER NOT NULL,
  value TEXT NOT NULL
)`;

// The guard. RETURNING yields a row only when the row was inserted or updated.
const WRITE = `INSERT INTO fenced_entries (key, token, value) VALUES (?, ?, ?)
  ON CONFLICT (key) DO UPDATE SET token = excluded.token, value = excluded.value
  WHERE excluded.token > fenced_entries.token
  RETURNING token`;

type Row = { key: string; token: number; value: string };

/**
 * The FencedStore Durable Object: per key, the highest fencing token accepted and the value
 * written with it. Methods take the key, so one object can hold many keys; the reference Worker
 * uses one object per key (`env.FENCED_STORE.getByName(key)`), so keys never queue behind each
 * other. RPC methods validate their arguments (they crossed an RPC boundary) and never throw
 * for bad input.
 */
export class FencedStore extends DurableObject<unknown> {
  // It reads no bindings: `env` is passed on untyped.
  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env);
    ctx.storage.sql.exec(SCHEMA);
  }

  /**
   * Writes `value` to `key` if `token` is greater than every token accepted for `key` before
   * (strictly: an equal token is rejected).
   * @param key 1 to 256 characters of `A-Z a-z 0-9 . _ : -`.
   * @param value a string of at most 64 KiB of UTF-8.
   * @param token the writer's fencing token (`lease.fencingToken`), a positive safe integer.
   */
  write(key: string, value: string, token: number): FencedWriteResult {
    try {
      checkFencedKey(key);
      checkFencedValue(value);
      checkFencedToken(token);
    } catch (error) {
      return {
        ok: false,
        reason: "invalid",
        error: error instanceof Error ? error.message : "bad write",
      };
    }
    const sql = this.ctx.storage.sql;
    return this.ctx.storage.transactionSync((): FencedWriteResult => {
      if (sql.exec(WRITE, key, token, value).toArray().length === 1) {
        return { ok: true, key, token };
      }
      const highest = sql
        .exec<Pick<Row, "token">>("SELECT token FROM fenced_entries WHERE key = ?", key)
        .one().token;
      return { ok: false, reason: "stale", key, token, highest };
    });
  }

  /** The entry of `key`, or null when nothing was ever accepted for it (or `key` is invalid). */
  read(key: string): FencedEntry | null {
    if (typeof key !== "string" || !KEY_PATTERN.test(key)) return null;
    const [row] = this.ctx.storage.sql
      .exec<Row>("SELECT key, token, value FROM fenced_entries WHERE key = ?", key)
      .toArray();
    return row ? { key: row.key, value: row.value, token: row.token } : null;
  }
}
