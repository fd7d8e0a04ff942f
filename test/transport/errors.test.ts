/**
 * Transport errors say what went wrong: the cause's code for network failures, a definite error
 * with a hint for a bad token, the variables to set for a client with no URL or token, an HTTP
 * answer's status and text as they were (a 4xx other than 408, 425 and 429 definite at once),
 * how many sends a request got, and a malformed reply detected; never a URL, token, owner or
 * request id.
 */
import { createServer } from "node:net";
import { Redis } from "@upstash/redis";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigurationError, EdgeLock, TransportError } from "../../src/index.js";
import { keyPrefix, startPrivateBridge, usePrivateBridge, useRawRedis } from "../support/env.js";
import { recordingEdgeLock } from "../support/locks.js";
import { startRedisServer } from "../support/redis-server.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();

/** A loopback port that nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

async function failure(promise: Promise<unknown>): Promise<TransportError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TransportError);
  return error as TransportError;
}

describe("transport errors", () => {
  it("a stopped endpoint: the message keeps ECONNREFUSED, not the address; definite", async () => {
    const dead = await startPrivateBridge();
    const redis = dead.redis({ retry: { retries: 0 } });
    await dead.close();
    const rec = recordingEdgeLock({}, redis);
    const error = await failure(
      rec.edgelock.getLock(`${prefix}down`).tryLock({ leaseTime: 1_000 }),
    );
    expect(error.message).toMatch(/fetch failed \(ECONNREFUSED: connection refused/);
    expect(error.message).toMatch(/nothing was sent/);
    expect(error.ambiguous).toBe(false);
    expect(error.message).not.toContain(new URL(dead.url).port);
  });

  it("refused with the default client (its 5 retries): ECONNREFUSED, definite, within requestTimeout", async () => {
    const port = await closedPort();
    const redis = new Redis({ url: `http://127.0.0.1:${port}`, token: "t0ken" });
    const rec = recordingEdgeLock({}, redis);
    const started = performance.now();
    const error = await failure(
      rec.edgelock.getLock(`${prefix}refused`).tryLock({ leaseTime: 1_000 }),
    );
    const elapsed = performance.now() - started;
    expect(elapsed).toBeLessThan(rec.edgelock.requestTimeout);
    expect(error.ambiguous).toBe(false);
    expect(error.message).toMatch(/ECONNREFUSED: connection refused.*nothing was sent/);
    expect(error.message).not.toContain(String(port));
    expect((error.cause as { code?: unknown }).code).toBe("ECONNREFUSED");
    // The client's retries were made (by edgelock, each counted), not skipped.
    expect(rec.requests()).toBeGreaterThanOrEqual(3);
    expect(rec.background).toHaveLength(0);
  });

  it("refused with a short requestTimeout: the retries stop early enough to report the cause", async () => {
    const port = await closedPort();
    const redis = new Redis({ url: `http://127.0.0.1:${port}`, token: "t0ken" });
    const rec = recordingEdgeLock({ requestTimeout: 300 }, redis);
    const started = performance.now();
    const error = await failure(
      rec.edgelock.getLock(`${prefix}refused-short`).tryLock({ leaseTime: 1_000 }),
    );
    expect(performance.now() - started).toBeLessThan(300);
    expect(error.ambiguous).toBe(false);
    expect(error.message).toMatch(/ECONNREFUSED/);
  });

  it("refused without auto-pipelining too: definite, ECONNREFUSED", async () => {
    const port = await closedPort();
    const redis = new Redis({
      url: `http://127.0.0.1:${port}`,
      token: "t0ken",
      enableAutoPipelining: false,
    });
    const rec = recordingEdgeLock({}, redis);
    const error = await failure(rec.edgelock.getLock(`${prefix}refused-plain`).tryLock());
    expect(error.ambiguous).toBe(false);
    expect(error.message).toMatch(/ECONNREFUSED.*nothing was sent/);
    expect(rec.requests()).toBeGreaterThanOrEqual(3);
  });

  it("an auto-pipelining client's script calls go out one per request, even in the same tick", async () => {
    // @upstash/redis's default batches the commands of one tick into a /pipeline request; each
    // script call is sent on its own, so that its time limit and hedge time its own round trip.
    const redis = bridge.redis();
    expect((redis as unknown as { enableAutoPipelining?: unknown }).enableAutoPipelining).toBe(
      true,
    );
    const rec = recordingEdgeLock({}, redis);
    const locks = [0, 1, 2].map((i) => rec.edgelock.getLock(`${prefix}own-request:${i}`));
    // Warm: the scripts are in Redis's cache, so every call is one EVALSHA.
    await (await locks[0]?.tryLock({ leaseTime: 5_000 }))?.release();
    const before = bridge.bridge.stats().byRoute;
    const leases = await Promise.all(locks.map((lock) => lock.tryLock({ leaseTime: 5_000 })));
    expect(leases.every((lease) => lease !== null)).toBe(true);
    await Promise.all(leases.map((lease) => lease?.release()));
    const after = bridge.bridge.stats().byRoute;
    expect(after.pipeline - before.pipeline).toBe(0);
    expect(after.single - before.single).toBe(6);
  });

  it("a client wrapped in a Proxy keeps its own retries, so the wrapper sees every call", async () => {
    const calls: string[] = [];
    const wrapped = new Proxy(bridge.redis(), {
      get(target, key) {
        const value: unknown = Reflect.get(target, key, target);
        if (key !== "eval" && key !== "evalsha") return value;
        const fn = value as (...args: unknown[]) => unknown;
        return (...args: unknown[]) => {
          calls.push(key);
          return fn.apply(target, args);
        };
      },
    });
    const rec = recordingEdgeLock({}, wrapped);
    const lease = await rec.edgelock.getLock(`${prefix}wrapped`).tryLock({ leaseTime: 1_000 });
    await lease?.release();
    expect(calls.length).toBe(rec.requests());
    expect(calls.length).toBeGreaterThanOrEqual(2);
  });

  it("a connection closed after the request was sent stays ambiguous, retries included", async () => {
    const lossy = await startPrivateBridge({
      rules: [{ action: "lose", mode: "close", match: "evalsha" }],
    });
    try {
      const rec = recordingEdgeLock({}, lossy.redis({ retry: { retries: 2, backoff: () => 5 } }));
      const error = await failure(
        rec.edgelock.getLock(`${prefix}lost`).tryLock({ leaseTime: 1_000 }),
      );
      expect(error.ambiguous).toBe(true);
      expect(error.message).not.toMatch(/nothing was sent/);
      expect(lossy.bridge.stats().requests).toBeGreaterThanOrEqual(3);
    } finally {
      await lossy.close();
    }
  });

  it("a wrong token: definite, with a hint, one request, and no background cancel", async () => {
    const redis = new Redis({ url: bridge.url, token: "not-the-token" });
    const rec = recordingEdgeLock({}, redis);
    const name = `${prefix}bad-token`;
    const error = await failure(rec.edgelock.getLock(name).tryLock({ leaseTime: 1_000 }));
    expect(error.ambiguous).toBe(false);
    expect(error.message).toMatch(/Unauthorized.*UPSTASH_REDIS_REST_TOKEN/);
    expect(error.message).not.toContain("not-the-token");
    expect(rec.background).toHaveLength(0);
    expect(rec.requests("acquire")).toBe(1); // no resend after a 401
  });

  for (const [what, config, named] of [
    ["URL", { url: "", token: "t0ken" }, /no REST URL: set UPSTASH_REDIS_REST_URL/],
    [
      "token",
      { url: "http://127.0.0.1:9", token: undefined },
      /no REST token: set UPSTASH_REDIS_REST_TOKEN/,
    ],
    ["token (empty)", { url: "http://127.0.0.1:9", token: "" }, /no REST token/],
  ] as const) {
    it(`a client with no ${what} is refused on first use as a ConfigurationError, naming it, before any request`, async () => {
      const warn = console.warn;
      console.warn = () => {}; // @upstash/redis warns about the missing config itself
      try {
        const redis = new Redis(config as unknown as { url: string; token: string });
        const rec = recordingEdgeLock({}, redis);
        const name = `${prefix}no-env`;
        const error = await rec.edgelock
          .getLock(name)
          .tryLock()
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(error).toBeInstanceOf(ConfigurationError);
        if (!(error instanceof ConfigurationError)) return;
        expect(error).not.toBeInstanceOf(TransportError);
        expect(error).toMatchObject({ code: "CONFIGURATION", resource: name });
        expect(error.name).toBe("ConfigurationError");
        expect(error.message).toMatch(named);
        // The release of a lease and a count change (resent until answered) refuse it too.
        await expect(rec.edgelock.getCountDownLatch(name).countDown()).rejects.toBeInstanceOf(
          ConfigurationError,
        );
        expect(rec.requests()).toBe(0);
        expect(rec.background).toHaveLength(0);
      } finally {
        console.warn = warn;
      }
    });
  }

  it("an unparsable URL is cut out of the message, credentials included", async () => {
    const redis = new Redis({
      url: "http://user:url-secret@[::1",
      token: "t0ken-secret",
      retry: { retries: 0 },
    });
    const rec = recordingEdgeLock({}, redis);
    const error = await failure(
      rec.edgelock.getLock(`${prefix}bad-url`).tryLock({ leaseTime: 1_000 }),
    );
    expect(error.message).toMatch(/Failed to parse URL from <url>/);
    expect(error.message).toMatch(/UPSTASH_REDIS_REST_URL/);
    expect(error.ambiguous).toBe(false);
    const text = `${error.message}\n${String((error.cause as Error).message)}`;
    expect(text).not.toContain("url-secret");
    expect(text).not.toContain("[::1");
  });

  it("a reply of the wrong shape is an ambiguous TransportError (a client with a static aborted signal)", async () => {
    // Such a client resolves every command with a fake result instead of sending it.
    const redis = bridge.redis({
      signal: AbortSignal.abort("static"),
      enableAutoPipelining: false,
    });
    const rec = recordingEdgeLock({}, redis);
    const name = `${prefix}malformed`;
    const error = await failure(rec.edgelock.getLock(name).tryLock({ leaseTime: 1_000 }));
    expect(error.message).toMatch(/unexpected reply from script lock\/acquire/);
    expect(error.ambiguous).toBe(true);
    // Without onEvent the scripts go uncounted (no {billed, reply} shape to check): the reply's
    // own decoding refuses it.
    const uncounted = new EdgeLock({ redis });
    const plain = await failure(uncounted.getLock(name).tryLock({ leaseTime: 1_000 }));
    expect(plain.message).toMatch(/unexpected reply from script lock\/acquire/);
    expect(plain.ambiguous).toBe(true);
    expect(await raw.exists(name)).toBe(0);
  });
});

describe("HTTP answers as they were", () => {
  /** A recording EdgeLock on the private bridge, its scripts cached and the stats reset. */
  async function warmed(options: Parameters<typeof recordingEdgeLock>[0] = {}) {
    const rec = recordingEdgeLock(options, bridge.redis());
    await (await rec.edgelock.getLock(`${prefix}warm`).tryLock({ leaseTime: 1_000 }))?.release();
    rec.events.length = 0;
    bridge.bridge.resetStats();
    return rec;
  }

  afterEach(() => {
    bridge.bridge.clearFaults();
  });

  it("a URL with a wrong path: 404 at once, its text and a hint, definite, one request", async () => {
    const redis = new Redis({ url: `${bridge.url}/v2`, token: bridge.token });
    const rec = recordingEdgeLock({}, redis);
    const name = `${prefix}wrong-path`;
    const started = performance.now();
    const error = await failure(rec.edgelock.getLock(name).tryLock());
    expect(performance.now() - started).toBeLessThan(500);
    expect(error).toMatchObject({ status: 404, ambiguous: false });
    expect(error.message).toBe(
      `Redis request for "${name}" failed: HTTP 404: bridge: no such endpoint (check the REST URL and its path, UPSTASH_REDIS_REST_URL)`,
    );
    expect(rec.requests()).toBe(1);
    expect(rec.background).toEqual([]);
  });

  it("a Redis stopped behind the bridge: 500 with its text, for an acquire and a release", async () => {
    const server = await startRedisServer();
    const own = await startPrivateBridge(undefined, { redisUrl: server.url });
    try {
      const rec = recordingEdgeLock({ requestTimeout: 300 }, own.redis());
      const lease = await rec.edgelock.getLock(`${prefix}stopped-held`).tryLock();
      if (!lease) throw new Error("not acquired");
      await server.stop();
      const acquire = await failure(rec.edgelock.getLock(`${prefix}stopped`).tryLock());
      expect(acquire).toMatchObject({ status: 500, ambiguous: true });
      // The server's answer, not the time-out of the last send that the call's end cut short.
      expect(acquire.message).toMatch(
        /^Redis request for "[^"]+" failed: HTTP 500: bridge: redis unavailable \(sent [2-9] times in \d+ ms, \d+ HTTP requests in all; cancelled in the background\)$/,
      );
      const release = await failure(lease.release());
      expect(release).toMatchObject({ status: 500, ambiguous: true });
      expect(release.message).toMatch(
        /failed: HTTP 500: bridge: redis unavailable \(sent \d+ times in \d+ ms, \d+ HTTP requests in all; definiteWithin \(900 ms\) has passed; still resending in the background, see the settle event\)$/,
      );
    } finally {
      await own.close();
      await server.stop();
    }
  });

  it("a send with no answer says requestTimeout, not what was left of a call's time", async () => {
    const rec = await warmed({ requestTimeout: 300 });
    const lease = await rec.edgelock.getLock(`${prefix}renew-hung`).tryLock({ leaseTime: 5_000 });
    if (!lease) throw new Error("not acquired");
    bridge.bridge.setFaults({ rules: [{ action: "fail", mode: "hang", match: "evalsha" }] });
    const error = await failure(lease.renew());
    expect(error.message).toBe(
      `Redis request for "${lease.name}" got no answer within 300 ms (requestTimeout); it may still be applied`,
    );
    expect(error).toMatchObject({ ambiguous: true, status: undefined });
    bridge.bridge.clearFaults();
    expect(await lease.release()).toBe("released");
  });

  it("a send with a shorter limit of its own (a keep-alive renewal's) says both", async () => {
    const rec = await warmed({ requestTimeout: 1_000, watchdogTimeout: 900 });
    const lease = await rec.edgelock.getLock(`${prefix}renewal-hung`).lock();
    bridge.bridge.setFaults({ rules: [{ action: "fail", mode: "hang", match: "evalsha" }] });
    const failed = await rec.until((e) => e.type === "error");
    // A keep-alive renewal is abandoned at a sixth of the lease: 150 ms.
    expect(failed.type === "error" && failed.error.message).toBe(
      `Redis request for "${lease.name}" got no answer within 150 ms (the time this send had; requestTimeout 1000 ms); it may still be applied`,
    );
    bridge.bridge.clearFaults();
    expect(await lease.release()).toBe("released");
  });

  it.each([429, 408, 425])(
    "%s (not now): sent once more; answered then, it is a grant",
    async (status) => {
      const rec = await warmed();
      bridge.bridge.setFaults({
        rules: [{ action: "fail", mode: "status", status, times: 1, match: "evalsha" }],
      });
      const lease = await rec.edgelock.getLock(`${prefix}retry-${status}`).tryLock();
      expect(lease).not.toBeNull();
      expect(bridge.bridge.stats().requests).toBe(2);
      await lease?.release();
    },
  );

  it("429 every time: definite (nothing was applied) with its status, after one resend", async () => {
    const rec = await warmed();
    const name = `${prefix}throttled`;
    bridge.bridge.setFaults({
      rules: [{ action: "fail", mode: "status", status: 429, match: "evalsha" }],
    });
    const error = await failure(rec.edgelock.getLock(name).tryLock());
    expect(error).toMatchObject({ status: 429, ambiguous: false });
    expect(error.message).toBe(
      `Redis request for "${name}" failed: HTTP 429: bridge fault: injected failure`,
    );
    expect(bridge.bridge.stats().requests).toBe(2);
    expect(rec.background).toEqual([]);
  });

  it.each([
    [400, ""],
    [405, " (check the REST URL and its path, UPSTASH_REDIS_REST_URL)"],
    [413, ""],
    [418, ""],
  ])("%s: definite at once, its status and text, one request", async (status, hint) => {
    const rec = await warmed();
    const name = `${prefix}definite-${status}`;
    bridge.bridge.setFaults({ rules: [{ action: "fail", mode: "status", status }] });
    const error = await failure(rec.edgelock.getLock(name).tryLock());
    expect(error).toMatchObject({ status, ambiguous: false });
    expect(error.message).toBe(
      `Redis request for "${name}" failed: HTTP ${status}: bridge fault: injected failure${hint}`,
    );
    expect(bridge.bridge.stats().requests).toBe(1);
    expect(rec.background).toEqual([]);
  });

  it("401 keeps its status beside the token hint", async () => {
    const rec = recordingEdgeLock({}, new Redis({ url: bridge.url, token: "wrong" }));
    const error = await failure(rec.edgelock.getLock(`${prefix}401`).tryLock());
    expect(error).toMatchObject({ status: 401, ambiguous: false });
    expect(error.message).toMatch(
      /failed: Unauthorized \(HTTP 401\/403: check the REST token, UPSTASH_REDIS_REST_TOKEN\)$/,
    );
  });

  it("403 with any text is an auth failure: the token hint, definite", async () => {
    const rec = await warmed();
    const name = `${prefix}403`;
    bridge.bridge.setFaults({ rules: [{ action: "fail", mode: "status", status: 403 }] });
    const error = await failure(rec.edgelock.getLock(name).tryLock());
    expect(error).toMatchObject({ status: 403, ambiguous: false });
    expect(error.message).toBe(
      `Redis request for "${name}" failed: bridge fault: injected failure (HTTP 401/403: check the REST token, UPSTASH_REDIS_REST_TOKEN)`,
    );
  });

  it("the global fetch is only borrowed: put back after each request, and left alone when read-only", async () => {
    const rec = await warmed({ requestTimeout: 300 });
    const original = globalThis.fetch;
    bridge.bridge.setFaults({ rules: [{ action: "fail", mode: "status", status: 418 }] });
    expect(await failure(rec.edgelock.getLock(`${prefix}borrowed`).tryLock())).toMatchObject({
      status: 418,
    });
    expect(globalThis.fetch).toBe(original);
    Object.defineProperty(globalThis, "fetch", { value: original, writable: false });
    try {
      const error = await failure(rec.edgelock.getLock(`${prefix}read-only`).tryLock());
      // No status then (so the answer is read as before: resent, ambiguous), but the call goes
      // out and its text comes back.
      expect(error.status).toBeUndefined();
      expect(error.message).toMatch(/failed: bridge fault: injected failure \(sent/);
    } finally {
      Object.defineProperty(globalThis, "fetch", { value: original, writable: true });
    }
  });

  it("a 5xx after Redis applied the request: ambiguous, resent, its status kept", async () => {
    const rec = await warmed({ requestTimeout: 300 });
    const name = `${prefix}lost-502`;
    bridge.bridge.setFaults({
      rules: [{ action: "lose", mode: "status", status: 502, match: "evalsha" }],
    });
    const error = await failure(rec.edgelock.getLock(name).tryLock({ leaseTime: 5_000 }));
    expect(error).toMatchObject({ status: 502, ambiguous: true });
    expect(error.message).toMatch(
      /failed: HTTP 502: bridge fault: response lost \(sent [2-9] times/,
    );
    expect(bridge.bridge.stats().requests).toBeGreaterThan(2);
    bridge.bridge.clearFaults();
    await Promise.all(rec.background);
    expect(await raw.exists(name)).toBe(0);
  });

  it("a client that does not report statuses (wrapped) still gets the server's text", async () => {
    const wrapped = new Proxy(new Redis({ url: `${bridge.url}/v2`, token: bridge.token }), {
      get(target, key) {
        const value: unknown = Reflect.get(target, key, target);
        if (key !== "eval" && key !== "evalsha") return value;
        const fn = value as (...args: unknown[]) => unknown;
        return (...args: unknown[]) => fn.apply(target, args);
      },
    });
    const rec = recordingEdgeLock({ requestTimeout: 300 }, wrapped);
    const error = await failure(rec.edgelock.getLock(`${prefix}wrapped-404`).tryLock());
    expect(error.status).toBeUndefined();
    expect(error.message).toMatch(/failed: bridge: no such endpoint/);
  });
});
