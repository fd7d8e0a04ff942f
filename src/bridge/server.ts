/**
 * The HTTP side of the bridge: a Hono app speaking the Upstash REST protocol, plus the
 * `/__bridge/*` control endpoints.
 *
 * @module
 */

import { createHash, timingSafeEqual } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { HttpBindings } from "@hono/node-server";
import type { Context } from "hono";
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import {
  type BlockingMode,
  commandName,
  instantForm,
  isBlocking,
  parseBatchBody,
  parseSingleBody,
  scriptSha,
} from "./commands.js";
import { isErrorReply, toJsonReply, toReplyEntry } from "./encode.js";
import type { FaultDecision, FaultInjector } from "./faults.js";
import { LIMIT_REPLIES, parseFaultConfig } from "./faults.js";
import type { RequestLogEntry } from "./log.js";
import { type SubscriptionKind, SubscriptionLimitError, type Subscriptions } from "./pubsub.js";
import type { Backend } from "./redis.js";
import { BlockingPoolBusyError, CommandRefusedError, RedisUnavailableError } from "./redis.js";
import type { Route, StatsRecorder } from "./stats.js";

/** What the app needs from the running bridge. */
export interface BridgeState {
  /** Bearer token every request except `GET /` must present. */
  token: string;
  /** The Redis connections (one server or a cluster). */
  redis: Backend;
  /** Active fault rules. */
  faults: FaultInjector;
  /** Request counters. */
  stats: StatsRecorder;
  /** Open pub/sub subscriptions (`/subscribe`, `/psubscribe`). */
  subscriptions: Subscriptions;
  /** How blocking commands are answered now (see {@link BlockingMode}); changeable at run time. */
  blocking: { mode: BlockingMode };
  /** Aborted when the bridge closes: cuts injected delays short. */
  closing: AbortSignal;
  /** Receives one entry per answered request (opt-in request log). */
  log?: ((entry: RequestLogEntry) => void) | undefined;
}

/** The Hono environment of the bridge: node-server's raw request/response bindings. */
export type BridgeEnv = { Bindings: HttpBindings; Variables: { commands?: string[] } };

const LOGGED_ROUTES = new Set([
  "/",
  "/pipeline",
  "/multi-exec",
  "/__bridge/stats",
  "/__bridge/stats/reset",
  "/__bridge/faults",
]);
/** What a command name looks like; anything else is logged as `?` (it could be a secret). */
const COMMAND_NAME = /^[a-z][a-z0-9_.|-]{0,39}$/;

type BridgeContext = Context<BridgeEnv>;

/** HTTP status and JSON body of a processed data request. */
interface Answer {
  status: 200 | 400 | 500 | 503;
  body: unknown;
  headers?: Record<string, string>;
}

const UNAUTHORIZED = { error: "Unauthorized" };
const REDIS_UNAVAILABLE = { error: "bridge: redis unavailable" };

/**
 * Builds the Hono app.
 *
 * Routes (all but `GET /` need `Authorization: Bearer <token>` or `?_token=<token>`, else 401
 * `{"error":"Unauthorized"}`):
 * - `GET /` -> `{"result":"edgelock-bridge"}`;
 * - `POST /`, `POST /pipeline`, `POST /multi-exec` -> the Upstash REST protocol;
 * - `POST /subscribe/<channel>`, `POST /psubscribe/<pattern>` -> a Server-Sent Events stream
 *   (Upstash's pub/sub over REST); `POST /publish/<channel>/<message>` -> `{"result": n}`;
 * - `POST /__bridge/blocking` (body `{"mode": "refuse" | "instant" | "block"}`),
 *   `POST /__bridge/subscriptions/drop` (ends every open subscription stream, as a lost
 *   connection would);
 * - `GET /__bridge/stats`, `POST /__bridge/stats/reset`, `POST /__bridge/faults` (body: a
 *   FaultConfig, replaces the current one), `DELETE /__bridge/faults`.
 */
export function createBridgeApp(state: BridgeState): Hono<BridgeEnv> {
  const app = new Hono<BridgeEnv>();
  const expected = digest(state.token);

  const log = state.log;
  if (log) {
    app.use("*", async (c, next) => {
      const started = performance.now();
      await next();
      log({
        method: c.req.method,
        route: LOGGED_ROUTES.has(c.req.path) ? c.req.path : "(other)",
        status: c.res.status,
        durationMs: performance.now() - started,
        commands: (c.get("commands") ?? []).map((n) => (COMMAND_NAME.test(n) ? n : "?")),
      });
    });
  }

  app.get("/", (c) => c.json({ result: "edgelock-bridge" }));

  app.use("*", async (c, next) => {
    const header = c.req.header("authorization") ?? "";
    const presented = header.startsWith("Bearer ") ? header.slice(7) : c.req.query("_token");
    if (presented === undefined || !timingSafeEqual(digest(presented), expected)) {
      return c.json(UNAUTHORIZED, 401);
    }
    await next();
  });

  app.post("/", (c) => handleData(c, state, "single"));
  app.post("/pipeline", (c) => handleData(c, state, "pipeline"));
  app.post("/multi-exec", (c) => handleData(c, state, "multiExec"));

  app.post("/subscribe/:channel", (c) => handleSubscribe(c, state, "subscribe"));
  app.post("/psubscribe/:pattern", (c) => handleSubscribe(c, state, "psubscribe"));
  app.post("/publish/:channel/:message", async (c) => {
    state.stats.request("publish");
    state.stats.commands(["publish"]);
    const [channel, message] = pathArguments(c, 2);
    if (channel === undefined || message === undefined) return c.json(BAD_ESCAPE, 400);
    const reply = await state.redis.single(["PUBLISH", channel, message]);
    if (isErrorReply(reply)) return c.json({ error: reply.message }, 400);
    return c.json({ result: toJsonReply(reply, { base64: false }) });
  });

  app.get("/__bridge/stats", (c) => c.json(snapshot(state)));
  app.post("/__bridge/blocking", async (c) => {
    let mode: unknown;
    try {
      mode = (JSON.parse(await c.req.text()) as { mode?: unknown }).mode;
    } catch {
      mode = undefined;
    }
    if (mode !== "refuse" && mode !== "instant" && mode !== "block") {
      return c.json({ error: 'bridge: mode must be "refuse", "instant" or "block"' }, 400);
    }
    state.blocking.mode = mode;
    return c.json({ result: "OK" });
  });
  app.post("/__bridge/subscriptions/drop", (c) => {
    state.subscriptions.dropAll();
    return c.json({ result: "OK" });
  });
  app.post("/__bridge/stats/reset", (c) => {
    state.stats.reset();
    state.faults.resetCount();
    state.redis.blockingPool.resetCount();
    return c.json({ result: "OK" });
  });
  app.post("/__bridge/faults", async (c) => {
    try {
      state.faults.set(parseFaultConfig(JSON.parse(await c.req.text())));
    } catch (error) {
      return c.json({ error: `bridge: invalid fault config: ${messageOf(error)}` }, 400);
    }
    return c.json({ result: "OK" });
  });
  app.delete("/__bridge/faults", (c) => {
    state.faults.clear();
    return c.json({ result: "OK" });
  });

  app.notFound((c) => c.json({ error: "bridge: no such endpoint" }, 404));
  app.onError((error, c) => {
    if (error instanceof RedisUnavailableError) return c.json(REDIS_UNAVAILABLE, 500);
    return c.json({ error: `bridge: internal error: ${messageOf(error)}` }, 500);
  });
  return app;
}

/** The routes of the REST protocol's command requests. */
type DataRoute = Extract<Route, "single" | "pipeline" | "multiExec">;

async function handleData(
  c: BridgeContext,
  state: BridgeState,
  route: DataRoute,
): Promise<Response> {
  state.stats.request(route);
  let body: unknown;
  try {
    body = JSON.parse(await c.req.text());
  } catch {
    return c.json({ error: "ERR bridge: request body is not valid JSON" }, 400);
  }
  const parsed = route === "single" ? parseSingleBody(body) : parseBatchBody(body);
  if (!parsed.ok) return c.json({ error: parsed.error }, 400);
  const names = parsed.commands.map(commandName);
  state.stats.commands(names);
  c.set("commands", names);
  // Inside MULTI Redis never blocks, so a transaction stays on its own connection.
  const blocking = route !== "multiExec" && parsed.commands.some(isBlocking);
  if (blocking && state.blocking.mode === "refuse") {
    const name = names.find((_, i) => isBlocking(parsed.commands[i] ?? []));
    return c.json({ error: `ERR blocking command '${name}' is not supported over REST` }, 400);
  }
  if (blocking && state.blocking.mode === "instant") {
    parsed.commands = parsed.commands.map(instantForm);
  }
  if (blocking && state.redis.blockingPool.max === 0) {
    return c.json(
      { error: "ERR bridge: blocking commands are disabled (blockingConnections: 0)" },
      400,
    );
  }

  if (state.faults.delayMs > 0) {
    try {
      await sleep(state.faults.delayMs, undefined, { signal: state.closing });
    } catch {
      return c.json({ error: "bridge: closing" }, 503);
    }
  }

  const fault = state.faults.decide(
    names,
    parsed.commands.flatMap((c) => scriptSha(c) ?? []),
  );
  if (fault?.action === "fail") return deliverFault(c, fault, "injected failure");

  const base64 = c.req.header("upstash-encoding")?.toLowerCase() === "base64";
  let answer: Answer;
  try {
    // A blocking request runs on a pooled connection, which is given up if the client leaves.
    const pooled = blocking ? c.req.raw.signal : undefined;
    answer = await execute(state.redis, route, parsed.commands, base64, pooled);
  } catch (error) {
    if (error instanceof BlockingPoolBusyError) {
      answer = { status: 503, body: { error: error.message }, headers: { "retry-after": "1" } };
    } else if (error instanceof CommandRefusedError) {
      answer = { status: 400, body: { error: error.message } };
    } else if (error instanceof RedisUnavailableError) {
      answer = { status: 500, body: REDIS_UNAVAILABLE };
    } else {
      throw error;
    }
  }
  if (fault?.action === "lose") return deliverFault(c, fault, "response lost");
  return c.json(answer.body, answer.status, answer.headers);
}

/**
 * Answers a subscription: 503 when the limit is reached, else the SSE stream, which ends when the
 * client leaves (its subscription and Redis connection closed with it) or the connection to
 * Redis drops.
 */
async function handleSubscribe(
  c: BridgeContext,
  state: BridgeState,
  kind: SubscriptionKind,
): Promise<Response> {
  state.stats.request(kind === "subscribe" ? "subscribe" : "psubscribe");
  state.stats.commands([kind]);
  const [target] = pathArguments(c, 1);
  if (target === undefined) return c.json(BAD_ESCAPE, 400);
  const queue: string[] = [];
  let wakeUp: (() => void) | undefined;
  let ended = false;
  const notify = () => {
    const w = wakeUp;
    wakeUp = undefined;
    w?.();
  };
  let subscription: { close(): void };
  try {
    subscription = await state.subscriptions.subscribe(
      kind,
      target,
      (channel, message) => {
        queue.push(
          kind === "subscribe"
            ? `message,${channel},${message}`
            : `pmessage,${target},${channel},${message}`,
        );
        notify();
      },
      () => {
        ended = true;
        notify();
      },
    );
  } catch (error) {
    if (error instanceof SubscriptionLimitError) {
      return c.json({ error: error.message }, 503, { "retry-after": "1" });
    }
    throw error;
  }
  const request = c.req.raw.signal;
  const leave = () => {
    ended = true;
    notify();
  };
  request.addEventListener("abort", leave, { once: true });
  const lifetime = state.faults.streamLifetime;
  let expiry: ReturnType<typeof setTimeout> | undefined;
  return streamSSE(c, async (stream) => {
    stream.onAbort(leave);
    try {
      await stream.writeSSE({ data: `${kind},${target},1` });
      if (lifetime) {
        const socket = c.env.incoming.socket;
        expiry = setTimeout(() => {
          if (lifetime.end === "cut") socket.destroy();
          leave();
        }, lifetime.ms);
      }
      while (!ended && !stream.aborted) {
        while (queue.length > 0) await stream.writeSSE({ data: queue.shift() as string });
        if (ended) break;
        await new Promise<void>((resolve) => {
          wakeUp = resolve;
        });
      }
    } finally {
      clearTimeout(expiry);
      request.removeEventListener("abort", leave);
      subscription.close();
    }
  });
}

const BAD_ESCAPE = { error: "ERR bridge: malformed percent-escape in the request path" };

/**
 * The last `count` segments of the request's path, percent-decoded strictly, as an HTTP server
 * that parses its request target does: a `%` not followed by two hex digits, or escapes that do
 * not decode to UTF-8, make the request malformed (`undefined` entries: answer 400), where a
 * lenient router would pass them on undecoded. fetch sends a space, a non-ASCII character, `{`
 * or `}` of a channel escaped and `/ ? # %` as they are, so a channel holding one of those never
 * arrives here whole.
 */
function pathArguments(c: BridgeContext, count: number): (string | undefined)[] {
  const segments = new URL(c.req.url).pathname.split("/").slice(-count);
  return segments.map((segment) => {
    if (/%(?![0-9A-Fa-f]{2})/.test(segment)) return undefined;
    try {
      return decodeURIComponent(segment);
    } catch {
      return undefined;
    }
  });
}

/** The counters with the gauges that live elsewhere. */
function snapshot(state: BridgeState) {
  return state.stats.snapshot(state.faults.injected, state.redis.blockingPool.stats(), {
    open: state.subscriptions.open,
    max: state.subscriptions.max,
  });
}

/**
 * Runs the commands of one data request. A single command whose reply is an error answers 400
 * `{"error"}`; pipelines always answer 200 with one entry per command; a transaction answers 200
 * with one entry per command, or 400 `{"error"}` when Redis discarded it (EXECABORT). With
 * `pooled` (a request holding a blocking command), a single command or a pipeline runs on a
 * connection of the blocking pool, given up when `pooled` aborts.
 */
async function execute(
  redis: Backend,
  route: DataRoute,
  commands: string[][],
  base64: boolean,
  pooled: AbortSignal | undefined,
): Promise<Answer> {
  const options = { base64 };
  switch (route) {
    case "single": {
      const [command] = commands as [string[]];
      const reply = pooled
        ? (await redis.blocking(commands, pooled))[0]
        : await redis.single(command);
      if (isErrorReply(reply)) return { status: 400, body: { error: reply.message } };
      return { status: 200, body: { result: toJsonReply(reply, options) } };
    }
    case "pipeline": {
      const replies = pooled
        ? await redis.blocking(commands, pooled)
        : await redis.pipeline(commands);
      return { status: 200, body: replies.map((reply) => toReplyEntry(reply, options)) };
    }
    case "multiExec": {
      const outcome = await redis.transaction(commands);
      if (!outcome.ok) return { status: 400, body: { error: outcome.error } };
      return { status: 200, body: outcome.replies.map((reply) => toReplyEntry(reply, options)) };
    }
  }
}

/**
 * Answers (or does not answer) a faulted request: 503 or another status with a JSON error, the
 * service's error text of a limit, a destroyed socket, or silence until the socket closes (after
 * `hangMs`, on client abort, or when the bridge closes).
 */
function deliverFault(c: BridgeContext, fault: FaultDecision, what: string): Promise<Response> {
  const unsent = () => new Response(null, { status: 503 });
  if (fault.mode === "503") {
    return Promise.resolve(c.json({ error: `bridge fault: ${what}` }, 503));
  }
  if (fault.mode === "limit" && fault.limit !== undefined) {
    return Promise.resolve(
      c.json({ error: LIMIT_REPLIES[fault.limit] }, (fault.status ?? 400) as ContentfulStatusCode),
    );
  }
  if (fault.mode === "status" && fault.status !== undefined) {
    return Promise.resolve(
      c.json({ error: `bridge fault: ${what}` }, fault.status as ContentfulStatusCode),
    );
  }
  const socket = c.env.incoming.socket;
  if (fault.mode === "close" || socket.destroyed) {
    socket.destroy();
    return Promise.resolve(unsent());
  }
  return new Promise<Response>((resolve) => {
    const timer =
      fault.hangMs === undefined ? undefined : setTimeout(() => socket.destroy(), fault.hangMs);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve(unsent());
    });
  });
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
