/**
 * Helpers for Web `Request → Response` route handlers, as Vercel Functions (Next.js App Router
 * `route.ts`, plain Node or Edge functions) use them:
 * - {@link lockWebhook}: process each webhook delivery once, keyed by its idempotency key;
 * - {@link lockCron}: skip a Vercel Cron run while the previous run of the same route is still
 *   going, after checking `Authorization: Bearer <CRON_SECRET>`.
 *
 * Both work anywhere a `Request` is handled (Workers through extra arguments, Node servers).
 * @see https://vercel.com/docs/cron-jobs/manage-cron-jobs
 * @module
 */
import { EdgeLockClient, reportEvent } from "./core.js";
import { noCost } from "./events.js";
import { checkOnLeaseLost, type OnLeaseLost, runGuarded } from "./lease/guarded.js";
import { checkKeepAlive, type KeepAlive, type Lease } from "./lease/lease.js";
import { getIdempotencyKey, MAX_COMPLETION_TTL_MS } from "./locks/idempotency/entry.js";
import { getLock } from "./locks/lock/entry.js";
import { type LockedInfo, lockedResponse, retryAfterSeconds } from "./settle.js";
import { checkFunction, checkLeaseTime, checkMs, checkName, checkOptions } from "./validate.js";

export type { LockedInfo };

/**
 * Default {@link LockWebhookOptions.completionTtl}: 7 days. Stripe retries an undelivered
 * live-mode event for up to 3 days; the record outlives that with room for slow retry
 * schedules and manual resends, for one small key per event.
 */
export const DEFAULT_COMPLETION_TTL_MS = 604_800_000;

/**
 * Keeps background work alive after the response: `waitUntil` from `@vercel/functions`
 * (a silent no-op outside Vercel), or on Workers `(promise, request, env, ctx) =>
 * ctx.waitUntil(promise)`. It gets the same extra arguments as the wrapped handler.
 */
export type WaitUntil<A extends unknown[]> = (
  promise: Promise<unknown>,
  request: Request,
  ...args: A
) => void;

/** What a webhook handler gets besides the request. */
export interface WebhookContext {
  /** The idempotency key (lock name) of this delivery. */
  key: string;
  /** The held lease; its `signal` aborts if the lease is lost. */
  lease: Lease;
}

/** What `onCompleted` learns about an already processed delivery. */
export interface CompletedInfo {
  /** The idempotency key of the delivery. */
  key: string;
  /** How long the completion record still lasts, in ms (PTTL). */
  completedTtl: number;
}

/**
 * Options of {@link lockWebhook}. Times in integer ms. `A` are extra arguments the wrapped
 * handler receives after the request (e.g. `[env, ctx]` on Workers); none on Vercel.
 */
export interface LockWebhookOptions<A extends unknown[] = []> {
  /**
   * The EdgeLock (or the core `EdgeLockClient` of `edgelock/lock`, which keeps the bundle to the
   * lock and the idempotency key alone), or a function of the request (and extra arguments)
   * returning it. Required.
   */
  edgelock: EdgeLockClient | ((request: Request, ...args: A) => EdgeLockClient);
  /**
   * The delivery's idempotency key, e.g. `` `stripe:${event.id}` `` or the `webhook-id` header
   * (1–512 characters, no `{` or `}`). It receives a **clone** of the request, so it may read
   * the body and the handler still can. Return `null`/`undefined` when the delivery has none.
   * A key the delivery does not yield (`null`/`undefined` returned, the function throws, e.g.
   * on a malformed JSON body, or it returns an unusable name) is answered by `onKeyError`,
   * `400` by default, never a 500; the handler does not run and Redis is not called. Required.
   */
  key: (
    request: Request,
    ...args: A
  ) => string | null | undefined | Promise<string | null | undefined>;
  /**
   * How long a successful delivery stays recorded, in ms, integer in [1, 31 536 000 000]; must
   * exceed the sender's retry window. @default 604800000 (7 days; see DEFAULT_COMPLETION_TTL_MS)
   */
  completionTtl?: number;
  /**
   * Fixed lease in ms, integer in [1, 86 400 000], not renewed. Omitted: watchdog mode (TTL =
   * the EdgeLock's `watchdogTimeout`, renewed by `keepAlive` while the handler runs).
   */
  leaseTime?: number;
  /** Keep-alive of the lease. @default "timer" in watchdog mode, "none" with a fixed lease */
  keepAlive?: KeepAlive;
  /**
   * Receives the completion/release so the response is not delayed by it. @default none: it is
   * awaited before the response is returned
   */
  waitUntil?: WaitUntil<A>;
  /**
   * Answer to a duplicate arriving while the first delivery is being processed. @default `409`
   * with `Retry-After` and `{ "error": "locked", "key", "retryAfter" }` (senders retry non-2xx)
   */
  onLocked?: (request: Request, info: LockedInfo, ...args: A) => Response | Promise<Response>;
  /**
   * Answer to a redelivery of a delivery already processed. @default `200` with
   * `{ "received": true, "duplicate": true, "key" }` (a 2xx stops the sender's retries)
   */
  onCompleted?: (request: Request, info: CompletedInfo, ...args: A) => Response | Promise<Response>;
  /**
   * Answer to a delivery without a usable key (see `key`); `info.error` is what `key` threw, or
   * the `TypeError`/`RangeError` describing the unusable name. No lock is taken, nothing is
   * recorded. Return a 2xx to make senders that retry every non-2xx answer (Stripe, Standard
   * Webhooks) stop redelivering it. @default `400` with `{ "error": "missing-key" }` or
   * `{ "error": "invalid-key" }`
   */
  onKeyError?: (request: Request, info: KeyErrorInfo, ...args: A) => Response | Promise<Response>;
  /**
   * What to do when the lease was lost while the handler ran (a duplicate may have been
   * processed meanwhile): `"throw"` rejects with `LeaseLostError` after the completion or
   * release (your framework answers `500`, the sender retries, and a completed delivery is then
   * acknowledged as a duplicate), the handler's `Response` in `error.result` or its error in
   * `error.cause`; `"return"` answers the handler's response as if the lease had held.
   * @default "throw"
   */
  onLeaseLost?: OnLeaseLost;
}

/** What `onKeyError` learns about a delivery without a usable idempotency key. */
export interface KeyErrorInfo {
  /**
   * `"missing"`: `key` returned `null` or `undefined`. `"invalid"`: `key` threw (e.g. a body that
   * is not JSON), or returned something that is not a name of 1–512 characters without `{`/`}`.
   */
  reason: "missing" | "invalid";
  /** With `"invalid"`: what `key` threw, or the `TypeError`/`RangeError` about its result. */
  error?: unknown;
}

/** A webhook handler: the original request (body unread), the key and lease, extra arguments. */
export type WebhookHandler<A extends unknown[] = []> = (
  request: Request,
  context: WebhookContext,
  ...args: A
) => Response | Promise<Response>;

const WEBHOOK_KEYS = [
  "edgelock",
  "key",
  "completionTtl",
  "leaseTime",
  "keepAlive",
  "waitUntil",
  "onLocked",
  "onCompleted",
  "onKeyError",
  "onLeaseLost",
];

/**
 * Wraps a webhook route handler so that each delivery (by idempotency key) is processed once:
 *
 * 1. the key is read from a clone of the request: a delivery without a usable key (`key`
 *    returns nothing, throws, or returns a bad name) is answered by `onKeyError`, `400` by
 *    default, and nothing else happens;
 * 2. the key is claimed in one request: a key already completed is acknowledged with `200`
 *    (`onCompleted`) without running the handler; a key held by a concurrent delivery is
 *    answered `409` + `Retry-After` (`onLocked`); both emit a `skip` event;
 * 3. otherwise the handler runs holding the key's lock;
 * 4. a **2xx** response records completion for `completionTtl` and releases the lock in one
 *    request; any other response (a 4xx such as a bad signature must not block a genuine
 *    delivery with the same id; a 5xx asks the sender to retry) or a thrown error releases the
 *    lock without recording anything, so the sender's retry processes the delivery again.
 *    The error propagates (your framework answers 500);
 * 5. when the lease was lost while the handler ran (its signal aborted for a loss, or an awaited
 *    completion/release found the hold gone), the call rejects with `LeaseLostError`
 *    after step 4 (a 2xx is still recorded: the work did finish), unless
 *    `onLeaseLost: "return"`. With `waitUntil`, only a loss the signal saw counts.
 *
 * Completion/release goes to `waitUntil` when given, else it is awaited before returning; a
 * failure there is reported as an `error` event (the lock then expires after its lease, and a
 * later redelivery is processed again: at-least-once, never concurrently).
 *
 * Requests per delivery on a warm client: one claim, then one completion or release.
 *
 * @example
 * ```ts
 * // app/api/webhook/route.ts
 * import { waitUntil } from "@vercel/functions";
 * export const POST = lockWebhook(
 *   { edgelock, key: async (req) => `stripe:${(await req.json()).id}`, waitUntil },
 *   async (req, { lease }) => {
 *     await fulfil(await req.json(), lease.signal);
 *     return Response.json({ received: true });
 *   },
 * );
 * ```
 * @throws TypeError / RangeError for bad options, when `lockWebhook` is called.
 */
export function lockWebhook<A extends unknown[] = []>(
  options: LockWebhookOptions<A>,
  handler: WebhookHandler<A>,
): (request: Request, ...args: A) => Promise<Response> {
  const o = checkOptions(options, "lockWebhook", WEBHOOK_KEYS);
  const edgelockOf = resolveEdgelock<A>(o.edgelock, "lockWebhook");
  const keyOf = checkFunction<LockWebhookOptions<A>["key"]>(o.key, "key");
  if (!keyOf) throw new TypeError("lockWebhook: `key` is required");
  if (typeof handler !== "function") {
    throw new TypeError("lockWebhook: `handler` must be a function");
  }
  const completionTtl =
    o.completionTtl === undefined
      ? DEFAULT_COMPLETION_TTL_MS
      : checkMs(o.completionTtl, "completionTtl", 1, MAX_COMPLETION_TTL_MS);
  const leaseTime = checkLeaseTime(o.leaseTime);
  const keepAlive = checkKeepAlive(o.keepAlive);
  const waitUntil = checkFunction<WaitUntil<A>>(o.waitUntil, "waitUntil");
  const onLocked = checkFunction<LockWebhookOptions<A>["onLocked"]>(o.onLocked, "onLocked");
  const onCompleted = checkFunction<LockWebhookOptions<A>["onCompleted"]>(
    o.onCompleted,
    "onCompleted",
  );
  const onKeyError = checkFunction<LockWebhookOptions<A>["onKeyError"]>(o.onKeyError, "onKeyError");
  const onLeaseLost = checkOnLeaseLost(o.onLeaseLost);
  const badKey = (request: Request, info: KeyErrorInfo, args: A) => {
    if (onKeyError) return onKeyError(request, info, ...args);
    const error = info.reason === "missing" ? "missing-key" : "invalid-key";
    return Response.json({ error }, { status: 400 });
  };

  return async function lockedWebhook(request: Request, ...args: A): Promise<Response> {
    const started = Date.now();
    const edgelock = edgelockOf(request, ...args);
    // The key comes from the delivery: a malformed one is the sender's fault (4xx), never a 500
    // that would make the sender redeliver it forever.
    let key: string;
    try {
      const keyValue = await keyOf(request.clone(), ...args);
      if (keyValue === null || keyValue === undefined) {
        return badKey(request, { reason: "missing" }, args);
      }
      key = checkName(keyValue, "key");
    } catch (error) {
      return badKey(request, { reason: "invalid", error }, args);
    }
    const idempotencyKey = getIdempotencyKey(edgelock, key);
    const claim = await idempotencyKey.claim({ leaseTime, keepAlive });
    if (claim.status !== "acquired") {
      const holderTtl = claim.status === "locked" ? claim.holderTtl : undefined;
      reportEvent(edgelock, {
        type: "skip",
        name: key,
        reason: claim.status === "locked" ? "overlap" : "duplicate",
        // The claim's acquire event already counted its request.
        ...noCost(Date.now() - started),
        ...(holderTtl === undefined ? {} : { holderTtl }),
      });
      if (claim.status === "completed") {
        const info = { key, completedTtl: claim.completedTtl };
        if (onCompleted) return onCompleted(request, info, ...args);
        return Response.json({ received: true, duplicate: true, key }, { status: 200 });
      }
      const info = {
        key,
        retryAfter: retryAfterSeconds(claim.holderTtl),
        holderTtl: claim.holderTtl,
      };
      if (onLocked) return onLocked(request, info, ...args);
      return lockedResponse(key, claim.holderTtl);
    }

    const lease = claim.lease;
    return runGuarded<Response>({
      client: edgelock,
      name: key,
      lease,
      onLeaseLost,
      fn: async () => {
        const response = await handler(request, { key, lease }, ...args);
        if (!isResponse(response)) {
          throw new TypeError("lockWebhook: the handler must return a Response");
        }
        return response;
      },
      // Only a 2xx is recorded as done: a thrown error or another status releases for a retry.
      end: (settled) =>
        settled.outcome === "returned" && settled.result.ok
          ? idempotencyKey.complete(lease, completionTtl)
          : lease.release(),
      defer: waitUntil && ((task) => waitUntil(task, request, ...args)),
    });
  };
}

/** What a cron handler gets besides the request. */
export interface CronContext {
  /** The lock name of this run. */
  name: string;
  /** The held lease, renewed by a timer while the handler runs; its `signal` aborts if lost. */
  lease: Lease;
}

/** What `onSkip` learns about the run that holds the lock. */
export interface SkippedInfo {
  /** The lock name. */
  name: string;
  /** Why the run was skipped, as the `skip` event says: another run holds the lock. */
  reason: "overlap";
  /** Seconds until the holder's lease runs out, rounded up, at least 1. */
  retryAfter: number;
  /** The holder's remaining lease in ms (PTTL: -1 when the key has no TTL, 0 when unknown). */
  holderTtl: number;
}

/** Options of {@link lockCron}. Times in integer ms. `A`: extra handler arguments. */
export interface LockCronOptions<A extends unknown[] = []> {
  /**
   * The EdgeLock (or the core `EdgeLockClient` of `edgelock/lock`, which keeps the bundle to the
   * lock and the idempotency key alone), or a function of the request (and extra arguments)
   * returning it. Required.
   */
  edgelock: EdgeLockClient | ((request: Request, ...args: A) => EdgeLockClient);
  /**
   * Lock name, or a function of the request returning it; runs sharing a name exclude each
   * other. @default `cron:<URL path>`, one lock per cron route
   */
  name?: string | ((request: Request, ...args: A) => string);
  /**
   * When given, a request must carry `Authorization: Bearer <cronSecret>` (what Vercel Cron
   * sends when the `CRON_SECRET` environment variable is set), else it is answered `401`
   * before any Redis request. The type accepts `undefined` so that
   * `cronSecret: process.env.CRON_SECRET` compiles, but an `undefined` (or empty) value throws a
   * `TypeError` (`RangeError`) when `lockCron` is called: a missing environment variable
   * cannot silently turn the check off. Omit the property to skip the check.
   */
  cronSecret?: string | undefined;
  /**
   * TTL of the run's lease in ms, integer in [1, 86 400 000], renewed every third of it by a
   * timer while the handler runs (a crashed run frees the lock within this time).
   * @default the EdgeLock's `watchdogTimeout` (30 000)
   */
  leaseTime?: number;
  /** Receives the release so the response is not delayed. @default none: it is awaited */
  waitUntil?: WaitUntil<A>;
  /**
   * Answer to a run skipped because another holds the lock. @default `200` with
   * `{ "skipped": true, "reason": "overlap", "name", "retryAfter" }`: a skip is a normal
   * outcome, not a failure (Vercel does not retry cron runs either way). `reason` is the `skip`
   * event's; it used to be `"locked"`, which an `onSkip` returning that body keeps.
   */
  onSkip?: (request: Request, info: SkippedInfo, ...args: A) => Response | Promise<Response>;
  /**
   * What to do when the lease was lost while the handler ran (another run may have overlapped):
   * `"throw"` rejects with `LeaseLostError` after the release (the run shows as failed),
   * the handler's `Response` in `error.result` or its error in `error.cause`; `"return"`
   * answers the handler's response as if the lease had held. @default "throw"
   */
  onLeaseLost?: OnLeaseLost;
}

/** A cron route handler: the request, the lock name and lease, extra arguments. */
export type CronHandler<A extends unknown[] = []> = (
  request: Request,
  context: CronContext,
  ...args: A
) => Response | Promise<Response>;

const CRON_KEYS = [
  "edgelock",
  "name",
  "cronSecret",
  "leaseTime",
  "waitUntil",
  "onSkip",
  "onLeaseLost",
];

/**
 * Wraps a Vercel Cron route handler so that overlapping runs skip. Vercel may start a run while
 * the previous one is still going, and may deliver the same run twice; it does not retry a
 * failed run.
 *
 * 1. With `cronSecret`, a request without `Authorization: Bearer <cronSecret>` gets `401`
 *    (`WWW-Authenticate: Bearer`, body `{ "error": "unauthorized" }`) and nothing else happens.
 * 2. One acquire attempt: when another run holds the lock, the run is skipped: a `skip` event
 *    and `onSkip`'s answer (default `200 { "skipped": true, ... }`).
 * 3. Otherwise the handler runs with the lease kept alive by the `"timer"` strategy, and the
 *    lock is released when it settles (to `waitUntil` when given, else awaited); an error from
 *    the handler propagates after the release.
 * 4. When the lease was lost while the handler ran (its signal aborted for a loss, or an awaited
 *    release found the hold gone), the call rejects with `LeaseLostError` after the
 *    release, unless `onLeaseLost: "return"`. With `waitUntil`, only a loss the signal saw
 *    counts.
 *
 * A duplicate delivery that arrives after the first run finished runs again: keep the job
 * idempotent, or claim a per-period key with `edgelock.getIdempotencyKey`.
 *
 * @example
 * ```ts
 * // app/api/cron/route.ts
 * export const GET = lockCron({ edgelock, cronSecret: process.env.CRON_SECRET }, async () => {
 *   await rebuildIndex();
 *   return Response.json({ ok: true });
 * });
 * ```
 * @throws TypeError / RangeError for bad options, when `lockCron` is called.
 */
export function lockCron<A extends unknown[] = []>(
  options: LockCronOptions<A>,
  handler: CronHandler<A>,
): (request: Request, ...args: A) => Promise<Response> {
  const o = checkOptions(options, "lockCron", CRON_KEYS);
  const edgelockOf = resolveEdgelock<A>(o.edgelock, "lockCron");
  const nameOption = o.name;
  if (typeof nameOption !== "function" && nameOption !== undefined) checkName(nameOption);
  if ("cronSecret" in o) {
    if (typeof o.cronSecret !== "string") {
      throw new TypeError(
        "lockCron: `cronSecret` must be a string (is CRON_SECRET set?); omit it to skip the check",
      );
    }
    if (o.cronSecret.length === 0) throw new RangeError("lockCron: `cronSecret` must not be empty");
  }
  const expected = o.cronSecret === undefined ? undefined : `Bearer ${o.cronSecret}`;
  const leaseTime = checkLeaseTime(o.leaseTime);
  const waitUntil = checkFunction<WaitUntil<A>>(o.waitUntil, "waitUntil");
  const onSkip = checkFunction<LockCronOptions<A>["onSkip"]>(o.onSkip, "onSkip");
  const onLeaseLost = checkOnLeaseLost(o.onLeaseLost);
  if (typeof handler !== "function") throw new TypeError("lockCron: `handler` must be a function");

  return async function lockedCron(request: Request, ...args: A): Promise<Response> {
    if (expected !== undefined && !sameText(request.headers.get("authorization"), expected)) {
      return Response.json(
        { error: "unauthorized" },
        { status: 401, headers: { "www-authenticate": "Bearer" } },
      );
    }
    const started = Date.now();
    const edgelock = edgelockOf(request, ...args);
    const name = checkName(
      typeof nameOption === "function"
        ? nameOption(request, ...args)
        : (nameOption ?? `cron:${new URL(request.url).pathname}`),
    );
    const run = await getLock(edgelock, name).tryAcquire({ leaseTime, keepAlive: "timer" });
    if (!run.lease) {
      const { holderTtl } = run;
      reportEvent(edgelock, {
        type: "skip",
        name,
        reason: "overlap",
        // The acquire event already counted the request.
        ...noCost(Date.now() - started),
        holderTtl,
      });
      const retryAfter = retryAfterSeconds(holderTtl);
      if (onSkip)
        return onSkip(request, { name, reason: "overlap", retryAfter, holderTtl }, ...args);
      // The event's word, so that a log search and the answer agree.
      return Response.json({ skipped: true, reason: "overlap", name, retryAfter }, { status: 200 });
    }
    const lease = run.lease;
    return runGuarded({
      client: edgelock,
      name,
      lease,
      onLeaseLost,
      fn: () => handler(request, { name, lease }, ...args),
      defer: waitUntil && ((task) => waitUntil(task, request, ...args)),
    });
  };
}

function resolveEdgelock<A extends unknown[]>(
  value: unknown,
  where: string,
): (request: Request, ...args: A) => EdgeLockClient {
  if (typeof value === "function") return value as (request: Request, ...args: A) => EdgeLockClient;
  if (!(value instanceof EdgeLockClient)) {
    throw new TypeError(
      `${where}: \`edgelock\` must be an EdgeLock (or EdgeLockClient) or a function returning one`,
    );
  }
  return () => value;
}

function isResponse(value: unknown): value is Response {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as Response).status === "number" &&
    typeof (value as Response).ok === "boolean"
  );
}

const encoder = new TextEncoder();

/** Compares a header with the expected value in time independent of where they differ. */
function sameText(actual: string | null, expected: string): boolean {
  if (actual === null) return false;
  const a = encoder.encode(actual);
  const b = encoder.encode(expected);
  let diff = a.length ^ b.length;
  for (let i = 0; i < b.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}
