/**
 * A Vercel Cron route (`app/api/cron/route.ts`, scheduled in vercel.json with
 * `{ "crons": [{ "path": "/api/cron", "schedule": "0 * * * *" }] }`): a run that starts while
 * the previous one is still going is skipped (200 `{ "skipped": true, ... }`), requests without
 * `Authorization: Bearer $CRON_SECRET` get 401, and the lease is renewed while the job runs.
 *
 * Environment: UPSTASH_REDIS_REST_URL, UPSTASH_REDIS_REST_TOKEN, CRON_SECRET.
 */
import { Redis } from "@upstash/redis";
import { EdgeLock } from "edgelock";
import { lockCron } from "edgelock/vercel";

const edgelock = new EdgeLock({ redis: Redis.fromEnv() });

export const GET = lockCron(
  // Throws at startup if CRON_SECRET is unset, instead of leaving the route open.
  { edgelock, cronSecret: process.env.CRON_SECRET },
  async (_request, { lease }) => {
    const rows = await rebuildReport(lease.signal);
    return Response.json({ rows });
  },
);

/** The job: must stop when `signal` aborts (the lock was lost). */
async function rebuildReport(signal: AbortSignal): Promise<number> {
  signal.throwIfAborted();
  return 42;
}
