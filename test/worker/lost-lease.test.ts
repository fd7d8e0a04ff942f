/**
 * A lease lost while the guarded code ran, in real workerd: `withLock` rejects with
 * LeaseLostError once the function settled, and the Hono middleware, whose release goes to the
 * real execution context's `waitUntil`, hands that error to `app.onError`.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { withLock } from "../../src/hono.js";
import { LeaseLostError } from "../../src/index.js";
import { keyPrefix, recordingEdgeLock } from "./support.js";

const prefix = keyPrefix();

/** Resolves when `signal` aborts. */
const aborted = (signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });

describe("withLock in workerd", () => {
  it("rejects with LeaseLostError carrying fn's value when another client force-unlocked", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}forced`;
    const other = recordingEdgeLock().edgelock.getLock(name);
    const error = await edgelock
      .withLock(
        name,
        async () => {
          expect(await other.forceUnlock()).toBe(true);
          return "done";
        },
        { leaseTime: 10_000 },
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(error).toMatchObject({ code: "LEASE_LOST", outcome: "returned", result: "done" });
  });

  it("rejects once fn settled when a fixed lease expired under it; onLeaseLost: 'return' does not", async () => {
    const { edgelock } = recordingEdgeLock();
    const name = `${prefix}expired`;
    const boom = new Error("boom");
    const error = await edgelock
      .withLock(
        name,
        async (lease) => {
          await aborted(lease.signal);
          throw boom;
        },
        { leaseTime: 100 },
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect((error as LeaseLostError).cause).toBe(boom);
    const value = await edgelock.withLock(
      name,
      async (lease) => {
        await aborted(lease.signal);
        return 3;
      },
      { leaseTime: 100, onLeaseLost: "return" },
    );
    expect(value).toBe(3);
  });
});

describe("Hono withLock in workerd", () => {
  it("hands a lost lease to app.onError, which maps it to 503; the release goes to waitUntil", async () => {
    const { edgelock } = recordingEdgeLock();
    const key = `${prefix}hono`;
    const errors: unknown[] = [];
    const app = new Hono();
    app.onError((error, c) => {
      errors.push(error);
      return error instanceof LeaseLostError
        ? c.json({ error: "lease-lost" }, 503)
        : c.text("Internal Server Error", 500);
    });
    app.get("/l", withLock({ edgelock, key, leaseTime: 100 }), async (c) => {
      await aborted(c.var.lease.signal);
      return c.text("late");
    });
    const ctx = createExecutionContext();
    const res = await app.fetch(new Request("http://worker/l"), env, ctx);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ error: "lease-lost" });
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: "LEASE_LOST", resource: key, outcome: "returned" });
    await waitOnExecutionContext(ctx);
    expect(await edgelock.getLock(key).isLocked()).toBe(false);
  });
});
