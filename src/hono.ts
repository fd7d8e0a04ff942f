/**
 * Hono middleware: `withLock` holds a distributed lock around a route, answers `409 Conflict`
 * with `Retry-After` while another request holds it, and releases it when the response is done
 * (after a streamed body has finished). Runs wherever Hono runs: Workers, Vercel, Node, Bun.
 * @see https://hono.dev/docs/guides/middleware
 * @module
 */
import type { Context, Env, MiddlewareHandler } from "hono";
import { createMiddleware } from "hono/factory";
import { EdgeLockClient } from "./core.js";
import { LeaseLostError } from "./errors.js";
import {
  checkOnLeaseLost,
  endGuarded,
  lostBeforeRelease,
  type OnLeaseLost,
} from "./lease/guarded.js";
import { checkKeepAlive, type KeepAlive, type Lease } from "./lease/lease.js";
import { getLock } from "./locks/lock/entry.js";
import {
  endQuietly,
  type LockedInfo,
  lockedResponse,
  onBodyEnd,
  retryAfterSeconds,
} from "./settle.js";
import {
  checkFunction,
  checkLeaseTime,
  checkName,
  checkOptions,
  checkWaitTime,
} from "./validate.js";

/**
 * Variables `withLock` sets: `c.var.lease` (or `c.get("lease")`) is the held lease; its
 * `signal` aborts if the lease is lost. Use with `new Hono<{ Variables: LockVariables }>()`.
 */
export type LockVariables = { lease: Lease };

export type { LockedInfo };

/** Options of {@link withLock}. Times in integer ms. */
export interface LockMiddlewareOptions<E extends Env = Env> {
  /**
   * The EdgeLock (or the core `EdgeLockClient` of `edgelock/lock`, which keeps the Worker's
   * bundle to the lock alone), or a function of the context returning it. Use the function on
   * Workers, where the Redis credentials arrive per request on `c.env`. Required.
   */
  edgelock: EdgeLockClient | ((c: Context<E>) => EdgeLockClient);
  /**
   * Lock name (1–512 characters, no `{` or `}`), or a function of the context returning it,
   * e.g. `(c) => \`order:${c.req.param("id")}\``. Requests with the same name exclude each
   * other. A function's result that is no such name (`""`, a name with braces) is answered
   * `400` with `{ "error": "invalid-key" }`, as `lockWebhook` answers it; an error the function
   * throws goes to `app.onError`. Required.
   */
  key: string | ((c: Context<E>) => string | Promise<string>);
  /**
   * How long a request waits for the lock before the `onLocked` answer, in ms, integer in
   * [0, 86 400 000]. @default 0 (one attempt: a busy lock is answered at once)
   */
  waitTime?: number;
  /**
   * Fixed lease in ms, integer in [1, 86 400 000], not renewed. Omitted: watchdog mode (TTL =
   * the EdgeLock's `watchdogTimeout`, renewed by `keepAlive` while the request lives).
   */
  leaseTime?: number;
  /** Keep-alive of the lease. @default "timer" in watchdog mode, "none" with a fixed lease */
  keepAlive?: KeepAlive;
  /**
   * Builds the answer when the lock stays busy. @default `409 Conflict` with header
   * `Retry-After: <retryAfter>` and JSON body `{ "error": "locked", "key", "retryAfter" }`
   */
  onLocked?: (c: Context<E>, info: LockedInfo) => Response | Promise<Response>;
  /**
   * What to do when the lease was lost while the route ran (another request may have held the
   * lock meanwhile): `"throw"` throws {@link LeaseLostError} to `app.onError` in place of the
   * route's answer (Hono's default answer to it is `500`; map it there, see below), with the
   * route's `Response` in `error.result` (`outcome: "returned"`) or its error in `error.cause`
   * (`outcome: "threw"`); `"return"` sends the route's answer as if the lease had held.
   * @default "throw"
   */
  onLeaseLost?: OnLeaseLost;
}

const OPTION_KEYS = [
  "edgelock",
  "key",
  "waitTime",
  "leaseTime",
  "keepAlive",
  "onLocked",
  "onLeaseLost",
];

/**
 * Holds the lock `key` while the route runs. The lease is `c.var.lease`.
 *
 * - Busy lock (after `waitTime`): answers `onLocked`'s response, by default `409` with
 *   `Retry-After` and `{ "error": "locked", "key": "<key>", "retryAfter": <seconds> }`. The
 *   answer is returned, not thrown, so an app's `onError` does not turn it into a 500.
 * - Release: in `finally`, also when the handler throws (the error still reaches `app.onError`).
 *   When the response has a body, the lock is held until the body has been read to the end or
 *   cancelled (a streamed response stays exclusive while it streams), except for `HEAD`, whose
 *   body Hono drops. With an execution context (Workers) the release is handed to
 *   `c.executionCtx.waitUntil`; elsewhere it is awaited (for a body: before the body ends).
 *   A failed release is reported as an `error` event; the lock then expires after its lease.
 * - A `key` function returning no usable name: `400` with `{ "error": "invalid-key" }`, nothing
 *   sent to Redis. Errors from acquiring (e.g. `TransportError`) and errors the `key` function
 *   throws propagate to `app.onError`.
 * - Lease lost while the route ran (`onLeaseLost: "throw"`, the default): a
 *   {@link LeaseLostError} goes to `app.onError` instead of the route's answer, so Hono answers
 *   `500` unless the app maps it, e.g.
 *   `app.onError((err, c) => err instanceof LeaseLostError ? c.json({ error: "lease-lost" }, 503) : c.text("Internal Server Error", 500))`.
 *   Known lost: the lease's signal had aborted for a loss when the route returned (a renewal
 *   found the hold gone, or a fixed lease's `expiresAt` passed), or, where the release is
 *   awaited before answering (no execution context and no body to stream), the release found
 *   the hold gone. A loss while a body streams, or that only a `waitUntil` release finds, comes
 *   too late to change the answer: it is reported as a `lost` event when a renewal sees it.
 *
 * Requests per guarded request on a warm client: one per acquire attempt, one release, plus
 * renewals of a watchdog lease.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { withLock, type LockVariables } from "edgelock/hono";
 *
 * const app = new Hono<{ Variables: LockVariables }>();
 * app.post(
 *   "/orders/:id/pay",
 *   withLock({ edgelock, key: (c) => `order:${c.req.param("id")}`, leaseTime: 10_000 }),
 *   async (c) => c.json(await pay(c.req.param("id"), c.var.lease.signal)),
 * );
 * ```
 * @throws TypeError / RangeError for bad options, when `withLock` is called (not per request).
 */
export function withLock<E extends Env = Env>(
  options: LockMiddlewareOptions<E>,
): MiddlewareHandler<E & { Variables: LockVariables }> {
  const o = checkOptions(options, "withLock", OPTION_KEYS);
  const edgelockOption = o.edgelock;
  if (typeof edgelockOption !== "function" && !(edgelockOption instanceof EdgeLockClient)) {
    throw new TypeError(
      "withLock: `edgelock` must be an EdgeLock (or EdgeLockClient) or a function returning one",
    );
  }
  const keyOption = o.key;
  if (typeof keyOption !== "function") {
    if (keyOption === undefined) throw new TypeError("withLock: `key` is required");
    checkName(keyOption, "key");
  }
  const waitTime = checkWaitTime(o.waitTime) ?? 0;
  const leaseTime = checkLeaseTime(o.leaseTime);
  const keepAlive = checkKeepAlive(o.keepAlive);
  const onLocked = checkFunction<LockMiddlewareOptions<E>["onLocked"]>(o.onLocked, "onLocked");
  const onLeaseLost = checkOnLeaseLost(o.onLeaseLost);
  const edgelockOf = (c: Context<E>): EdgeLockClient =>
    typeof edgelockOption === "function" ? edgelockOption(c) : edgelockOption;

  return createMiddleware<E & { Variables: LockVariables }>(async function edgelockLock(c, next) {
    const ctx = c as unknown as Context<E>;
    const edgelock = edgelockOf(ctx);
    let key: string;
    try {
      key = checkName(typeof keyOption === "function" ? await keyOption(ctx) : keyOption, "key");
    } catch (error) {
      // A name built from the request (an empty route parameter) is the client's fault: the
      // same 400 as lockWebhook's, not a 500. What the key function itself threw is the app's.
      if (error instanceof TypeError || error instanceof RangeError) return invalidKey();
      throw error;
    }
    const result = await getLock(edgelock, key).tryAcquire({ waitTime, leaseTime, keepAlive });
    if (!result.lease) {
      const { holderTtl } = result;
      if (onLocked)
        return onLocked(ctx, { key, retryAfter: retryAfterSeconds(holderTtl), holderTtl });
      return lockedResponse(key, holderTtl);
    }
    const lease = result.lease;
    const waitUntil = waitUntilOf(c);
    let releasesWithBody = false;
    let lost = false;
    try {
      c.set("lease", lease);
      await next();
      const body = c.res.body;
      // A lease known lost is not held while a body streams: the answer is the loss, now.
      const known = onLeaseLost === "throw" && lostBeforeRelease(lease);
      if (body && !known && !c.error && c.req.method !== "HEAD") {
        const release = () => endQuietly(edgelock, key, () => lease.release());
        c.res = new Response(onBodyEnd(body, deferRelease(release, waitUntil)), c.res);
        releasesWithBody = true;
      }
    } finally {
      if (!releasesWithBody)
        lost = await endGuarded(edgelock, key, lease, () => lease.release(), waitUntil);
    }
    if (onLeaseLost === "throw" && lost) {
      // Thrown, not answered: the app's onError decides the status (Hono's default is 500).
      throw new LeaseLostError(
        key,
        "lost",
        c.error ? { outcome: "threw", error: c.error } : { outcome: "returned", result: c.res },
      );
    }
  });
}

/** The answer to a key that is no lock name: lockWebhook's `invalid-key`. */
function invalidKey(): Response {
  return Response.json({ error: "invalid-key" }, { status: 400 });
}

/**
 * What the body wrapper runs at its end. With `waitUntil`, a promise is registered right away
 * (the runtime keeps the invocation alive until it settles) and the body's end is not delayed;
 * without, the body's end waits for the release, so a client that read the body finds the
 * lock free.
 */
function deferRelease(
  release: () => Promise<unknown>,
  waitUntil: ((promise: Promise<unknown>) => void) | undefined,
): () => Promise<void> {
  if (!waitUntil) return async () => void (await release());
  let start: () => void = () => {};
  const started = new Promise<void>((resolve) => {
    start = resolve;
  });
  waitUntil(started.then(release));
  return async () => start();
}

/** `c.executionCtx.waitUntil`, or undefined where Hono has no execution context (Node, Vercel). */
function waitUntilOf(c: Context): ((promise: Promise<unknown>) => void) | undefined {
  try {
    const ctx = c.executionCtx;
    return (promise) => ctx.waitUntil(promise);
  } catch {
    // Hono's getter throws "This context has no ExecutionContext" outside Workers.
    return undefined;
  }
}
