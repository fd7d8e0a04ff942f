/**
 * A Redisson client's fair lock seen from a test: its own scripts (with its default 5-minute
 * fairLockWaitTimeout) run on the raw Redis client, and the queue they share with edgelock.
 */
import { REDISSON_FAIR_ACQUIRE, REDISSON_FAIR_UNLOCK } from "../fixtures/redisson.js";
import type { RawRedis } from "./env.js";

/** The lease every Redisson client of these tests asks for, in ms. */
export const REDISSON_LEASE = 30_000;
/** Redisson's Config#fairLockWaitTimeout default. */
const FAIR_LOCK_WAIT_TIMEOUT = 300_000;

/** A Redisson client's fair lock on `name`, as `owner`, with the client's clock. */
export function redissonFairLock(raw: RawRedis, name: string, owner: string) {
  const queue = `redisson_lock_queue:{${name}}`;
  const zset = `redisson_lock_timeout:{${name}}`;
  return {
    /** One attempt of lock(): null = acquired, else the ms it would wait. */
    attempt: () =>
      raw.eval(REDISSON_FAIR_ACQUIRE, {
        keys: [name, queue, zset],
        arguments: [
          String(REDISSON_LEASE),
          owner,
          String(FAIR_LOCK_WAIT_TIMEOUT),
          String(Date.now()),
        ],
      }),
    unlock: () =>
      raw.eval(REDISSON_FAIR_UNLOCK, {
        keys: [name, queue, zset, `redisson_lock__channel:{${name}}`],
        arguments: [String(REDISSON_LEASE), owner, String(Date.now())],
      }),
  };
}

/** The fair lock's queue of `name` (Redisson's LIST, which edgelock's waiters join too). */
export const fairQueueOf = async (raw: RawRedis, name: string) =>
  (await raw.lRange(`redisson_lock_queue:{${name}}`, 0, -1)).map(String);
