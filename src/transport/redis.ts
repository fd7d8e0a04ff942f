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
   * Any command (`@upstash/redis` ≥ 1.28). Not used by the library (waiters never send blocking
   * commands, which the Upstash REST API lists as not supported); kept for compatible clients.
   */
  exec?(args: [string, ...(string | number)[]]): Promise<unknown>;
  /**
   * SUBSCRIBE over Server-Sent Events (`@upstash/redis` ≥ 1.35): one long-lived HTTP request per
   * channel, on which releases wake waiters. Without it, waiters poll. When it is the client's
   * own, edgelock makes the same request itself (with the client's URL, token and headers), so
   * that it knows at once when the stream ends (./sse.ts).
   */
  subscribe?(channels: string[]): SubscriberLike;
}

/** The part of `@upstash/redis`'s `Subscriber` edgelock uses. */
export interface SubscriberLike {
  /**
   * `"subscribe"`: the subscription is confirmed (data: the count); `"message"`: a delivery
   * (data: `{ channel, message }`); `"error"`: the request failed (data: the error).
   */
  on(type: "subscribe" | "message" | "error", listener: (data: unknown) => void): void;
  /** Ends the subscription's request. */
  unsubscribe(channels?: string[]): Promise<void>;
}
