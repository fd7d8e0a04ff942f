/** A Lua script with the SHA1 that EVALSHA addresses it by (src/lua/<kind>.gen.ts). */
export interface LuaScript {
  /** Path below lua/ without the extension, e.g. `lock/acquire`. */
  readonly name: string;
  /** Script source without comments (see lua/ for them), sent with EVAL on NOSCRIPT. */
  readonly source: string;
  /** Lowercase hex SHA1 of `source`, as SCRIPT LOAD returns it. */
  readonly sha1: string;
}
