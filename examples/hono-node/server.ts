/**
 * Hono on Node with `withLock`: requests for the same report exclude each other; a second
 * request while one runs gets 409 with Retry-After.
 *
 *   npm run build
 *   UPSTASH_REDIS_REST_URL=... UPSTASH_REDIS_REST_TOKEN=... \
 *     node --import tsx examples/hono-node/server.ts
 *   curl -i -X POST localhost:3000/reports/7/rebuild   # twice at once: one 200, one 409
 */
import { serve } from "@hono/node-server";
import { Redis } from "@upstash/redis";
import { EdgeLock } from "edgelock";
import { type LockVariables, withLock } from "edgelock/hono";
import { Hono } from "hono";

const edgelock = new EdgeLock({ redis: Redis.fromEnv() });
const app = new Hono<{ Variables: LockVariables }>();

app.post(
  "/reports/:id/rebuild",
  withLock({ edgelock, key: (c) => `report:${c.req.param("id")}`, leaseTime: 30_000 }),
  async (c) => {
    const { lease } = c.var;
    await rebuild(c.req.param("id"), lease.signal);
    return c.json({ rebuilt: c.req.param("id") });
  },
);

/** The work: must stop when `signal` aborts (the lock was lost). */
async function rebuild(id: string, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted();
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  console.log(`report ${id} rebuilt`);
}

const port = Number(process.env.PORT ?? 3000);
serve({ fetch: app.fetch, hostname: "127.0.0.1", port }, (info) => {
  console.log(`listening on http://127.0.0.1:${info.port}`);
});
