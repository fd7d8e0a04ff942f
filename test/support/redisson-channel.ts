/**
 * Redisson's semaphore channel `redisson_sc:{<name>}` seen from a test, as a JVM client's
 * SemaphorePubSub sees it: who listens there, and what is published.
 */
import type { RawRedis } from "./env.js";

/** Redisson's channel of semaphore `name` (both semaphore kinds). */
export const semaphoreChannelOf = (name: string) => `redisson_sc:{${name}}`;

/** Subscribers of Redisson's semaphore channel of `name` (PUBSUB NUMSUB). */
export async function redissonSubscribers(raw: RawRedis, name: string): Promise<number> {
  const reply = (await raw.sendCommand([
    "PUBSUB",
    "NUMSUB",
    semaphoreChannelOf(name),
  ])) as unknown[];
  return Number(reply[1]);
}

/** Messages on Redisson's semaphore channel of `name`, from a SUBSCRIBE confirmed on return. */
export async function redissonMessages(raw: RawRedis, name: string) {
  const sub = raw.duplicate();
  await sub.connect();
  const messages: string[] = [];
  let notify = () => {};
  await sub.subscribe(semaphoreChannelOf(name), (m) => {
    messages.push(String(m));
    notify();
  });
  return {
    messages,
    /** Resolves once `n` messages arrived. */
    received: (n: number) =>
      new Promise<void>((resolve) => {
        notify = () => messages.length >= n && resolve();
        notify();
      }),
    close: () => sub.close(),
  };
}

/**
 * Listens on the edgelock wake channel of client "live0000" for `name`, as that client would
 * (a waiter id "live0000:<wait>" registered by a script hears its messages here).
 */
export async function wakeListener(raw: RawRedis, name: string) {
  const sub = raw.duplicate();
  await sub.connect();
  const heard: string[] = [];
  await sub.subscribe(`edgelock_wake:{${name}}:live0000`, (m) => heard.push(String(m)));
  return { heard, close: () => sub.destroy() };
}
