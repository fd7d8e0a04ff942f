/**
 * Inspection: what an administrator (or the `edgelock` CLI) reads to see who holds a primitive.
 * Every primitive that can report its holders implements {@link Inspectable} the same way: one
 * read-only request, a plain object with a `kind` to switch on.
 * @module
 */

/** One holder of a primitive. */
export interface Holder {
  /**
   * The owner id exactly as stored in Redis (`<clientId>:<taskId>` for edgelock, `<uuid>:<threadId>`
   * for Redisson). Owner ids appear here, in an explicit admin call, and never in events or
   * error messages: treat the result like any other credential-adjacent diagnostic.
   */
  owner: string;
}

/** A snapshot of one primitive, read in one request. Primitives extend it with their details. */
export interface Inspection {
  /** Which primitive reported it: `"lock"` for a reentrant lock; switch on it. */
  kind: string;
  /** The primitive's name (its Redis key). */
  name: string;
  /** Remaining TTL of the primitive's key in ms, PTTL semantics: -2 absent, -1 no TTL. */
  ttl: number;
  /** Current holders (empty when free). */
  holders: Holder[];
}

/** A primitive that can report its holders: `await primitive.inspect()`. */
export interface Inspectable<T extends Inspection = Inspection> {
  /**
   * Reads the primitive's state in one HTTP request, changing nothing.
   * @throws {TransportError} when Redis could not be reached (or the key holds another type).
   */
  inspect(): Promise<T>;
}
