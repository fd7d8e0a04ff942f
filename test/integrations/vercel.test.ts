/**
 * `lockWebhook` and `lockCron`: route handlers called directly with Web Requests, as Vercel
 * calls them, against the real bridge and Redis.
 */
import { Redis } from "@upstash/redis";
import { type ExecutionContext, Hono } from "hono";
import { describe, expect, it } from "vitest";
import { EdgeLock, LeaseLostError, type LockEvent } from "../../src/index.js";
import {
  DEFAULT_COMPLETION_TTL_MS,
  lockCron,
  lockWebhook,
  type WebhookHandler,
} from "../../src/vercel.js";
import { keyPrefix, sharedBridge, usePrivateBridge, useRawRedis } from "../support/env.js";
import { aborted, recordingEdgeLock } from "../support/locks.js";

const prefix = keyPrefix();
const done = (name: string) => `edgelock_done:{${name}}`;
const raw = useRawRedis();

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** A Stripe-like delivery of event `id`. */
function delivery(id: string): Request {
  return new Request("http://127.0.0.1/api/webhook", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ id, type: "payment_intent.succeeded" }),
  });
}

/** The key function of the tests: reads the body (of the clone it is given). */
const eventKey = async (request: Request) => {
  const event = (await request.json()) as { id: string };
  return `${prefix}evt:${event.id}`;
};

/** A handler that counts its runs (reading the body itself) and answers `status`. */
function countingHandler(status = 200) {
  const runs: string[] = [];
  const handler: WebhookHandler = async (request, { key, lease }) => {
    const event = (await request.json()) as { id: string };
    runs.push(event.id);
    expect(lease.name).toBe(key);
    expect(lease.signal.aborted).toBe(false);
    return Response.json({ received: true }, { status });
  };
  return { runs, handler };
}

const skips = (events: LockEvent[]) => events.filter((e) => e.type === "skip");

describe("lockWebhook", () => {
  it("processes 5 concurrent deliveries once; the others get 409 + Retry-After", async () => {
    const rec = recordingEdgeLock();
    const entered = deferred();
    const gate = deferred();
    let runs = 0;
    const webhook = lockWebhook(
      { edgelock: rec.edgelock, key: eventKey, leaseTime: 10_000 },
      async (request) => {
        runs++;
        expect(await request.json()).toMatchObject({ id: "concurrent" });
        entered.resolve();
        await gate.promise;
        return Response.json({ received: true });
      },
    );
    const rejected = deferred();
    const answers: Response[] = [];
    const all = Array.from({ length: 5 }, () =>
      webhook(delivery("concurrent")).then((res) => {
        answers.push(res);
        if (answers.length === 4) rejected.resolve();
        return res;
      }),
    );
    await entered.promise;
    await rejected.promise;
    expect(answers.map((r) => r.status)).toEqual([409, 409, 409, 409]);
    for (const res of answers) {
      const retryAfter = Number(res.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(10);
      expect(await res.json()).toEqual({
        error: "locked",
        key: `${prefix}evt:concurrent`,
        retryAfter,
      });
    }
    gate.resolve();
    const statuses = (await Promise.all(all)).map((r) => r.status).sort();
    expect(statuses).toEqual([200, 409, 409, 409, 409]);
    expect(runs).toBe(1);
    expect(skips(rec.events)).toHaveLength(4);
    for (const skip of skips(rec.events)) {
      expect(skip).toMatchObject({
        name: `${prefix}evt:concurrent`,
        reason: "overlap",
        requests: 0,
      });
      expect((skip as { holderTtl?: number }).holderTtl).toBeGreaterThan(0);
    }

    // Two later redeliveries are acknowledged without running the handler.
    for (let i = 0; i < 2; i++) {
      const again = await webhook(delivery("concurrent"));
      expect(again.status).toBe(200);
      expect(await again.json()).toEqual({
        received: true,
        duplicate: true,
        key: `${prefix}evt:concurrent`,
      });
    }
    expect(runs).toBe(1);
    expect(skips(rec.events)).toHaveLength(6);
    for (const skip of skips(rec.events).slice(4)) {
      expect(skip).toMatchObject({ name: `${prefix}evt:concurrent`, reason: "duplicate" });
      expect(skip).not.toHaveProperty("holderTtl");
    }
    expect(await raw.exists(`${prefix}evt:concurrent`)).toBe(0);
    const markerTtl = await raw.pTTL(done(`${prefix}evt:concurrent`));
    expect(markerTtl).toBeGreaterThan(DEFAULT_COMPLETION_TTL_MS - 60_000);
    expect(markerTtl).toBeLessThanOrEqual(DEFAULT_COMPLETION_TTL_MS);
  });

  it("records completion for completionTtl, in one request per delivery after the claim", async () => {
    const rec = recordingEdgeLock();
    const { runs, handler } = countingHandler();
    const webhook = lockWebhook(
      { edgelock: rec.edgelock, key: eventKey, completionTtl: 3 * 86_400_000 },
      handler,
    );
    await webhook(delivery("warm"));
    rec.events.length = 0;
    const res = await webhook(delivery("ttl"));
    expect(res.status).toBe(200);
    expect(runs).toEqual(["warm", "ttl"]);
    expect(rec.events.map((e) => [e.type, e.requests])).toEqual([
      ["acquire", 1],
      ["release", 1],
    ]);
    const markerTtl = await raw.pTTL(done(`${prefix}evt:ttl`));
    expect(markerTtl).toBeGreaterThan(3 * 86_400_000 - 60_000);
    expect(markerTtl).toBeLessThanOrEqual(3 * 86_400_000);
  });

  it("a handler that throws records nothing, releases, and a redelivery reprocesses", async () => {
    const rec = recordingEdgeLock();
    let attempts = 0;
    const webhook = lockWebhook({ edgelock: rec.edgelock, key: eventKey }, async () => {
      attempts++;
      if (attempts === 1) throw new Error("database down");
      return Response.json({ received: true });
    });
    await expect(webhook(delivery("throws"))).rejects.toThrow("database down");
    expect(await raw.exists(done(`${prefix}evt:throws`))).toBe(0);
    expect(await raw.exists(`${prefix}evt:throws`)).toBe(0);
    const retry = await webhook(delivery("throws"));
    expect(retry.status).toBe(200);
    expect(await retry.json()).toEqual({ received: true });
    expect(attempts).toBe(2);
    expect(await raw.exists(done(`${prefix}evt:throws`))).toBe(1);
    expect((await webhook(delivery("throws"))).status).toBe(200);
    expect(attempts).toBe(2);
  });

  it.each([
    [500, "a 5xx"],
    [503, "a 503"],
    [400, "a 4xx (e.g. a bad signature)"],
  ])("a handler answering %i (%s) records nothing and is run again", async (status) => {
    const rec = recordingEdgeLock();
    const { runs, handler } = countingHandler(status);
    const webhook = lockWebhook({ edgelock: rec.edgelock, key: eventKey }, handler);
    const id = `status-${status}`;
    expect((await webhook(delivery(id))).status).toBe(status);
    expect(await raw.exists(done(`${prefix}evt:${id}`))).toBe(0);
    expect(await raw.exists(`${prefix}evt:${id}`)).toBe(0);
    expect((await webhook(delivery(id))).status).toBe(status);
    expect(runs).toEqual([id, id]);
  });

  it("hands the completion and the release to waitUntil when given", async () => {
    const rec = recordingEdgeLock();
    const tasks: Promise<unknown>[] = [];
    const requests: Request[] = [];
    let fail = false;
    const webhook = lockWebhook(
      {
        edgelock: rec.edgelock,
        key: eventKey,
        leaseTime: 10_000,
        waitUntil: (promise, request) => {
          tasks.push(promise);
          requests.push(request);
        },
      },
      async () => {
        if (fail) throw new Error("fails");
        return Response.json({ received: true });
      },
    );
    const req = delivery("wait-until");
    const res = await webhook(req);
    expect(res.status).toBe(200);
    expect(tasks).toHaveLength(1);
    expect(requests[0]).toBe(req);
    await Promise.all(tasks);
    expect(await raw.exists(done(`${prefix}evt:wait-until`))).toBe(1);
    expect(await raw.exists(`${prefix}evt:wait-until`)).toBe(0);

    fail = true;
    await expect(webhook(delivery("wait-until-fail"))).rejects.toThrow("fails");
    expect(tasks).toHaveLength(2);
    await Promise.all(tasks);
    expect(await raw.exists(`${prefix}evt:wait-until-fail`)).toBe(0);
    expect(await raw.exists(done(`${prefix}evt:wait-until-fail`))).toBe(0);
  });

  describe("lease lost while the handler ran", () => {
    it("rejects with LeaseLostError carrying the Response after recording the 2xx (force-unlocked meanwhile); the redelivery is a duplicate", async () => {
      const rec = recordingEdgeLock();
      let runs = 0;
      const webhook = lockWebhook(
        { edgelock: rec.edgelock, key: eventKey },
        async (_r, { key }) => {
          runs++;
          expect(await recordingEdgeLock().edgelock.getLock(key).forceUnlock()).toBe(true);
          return Response.json({ received: true });
        },
      );
      const error = await webhook(delivery("lost-2xx")).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LeaseLostError);
      expect(error).toMatchObject({ resource: `${prefix}evt:lost-2xx`, outcome: "returned" });
      expect(((error as LeaseLostError).result as Response).status).toBe(200);
      // The work did finish: recorded, so the sender's retry is acknowledged, not rerun.
      expect(await raw.exists(done(`${prefix}evt:lost-2xx`))).toBe(1);
      const retry = await webhook(delivery("lost-2xx"));
      expect(await retry.json()).toMatchObject({ duplicate: true });
      expect(runs).toBe(1);
    });

    it("rejects with the handler's error as cause when a fixed lease expired while it ran", async () => {
      const rec = recordingEdgeLock();
      const boom = new Error("boom");
      const webhook = lockWebhook(
        { edgelock: rec.edgelock, key: eventKey, leaseTime: 100 },
        async (_r, { lease }) => {
          await aborted(lease.signal);
          throw boom;
        },
      );
      const error = await webhook(delivery("lost-throws")).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LeaseLostError);
      expect(error).toMatchObject({ outcome: "threw" });
      expect((error as LeaseLostError).cause).toBe(boom);
      expect(await raw.exists(done(`${prefix}evt:lost-throws`))).toBe(0);
    });

    it("a fixed lease that expired while the handler ran: the 2xx is recorded before the call rejects", async () => {
      const rec = recordingEdgeLock();
      const webhook = lockWebhook(
        { edgelock: rec.edgelock, key: eventKey, leaseTime: 100 },
        async (_r, { lease }) => {
          await aborted(lease.signal);
          return Response.json({ received: true });
        },
      );
      await expect(webhook(delivery("lost-expired-2xx"))).rejects.toBeInstanceOf(LeaseLostError);
      // Awaited, not left running behind the answer.
      expect(rec.events.filter((e) => e.type === "release")).toHaveLength(1);
      expect(await raw.exists(done(`${prefix}evt:lost-expired-2xx`))).toBe(1);
    });

    it('with onLeaseLost: "return" answers the handler\'s response', async () => {
      const rec = recordingEdgeLock();
      const webhook = lockWebhook(
        { edgelock: rec.edgelock, key: eventKey, onLeaseLost: "return" },
        async (_r, { key }) => {
          await recordingEdgeLock().edgelock.getLock(key).forceUnlock();
          return new Response("done", { status: 202 });
        },
      );
      const res = await webhook(delivery("lost-return"));
      expect(res.status).toBe(202);
      expect(await res.text()).toBe("done");
    });
  });

  it("answers 400 without running the handler when the key function finds no key", async () => {
    const rec = recordingEdgeLock();
    const { runs, handler } = countingHandler();
    const webhook = lockWebhook(
      { edgelock: rec.edgelock, key: (req) => req.headers.get("webhook-id") },
      handler,
    );
    const res = await webhook(delivery("no-header"));
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "missing-key" });
    expect(runs).toEqual([]);
    expect(rec.events).toEqual([]);
  });

  it("answers 400, never 500, when the key function throws (a malformed body) or returns a bad name", async () => {
    const rec = recordingEdgeLock();
    const { runs, handler } = countingHandler();
    const fromBody = lockWebhook({ edgelock: rec.edgelock, key: eventKey }, handler);
    const malformed = new Request("http://127.0.0.1/api/webhook", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    const res = await fromBody(malformed);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "invalid-key" });

    // A name the payload makes unusable (braces, too long, not a string) is the sender's too.
    for (const bad of ["a{b}", "x".repeat(513), 42]) {
      const webhook = lockWebhook({ edgelock: rec.edgelock, key: () => bad as string }, handler);
      const answer = await webhook(delivery("bad-name"));
      expect(answer.status).toBe(400);
      expect(await answer.json()).toEqual({ error: "invalid-key" });
    }
    expect(runs).toEqual([]);
    expect(rec.events).toEqual([]); // no Redis request was made
  });

  it("onKeyError builds the answer to a delivery without a usable key", async () => {
    const rec = recordingEdgeLock();
    const { runs, handler } = countingHandler();
    const seen: { reason: string; error?: unknown }[] = [];
    const boom = new SyntaxError("Unexpected token");
    const webhook = lockWebhook(
      {
        edgelock: rec.edgelock,
        key: (req) => {
          if (req.headers.get("x-case") === "throw") throw boom;
          return req.headers.get("webhook-id");
        },
        onKeyError: (_req, info, ...rest) => {
          expect(rest).toEqual([]);
          seen.push(info);
          return Response.json({ dropped: info.reason }, { status: 422 });
        },
      },
      handler,
    );
    const thrown = await webhook(
      new Request("http://127.0.0.1/hook", { method: "POST", headers: { "x-case": "throw" } }),
    );
    expect(thrown.status).toBe(422);
    expect(await thrown.json()).toEqual({ dropped: "invalid" });
    const missing = await webhook(new Request("http://127.0.0.1/hook", { method: "POST" }));
    expect(await missing.json()).toEqual({ dropped: "missing" });
    expect(seen).toEqual([{ reason: "invalid", error: boom }, { reason: "missing" }]);
    expect(runs).toEqual([]);
    expect(() =>
      lockWebhook({ edgelock: rec.edgelock, key: eventKey, onKeyError: 400 as never }, handler),
    ).toThrow(/`onKeyError`/);
  });

  it("uses onLocked and onCompleted when given", async () => {
    const rec = recordingEdgeLock();
    const name = `${prefix}evt:hooks`;
    const webhook = lockWebhook(
      {
        edgelock: rec.edgelock,
        key: eventKey,
        onLocked: (_req, info) =>
          new Response(`busy ${info.key} ${info.retryAfter}`, { status: 503 }),
        onCompleted: (_req, info) =>
          new Response(`seen ${info.key} ${info.completedTtl > 0}`, { status: 202 }),
      },
      async () => Response.json({ received: true }),
    );
    const holder = await rec.edgelock.getLock(name).tryLock({ leaseTime: 4_000 });
    if (!holder) throw new Error("not acquired");
    const busy = await webhook(delivery("hooks"));
    expect(busy.status).toBe(503);
    expect(await busy.text()).toBe(`busy ${name} 4`);
    await holder.release();
    expect((await webhook(delivery("hooks"))).status).toBe(200);
    const seen = await webhook(delivery("hooks"));
    expect(seen.status).toBe(202);
    expect(await seen.text()).toBe(`seen ${name} true`);
  });

  it("passes extra arguments (e.g. a Worker's env) to every callback", async () => {
    const rec = recordingEdgeLock();
    type Env = { edgelock: EdgeLock; tag: string };
    const seen: string[] = [];
    const webhook = lockWebhook<[Env]>(
      {
        edgelock: (_req, env) => {
          seen.push(`edgelock:${env.tag}`);
          return env.edgelock;
        },
        key: async (req, env) => `${await eventKey(req)}:${env.tag}`,
      },
      async (_req, { key }, env) => {
        seen.push(`handler:${env.tag}:${key}`);
        return new Response(null, { status: 204 });
      },
    );
    const res = await webhook(delivery("args"), { edgelock: rec.edgelock, tag: "t1" });
    expect(res.status).toBe(204);
    expect(seen).toEqual(["edgelock:t1", `handler:t1:${prefix}evt:args:t1`]);
  });

  it("composes with Hono on Workers: env and execution context as extra arguments", async () => {
    type Env = { UPSTASH_REDIS_REST_URL: string; UPSTASH_REDIS_REST_TOKEN: string };
    const tasks: Promise<unknown>[] = [];
    const ctx = {
      waitUntil: (p: Promise<unknown>) => {
        tasks.push(p);
      },
      passThroughOnException: () => {},
      props: {},
    };
    let runs = 0;
    const webhook = lockWebhook<[Env, ExecutionContext]>(
      {
        edgelock: (_request, env) =>
          new EdgeLock({
            redis: new Redis({
              url: env.UPSTASH_REDIS_REST_URL,
              token: env.UPSTASH_REDIS_REST_TOKEN,
            }),
          }),
        key: (request) => request.headers.get("webhook-id"),
        waitUntil: (promise, _request, _env, ctx) => ctx.waitUntil(promise),
      },
      async (request, { lease }) => {
        runs++;
        expect(await request.json()).toMatchObject({ id: "hono" });
        expect(lease.signal.aborted).toBe(false);
        return Response.json({ received: true });
      },
    );
    const app = new Hono<{ Bindings: Env }>();
    app.post("/api/webhook", (c) => webhook(c.req.raw, c.env, c.executionCtx));
    const { url, token } = sharedBridge();
    const env: Env = { UPSTASH_REDIS_REST_URL: url, UPSTASH_REDIS_REST_TOKEN: token };
    const send = () => {
      const req = delivery("hono");
      req.headers.set("webhook-id", `${prefix}msg_hono`);
      return app.request(req, undefined, env, ctx);
    };
    expect((await send()).status).toBe(200);
    expect(tasks).toHaveLength(1);
    await Promise.all(tasks);
    const again = await send();
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ duplicate: true, key: `${prefix}msg_hono` });
    expect(runs).toBe(1);
  });

  it("rejects a handler returning no Response", async () => {
    const rec = recordingEdgeLock();
    const noResponse = lockWebhook(
      { edgelock: rec.edgelock, key: eventKey },
      (async () => undefined) as unknown as WebhookHandler,
    );
    await expect(noResponse(delivery("no-response"))).rejects.toThrow(/must return a Response/);
    expect(await raw.exists(`${prefix}evt:no-response`)).toBe(0);
    expect(await raw.exists(done(`${prefix}evt:no-response`))).toBe(0);
  });

  describe("through a bridge that applies a request and loses the response", () => {
    const bridge = usePrivateBridge();

    async function warmWebhook() {
      const rec = recordingEdgeLock({}, bridge.redis());
      const { runs, handler } = countingHandler();
      const webhook = lockWebhook(
        { edgelock: rec.edgelock, key: eventKey, leaseTime: 10_000 },
        async (request, context) => {
          const res = await handler(request, context);
          onHandled?.();
          return res;
        },
      );
      let onHandled: (() => void) | undefined;
      await webhook(delivery(`warm-${Math.random()}`));
      runs.length = 0;
      rec.events.length = 0;
      return {
        rec,
        runs,
        webhook,
        afterHandler: (f: () => void) => {
          onHandled = f;
        },
      };
    }

    const loseNextEvalsha = () =>
      bridge.bridge.setFaults({
        rules: [{ action: "lose", mode: "close", match: "evalsha", times: 1 }],
      });

    it("a replayed claim holds once: one run, the lock fully released by the completion", async () => {
      const { rec, runs, webhook } = await warmWebhook();
      const before = bridge.bridge.stats().byCommand.evalsha ?? 0;
      loseNextEvalsha();
      const res = await webhook(delivery("replay-claim"));
      bridge.bridge.clearFaults();
      expect(res.status).toBe(200);
      expect(runs).toEqual(["replay-claim"]);
      // claim sent twice (applied, lost, resent), completion once
      expect((bridge.bridge.stats().byCommand.evalsha ?? 0) - before).toBe(3);
      expect(rec.events.find((e) => e.type === "release")).toMatchObject({ result: "released" });
      expect(await raw.exists(`${prefix}evt:replay-claim`)).toBe(0);
      expect((await webhook(delivery("replay-claim"))).status).toBe(200);
      expect(runs).toEqual(["replay-claim"]);
    });

    it("a replayed completion records once and releases once", async () => {
      const { rec, runs, webhook, afterHandler } = await warmWebhook();
      afterHandler(loseNextEvalsha);
      const before = bridge.bridge.stats().byCommand.evalsha ?? 0;
      const res = await webhook(delivery("replay-complete"));
      bridge.bridge.clearFaults();
      expect(res.status).toBe(200);
      expect((bridge.bridge.stats().byCommand.evalsha ?? 0) - before).toBe(3);
      expect(rec.events.filter((e) => e.type === "release")).toMatchObject([
        { result: "released" },
      ]);
      expect(await raw.exists(`${prefix}evt:replay-complete`)).toBe(0);
      expect(await raw.exists(done(`${prefix}evt:replay-complete`))).toBe(1);
      for (let i = 0; i < 2; i++) {
        expect((await webhook(delivery("replay-complete"))).status).toBe(200);
      }
      expect(runs).toEqual(["replay-complete"]);
    });

    it("a replayed release after a failed run releases once; the retry reprocesses", async () => {
      const rec = recordingEdgeLock({}, bridge.redis());
      let attempts = 0;
      const webhook = lockWebhook({ edgelock: rec.edgelock, key: eventKey }, async () => {
        attempts++;
        if (attempts === 2) {
          loseNextEvalsha();
          return new Response("try later", { status: 503 });
        }
        return Response.json({ received: true });
      });
      await webhook(delivery(`warm-${Math.random()}`));
      expect((await webhook(delivery("replay-release"))).status).toBe(503);
      bridge.bridge.clearFaults();
      expect(rec.events.filter((e) => e.type === "release").at(-1)).toMatchObject({
        result: "released",
      });
      expect(await raw.exists(`${prefix}evt:replay-release`)).toBe(0);
      expect((await webhook(delivery("replay-release"))).status).toBe(200);
      expect(attempts).toBe(3);
    });

    it("a failed completion is reported as an error event and the response stands", async () => {
      const rec = recordingEdgeLock({}, bridge.redis());
      const name = `${prefix}evt:complete-fails`;
      const webhook = lockWebhook(
        { edgelock: rec.edgelock, key: eventKey, leaseTime: 10_000 },
        async () => {
          bridge.bridge.setFaults({ rules: [{ action: "fail", match: "evalsha" }] });
          return Response.json({ received: true });
        },
      );
      const res = await webhook(delivery("complete-fails"));
      bridge.bridge.clearFaults();
      expect(res.status).toBe(200);
      expect(rec.events.find((e) => e.type === "error")).toMatchObject({
        operation: "release",
        name,
      });
      // Not recorded: the lock expires after its lease, and a redelivery then reprocesses.
      expect(await raw.exists(done(name))).toBe(0);
      expect(await rec.edgelock.getLock(name).forceUnlock()).toBe(true);
    });
  });

  describe("invalid options throw when lockWebhook is called", () => {
    const edgelock = new EdgeLock({
      redis: {
        eval: () => Promise.reject(new Error("no request expected")),
        evalsha: () => Promise.reject(new Error("no request expected")),
      },
    });
    const key = () => "k";
    const ok = async () => new Response();
    it.each([
      ["no options", () => lockWebhook(undefined as never, ok), TypeError, /`edgelock`/],
      ["missing edgelock", () => lockWebhook({ key } as never, ok), TypeError, /`edgelock`/],
      [
        "edgelock not an EdgeLock",
        () => lockWebhook({ edgelock: {} as never, key }, ok),
        TypeError,
        /`edgelock`/,
      ],
      ["missing key", () => lockWebhook({ edgelock } as never, ok), TypeError, /`key` is required/],
      [
        "key not a function",
        () => lockWebhook({ edgelock, key: "k" as never }, ok),
        TypeError,
        /`key`/,
      ],
      [
        "handler not a function",
        () => lockWebhook({ edgelock, key }, undefined as never),
        TypeError,
        /`handler`/,
      ],
      [
        "completionTtl 0",
        () => lockWebhook({ edgelock, key, completionTtl: 0 }, ok),
        RangeError,
        /`completionTtl`/,
      ],
      [
        "completionTtl over a year",
        () => lockWebhook({ edgelock, key, completionTtl: 31_536_000_001 }, ok),
        RangeError,
        /`completionTtl`/,
      ],
      [
        "completionTtl as a string",
        () => lockWebhook({ edgelock, key, completionTtl: "3d" as never }, ok),
        TypeError,
        /`completionTtl`/,
      ],
      [
        "leaseTime 0",
        () => lockWebhook({ edgelock, key, leaseTime: 0 }, ok),
        RangeError,
        /`leaseTime`/,
      ],
      [
        "bad keepAlive",
        () => lockWebhook({ edgelock, key, keepAlive: 1 as never }, ok),
        TypeError,
        /`keepAlive`/,
      ],
      [
        "waitUntil not a function",
        () => lockWebhook({ edgelock, key, waitUntil: {} as never }, ok),
        TypeError,
        /`waitUntil`/,
      ],
      [
        "onLocked not a function",
        () => lockWebhook({ edgelock, key, onLocked: 1 as never }, ok),
        TypeError,
        /`onLocked`/,
      ],
      [
        "onCompleted not a function",
        () => lockWebhook({ edgelock, key, onCompleted: 1 as never }, ok),
        TypeError,
        /`onCompleted`/,
      ],
      [
        "bad onLeaseLost",
        () => lockWebhook({ edgelock, key, onLeaseLost: "ignore" as never }, ok),
        TypeError,
        /`onLeaseLost` must be "throw" or "return"/,
      ],
      [
        "unknown option",
        () => lockWebhook({ edgelock, key, ttl: 1 } as never, ok),
        TypeError,
        /unknown option `ttl`/,
      ],
    ])("%s", (_, call, type, message) => {
      expect(call).toThrow(type);
      expect(call).toThrow(message);
    });
  });
});

describe("lockCron", () => {
  const secret = "s3cret-for-tests";
  const cronRequest = (path = "/api/cron", auth: string | null = `Bearer ${secret}`) =>
    new Request(`http://127.0.0.1${path}`, {
      headers: auth === null ? {} : { authorization: auth, "user-agent": "vercel-cron/1.0" },
    });

  it("skips a run that overlaps a running one (200 + skipped body, skip event)", async () => {
    const rec = recordingEdgeLock();
    const entered = deferred();
    const gate = deferred();
    let runs = 0;
    const path = `/api/cron/${prefix.replaceAll(":", "-")}overlap`;
    const cron = lockCron({ edgelock: rec.edgelock, cronSecret: secret }, async (_req, ctx) => {
      runs++;
      expect(ctx.name).toBe(`cron:${path}`);
      expect(ctx.lease.signal.aborted).toBe(false);
      entered.resolve();
      await gate.promise;
      return Response.json({ ran: true });
    });
    const first = cron(cronRequest(path));
    await entered.promise;
    const second = await cron(cronRequest(path));
    expect(second.status).toBe(200);
    const body = (await second.json()) as Record<string, unknown>;
    // The answer and the event give one reason.
    expect(body).toMatchObject({ skipped: true, reason: "overlap", name: `cron:${path}` });
    expect(body.retryAfter).toBeGreaterThanOrEqual(1);
    const skip = skips(rec.events);
    expect(skip).toHaveLength(1);
    expect(skip[0]).toMatchObject({
      type: "skip",
      name: `cron:${path}`,
      reason: "overlap",
      requests: 0,
    });
    expect((skip[0] as { holderTtl: number }).holderTtl).toBeGreaterThan(0);
    gate.resolve();
    const res = await first;
    expect(await res.json()).toEqual({ ran: true });
    expect(runs).toBe(1);
    expect(await rec.edgelock.getLock(`cron:${path}`).isLocked()).toBe(false);
  });

  it("answers 401 to a missing or wrong CRON secret, before any Redis request", async () => {
    const rec = recordingEdgeLock();
    let runs = 0;
    const cron = lockCron(
      { edgelock: rec.edgelock, cronSecret: secret, name: `${prefix}auth` },
      () => {
        runs++;
        return new Response("ok");
      },
    );
    for (const auth of [null, "Bearer wrong", `Bearer ${secret}x`, secret, `bearer ${secret}`]) {
      const res = await cron(cronRequest("/api/cron", auth));
      expect(res.status, String(auth)).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe("Bearer");
      expect(await res.json()).toEqual({ error: "unauthorized" });
    }
    expect(runs).toBe(0);
    expect(rec.events).toEqual([]);
    expect((await cron(cronRequest())).status).toBe(200);
    expect(runs).toBe(1);
  });

  it("without cronSecret, does not check the header", async () => {
    const rec = recordingEdgeLock();
    const cron = lockCron(
      { edgelock: rec.edgelock, name: `${prefix}open` },
      () => new Response("ok"),
    );
    expect((await cron(cronRequest("/api/cron", null))).status).toBe(200);
  });

  it("keeps the lease alive with the timer while the handler runs, and releases after", async () => {
    const rec = recordingEdgeLock({ watchdogTimeout: 300 });
    const name = `${prefix}keepalive`;
    const cron = lockCron({ edgelock: rec.edgelock, name }, async (_req, { lease }) => {
      // Runs well past its 300 ms lease: only the timer keeps it.
      await rec.until(
        (_, all) =>
          all.filter((e) => e.type === "renew" && e.renewed && e.by === "timer").length >= 4,
      );
      expect(lease.signal.aborted).toBe(false);
      expect(await rec.edgelock.getLock(name).isHeldBy(lease.owner)).toBe(true);
      return new Response("long job done");
    });
    const res = await cron(cronRequest());
    expect(await res.text()).toBe("long job done");
    expect(await rec.edgelock.getLock(name).isLocked()).toBe(false);
    expect(rec.events.filter((e) => e.type === "lost")).toEqual([]);
  });

  it("releases when the handler throws, and the error propagates", async () => {
    const rec = recordingEdgeLock();
    const name = `${prefix}cron-throws`;
    const cron = lockCron({ edgelock: rec.edgelock, name }, () => {
      throw new Error("job failed");
    });
    await expect(cron(cronRequest())).rejects.toThrow("job failed");
    expect(await rec.edgelock.getLock(name).isLocked()).toBe(false);
  });

  describe("lease lost while the handler ran", () => {
    it("rejects with LeaseLostError carrying the Response when another client force-unlocked", async () => {
      const rec = recordingEdgeLock();
      const name = `${prefix}cron-lost`;
      const cron = lockCron({ edgelock: rec.edgelock, name }, async () => {
        expect(await recordingEdgeLock().edgelock.getLock(name).forceUnlock()).toBe(true);
        return new Response("ran");
      });
      const error = await cron(cronRequest()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LeaseLostError);
      expect(error).toMatchObject({ resource: name, outcome: "returned" });
      expect(await ((error as LeaseLostError).result as Response).text()).toBe("ran");
    });

    it("a loss a keep-alive renewal found: the release is awaited before the call rejects", async () => {
      const rec = recordingEdgeLock();
      const name = `${prefix}cron-lost-renewal`;
      const cron = lockCron(
        { edgelock: rec.edgelock, name, leaseTime: 100 },
        async (_r, { lease }) => {
          await recordingEdgeLock().edgelock.getLock(name).forceUnlock();
          await aborted(lease.signal);
          return new Response("ran");
        },
      );
      await expect(cron(cronRequest())).rejects.toBeInstanceOf(LeaseLostError);
      expect(rec.events.filter((e) => e.type === "release")).toMatchObject([{ result: "expired" }]);
    });

    it("with waitUntil, rejects for a loss a keep-alive renewal found, the handler's error attached", async () => {
      const rec = recordingEdgeLock();
      const name = `${prefix}cron-lost-expired`;
      const tasks: Promise<unknown>[] = [];
      const boom = new Error("job failed");
      const cron = lockCron(
        { edgelock: rec.edgelock, name, leaseTime: 100, waitUntil: (p) => void tasks.push(p) },
        async (_req, { lease }) => {
          // The next timer renewal finds the hold gone and aborts the signal.
          await recordingEdgeLock().edgelock.getLock(name).forceUnlock();
          await aborted(lease.signal);
          throw boom;
        },
      );
      const error = await cron(cronRequest()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LeaseLostError);
      expect((error as LeaseLostError).cause).toBe(boom);
      await Promise.all(tasks);
    });

    it('with onLeaseLost: "return" answers the handler\'s response', async () => {
      const rec = recordingEdgeLock();
      const name = `${prefix}cron-lost-return`;
      const cron = lockCron({ edgelock: rec.edgelock, name, onLeaseLost: "return" }, async () => {
        await recordingEdgeLock().edgelock.getLock(name).forceUnlock();
        return new Response("ran");
      });
      expect(await (await cron(cronRequest())).text()).toBe("ran");
    });
  });

  it("hands the release to waitUntil when given, and uses onSkip and a name function", async () => {
    const rec = recordingEdgeLock();
    const tasks: Promise<unknown>[] = [];
    const name = `${prefix}cron-wait-until`;
    const cron = lockCron(
      {
        edgelock: rec.edgelock,
        name: (req) => `${name}:${new URL(req.url).searchParams.get("job")}`,
        leaseTime: 5_000,
        waitUntil: (p) => {
          tasks.push(p);
        },
        onSkip: (_req, info) =>
          new Response(`skipped ${info.name} ${info.retryAfter} (${info.reason})`),
      },
      () => new Response("ran"),
    );
    const res = await cron(cronRequest("/api/cron?job=a"));
    expect(await res.text()).toBe("ran");
    expect(tasks).toHaveLength(1);
    await Promise.all(tasks);
    expect(await rec.edgelock.getLock(`${name}:a`).isLocked()).toBe(false);

    const holder = await rec.edgelock.getLock(`${name}:b`).tryLock({ leaseTime: 5_000 });
    if (!holder) throw new Error("not acquired");
    const skipped = await cron(cronRequest("/api/cron?job=b"));
    expect(await skipped.text()).toBe(`skipped ${name}:b 5 (overlap)`);
    await holder.release();
  });

  describe("invalid options throw when lockCron is called", () => {
    const edgelock = new EdgeLock({
      redis: {
        eval: () => Promise.reject(new Error("no request expected")),
        evalsha: () => Promise.reject(new Error("no request expected")),
      },
    });
    const ok = () => new Response();
    it.each([
      ["missing edgelock", () => lockCron({} as never, ok), TypeError, /`edgelock`/],
      [
        "cronSecret present but undefined",
        () => lockCron({ edgelock, cronSecret: undefined }, ok),
        TypeError,
        /CRON_SECRET/,
      ],
      [
        "empty cronSecret",
        () => lockCron({ edgelock, cronSecret: "" }, ok),
        RangeError,
        /`cronSecret`/,
      ],
      ["name with {", () => lockCron({ edgelock, name: "a{b" }, ok), RangeError, /`name`/],
      ["leaseTime 0", () => lockCron({ edgelock, leaseTime: 0 }, ok), RangeError, /`leaseTime`/],
      [
        "waitUntil not a function",
        () => lockCron({ edgelock, waitUntil: 1 as never }, ok),
        TypeError,
        /`waitUntil`/,
      ],
      [
        "onSkip not a function",
        () => lockCron({ edgelock, onSkip: 1 as never }, ok),
        TypeError,
        /`onSkip`/,
      ],
      [
        "handler not a function",
        () => lockCron({ edgelock }, null as never),
        TypeError,
        /`handler`/,
      ],
      [
        "bad onLeaseLost",
        () => lockCron({ edgelock, onLeaseLost: 1 as never }, ok),
        TypeError,
        /`onLeaseLost` must be "throw" or "return"/,
      ],
      [
        "unknown option",
        () => lockCron({ edgelock, secret: "x" } as never, ok),
        TypeError,
        /unknown option `secret`/,
      ],
    ])("%s", (_, call, type, message) => {
      expect(call).toThrow(type);
      expect(call).toThrow(message);
    });
  });
});
