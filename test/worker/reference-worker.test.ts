/**
 * The reference Worker's HTTP routes in real workerd (through `exports.default.fetch`, the
 * Worker's own fetch handler): Hono `withLock` answering 409 + Retry-After, the guarded counter
 * and the job kept alive by the LeaseKeeper.
 */
import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { eventually, keyPrefix, recordingEdgeLock, redisOn } from "./support.js";

const prefix = keyPrefix().replaceAll(":", "-");
const post = (path: string) =>
  exports.default.fetch(new Request(`http://worker${path}`, { method: "POST" }));

describe("Hono withLock routes", () => {
  it("answers 409 with Retry-After while another request holds the lock, then lets the next one in", async () => {
    const name = `${prefix}r1`;
    const lock = recordingEdgeLock().edgelock.getLock(`lock:report:${name}`);
    const first = post(`/report/${name}?ms=1500`);
    await eventually(async () => ((await lock.isLocked()) ? true : undefined));

    const busy = await post(`/report/${name}?ms=0`);
    expect(busy.status).toBe(409);
    const retryAfter = Number(busy.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(29);
    expect(retryAfter).toBeLessThanOrEqual(30);
    expect(await busy.json()).toEqual({ error: "locked", key: `lock:report:${name}`, retryAfter });

    const done = await first;
    expect(done.status).toBe(200);
    expect(await done.json()).toEqual({ built: name });
    await eventually(async () => ((await lock.isLocked()) ? undefined : true));
    const next = await post(`/report/${name}?ms=0`);
    expect(next.status).toBe(200);
    await next.arrayBuffer();
  });

  it("serialises an unguarded read-modify-write: 10 concurrent increments, no overlap", async () => {
    const name = `${prefix}c1`;
    // Each client reads its body: the route holds the lock until its response body is done.
    const answers = await Promise.all(
      Array.from({ length: 10 }, async () => {
        const response = await post(`/counter/${name}`);
        return { status: response.status, body: (await response.json()) as { value: number } };
      }),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    expect(answers.map((a) => a.body.value).sort((a, b) => a - b)).toEqual([
      1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
    ]);
    const redis = redisOn();
    const key = `${env.DEMO_KEY_PREFIX}counter:${name}`;
    expect(await redis.get<number>(key)).toBe(10);
    expect(await redis.get<number>(`${key}:overlaps`)).toBeNull();
  });
});

describe("webhook route (Vercel helper on Workers)", () => {
  const deliver = (body: unknown) =>
    exports.default.fetch(
      new Request("http://worker/webhook", { method: "POST", body: JSON.stringify(body) }),
    );

  it("processes an event once: 5 concurrent deliveries and 2 redeliveries", async () => {
    const id = `${prefix}evt1`;
    const concurrent = await Promise.all(
      Array.from({ length: 5 }, async () => {
        const response = await deliver({ id });
        return { status: response.status, body: await response.json() };
      }),
    );
    const statuses = concurrent.map((a) => a.status).sort();
    expect(statuses).toEqual([200, 409, 409, 409, 409]);
    expect(concurrent.find((a) => a.status === 200)?.body).toEqual({
      received: true,
      processed: id,
    });
    for (let i = 0; i < 2; i++) {
      const again = await deliver({ id });
      expect(again.status).toBe(200);
      expect(await again.json()).toEqual({ received: true, duplicate: true, key: `webhook:${id}` });
    }
    const redis = redisOn();
    expect(await redis.get<number>(`${env.DEMO_KEY_PREFIX}webhook:${id}:processed`)).toBe(1);
    expect(await redis.get<number>(`${env.DEMO_KEY_PREFIX}webhook:${id}:overlaps`)).toBeNull();
  });

  it("answers 400 to a delivery without an event id", async () => {
    const response = await deliver({ type: "ping" });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: "missing-key" });
  });
});

describe("job kept alive by the LeaseKeeper", () => {
  it("holds the lock for three lease times and releases it at the end", async () => {
    const name = `${prefix}j1`;
    // 1 000 ms leases (renewed every 333 ms) leave slack for a loaded CI machine.
    const response = await post(`/job/${name}?ms=3000&lease=1000`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { ran: boolean; heldMs: number };
    expect(body.ran).toBe(true);
    expect(body.heldMs).toBeGreaterThanOrEqual(3_000);
    expect(response.headers.get("x-lease-lost")).toBe("false");
    expect(response.headers.get("x-release")).toBe("released");
    expect(await redisOn().get(`${env.DEMO_KEY_PREFIX}job:${name}:overlaps`)).toBeNull();
  });
});
