/**
 * Transport errors say what went wrong: the cause's code for network failures, a definite error
 * with a hint for a bad token, the variables to set for a client with no URL or token, and a
 * malformed reply detected; never a URL, token, owner or request id.
 */
import { Redis } from "@upstash/redis";
import { describe, expect, it } from "vitest";
import { TransportError } from "../../src/index.js";
import { keyPrefix, startPrivateBridge, usePrivateBridge, useRawRedis } from "../support/env.js";
import { recordingEdgeLock } from "../support/locks.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const bridge = usePrivateBridge();

async function failure(promise: Promise<unknown>): Promise<TransportError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TransportError);
  return error as TransportError;
}

describe("transport errors", () => {
  it("a stopped endpoint: the message keeps ECONNREFUSED, not the address", async () => {
    const dead = await startPrivateBridge();
    const redis = dead.redis({ retry: { retries: 0 } });
    await dead.close();
    const rec = recordingEdgeLock({}, redis);
    const error = await failure(
      rec.edgelock.getLock(`${prefix}down`).tryLock({ leaseTime: 1_000 }),
    );
    expect(error.message).toMatch(/fetch failed \(ECONNREFUSED: connection refused/);
    expect(error.ambiguous).toBe(true);
    expect(error.message).not.toContain(new URL(dead.url).port);
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

  it("a client with no URL or token is rejected on first use, naming the variables, before any request", async () => {
    const warn = console.warn;
    console.warn = () => {}; // @upstash/redis warns about the missing config itself
    try {
      const redis = new Redis({ url: "", token: "" });
      const rec = recordingEdgeLock({}, redis);
      const error = await failure(rec.edgelock.getLock(`${prefix}no-env`).tryLock());
      expect(error.ambiguous).toBe(false);
      expect(error.message).toMatch(/UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN/);
      expect(rec.requests()).toBe(0);
      expect(rec.background).toHaveLength(0);
    } finally {
      console.warn = warn;
    }
  });

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
    expect(await raw.exists(name)).toBe(0);
  });
});
