/** `withLock` Hono middleware, through `app.request()` against the real bridge and Redis. */
import { Redis } from "@upstash/redis";
import { Hono } from "hono";
import { describe, expect, it, vi } from "vitest";
import { withLock } from "../../src/hono.js";
import { EdgeLock, type Lease, LeaseLostError, TransportError } from "../../src/index.js";
import { keyPrefix, sharedBridge, usePrivateBridge } from "../support/env.js";
import { aborted, recordingEdgeLock } from "../support/locks.js";

const prefix = keyPrefix();

/** A promise with its resolve function, to hold a handler inside its critical section. */
function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** A fake Workers execution context that records what it is handed. */
function executionContext() {
  const tasks: Promise<unknown>[] = [];
  return {
    tasks,
    ctx: {
      waitUntil: (p: Promise<unknown>) => {
        tasks.push(p);
      },
      passThroughOnException: () => {},
      props: {},
    },
  };
}

const encode = (s: string) => new TextEncoder().encode(s);

describe("withLock middleware", () => {
  it("runs the handler holding the lock, exposes c.var.lease, and releases", async () => {
    const rec = recordingEdgeLock();
    const key = `${prefix}basic`;
    const lock = rec.edgelock.getLock(key);
    let seen: Lease | undefined;
    const app = new Hono();
    app.get("/basic", withLock({ edgelock: rec.edgelock, key, leaseTime: 10_000 }), async (c) => {
      seen = c.var.lease;
      return c.json({
        name: c.var.lease.name,
        held: await lock.isHeldBy(c.get("lease").owner),
        aborted: c.var.lease.signal.aborted,
      });
    });
    const res = await app.request("/basic");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ name: key, held: true, aborted: false });
    expect(await lock.isLocked()).toBe(false);
    expect(seen?.signal.aborted).toBe(true);
    expect(rec.events.filter((e) => e.type === "release")).toMatchObject([{ result: "released" }]);
  });

  it("answers a concurrent request 409 with Retry-After and a JSON body", async () => {
    const rec = recordingEdgeLock();
    const key = `${prefix}busy`;
    const entered = deferred();
    const gate = deferred();
    const app = new Hono();
    app.post("/busy", withLock({ edgelock: rec.edgelock, key, leaseTime: 10_000 }), async (c) => {
      entered.resolve();
      await gate.promise;
      return c.text("done");
    });
    const first = app.request("/busy", { method: "POST" });
    await entered.promise;
    const second = await app.request("/busy", { method: "POST" });
    expect(second.status).toBe(409);
    const retryAfter = Number(second.headers.get("retry-after"));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(10);
    expect(await second.json()).toEqual({ error: "locked", key, retryAfter });
    gate.resolve();
    const ok = await first;
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe("done");
    expect(await rec.edgelock.getLock(key).isLocked()).toBe(false);
  });

  it("rounds Retry-After up from the holder's PTTL and never below 1 second", async () => {
    const rec = recordingEdgeLock();
    const key = `${prefix}retry-after`;
    const holder = await rec.edgelock.getLock(key).tryLock({ leaseTime: 300 });
    if (!holder) throw new Error("not acquired");
    const app = new Hono();
    app.get("/r", withLock({ edgelock: rec.edgelock, key }), (c) => c.text("no"));
    const res = await app.request("/r");
    expect(res.status).toBe(409);
    expect(res.headers.get("retry-after")).toBe("1");
    await holder.release();
  });

  it("uses onLocked's response instead of the default", async () => {
    const rec = recordingEdgeLock();
    const key = `${prefix}on-locked`;
    const holder = await rec.edgelock.getLock(key).tryLock({ leaseTime: 5_000 });
    if (!holder) throw new Error("not acquired");
    const infos: unknown[] = [];
    const app = new Hono();
    app.get(
      "/x",
      withLock({
        edgelock: rec.edgelock,
        key,
        onLocked: (c, info) => {
          infos.push(info);
          return c.text(`busy for ${info.retryAfter}s`, 423);
        },
      }),
      (c) => c.text("never"),
    );
    const res = await app.request("/x");
    expect(res.status).toBe(423);
    expect(await res.text()).toBe("busy for 5s");
    expect(infos).toHaveLength(1);
    const info = infos[0] as { key: string; retryAfter: number; holderTtl: number };
    expect(info.key).toBe(key);
    expect(info.retryAfter).toBe(5);
    expect(info.holderTtl).toBeGreaterThan(4_000);
    expect(info.holderTtl).toBeLessThanOrEqual(5_000);
    await holder.release();
  });

  it("waits up to waitTime for the holder", async () => {
    const rec = recordingEdgeLock();
    const key = `${prefix}wait`;
    const holder = await rec.edgelock.getLock(key).tryLock({ leaseTime: 10_000 });
    if (!holder) throw new Error("not acquired");
    const app = new Hono();
    app.get("/w", withLock({ edgelock: rec.edgelock, key, waitTime: 10_000 }), (c) =>
      c.text("got it"),
    );
    const pending = app.request("/w");
    await rec.until((e) => e.type === "waiting");
    await holder.release();
    const res = await pending;
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("got it");
    expect(await rec.edgelock.getLock(key).isLocked()).toBe(false);
  });

  it("releases when the handler throws, and the error reaches app.onError", async () => {
    const rec = recordingEdgeLock();
    const key = `${prefix}throws`;
    const errors: unknown[] = [];
    let seen: Lease | undefined;
    const app = new Hono();
    app.onError((error, c) => {
      errors.push(error);
      return c.text("handled", 500);
    });
    app.get("/t", withLock({ edgelock: rec.edgelock, key, leaseTime: 10_000 }), (c) => {
      seen = c.var.lease;
      throw new Error("boom");
    });
    const res = await app.request("/t");
    expect(res.status).toBe(500);
    expect(await res.text()).toBe("handled");
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toBe("boom");
    expect(seen?.signal.aborted).toBe(true);
    expect(await rec.edgelock.getLock(key).isLocked()).toBe(false);
  });

  describe("lease lost while the route ran", () => {
    /** An app whose onError maps a lost lease to 503 and records what it was given. */
    function mappingApp() {
      const errors: unknown[] = [];
      const app = new Hono();
      app.onError((error, c) => {
        errors.push(error);
        return error instanceof LeaseLostError
          ? c.json({ error: "lease-lost" }, 503)
          : c.text("handled", 500);
      });
      return { app, errors };
    }

    it("answers 500 by default when a fixed lease expired while the handler ran", async () => {
      const rec = recordingEdgeLock();
      const key = `${prefix}lost-default`;
      const app = new Hono();
      app.get("/l", withLock({ edgelock: rec.edgelock, key, leaseTime: 100 }), async (c) => {
        await aborted(c.var.lease.signal);
        return c.text("late");
      });
      // Hono's default onError logs what it turns into a 500.
      const logged = vi.spyOn(console, "error").mockImplementation(() => {});
      try {
        const res = await app.request("/l");
        expect(res.status).toBe(500);
        expect(logged.mock.calls.map((call) => call[0])).toEqual([expect.any(LeaseLostError)]);
      } finally {
        logged.mockRestore();
      }
    });

    it("hands app.onError a LeaseLostError carrying the route's Response, which it maps to 503", async () => {
      const rec = recordingEdgeLock();
      const key = `${prefix}lost-mapped`;
      const { app, errors } = mappingApp();
      app.get("/l", withLock({ edgelock: rec.edgelock, key, leaseTime: 100 }), async (c) => {
        await aborted(c.var.lease.signal);
        return c.text("late");
      });
      const res = await app.request("/l");
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ error: "lease-lost" });
      expect(errors).toHaveLength(1);
      const error = errors[0] as LeaseLostError;
      expect(error).toMatchObject({ code: "LEASE_LOST", resource: key, outcome: "returned" });
      expect(error.result).toBeInstanceOf(Response);
      expect(await (error.result as Response).text()).toBe("late");
    });

    it("on Workers (waitUntil release) reports a loss the lease's signal saw", async () => {
      const rec = recordingEdgeLock();
      const key = `${prefix}lost-wait-until`;
      const { tasks, ctx } = executionContext();
      const { app, errors } = mappingApp();
      app.get("/l", withLock({ edgelock: rec.edgelock, key, leaseTime: 100 }), async (c) => {
        await aborted(c.var.lease.signal);
        return c.text("late");
      });
      const res = await app.request("/l", {}, undefined, ctx);
      expect(res.status).toBe(503);
      expect(errors).toMatchObject([{ code: "LEASE_LOST", outcome: "returned" }]);
      expect(tasks).toHaveLength(1);
      await Promise.all(tasks);
    });

    it("reports a force-unlock the awaited release found, with the handler's error as cause", async () => {
      const rec = recordingEdgeLock();
      const key = `${prefix}lost-forced`;
      const other = recordingEdgeLock().edgelock.getLock(key);
      const { app, errors } = mappingApp();
      const boom = new Error("boom");
      app.get("/l", withLock({ edgelock: rec.edgelock, key, leaseTime: 10_000 }), async () => {
        expect(await other.forceUnlock()).toBe(true);
        throw boom;
      });
      const res = await app.request("/l");
      expect(res.status).toBe(503);
      // onError sees the handler's error first, then the lost lease that wraps it.
      expect(errors).toHaveLength(2);
      expect(errors[0]).toBe(boom);
      expect(errors[1]).toBeInstanceOf(LeaseLostError);
      expect(errors[1]).toMatchObject({ outcome: "threw" });
      expect((errors[1] as LeaseLostError).cause).toBe(boom);
      expect(rec.events.filter((e) => e.type === "release")).toMatchObject([{ result: "expired" }]);
    });

    it('with onLeaseLost: "return" sends the route\'s answer', async () => {
      const rec = recordingEdgeLock();
      const key = `${prefix}lost-return`;
      const { app, errors } = mappingApp();
      app.get(
        "/l",
        withLock({ edgelock: rec.edgelock, key, leaseTime: 100, onLeaseLost: "return" }),
        async (c) => {
          await aborted(c.var.lease.signal);
          return c.text("late");
        },
      );
      const res = await app.request("/l");
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("late");
      expect(errors).toEqual([]);
    });
  });

  it("holds the lock while a streamed body is open and releases when it has been read", async () => {
    const rec = recordingEdgeLock();
    const key = `${prefix}stream`;
    const lock = rec.edgelock.getLock(key);
    let source!: ReadableStreamDefaultController<Uint8Array>;
    const app = new Hono();
    app.get("/s", withLock({ edgelock: rec.edgelock, key, leaseTime: 10_000 }), () => {
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          source = controller;
        },
      });
      return new Response(body, { headers: { "content-type": "text/plain", "x-kept": "yes" } });
    });
    const res = await app.request("/s");
    expect(res.status).toBe(200);
    expect(res.headers.get("x-kept")).toBe("yes");
    expect(await lock.isLocked()).toBe(true);
    source.enqueue(encode("hello "));
    expect(await lock.isLocked()).toBe(true);
    source.enqueue(encode("world"));
    source.close();
    expect(await res.text()).toBe("hello world");
    expect(await lock.isLocked()).toBe(false);
    expect(rec.events.filter((e) => e.type === "release")).toMatchObject([{ result: "released" }]);
  });

  it("releases when the reader cancels a streamed body, and cancels the source", async () => {
    const rec = recordingEdgeLock();
    const key = `${prefix}stream-cancel`;
    const lock = rec.edgelock.getLock(key);
    const cancelled = deferred<unknown>();
    const app = new Hono();
    app.get("/s", withLock({ edgelock: rec.edgelock, key, leaseTime: 10_000 }), (c) =>
      c.body(
        new ReadableStream<Uint8Array>({
          pull(controller) {
            controller.enqueue(encode("tick"));
          },
          cancel(reason) {
            cancelled.resolve(reason);
          },
        }),
      ),
    );
    const res = await app.request("/s");
    const reader = res.body?.getReader();
    if (!reader) throw new Error("no body");
    expect(new TextDecoder().decode((await reader.read()).value)).toBe("tick");
    expect(await lock.isLocked()).toBe(true);
    await reader.cancel("client went away");
    expect(await cancelled.promise).toBe("client went away");
    expect(await lock.isLocked()).toBe(false);
  });

  it("releases when a streamed body fails, and passes the failure to the reader", async () => {
    const rec = recordingEdgeLock();
    const key = `${prefix}stream-error`;
    const app = new Hono();
    app.get("/s", withLock({ edgelock: rec.edgelock, key, leaseTime: 10_000 }), () => {
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          controller.error(new Error("upstream broke"));
        },
      });
      return new Response(body);
    });
    const res = await app.request("/s");
    await expect(res.text()).rejects.toThrow("upstream broke");
    expect(await rec.edgelock.getLock(key).isLocked()).toBe(false);
  });

  it("with an execution context, hands the release to waitUntil after the body ends", async () => {
    const rec = recordingEdgeLock();
    const key = `${prefix}wait-until`;
    const lock = rec.edgelock.getLock(key);
    const { tasks, ctx } = executionContext();
    const app = new Hono();
    app.get("/j", withLock({ edgelock: rec.edgelock, key, leaseTime: 10_000 }), (c) =>
      c.json({ ok: true }),
    );
    const res = await app.request("/j", {}, undefined, ctx);
    expect(tasks).toHaveLength(1);
    expect(await lock.isLocked()).toBe(true);
    expect(await res.json()).toEqual({ ok: true });
    await Promise.all(tasks);
    expect(await lock.isLocked()).toBe(false);
  });

  it("with an execution context and no body, hands the release to waitUntil at once", async () => {
    const rec = recordingEdgeLock();
    const key = `${prefix}wait-until-empty`;
    const { tasks, ctx } = executionContext();
    const app = new Hono();
    app.delete("/e", withLock({ edgelock: rec.edgelock, key, leaseTime: 10_000 }), (c) =>
      c.body(null, 204),
    );
    const res = await app.request("/e", { method: "DELETE" }, undefined, ctx);
    expect(res.status).toBe(204);
    expect(tasks).toHaveLength(1);
    await Promise.all(tasks);
    expect(await rec.edgelock.getLock(key).isLocked()).toBe(false);
  });

  it("releases at once for HEAD, whose body Hono drops", async () => {
    const rec = recordingEdgeLock();
    const key = `${prefix}head`;
    const app = new Hono();
    app.get("/h", withLock({ edgelock: rec.edgelock, key, leaseTime: 10_000 }), (c) =>
      c.text("body"),
    );
    const res = await app.request("/h", { method: "HEAD" });
    expect(res.status).toBe(200);
    expect(res.body).toBeNull();
    expect(await rec.edgelock.getLock(key).isLocked()).toBe(false);
  });

  it("takes the lock name from a key function using c.req.param", async () => {
    const rec = recordingEdgeLock();
    const entered = deferred();
    const gate = deferred();
    const app = new Hono();
    app.post(
      "/items/:id",
      withLock({
        edgelock: rec.edgelock,
        key: async (c) => `${prefix}item:${c.req.param("id")}`,
        leaseTime: 10_000,
      }),
      async (c) => {
        if (c.req.param("id") === "1") {
          entered.resolve();
          await gate.promise;
        }
        return c.json({ name: c.var.lease.name });
      },
    );
    const one = app.request("/items/1", { method: "POST" });
    await entered.promise;
    const two = await app.request("/items/2", { method: "POST" });
    expect(two.status).toBe(200);
    expect(await two.json()).toEqual({ name: `${prefix}item:2` });
    const oneAgain = await app.request("/items/1", { method: "POST" });
    expect(oneAgain.status).toBe(409);
    expect(await oneAgain.json()).toMatchObject({ key: `${prefix}item:1` });
    gate.resolve();
    expect((await one).status).toBe(200);
  });

  it("builds the EdgeLock from c.env per request", async () => {
    type Bindings = { REDIS_URL: string; REDIS_TOKEN: string };
    const key = `${prefix}env`;
    const built: string[] = [];
    const errors: unknown[] = [];
    const app = new Hono<{ Bindings: Bindings }>();
    app.onError((error, c) => {
      errors.push(error);
      return c.text("redis refused", 500);
    });
    app.get(
      "/env",
      withLock<{ Bindings: Bindings }>({
        edgelock: (c) => {
          built.push(c.env.REDIS_URL);
          return new EdgeLock({
            redis: new Redis({ url: c.env.REDIS_URL, token: c.env.REDIS_TOKEN }),
          });
        },
        key,
        leaseTime: 10_000,
      }),
      (c) => c.json({ name: c.var.lease.name }),
    );
    const { url, token } = sharedBridge();
    const env: Bindings = { REDIS_URL: url, REDIS_TOKEN: token };
    const first = await app.request("/env", {}, env);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ name: key });
    const second = await app.request("/env", {}, env);
    expect(second.status).toBe(200);
    await second.body?.cancel();
    expect(built).toEqual([url, url]);
    const wrongToken = await app.request("/env", {}, { ...env, REDIS_TOKEN: "wrong" });
    expect(wrongToken.status).toBe(500);
    expect(errors[0]).toBeInstanceOf(TransportError);
    expect(String(errors[0])).not.toContain("wrong");
  });

  it.each([
    ["an empty name", ""],
    ["a name with braces", "a{b}"],
    ["a name over 512 characters", "k".repeat(513)],
  ])(
    "answers 400 invalid-key, as lockWebhook does, when the key function returns %s",
    async (_, bad) => {
      const rec = recordingEdgeLock();
      const errors: unknown[] = [];
      const app = new Hono();
      app.onError((error, c) => {
        errors.push(error);
        return c.text("bad", 500);
      });
      const handler = vi.fn((c) => c.text("x"));
      // An empty route parameter: `/orders//pay`.
      app.get("/k/:id?", withLock({ edgelock: rec.edgelock, key: () => bad }), handler);
      const res = await app.request("/k");
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: "invalid-key" });
      expect(errors).toEqual([]);
      expect(handler).not.toHaveBeenCalled();
      expect(rec.events).toHaveLength(0);
    },
  );

  it("an error the key function throws goes to app.onError", async () => {
    const rec = recordingEdgeLock();
    const errors: unknown[] = [];
    const app = new Hono();
    app.onError((error, c) => {
      errors.push(error);
      return c.text("bad", 500);
    });
    const thrown = new Error("session store down");
    app.get(
      "/k",
      withLock({
        edgelock: rec.edgelock,
        key: () => {
          throw thrown;
        },
      }),
      (c) => c.text("x"),
    );
    expect((await app.request("/k")).status).toBe(500);
    expect(errors).toEqual([thrown]);
    expect(rec.events).toHaveLength(0);
  });

  describe("with a faulty bridge", () => {
    const bridge = usePrivateBridge();

    it("a failed acquire reaches app.onError as a TransportError", async () => {
      const rec = recordingEdgeLock({}, bridge.redis());
      bridge.bridge.setFaults({ rules: [{ action: "fail", match: "evalsha" }] });
      const errors: unknown[] = [];
      const app = new Hono();
      app.onError((error, c) => {
        errors.push(error);
        return c.text("down", 503);
      });
      app.get("/f", withLock({ edgelock: rec.edgelock, key: `${prefix}fault-acquire` }), (c) =>
        c.text("never"),
      );
      try {
        expect((await app.request("/f")).status).toBe(503);
      } finally {
        bridge.bridge.clearFaults();
      }
      expect(errors[0]).toBeInstanceOf(TransportError);
    });

    it("a failed release keeps the response and is reported as an error event", async () => {
      const rec = recordingEdgeLock({}, bridge.redis());
      const key = `${prefix}fault-release`;
      const app = new Hono();
      app.get("/f", withLock({ edgelock: rec.edgelock, key, leaseTime: 10_000 }), (c) => {
        // EVAL too: a client whose first script met NOSCRIPT sends the release script with EVAL.
        bridge.bridge.setFaults({
          rules: [
            { action: "fail", match: "evalsha" },
            { action: "fail", match: "eval" },
          ],
        });
        return c.body(null, 204);
      });
      try {
        const res = await app.request("/f");
        expect(res.status).toBe(204);
      } finally {
        bridge.bridge.clearFaults();
      }
      expect(rec.events.find((e) => e.type === "error")).toMatchObject({
        type: "error",
        operation: "release",
        name: key,
      });
      // The lock expires after its lease; clean up now.
      expect(await rec.edgelock.getLock(key).forceUnlock()).toBe(true);
    });
  });

  describe("invalid options throw when the factory runs", () => {
    const edgelock = new EdgeLock({
      redis: {
        eval: () => Promise.reject(new Error("no request expected")),
        evalsha: () => Promise.reject(new Error("no request expected")),
      },
    });
    it.each([
      ["no options", () => withLock(undefined as never), TypeError, /edgelock/],
      ["missing edgelock", () => withLock({ key: "k" } as never), TypeError, /`edgelock`/],
      [
        "edgelock not an EdgeLock",
        () => withLock({ edgelock: {} as never, key: "k" }),
        TypeError,
        /`edgelock`/,
      ],
      ["missing key", () => withLock({ edgelock } as never), TypeError, /`key` is required/],
      [
        "key with {",
        () => withLock({ edgelock, key: "a{b" }),
        RangeError,
        /`key` must not contain/,
      ],
      ["empty key", () => withLock({ edgelock, key: "" }), RangeError, /`key` must be 1 to 512/],
      [
        "key not a string",
        () => withLock({ edgelock, key: 7 as never }),
        TypeError,
        /`key` must be a string/,
      ],
      [
        "negative waitTime",
        () => withLock({ edgelock, key: "k", waitTime: -1 }),
        RangeError,
        /`waitTime`/,
      ],
      [
        "leaseTime 0",
        () => withLock({ edgelock, key: "k", leaseTime: 0 }),
        RangeError,
        /`leaseTime`/,
      ],
      [
        "fractional leaseTime",
        () => withLock({ edgelock, key: "k", leaseTime: 1.5 }),
        RangeError,
        /`leaseTime`/,
      ],
      [
        "bad keepAlive",
        () => withLock({ edgelock, key: "k", keepAlive: "forever" as never }),
        TypeError,
        /`keepAlive`/,
      ],
      [
        "onLocked not a function",
        () => withLock({ edgelock, key: "k", onLocked: 1 as never }),
        TypeError,
        /`onLocked`/,
      ],
      [
        "bad onLeaseLost",
        () => withLock({ edgelock, key: "k", onLeaseLost: "ignore" as never }),
        TypeError,
        /`onLeaseLost` must be "throw" or "return"/,
      ],
      [
        "unknown option",
        () => withLock({ edgelock, key: "k", lease: 1 } as never),
        TypeError,
        /unknown option `lease`/,
      ],
    ])("%s", (_, call, type, message) => {
      expect(call).toThrow(type);
      expect(call).toThrow(message);
    });
  });
});
