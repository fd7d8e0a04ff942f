/**
 * The reference Worker that `wrangler.toml` runs and `npm run demo` drives: a Hono app whose
 * routes are guarded by edgelock, a cron handler guarded by `guardScheduled`, and the
 * `LeaseKeeper` and `FencedStore` Durable Object exports. Its routes do deliberately unsafe things
 * (an unguarded read-modify-write) that only the lock makes correct, and record overlaps so the
 * demo can prove there were none; the `/fenced/` routes show what the lock cannot do alone (stop
 * a holder paused past its lease) and the fencing tokens that do it at the resource.
 * @module
 */
import { Redis } from "@upstash/redis/cloudflare";
import { Hono } from "hono";
import { EdgeLock } from "../src/client.js";
import { type LockVariables, withLock } from "../src/hono.js";
import { lockWebhook } from "../src/vercel.js";
import {
  checkFencedKey,
  checkFencedToken,
  checkFencedValue,
  FencedStore,
  type FencedWriteResult,
} from "./fenced-store.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { guardScheduled } from "./scheduled.js";

export { FencedStore, LeaseKeeper };

/** Bindings of the reference Worker (see wrangler.toml). */
export interface Env {
  UPSTASH_REDIS_REST_URL: string;
  /** A secret: `wrangler secret put UPSTASH_REDIS_REST_TOKEN`. */
  UPSTASH_REDIS_REST_TOKEN: string;
  /** Prefix of the keys the demo routes write. */
  DEMO_KEY_PREFIX?: string;
  LEASE_KEEPER: DurableObjectNamespace<LeaseKeeper>;
  /** The resource the `/fenced/` routes guard with fencing tokens. */
  FENCED_STORE: DurableObjectNamespace<FencedStore>;
}

/** A Redis client per invocation: credentials arrive with each invocation's env. */
function redisOf(env: Env): Redis {
  return new Redis({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN });
}

function edgelockOf(env: Env, watchdogTimeout?: number): EdgeLock {
  return new EdgeLock({ redis: redisOf(env), keeper: env.LEASE_KEEPER, watchdogTimeout });
}

const prefixOf = (env: Env) => env.DEMO_KEY_PREFIX ?? "demo:";

/**
 * Runs `work` while counting how many runs of `key` are inside at once, in Redis. A run that
 * finds another one inside adds one to `<key>:overlaps`: with a working lock it stays at 0.
 */
async function detectOverlap<T>(redis: Redis, key: string, work: () => Promise<T>): Promise<T> {
  const inside = await redis.incr(`${key}:inside`);
  if (inside > 1) await redis.incr(`${key}:overlaps`);
  try {
    return await work();
  } finally {
    await redis.decr(`${key}:inside`);
  }
}

/** Integer query parameter in [min, max], or `fallback` when absent. */
function intParam(value: string | undefined, fallback: number, min: number, max: number) {
  if (value === undefined) return fallback;
  const n = Number(value);
  return Number.isInteger(n) && n >= min && n <= max ? n : fallback;
}

const app = new Hono<{ Bindings: Env; Variables: LockVariables }>();

/**
 * An unguarded read-modify-write (GET, +1, SET) that only the lock makes safe: 50 concurrent
 * requests give exactly 50 increments and no overlap. Requests queue for the lock (up to 20 s).
 */
app.post(
  "/counter/:name",
  withLock<{ Bindings: Env }>({
    edgelock: (c) => edgelockOf(c.env),
    key: (c) => `lock:counter:${c.req.param("name")}`,
    waitTime: 20_000,
    leaseTime: 10_000,
  }),
  async (c) => {
    const redis = redisOf(c.env);
    const key = `${prefixOf(c.env)}counter:${c.req.param("name")}`;
    const value = await detectOverlap(redis, key, async () => {
      const current = Number((await redis.get<number>(key)) ?? 0);
      await scheduler.wait(2);
      await redis.set(key, current + 1);
      return current + 1;
    });
    return c.json({ value });
  },
);

/**
 * One build at a time per name, no queueing: while a build runs (`?ms=`, default 1000), another
 * request answers 409 with `Retry-After` (the holder's remaining lease, in seconds).
 */
app.post(
  "/report/:name",
  withLock<{ Bindings: Env }>({
    edgelock: (c) => edgelockOf(c.env),
    key: (c) => `lock:report:${c.req.param("name")}`,
    leaseTime: 30_000,
  }),
  async (c) => {
    await scheduler.wait(intParam(c.req.query("ms"), 1_000, 0, 20_000));
    return c.json({ built: c.req.param("name") });
  },
);

/**
 * A webhook processed once per event id (`{ "id": "evt_..." }` in the body): a concurrent
 * duplicate is answered 409 + Retry-After, a redelivery after success 200 without reprocessing.
 * The Vercel helper takes the Workers handler's extra arguments (`env`, `ctx`) as its own.
 */
const webhook = lockWebhook<[Env]>(
  {
    edgelock: (_request, env) => edgelockOf(env),
    key: async (request) => {
      const event = (await request.json().catch(() => null)) as { id?: unknown } | null;
      return typeof event?.id === "string" ? `webhook:${event.id}` : null;
    },
    leaseTime: 30_000,
    completionTtl: 3 * 24 * 3_600_000,
  },
  async (request, _context, env) => {
    const event = (await request.json()) as { id: string };
    const redis = redisOf(env);
    const key = `${prefixOf(env)}webhook:${event.id}`;
    await detectOverlap(redis, key, async () => {
      await redis.incr(`${key}:processed`);
      await scheduler.wait(200);
    });
    return Response.json({ received: true, processed: event.id });
  },
);
app.post("/webhook", (c) => webhook(c.req.raw, c.env));

/**
 * A job longer than its lease, kept alive only by the LeaseKeeper's alarm (no timer in this
 * invocation): `?ms=` job duration, `?lease=` lease time (both ms).
 */
app.post("/job/:name", async (c) => {
  const env = c.env;
  const name = c.req.param("name");
  const ms = intParam(c.req.query("ms"), 3_000, 0, 60_000);
  const leaseTime = intParam(c.req.query("lease"), 1_000, 100, 60_000);
  const edgelock = edgelockOf(env, leaseTime);
  const lock = edgelock.getLock(`lock:job:${name}`);
  const started = Date.now();
  const lease = await lock.tryLock({
    keepAlive: { keeper: env.LEASE_KEEPER, maxHoldTime: ms + 10 * leaseTime },
  });
  if (!lease) return c.json({ ran: false }, 409);
  const redis = redisOf(env);
  try {
    await detectOverlap(redis, `${prefixOf(env)}job:${name}`, () => scheduler.wait(ms));
  } finally {
    const lost = lease.signal.aborted;
    const released = await lease.release();
    c.header("x-lease-lost", String(lost));
    c.header("x-release", released);
  }
  return c.json({ ran: true, heldMs: Date.now() - started });
});

/** The FencedStore object of `key`: one per key, so writes to different keys never queue. */
const fencedStoreOf = (env: Env, key: string) => env.FENCED_STORE.getByName(key);

/** The fenced lock whose tokens guard FencedStore key `key`. */
const fencedLockName = (key: string) => `lock:fenced:${key}`;

/** Runs `parse`; bad input (a TypeError or RangeError) becomes a 400 answer naming it. */
async function parseOr400<T>(parse: () => Promise<T>): Promise<T | Response> {
  try {
    return await parse();
  } catch (error) {
    if (!(error instanceof TypeError || error instanceof RangeError)) throw error;
    return Response.json({ error: "bad-request", message: error.message }, { status: 400 });
  }
}

/**
 * The request body as a JSON object.
 * @throws TypeError when it is not JSON or not an object.
 */
async function jsonBody(request: Request): Promise<Record<string, unknown>> {
  const body: unknown = await request.json().catch(() => undefined);
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new TypeError("the body must be a JSON object");
  }
  return body as Record<string, unknown>;
}

/** A FencedStore write outcome as HTTP: 200 written, 409 stale token, 400 invalid. */
function fencedReply(result: FencedWriteResult): Response {
  if (result.ok) return Response.json({ written: true, key: result.key, token: result.token });
  if (result.reason === "stale") {
    const { key, token, highest } = result;
    return Response.json({ error: "stale-token", key, token, highest }, { status: 409 });
  }
  return Response.json({ error: "bad-request", message: result.error }, { status: 400 });
}

/**
 * Writes `{ "value": string }` to FencedStore key `:key` under the key's fenced lock: acquires
 * (waiting up to `?wait=` ms, default 10 000; lease 10 s), writes with `lease.fencingToken`,
 * releases. 200 `{ written: true, key, token }`; 409 `{ error: "locked" }` when the lock stayed
 * busy, or `{ error: "stale-token", highest }` when this lease ran out and a later holder wrote
 * first; 400 `{ error: "bad-request", message }` for a bad key or body (nothing acquired).
 */
app.post("/fenced/:key", async (c) => {
  const input = await parseOr400(async () => ({
    key: checkFencedKey(c.req.param("key")),
    value: checkFencedValue((await jsonBody(c.req.raw)).value),
  }));
  if (input instanceof Response) return input;
  const waitTime = intParam(c.req.query("wait"), 10_000, 0, 20_000);
  const lock = edgelockOf(c.env).getFencedLock(fencedLockName(input.key));
  const lease = await lock.tryLock({ waitTime, leaseTime: 10_000 });
  if (!lease) return c.json({ error: "locked", key: input.key }, 409);
  try {
    const store = fencedStoreOf(c.env, input.key);
    return fencedReply(await store.write(input.key, input.value, lease.fencingToken));
  } finally {
    await lease.release();
  }
});

/**
 * A holder that goes away while it holds the lock: acquires key `:key`'s fenced lock for
 * `?lease=` ms (default 1 000, no keep-alive, no wait) and answers without releasing it,
 * 200 `{ lease: lease.toJSON(), token }` or 409 `{ error: "locked" }`. Whoever has the answer
 * can come back later, however much later, and write with `PUT /fenced/:key` and that token.
 */
app.post("/fenced/:key/lease", async (c) => {
  const key = await parseOr400(async () => checkFencedKey(c.req.param("key")));
  if (key instanceof Response) return key;
  const leaseTime = intParam(c.req.query("lease"), 1_000, 50, 60_000);
  const lock = edgelockOf(c.env).getFencedLock(fencedLockName(key));
  const lease = await lock.tryLock({ leaseTime, keepAlive: "none" });
  if (!lease) return c.json({ error: "locked", key }, 409);
  return c.json({ lease: lease.toJSON(), token: lease.fencingToken });
});

/**
 * Writes `{ "value": string, "token": number }` to FencedStore key `:key` with the caller's
 * token and no lock: the write of a holder that took its token earlier. 200 written, 409
 * `{ error: "stale-token", key, token, highest }`, 400 bad key or body (nothing written).
 */
app.put("/fenced/:key", async (c) => {
  const input = await parseOr400(async () => {
    const key = checkFencedKey(c.req.param("key"));
    const body = await jsonBody(c.req.raw);
    return { key, value: checkFencedValue(body.value), token: checkFencedToken(body.token) };
  });
  if (input instanceof Response) return input;
  const store = fencedStoreOf(c.env, input.key);
  return fencedReply(await store.write(input.key, input.value, input.token));
});

/** FencedStore key `:key`: 200 `{ key, value, token }`, 404 `{ error: "not-found" }`. */
app.get("/fenced/:key", async (c) => {
  const key = await parseOr400(async () => checkFencedKey(c.req.param("key")));
  if (key instanceof Response) return key;
  const entry = await fencedStoreOf(c.env, key).read(key);
  return entry ? c.json(entry) : c.json({ error: "not-found", key }, 404);
});

/** The cron job (every expression in wrangler.toml `[triggers] crons`), one run at a time. */
const cron = guardScheduled<Env>(
  {
    edgelock: (env) => edgelockOf(env),
    keepAlive: (env) => ({ keeper: env.LEASE_KEEPER, maxHoldTime: 14 * 60_000 }),
  },
  async (controller, env) => {
    const redis = redisOf(env);
    const key = `${prefixOf(env)}cron:${controller.cron}`;
    await detectOverlap(redis, key, async () => {
      await redis.incr(`${key}:runs`);
      await scheduler.wait(300);
    });
  },
);

export default {
  fetch: app.fetch,
  async scheduled(controller, env, ctx) {
    const outcome = await cron.run(controller, env, ctx);
    if (!outcome.ran) await redisOf(env).incr(`${prefixOf(env)}cron:${controller.cron}:skips`);
  },
} satisfies ExportedHandler<Env>;
