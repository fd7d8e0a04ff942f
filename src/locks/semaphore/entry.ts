/**
 * `edgelock/semaphore`: the counting semaphore (Redisson RSemaphore) alone, over the core
 * client. `EdgeLock#getSemaphore` is {@link getSemaphore}.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { checkName } from "../../validate.js";
import { Semaphore } from "./index.js";

export * from "../shared-exports.js";
export * from "./exports.js";

/**
 * A counting semaphore (Redisson `RedissonClient#getSemaphore`) on `name`: permits taken with
 * `tryAcquire` and given back with `release`, replay-safe, releases bounded by the permits set.
 * @param client an {@link EdgeLockClient} (an `EdgeLock` is one too).
 * @param name semaphore name = Redis key, 1–512 characters, no `{` or `}`.
 * @throws TypeError / RangeError for a bad name, or when `client` is not an EdgeLockClient.
 */
export function getSemaphore(client: EdgeLockClient, name: string): Semaphore {
  return new Semaphore(contextOf(client), checkName(name));
}
