/**
 * The part of an `@upstash/redis` client edgelock uses, typed structurally so that any 1.x
 * version (and any object with the same two methods) fits.
 */
export interface RedisLike {
  /** EVAL: run `script` with `keys` and `args`; resolves to the decoded reply. */
  eval(script: string, keys: string[], args: (string | number)[]): Promise<unknown>;
  /** EVALSHA: run the cached script `sha1`; rejects with a NOSCRIPT error when Redis lacks it. */
  evalsha(sha1: string, keys: string[], args: (string | number)[]): Promise<unknown>;
  /**
   * Any command (`@upstash/redis` ≥ 1.28): used for the blocking `BLPOP` of waiters. Without it,
   * waiters poll.
   */
  exec?(args: [string, ...(string | number)[]]): Promise<unknown>;
}
