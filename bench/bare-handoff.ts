/**
 * The bare hand-off lock: the physical reference of the contended scenarios, not shipped. It is
 * the least a lock whose release hands it to the next waiter can do over the REST API: each
 * client (one isolate) subscribes once to a channel of its own, an acquire that finds the lock
 * taken queues the client in a LIST, and the release's script gives the lock to the first queued
 * client and publishes to that client's channel, whose message is the acquisition. No renewal,
 * no fencing, no re-entry, no replay safety, no clean-up of a waiter that gave up or died, no
 * bound on a wait but the caller's: what edgelock's reentrant and fair locks pay for those is
 * the gap between their rows and this one.
 * @module
 */
import type { Redis } from "@upstash/redis";
import type { BenchEnv } from "./env.js";
import { LEASE_MS, type LibClient, type Library, WAIT_BUDGET_MS } from "./libraries.js";

/** KEYS: lock, queue. ARGV: client, lease ms. Returns 1 taken, 0 queued. Billed: 2 or 3. */
const ACQUIRE = `if redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2]) then return 1 end
redis.call('rpush', KEYS[2], ARGV[1])
return 0`;

/**
 * KEYS: lock, queue. ARGV: client, lease ms, channel prefix. Returns 1 freed, 2 handed to the
 * next client, 0 not held. Billed: 4 freeing (EVALSHA, GET, LPOP, DEL), 5 handing off (EVALSHA,
 * GET, LPOP, SET, PUBLISH).
 */
const RELEASE = `if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
local head = redis.call('lpop', KEYS[2])
if head then
  redis.call('set', KEYS[1], head, 'px', ARGV[2])
  redis.call('publish', ARGV[3] .. head, head)
  return 2
end
redis.call('del', KEYS[1])
return 1`;

let clients = 0;

const keysOf = (key: string) => [`bare:${key}`, `bare:${key}:queue`];

/** One isolate of the bare hand-off lock: its own HTTP client and subscription. */
async function bareClient(redis: Redis, waitMs: number): Promise<LibClient> {
  const id = `c${++clients}`;
  const [acquireSha, releaseSha] = await Promise.all([
    redis.scriptLoad(ACQUIRE),
    redis.scriptLoad(RELEASE),
  ]);
  // One subscription per client and key, opened before the client first queues (else the
  // release's message could go to nobody) and kept for the client's life.
  const subs = new Map<string, { close(): Promise<void> }>();
  let wake: (() => void) | undefined;
  const subscribe = async (key: string) => {
    const sub = redis.subscribe<string>([`bare:${key}:${id}`]);
    await new Promise<void>((resolve, reject) => {
      sub.on("subscribe", () => resolve());
      sub.on("error", (e) => reject(e));
    });
    sub.on("message", () => {
      const w = wake;
      wake = undefined;
      if (w) w();
      // Handed the lock after its acquire gave up: hand it on at once.
      else void redis.evalsha(releaseSha, keysOf(key), [id, LEASE_MS, `bare:${key}:`]);
    });
    subs.set(key, { close: () => sub.unsubscribe() });
  };
  return {
    acquire: async (key) => {
      if (!subs.has(key)) await subscribe(key);
      const keys = keysOf(key);
      const given = new Promise<boolean>((resolve) => {
        wake = () => resolve(true);
        setTimeout(() => resolve(false), waitMs).unref();
      });
      const taken = (await redis.evalsha(acquireSha, keys, [id, LEASE_MS])) === 1;
      if (!taken && !(await given)) return null;
      wake = undefined;
      return {
        release: async () => {
          await redis.evalsha(releaseSha, keys, [id, LEASE_MS, `bare:${key}:`]);
        },
      };
    },
    close: async () => {
      await Promise.all([...subs.values()].map((s) => s.close()));
    },
  };
}

/** The bare hand-off lock as a bench library (HTTP, through the bridge like edgelock). */
export const bareHandOffLibrary: Library = {
  name: "bare-handoff",
  transport: "http",
  settings: {
    default:
      "reference, not shipped (bench/bare-handoff.ts): SET NX PX or RPUSH to a queue; the release's script hands the lock to the queue's head and publishes to that client's channel, subscribed once per client; no renewal, fencing, re-entry or replay safety",
    sameBudget: "same as default",
  },
  sameBudgetDiffers: false,
  client: (env: BenchEnv, _mode, waitMs = WAIT_BUDGET_MS) => bareClient(env.http(), waitMs),
};
