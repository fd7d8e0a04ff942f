/**
 * A webhook processed once per delivery: a concurrent duplicate gets 409 + Retry-After, a
 * redelivery after success 200 `{ duplicate: true }` without running the work again, a failed
 * run (non-2xx) is not recorded, so the sender's retry processes it again.
 */
import { lockWebhook } from "edgelock/vercel";
import { callDownstream } from "../../../lib/downstream";
import { edgelock } from "../../../lib/edgelock";

interface WebhookEvent {
  id: string;
  type: string;
}

export const POST = lockWebhook(
  {
    edgelock,
    // Reads a clone of the request; a body that is not JSON makes this throw: 400 invalid-key.
    key: async (request) => {
      const event = (await request.json()) as Partial<WebhookEvent>;
      // No id, or an empty one ({"id":""}), is no key: 400 missing-key, not one shared record.
      return typeof event.id === "string" && event.id !== "" ? `webhook:${event.id}` : null;
    },
  },
  async (request, { lease }) => {
    // Verify the sender's signature here and answer 400 when it is wrong.
    const event = (await request.json()) as WebhookEvent;
    const fulfilled = await callDownstream("/fulfil", event, lease.signal);
    // A 5xx records nothing: the sender retries and the delivery is processed again.
    if (!fulfilled.ok) return Response.json({ error: "fulfilment failed" }, { status: 502 });
    return Response.json({ received: true, processed: event.id });
  },
);
