/**
 * `edgelock/count-down-latch`: the count-down latch (Redisson RCountDownLatch) alone, over the
 * core client. `EdgeLock#getCountDownLatch` is {@link getCountDownLatch}.
 * @module
 */
import { contextOf, type EdgeLockClient } from "../../core.js";
import { checkName } from "../../validate.js";
import { CountDownLatch } from "./index.js";

export * from "../shared-exports.js";
export * from "./exports.js";

/**
 * A count-down latch (Redisson `RedissonClient#getCountDownLatch`) on `name`: `trySetCount`,
 * `countDown`, `getCount` and `await`, replay-safe, waiters woken by the count-down that opens
 * it.
 * @param client an {@link EdgeLockClient} (an `EdgeLock` is one too).
 * @param name latch name = Redis key, 1–512 characters, no `{` or `}`.
 * @throws TypeError / RangeError for a bad name, or when `client` is not an EdgeLockClient.
 */
export function getCountDownLatch(client: EdgeLockClient, name: string): CountDownLatch {
  return new CountDownLatch(contextOf(client), checkName(name));
}
