/**
 * A webhook route for Vercel's Edge runtime (`edge-runtime`, the sandbox `next dev` and
 * `vercel dev` run Edge functions in): `lockWebhook` of the built `edgelock/vercel` over
 * `@upstash/redis`. `test/runtimes/run.ts` bundles it into one script, evaluates it in an
 * `EdgeRuntime` with `SMOKE` defined, and sends the demo's delivery sequence.
 *
 * The handler holds the delivery's lock until 4 duplicates have been answered 409, so the
 * sequence is decided by the lock and not by timing.
 */

import { Redis } from "@upstash/redis";
import { EdgeLock } from "edgelock";
import { lockWebhook } from "edgelock/vercel";

declare const SMOKE: { url: string; token: string; prefix: string };
declare const EdgeRuntime: string | undefined;

const edgelock = new EdgeLock({ redis: new Redis({ url: SMOKE.url, token: SMOKE.token }) });

let processed = 0;
let locked = 0;
let open = () => {};
const duplicatesAnswered = new Promise<void>((resolve) => {
  open = resolve;
});

const POST = lockWebhook(
  {
    edgelock,
    key: async (request) => {
      const event = (await request.json()) as { id?: unknown };
      return typeof event.id === "string" ? `${SMOKE.prefix}webhook:${event.id}` : null;
    },
    leaseTime: 30_000,
    completionTtl: 60_000,
  },
  async (request) => {
    const event = (await request.json()) as { id: string };
    processed += 1;
    await duplicatesAnswered;
    return Response.json({ received: true, processed: event.id, times: processed });
  },
);

async function handle(request: Request): Promise<Response> {
  const response = await POST(request);
  if (response.status === 409 && ++locked === 4) open();
  const headers = new Headers(response.headers);
  headers.set("x-runtime", typeof EdgeRuntime === "string" ? EdgeRuntime : "unknown");
  headers.set("x-processed", String(processed));
  return new Response(response.body, { status: response.status, headers });
}

addEventListener("fetch", (event) => {
  const fetchEvent = event as Event & {
    request: Request;
    respondWith(response: Promise<Response>): void;
  };
  fetchEvent.respondWith(handle(fetchEvent.request));
});
