/**
 * A Vercel Cron route (vercel.json): a run that starts while the previous one is still going is
 * skipped (200 `{ skipped: true }`), a request without `Authorization: Bearer $CRON_SECRET` gets
 * 401, and the lease is renewed while the job runs.
 */
import { lockCron } from "edgelock/vercel";
import { callDownstream } from "../../../lib/downstream";
import { edgelock } from "../../../lib/edgelock";

export const dynamic = "force-dynamic";

// Throws when the module loads if CRON_SECRET is unset, instead of leaving the route open.
export const GET = lockCron(
  { edgelock, cronSecret: process.env.CRON_SECRET },
  async (_request, { lease }) => {
    const report = await callDownstream("/report", { at: Date.now() }, lease.signal);
    if (!report.ok) return Response.json({ error: "report failed" }, { status: 502 });
    return Response.json((await report.json()) as unknown);
  },
);
