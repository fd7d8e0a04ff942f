/**
 * Pub/sub of the bridge, as the Upstash REST API serves it: `POST /subscribe/<channel>` and
 * `POST /psubscribe/<pattern>` answer a Server-Sent Events stream (`data: subscribe,<channel>,1`
 * once Redis confirmed, then `data: message,<channel>,<message>` per PUBLISH; for patterns
 * `data: pmessage,<pattern>,<channel>,<message>`). Each subscription has a Redis connection of
 * its own (`@redis/client`, RESP2), closed when its HTTP request ends; at most `max` are open.
 *
 * @module
 */

import { createClient } from "@redis/client";
import { RedisUnavailableError } from "./redis.js";

/** What a subscription listens to: one channel, or one glob pattern. */
export type SubscriptionKind = "subscribe" | "psubscribe";

/** Thrown when `max` subscriptions are open already (the bridge answers 503). */
export class SubscriptionLimitError extends Error {
  /** @param max the configured limit. */
  constructor(max: number) {
    super(`ERR bridge: all ${max} subscriptions are in use`);
    this.name = "SubscriptionLimitError";
  }
}

/** One open subscription. */
export interface OpenSubscription {
  /** Unsubscribes and closes its connection. Idempotent. */
  close(): void;
}

/** Default most subscriptions open at once. */
export const DEFAULT_MAX_SUBSCRIPTIONS = 256;

/** The open subscriptions of a bridge, each on a Redis connection of its own. */
export class Subscriptions {
  readonly #urlFor: (kind: SubscriptionKind, target: string) => Promise<string>;
  readonly max: number;
  readonly #open = new Set<{ lose(): void }>();
  #taken = 0;
  #closed = false;

  /**
   * @param urlFor the Redis a subscription connects to. On a cluster any node hears every
   * PUBLISH, but only the publishing node counts it: a channel's subscription goes to its slot's
   * owner.
   * @param max most subscriptions open at once.
   */
  constructor(urlFor: (kind: SubscriptionKind, target: string) => Promise<string>, max: number) {
    this.#urlFor = urlFor;
    this.max = max;
  }

  /** Subscriptions open now. */
  get open(): number {
    return this.#taken;
  }

  /**
   * Subscribes; resolves once Redis confirmed the subscription.
   * @param onMessage called with the channel and message of each delivery (and, for a pattern,
   * the pattern).
   * @param onLost called once when the connection drops (not after {@link OpenSubscription.close}).
   * @throws SubscriptionLimitError when `max` are open; RedisUnavailableError when Redis cannot
   * be reached.
   */
  async subscribe(
    kind: SubscriptionKind,
    target: string,
    onMessage: (channel: string, message: string) => void,
    onLost: () => void,
  ): Promise<OpenSubscription> {
    if (this.#closed) throw new RedisUnavailableError(new Error("bridge closing"));
    if (this.#taken >= this.max) throw new SubscriptionLimitError(this.max);
    this.#taken += 1;
    let url: string;
    try {
      url = await this.#urlFor(kind, target);
    } catch (error) {
      this.#taken -= 1;
      throw new RedisUnavailableError(error);
    }
    let done = false;
    const client = createClient({
      url,
      RESP: 2,
      disableOfflineQueue: true,
      disableClientInfo: true,
      socket: { connectTimeout: 2000, reconnectStrategy: false },
    });
    const close = () => {
      if (done) return;
      done = true;
      this.#taken -= 1;
      this.#open.delete(entry);
      client.destroy();
    };
    const entry = {
      lose: () => {
        if (done) return;
        close();
        onLost();
      },
    };
    client.on("error", entry.lose);
    client.on("end", entry.lose);
    try {
      await client.connect();
      this.#open.add(entry);
      const listener = (message: string, channel: string) => onMessage(channel, message);
      if (kind === "subscribe") await client.subscribe(target, listener);
      else await client.pSubscribe(target, listener);
    } catch (error) {
      close();
      throw new RedisUnavailableError(error);
    }
    if (this.#closed) close();
    return { close };
  }

  /** Drops every open subscription's connection, as a lost connection would (its stream ends). */
  dropAll(): void {
    for (const entry of [...this.#open]) entry.lose();
  }

  /** Closes everything; later subscriptions are refused. */
  close(): void {
    this.#closed = true;
    this.dropAll();
  }
}
