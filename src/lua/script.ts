/**
 * A Lua script (src/lua/<kind>.gen.ts). The SHA1 that EVALSHA addresses it by is computed at its
 * first run (src/transport/sha1.ts).
 */
export interface LuaScript {
  /** Path below lua/ without the extension, e.g. `lock/acquire`. */
  readonly name: string;
  /** Script source without comments (see lua/ for them), sent with EVAL on NOSCRIPT. */
  readonly source: string;
}
