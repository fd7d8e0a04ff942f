/**
 * The primitives' entries (`edgelock/lock`, `edgelock/semaphore`, ...): standalone functions over
 * the core client, the same primitives `EdgeLock` hands out, and each entry bundles only its own
 * kind's scripts.
 */
import { join } from "node:path";
import { build } from "esbuild";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { EdgeLock } from "../src/client.js";
import { EdgeLockClient } from "../src/core.js";
import { ServiceLimitError, TransportError } from "../src/errors.js";
import type { LockEvent } from "../src/events.js";
import { withLock as lockMiddleware } from "../src/hono.js";
import { getCountDownLatch } from "../src/locks/count-down-latch/entry.js";
import { getFairLock } from "../src/locks/fair-lock/entry.js";
import { getFencedLock } from "../src/locks/fenced-lock/entry.js";
import { getIdempotencyKey } from "../src/locks/idempotency/entry.js";
import { getLock, LockTimeoutError, withLock } from "../src/locks/lock/entry.js";
import { getMultiLock } from "../src/locks/multi-lock/entry.js";
import { getPermitExpirableSemaphore } from "../src/locks/permit-expirable-semaphore/entry.js";
import { getReadWriteLock } from "../src/locks/read-write-lock/entry.js";
import { RedLock } from "../src/locks/redlock/entry.js";
import { getSemaphore } from "../src/locks/semaphore/entry.js";
import { lockCron, lockWebhook } from "../src/vercel.js";
import { bridgeRedis, keyPrefix, useRawRedis } from "./support/env.js";

const prefix = keyPrefix();
const raw = useRawRedis();
const root = join(import.meta.dirname, "..");

function client(events: LockEvent[] = []): EdgeLockClient {
  return new EdgeLockClient({ redis: bridgeRedis(), onEvent: (e) => events.push(e) });
}

describe("entries over the core client", () => {
  it("getLock: a reentrant lock that excludes the same name taken through an EdgeLock", async () => {
    const events: LockEvent[] = [];
    const name = `${prefix}lock`;
    const lease = await getLock(client(events), name).tryLock({ leaseTime: 10_000 });
    expect(lease).not.toBeNull();
    const edgelock = new EdgeLock({ redis: bridgeRedis() });
    expect(await edgelock.getLock(name).tryLock()).toBeNull();
    expect(await getLock(edgelock, name).isHeldBy(lease?.owner ?? "")).toBe(true);
    expect(await lease?.release()).toBe("released");
    expect(events.map((e) => e.type)).toEqual(["acquire", "release"]);
  });

  it("withLock: runs the function under the lock and releases it; a busy lock times out", async () => {
    const c = client();
    const name = `${prefix}with`;
    const held = await withLock(c, name, async (lease) => {
      expect(await getLock(c, name).isHeldBy(lease.owner)).toBe(true);
      await expect(withLock(c, name, () => 1, { waitTime: 0 })).rejects.toBeInstanceOf(
        LockTimeoutError,
      );
      return lease.owner;
    });
    expect(held).toMatch(new RegExp(`^${c.clientId}:`));
    expect(await getLock(c, name).isLocked()).toBe(false);
  });

  it("every other entry hands out its primitive", async () => {
    const c = client();
    const fair = await getFairLock(c, `${prefix}fair`).tryLock({ leaseTime: 5_000 });
    expect(await fair?.release()).toBe("released");

    const fenced = await getFencedLock(c, `${prefix}fenced`).tryLock({ leaseTime: 5_000 });
    expect(fenced?.fencingToken).toBeGreaterThan(0);
    await fenced?.release();

    const rw = getReadWriteLock(c, `${prefix}rw`);
    const read = await rw.readLock().tryLock({ leaseTime: 5_000 });
    expect(await rw.writeLock().tryLock()).toBeNull();
    await read?.release();

    const semaphore = getSemaphore(c, `${prefix}sem`);
    expect(await semaphore.trySetPermits(2)).toBe(true);
    expect((await semaphore.tryAcquire({ permits: 2 }))?.permits).toBe(2);
    expect(await semaphore.availablePermits()).toBe(0);

    const permits = getPermitExpirableSemaphore(c, `${prefix}pes`);
    await permits.trySetPermits(1);
    const permit = await permits.tryAcquire({ leaseTime: 5_000 });
    expect(permit?.permitIds).toHaveLength(1);
    await permit?.release();

    const once = getIdempotencyKey(c, `${prefix}once`);
    const claim = await once.claim({ leaseTime: 5_000 });
    if (claim.status !== "acquired") throw new Error(`claim: ${claim.status}`);
    expect(await once.complete(claim.lease, 5_000)).toBe("released");
    expect((await getIdempotencyKey(c, `${prefix}once`).claim()).status).toBe("completed");

    const latch = getCountDownLatch(c, `${prefix}latch`);
    expect(await latch.trySetCount(1)).toBe(true);
    await latch.countDown();
    expect(await latch.getCount()).toBe(0);

    const a = getLock(c, `${prefix}multi:a`);
    const b = getFairLock(client(), `${prefix}multi:b`);
    const multi = await getMultiLock(c, a, b).tryLock({ leaseTime: 5_000 });
    expect(await a.isLocked()).toBe(true);
    expect(await b.isLocked()).toBe(true);
    await multi?.release();
    expect(await a.isLocked()).toBe(false);

    const members = [1, 2, 3].map(() => getLock(client(), `${prefix}red`));
    const red = await new RedLock(members).tryLock({ leaseTime: 5_000 });
    expect(red).not.toBeNull();
    await red?.release();
    await raw.del([`${prefix}sem`, `edgelock_permits:{${prefix}sem}`]);
  });
});

describe("integrations over the core client", () => {
  it("the Hono middleware takes an EdgeLockClient, and refuses an object that is not one", async () => {
    const c = client();
    const key = `${prefix}hono`;
    const app = new Hono();
    app.get("/", lockMiddleware({ edgelock: c, key, leaseTime: 10_000 }), async (ctx) =>
      ctx.text(String(await getLock(c, key).isLocked())),
    );
    const res = await app.request("/");
    expect(await res.text()).toBe("true");
    expect(await getLock(c, key).isLocked()).toBe(false);
    expect(() => lockMiddleware({ edgelock: { getLock: () => null } as never, key })).toThrow(
      "withLock: `edgelock` must be an EdgeLock (or EdgeLockClient) or a function returning one",
    );
  });
});

describe("the Vercel helpers over the core client", () => {
  const delivery = (id: string) =>
    new Request("http://127.0.0.1/api/webhook", { method: "POST", body: JSON.stringify({ id }) });

  it("lockWebhook takes an EdgeLockClient: one run per delivery, the redelivery acknowledged", async () => {
    const c = client();
    const key = `${prefix}vercel:evt`;
    let runs = 0;
    const webhook = lockWebhook({ edgelock: c, key: () => key, leaseTime: 10_000 }, async () => {
      runs++;
      expect(await getLock(c, key).isLocked()).toBe(true);
      return Response.json({ received: true });
    });
    expect((await webhook(delivery("1"))).status).toBe(200);
    const again = await webhook(delivery("1"));
    expect(await again.json()).toEqual({ received: true, duplicate: true, key });
    expect(runs).toBe(1);
    expect(await getLock(c, key).isLocked()).toBe(false);
  });

  it("lockCron takes a function returning an EdgeLockClient, and skips an overlapping run", async () => {
    const c = client();
    const name = `${prefix}vercel:cron`;
    const held = await getLock(client(), name).tryLock({ leaseTime: 10_000 });
    const cron = lockCron({ edgelock: () => c, name }, () => Response.json({ ran: true }));
    const skipped = await cron(new Request("http://127.0.0.1/api/cron"));
    expect(await skipped.json()).toMatchObject({ skipped: true, name });
    await held?.release();
    expect(await (await cron(new Request("http://127.0.0.1/api/cron"))).json()).toEqual({
      ran: true,
    });
    expect(await getLock(c, name).isLocked()).toBe(false);
  });

  it("both refuse an object that is not an EdgeLockClient, when called", () => {
    const fake = { getLock: () => null, getIdempotencyKey: () => null } as never;
    const ok = () => new Response();
    const message = "must be an EdgeLock (or EdgeLockClient) or a function returning one";
    expect(() => lockWebhook({ edgelock: fake, key: () => "k" }, ok)).toThrow(
      `lockWebhook: \`edgelock\` ${message}`,
    );
    expect(() => lockCron({ edgelock: fake }, ok)).toThrow(`lockCron: \`edgelock\` ${message}`);
  });
});

describe("entries refuse bad input before any request", () => {
  const notAClient = { redis: bridgeRedis() } as unknown as EdgeLockClient;
  const factories: [string, (c: EdgeLockClient, name: string) => unknown][] = [
    ["getLock", getLock],
    ["getFairLock", getFairLock],
    ["getFencedLock", getFencedLock],
    ["getReadWriteLock", getReadWriteLock],
    ["getSemaphore", getSemaphore],
    ["getPermitExpirableSemaphore", getPermitExpirableSemaphore],
    ["getCountDownLatch", getCountDownLatch],
    ["getIdempotencyKey", getIdempotencyKey],
  ];

  it.each(factories)("%s: a client that is not an EdgeLockClient is a TypeError", (_, get) => {
    expect(() => get(notAClient, `${prefix}x`)).toThrow(
      new TypeError("expected an EdgeLockClient or EdgeLock created by this copy of edgelock"),
    );
  });

  it.each(factories)("%s: a bad name is refused", (_, get) => {
    expect(() => get(client(), "a{b}")).toThrow(/name/);
    expect(() => get(client(), "")).toThrow(RangeError);
  });

  it("getMultiLock refuses a non-client and a non-lock member", () => {
    const lock = getLock(client(), `${prefix}m`);
    expect(() => getMultiLock(notAClient, lock)).toThrow(TypeError);
    expect(() => getMultiLock(client())).toThrow(/at least one|lock/);
    expect(() => getMultiLock(client(), {} as never)).toThrow(TypeError);
  });

  it("withLock refuses a non-function, a bad option and a non-client without a request", async () => {
    await expect(withLock(client(), `${prefix}w`, 1 as never)).rejects.toThrow(
      "withLock: `fn` must be a function",
    );
    await expect(withLock(client(), `${prefix}w`, () => 1, { waitTime: -1 })).rejects.toThrow(
      RangeError,
    );
    await expect(withLock(notAClient, `${prefix}w`, () => 1)).rejects.toThrow(TypeError);
  });

  it("EdgeLockClient validates its options as EdgeLock does", () => {
    expect(() => new EdgeLockClient({ redis: {} as never })).toThrow(/@upstash\/redis client/);
    expect(() => new EdgeLockClient({ redis: bridgeRedis(), requestTimeout: 1 })).toThrow(
      RangeError,
    );
  });
});

describe("the errors every entry exports", () => {
  const entries: [string, () => Promise<Record<string, unknown>>][] = [
    ["edgelock", () => import("../src/index.js")],
    ["edgelock/lock", () => import("../src/locks/lock/entry.js")],
    ["edgelock/fair-lock", () => import("../src/locks/fair-lock/entry.js")],
    ["edgelock/fenced-lock", () => import("../src/locks/fenced-lock/entry.js")],
    ["edgelock/read-write-lock", () => import("../src/locks/read-write-lock/entry.js")],
    ["edgelock/semaphore", () => import("../src/locks/semaphore/entry.js")],
    [
      "edgelock/permit-expirable-semaphore",
      () => import("../src/locks/permit-expirable-semaphore/entry.js"),
    ],
    ["edgelock/count-down-latch", () => import("../src/locks/count-down-latch/entry.js")],
    ["edgelock/idempotency", () => import("../src/locks/idempotency/entry.js")],
    ["edgelock/multi-lock", () => import("../src/locks/multi-lock/entry.js")],
    ["edgelock/redlock", () => import("../src/locks/redlock/entry.js")],
  ];

  it.each(entries)(
    "%s: ServiceLimitError beside TransportError, the same class",
    async (_, load) => {
      const module = await load();
      expect(module.TransportError).toBe(TransportError);
      expect(module.ServiceLimitError).toBe(ServiceLimitError);
    },
  );
});

describe("each entry bundles only its own kind's scripts, and none EdgeLock", () => {
  /** Script modules (src/lua/<kind>.gen.ts) an entry may pull in, beyond none. */
  const allowed: Record<string, string[]> = {
    lock: ["lock"],
    "fair-lock": ["fair-lock", "lock"],
    "fenced-lock": ["fenced-lock", "lock"],
    "read-write-lock": ["read-write-lock", "lock"],
    semaphore: ["semaphore", "lock"],
    "permit-expirable-semaphore": ["permit-expirable-semaphore", "semaphore", "lock"],
    "count-down-latch": ["count-down-latch", "lock"],
    "multi-lock": ["lock"],
    redlock: ["lock"],
    idempotency: ["lock"],
    // lockWebhook (an idempotency key) and lockCron (a lock).
    vercel: ["lock"],
    // The LeaseKeeper (renewers only) and the cron guard (a lock).
    cloudflare: ["lock", "read-write-lock", "permit-expirable-semaphore"],
  };

  it.each(Object.entries(allowed))("%s", async (kind, kinds) => {
    const result = await build({
      entryPoints: [
        kind === "cloudflare"
          ? join(root, "worker", "cloudflare.ts")
          : kind === "vercel"
            ? join(root, "src", "vercel.ts")
            : join(root, "src", "locks", kind, "entry.ts"),
      ],
      external: ["cloudflare:*", "@upstash/redis/*"],
      bundle: true,
      write: false,
      format: "esm",
      platform: "neutral",
      metafile: true,
      logLevel: "silent",
    });
    // What reaches the bundle: modules imported only for what tree-shaking drops do not count.
    const output = Object.values(result.metafile.outputs)[0];
    const shipped = Object.entries(output?.inputs ?? {})
      .filter(([, v]) => v.bytesInOutput > 0)
      .map(([file]) => file);
    const used = shipped
      .map((file) => /src\/lua\/([a-z-]+)\.gen\.ts$/.exec(file)?.[1])
      .filter((k): k is string => k !== undefined);
    for (const k of used) expect(kinds, `${kind} bundles lua/${k}`).toContain(k);
    expect(shipped.some((f) => f.endsWith("src/client.ts"))).toBe(false);
  });
});

describe("edgelock/console", () => {
  it("bundles for workerd: no Node built-in, no EdgeLock, every kind's scripts", async () => {
    const result = await build({
      entryPoints: [join(root, "src", "console", "index.ts")],
      external: ["cloudflare:*", "@upstash/redis/*", "hono", "hono/*"],
      bundle: true,
      write: false,
      format: "esm",
      platform: "neutral",
      conditions: ["workerd", "worker"],
      metafile: true,
      logLevel: "silent",
    });
    const output = Object.values(result.metafile.outputs)[0];
    const shipped = Object.entries(output?.inputs ?? {})
      .filter(([, v]) => v.bytesInOutput > 0)
      .map(([file]) => file);
    expect(output?.imports.filter((i) => i.external).map((i) => i.path)).toEqual(["hono"]);
    expect(shipped.some((f) => f.endsWith("src/client.ts"))).toBe(false);
    expect(shipped.some((f) => f.includes("src/cli/"))).toBe(false);
    const kinds = shipped
      .map((file) => /src\/lua\/([a-z-]+)\.gen\.ts$/.exec(file)?.[1])
      .filter((k): k is string => k !== undefined)
      .sort();
    expect(kinds).toEqual([
      "count-down-latch",
      "fair-lock",
      "fenced-lock",
      "lock",
      "permit-expirable-semaphore",
      "read-write-lock",
      "semaphore",
    ]);
  });
});
