/**
 * A webhook route handler as a Next.js App Router file (`app/api/webhook/route.ts`) or any
 * Vercel Function: each delivery is processed once, keyed by the event id. Concurrent duplicates
 * get 409 + Retry-After (the sender retries), redeliveries after success get 200 without
 * running the work again, and a failed run is not recorded, so the sender's retry reprocesses.
 *
 * Environment: UPSTASH_REDIS_REST_URL, UPSTASH_REDIS_REST_TOKEN.
 */
import { Redis } from "@upstash/redis";
import { EdgeLock } from "edgelock";
import { lockWebhook } from "edgelock/vercel";

const edgelock = new EdgeLock({ redis: Redis.fromEnv() });

interface WebhookEvent {
  id: string;
  type: string;
}

export const POST = lockWebhook(
  {
    edgelock,
    // Receives a clone of the request: reading its body leaves the body for the handler.
    key: async (request) => {
      const event = (await request.json()) as Partial<WebhookEvent>;
      // No id, or an empty one: null -> 400 missing-key (never one record shared by all).
      return typeof event.id === "string" && event.id !== "" ? `webhook:${event.id}` : null;
    },
    // Stripe retries for up to 3 days; the record must outlive that (default: 7 days).
    completionTtl: 7 * 24 * 60 * 60 * 1000,
    // On Vercel, also pass `waitUntil` from "@vercel/functions" so the completion record is
    // written after the response is sent.
  },
  async (request, { lease }) => {
    // Verify the sender's signature here (e.g. stripe.webhooks.constructEvent) and answer 400
    // when it is wrong: a non-2xx answer records nothing.
    const event = (await request.json()) as WebhookEvent;
    await handleEvent(event, lease.signal);
    return Response.json({ received: true });
  },
);

/** The work: must stop when `signal` aborts (the lock was lost). */
async function handleEvent(event: WebhookEvent, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted();
  console.log(`processing ${event.type} ${event.id}`);
}
