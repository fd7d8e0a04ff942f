/**
 * Routes for Vercel's Edge runtime (`edge-runtime`, the sandbox `next dev` and `vercel dev` run
 * Edge functions in), over the built package and `@upstash/redis`. `test/runtimes/run.ts`
 * bundles this file into one script, evaluates it in an `EdgeRuntime` with `SMOKE` defined, and
 * sends requests:
 *
 * - `POST /api/webhook`: `lockWebhook` of `edgelock/vercel`. Its handler holds the delivery's
 *   lock until 4 duplicates have been answered 409, so the demo's delivery sequence is decided by
 *   the lock and not by timing.
 * - `POST /api/wake`: a waiter subscribed over Server-Sent Events (`redis.subscribe()` on the
 *   runtime's streaming fetch) woken by a release; answers what it measured.
 * - `POST /api/hold`: takes a lock for 30 s and answers its owner; `GET /api/locks`: the lock
 *   console (`edgelock/console`) showing that lock to a request with `x-ops: yes`.
 */

import { Redis } from "@upstash/redis";
import { EdgeLock, type LockEvent } from "edgelock";
import { lockConsole } from "edgelock/console";
import { lockWebhook } from "edgelock/vercel";
import { Hono } from "hono";

declare const SMOKE: { url: string; token: string; prefix: string };
declare const EdgeRuntime: string | undefined;

const client = (onEvent?: (event: LockEvent) => void) =>
  new EdgeLock({
    redis: new Redis({ url: SMOKE.url, token: SMOKE.token }),
    wait: "subscribe",
    // A wait that polled instead of being woken would sleep at least 5 s: past the check's bound.
    backoff: { initialDelay: 10_000, maxDelay: 10_000 },
    ...(onEvent ? { onEvent } : {}),
  });

let processed = 0;
let locked = 0;
let open = () => {};
const duplicatesAnswered = new Promise<void>((resolve) => {
  open = resolve;
});

const webhook = lockWebhook(
  {
    edgelock: client(),
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

async function postWebhook(request: Request): Promise<Response> {
  const response = await webhook(request);
  if (response.status === 409 && ++locked === 4) open();
  return response;
}

/** A holder and a subscribed waiter in this isolate; the holder releases once it listens. */
async function wake(): Promise<Response> {
  const name = `${SMOKE.prefix}edge-wake`;
  const events: LockEvent[] = [];
  let listening = () => {};
  const subscribed = new Promise<void>((resolve) => {
    listening = resolve;
  });
  const waiter = client((event) => {
    events.push(event);
    // The second `wait` comes after the confirmed subscription and its attempt.
    if (event.type === "waiting" && event.attempt >= 2) listening();
  });
  const held = await client().getLock(name).tryLock({ leaseTime: 30_000 });
  if (!held) return Response.json({ error: "holder did not acquire" }, { status: 500 });
  const pending = waiter.getLock(name).tryLock({ waitTime: 15_000, leaseTime: 10_000 });
  await subscribed;
  const released = Date.now();
  const release = await held.release();
  const lease = await pending;
  const wokenMs = Date.now() - released;
  const strategies = events.flatMap((e) => (e.type === "wait-strategy" ? [e.strategy] : []));
  const result = { release, acquired: lease !== null, wokenMs, strategies };
  await lease?.release();
  return Response.json(result);
}

const held = `${SMOKE.prefix}edge-console`;
const consoleApp = new Hono();
consoleApp.route(
  "/api/locks",
  lockConsole({
    redis: new Redis({ url: SMOKE.url, token: SMOKE.token }),
    authorize: (request) => request.headers.get("x-ops") === "yes",
    names: [held],
    scan: false,
  }),
);

async function hold(): Promise<Response> {
  const lease = await client().getLock(held).tryLock({ leaseTime: 30_000 });
  return Response.json({ owner: lease?.owner ?? null });
}

async function handle(request: Request): Promise<Response> {
  const path = new URL(request.url).pathname;
  const response =
    path === "/api/webhook"
      ? await postWebhook(request)
      : path === "/api/wake"
        ? await wake()
        : path === "/api/hold"
          ? await hold()
          : path === "/api/locks"
            ? await consoleApp.fetch(request)
            : new Response("not found", { status: 404 });
  const headers = new Headers(response.headers);
  headers.set("x-runtime", typeof EdgeRuntime === "string" ? EdgeRuntime : "unknown");
  return new Response(response.body, { status: response.status, headers });
}

addEventListener("fetch", (event) => {
  const fetchEvent = event as Event & {
    request: Request;
    respondWith(response: Promise<Response>): void;
  };
  fetchEvent.respondWith(handle(fetchEvent.request));
});
