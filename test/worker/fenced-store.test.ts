/**
 * FencedStore in real workerd (RPC and the reference Worker's `/fenced/` routes), with real
 * fenced locks on the bridge and redis-server: the token rule (strictly greater), input
 * validation, independent keys, and Kleppmann's scenario of a holder paused past its lease.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { Lease, SerializedLease } from "../../src/index.js";
import { FENCED_VALUE_MAX_BYTES, type FencedWriteResult } from "../../worker/fenced-store.js";
import { keyPrefix, recordingEdgeLock } from "./support.js";

const prefix = keyPrefix();
let counter = 0;
/** A key no other test uses. */
const freshKey = () => `${prefix}k${++counter}`;
const store = (key: string) => env.FENCED_STORE.getByName(key);

const call = (method: string, path: string, body?: unknown) =>
  exports.default.fetch(
    new Request(`http://worker${path}`, {
      method,
      body: body === undefined || typeof body === "string" ? body : JSON.stringify(body),
    }),
  );

/** Status and JSON body of a route's answer. */
async function answer(response: Response) {
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const put = (key: string, body: unknown) => call("PUT", `/fenced/${key}`, body).then(answer);
const get = (key: string) => call("GET", `/fenced/${key}`).then(answer);

function aborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener("abort", () => resolve(signal.reason), { once: true });
  });
}

const fencedLock = (key: string) =>
  recordingEdgeLock().edgelock.getFencedLock(`lock:fenced:${key}`);

describe("FencedStore: the token rule", () => {
  it("accepts strictly increasing tokens and keeps the value of the highest", async () => {
    const key = freshKey();
    for (const token of [1, 2, 10, 2 ** 53 - 1]) {
      expect(await store(key).write(key, `v${token}`, token)).toEqual({ ok: true, key, token });
    }
    expect(await store(key).read(key)).toEqual({
      key,
      value: `v${2 ** 53 - 1}`,
      token: 2 ** 53 - 1,
    });
  });

  it("rejects a lower token with the highest seen, and changes nothing", async () => {
    const key = freshKey();
    await store(key).write(key, "v10", 10);
    for (const token of [9, 1]) {
      expect(await store(key).write(key, "late", token)).toEqual({
        ok: false,
        reason: "stale",
        key,
        token,
        highest: 10,
      });
    }
    expect(await store(key).read(key)).toEqual({ key, value: "v10", token: 10 });
  });

  it("rejects an equal token, also a re-sent copy of the accepted write (highest === token)", async () => {
    const key = freshKey();
    expect((await store(key).write(key, "v7", 7)).ok).toBe(true);
    const stale = { ok: false, reason: "stale", key, token: 7, highest: 7 };
    expect(await store(key).write(key, "v7", 7)).toEqual(stale);
    expect(await store(key).write(key, "other", 7)).toEqual(stale);
    expect(await store(key).read(key)).toEqual({ key, value: "v7", token: 7 });
  });

  it("keeps keys independent, in one object and across objects", async () => {
    const [a, b] = [freshKey(), freshKey()];
    const one = store(a);
    expect((await one.write(a, "a100", 100)).ok).toBe(true);
    expect((await one.write(b, "b1", 1)).ok).toBe(true);
    expect(await one.write(a, "a50", 50)).toMatchObject({ ok: false, highest: 100 });
    expect((await one.write(b, "b2", 2)).ok).toBe(true);
    expect(await one.read(a)).toEqual({ key: a, value: "a100", token: 100 });
    expect(await one.read(b)).toEqual({ key: b, value: "b2", token: 2 });
    // Another object knows nothing of the first one's keys.
    expect(await store(b).read(a)).toBeNull();
    expect((await store(b).write(a, "elsewhere", 1)).ok).toBe(true);
  });

  it("ends at the highest token whatever order 30 concurrent writes arrive in", async () => {
    const key = freshKey();
    const tokens = Array.from({ length: 30 }, (_, i) => i + 1).sort(() => Math.random() - 0.5);
    const results = await Promise.all(tokens.map((t) => store(key).write(key, `v${t}`, t)));
    expect(results.flatMap((r) => (r.ok ? [r.token] : []))).toContain(30);
    for (const r of results) {
      if (!r.ok && r.reason === "stale") expect(r.highest).toBeGreaterThanOrEqual(r.token);
    }
    expect(await store(key).read(key)).toEqual({ key, value: "v30", token: 30 });
  });

  it("keeps the highest token across an eviction of the object", async () => {
    const key = freshKey();
    await store(key).write(key, "v5", 5);
    await abortAllDurableObjects();
    expect(await store(key).read(key)).toEqual({ key, value: "v5", token: 5 });
    expect(await store(key).write(key, "v4", 4)).toMatchObject({ ok: false, highest: 5 });
  });

  it("rejects invalid arguments over RPC without writing anything", async () => {
    const key = freshKey();
    const bad: [unknown, unknown, unknown][] = [
      [key, "v", 0],
      [key, "v", -1],
      [key, "v", 1.5],
      [key, "v", Number.NaN],
      [key, "v", Number.POSITIVE_INFINITY],
      [key, "v", 2 ** 53],
      [key, "v", "5"],
      [key, 5, 1],
      [key, "x".repeat(FENCED_VALUE_MAX_BYTES + 1), 1],
      ["", "v", 1],
      ["a b", "v", 1],
      ["k".repeat(257), "v", 1],
    ];
    for (const [k, v, t] of bad) {
      const result: FencedWriteResult = await store(key).write(
        k as string,
        v as string,
        t as number,
      );
      expect(result).toMatchObject({ ok: false, reason: "invalid" });
    }
    expect(await store(key).read(key)).toBeNull();
    // A bad token above the highest does not get past the rule either.
    await store(key).write(key, "v5", 5);
    expect(await store(key).write(key, "v", 2 ** 53)).toMatchObject({ reason: "invalid" });
    expect(await store(key).read(key)).toEqual({ key, value: "v5", token: 5 });
  });
});

describe("/fenced/ routes", () => {
  it("PUT writes with increasing tokens; a lower or equal token answers 409 with the highest", async () => {
    const key = freshKey();
    expect(await put(key, { value: "one", token: 3 })).toEqual({
      status: 200,
      body: { written: true, key, token: 3 },
    });
    expect((await put(key, { value: "two", token: 8 })).status).toBe(200);
    for (const token of [8, 5]) {
      expect(await put(key, { value: "late", token })).toEqual({
        status: 409,
        body: { error: "stale-token", key, token, highest: 8 },
      });
    }
    expect(await get(key)).toEqual({ status: 200, body: { key, value: "two", token: 8 } });
  });

  it("answers 400 to bad input and writes nothing", async () => {
    const key = freshKey();
    const bodies: unknown[] = [
      "not json",
      "[1]",
      "null",
      {},
      { token: 1 },
      { value: 1, token: 1 },
      { value: "v" },
      { value: "v", token: "5" },
      { value: "v", token: 0 },
      { value: "v", token: -3 },
      { value: "v", token: 1.5 },
      { value: "v", token: 2 ** 53 },
      { value: "x".repeat(FENCED_VALUE_MAX_BYTES + 1), token: 1 },
    ];
    for (const body of bodies) {
      const { status, body: reply } = await put(key, body);
      expect(status).toBe(400);
      expect(reply.error).toBe("bad-request");
      expect(typeof reply.message).toBe("string");
    }
    for (const badKey of ["a%20b", "a%7Bb%7D", "k".repeat(257)]) {
      expect((await put(badKey, { value: "v", token: 1 })).status).toBe(400);
      expect((await call("POST", `/fenced/${badKey}`, { value: "v" })).status).toBe(400);
      expect((await call("POST", `/fenced/${badKey}/lease`)).status).toBe(400);
      expect((await get(badKey)).status).toBe(400);
    }
    // The locking route checks its body before it takes the lock.
    const lock = fencedLock(key);
    expect((await call("POST", `/fenced/${key}`, { value: 42 })).status).toBe(400);
    expect(await lock.getToken()).toBe(0);
    expect(await get(key)).toEqual({ status: 404, body: { error: "not-found", key } });
  });

  it("POST takes the fenced lock, writes with its token and releases it: each write a higher token", async () => {
    const key = freshKey();
    const first = await answer(await call("POST", `/fenced/${key}`, { value: "first" }));
    const second = await answer(await call("POST", `/fenced/${key}`, { value: "second" }));
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    const t1 = first.body.token as number;
    const t2 = second.body.token as number;
    expect(t2).toBeGreaterThan(t1);
    const lock = fencedLock(key);
    expect(await lock.isLocked()).toBe(false);
    expect(await lock.getToken()).toBe(t2);
    expect(await get(key)).toEqual({ status: 200, body: { key, value: "second", token: t2 } });
  });

  it("5 concurrent POSTs are all written with distinct tokens; the value is the highest token's", async () => {
    const key = freshKey();
    const replies = await Promise.all(
      [1, 2, 3, 4, 5].map(async (i) => ({
        i,
        ...(await answer(await call("POST", `/fenced/${key}`, { value: `v${i}` }))),
      })),
    );
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const tokens = replies.map((r) => r.body.token as number);
    expect(new Set(tokens).size).toBe(5);
    const last = replies.reduce((a, b) =>
      (b.body.token as number) > (a.body.token as number) ? b : a,
    );
    expect(await get(key)).toEqual({
      status: 200,
      body: { key, value: `v${last.i}`, token: Math.max(...tokens) },
    });
  });
});

describe("a holder paused past its lease (Kleppmann 2016)", () => {
  /** B's turn: waits for the lock through the Worker, writes with a newer token. */
  async function holderBWrites(key: string, tokenA: number) {
    const b = await answer(await call("POST", `/fenced/${key}?wait=10000`, { value: "B" }));
    expect(b.status).toBe(200);
    expect(b.body.written).toBe(true);
    const tokenB = b.body.token as number;
    expect(tokenB).toBeGreaterThan(tokenA);
    return tokenB;
  }

  /** A wakes up and writes with the token of its lost lease: rejected, B's value stands. */
  async function holderAWritesLate(key: string, lease: Lease, tokenB: number) {
    const tokenA = lease.fencingToken as number;
    expect(await put(key, { value: "A", token: tokenA })).toEqual({
      status: 409,
      body: { error: "stale-token", key, token: tokenA, highest: tokenB },
    });
    expect(await get(key)).toEqual({ status: 200, body: { key, value: "B", token: tokenB } });
    // The lock agrees that A's time is over; only the resource could stop the write.
    expect(await lease.release()).toBe("expired");
  }

  it("A's lease expires, B acquires and writes, A's late write with its old token is rejected", async () => {
    const key = freshKey();
    const a = await fencedLock(key).tryLock({ leaseTime: 300, keepAlive: "none" });
    expect(a).not.toBeNull();
    const lease = a as Lease;
    const tokenA = lease.fencingToken as number;
    expect(Number.isSafeInteger(tokenA)).toBe(true);
    // A is paused: it does nothing until its lease is gone.
    await aborted(lease.signal);
    const tokenB = await holderBWrites(key, tokenA);
    await holderAWritesLate(key, lease, tokenB);
  });

  it("the same through the routes: A's lease handed out by POST /fenced/:key/lease, restored later", async () => {
    const key = freshKey();
    const a = await answer(await call("POST", `/fenced/${key}/lease?lease=300`));
    expect(a.status).toBe(200);
    const tokenA = a.body.token as number;
    const lease = recordingEdgeLock().edgelock.restoreLease(a.body.lease as SerializedLease);
    expect(lease.fencingToken).toBe(tokenA);
    // B asks while A still holds the lock: the lock makes it wait for A's lease to run out.
    const tokenB = await holderBWrites(key, tokenA);
    expect(lease.signal.aborted || Date.now() >= lease.expiresAt).toBe(true);
    await holderAWritesLate(key, lease, tokenB);
  });
});
