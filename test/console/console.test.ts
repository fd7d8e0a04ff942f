/**
 * The lock console (`edgelock/console`) through `app.request()`: its options refused before any
 * request, `authorize` in front of everything, what a page shows of each kind (epoch, fencing
 * token, waiters), the scan's bounds, what a refresh costs (checked against Redis's own command
 * counts), and the free: read-only by default, a dry run first, the name typed again, the form's
 * token, the request's origin, the audit event. Against a redis-server and a bridge of its own,
 * through real `@upstash/redis` clients. The same page in a real browser:
 * console.browser.test.ts.
 */
import { Redis } from "@upstash/redis";
import { Hono } from "hono";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Bridge, startBridge } from "../../src/bridge/index.js";
import {
  type ConsoleAuditEvent,
  type LockConsoleOptions,
  lockConsole,
  type UpstashAdminClient,
} from "../../src/console/index.js";
import { EdgeLock } from "../../src/index.js";
import { type BillMeter, billMeter } from "../support/billing.js";
import { type Seeded, type Stack, seedEveryKind, startStack, until } from "./support.js";

let stack: Stack;
let meter: BillMeter;
beforeAll(async () => {
  stack = await startStack();
  meter = await billMeter(stack.redis.url);
});
afterAll(async () => {
  await meter?.close();
  await stack?.close();
});
const edgelock = () => new EdgeLock({ redis: stack.client() });

/** A console mounted on `/locks` of an app, with `authorize` letting everyone in by default. */
function mounted(options: Partial<LockConsoleOptions> = {}) {
  const app = new Hono();
  app.route(
    "/locks",
    lockConsole({ redis: stack.client(), authorize: () => true, ...options } as LockConsoleOptions),
  );
  return app;
}

async function page(app: Hono, path = "/locks") {
  const res = await app.request(path);
  return { status: res.status, html: await res.text(), res };
}

/** The `<section>` of one name (sections do not nest). */
function section(html: string, name: string): string {
  const start = html.indexOf(`<section class="name" data-name="${name}"`);
  if (start < 0) throw new Error(`no section for ${name}`);
  return html.slice(start, html.indexOf("</section>", start));
}

/** The billed commands the page says its refresh cost. */
function billedOf(html: string): number {
  const m = /id="cost">Last refresh: <b>(\d+)<\/b>/.exec(html);
  if (!m) throw new Error("no cost line");
  return Number(m[1]);
}

/** An `@upstash/redis` client whose every call is recorded and refused: nothing may be sent. */
function untouchable(): UpstashAdminClient & { calls: string[] } {
  const calls: string[] = [];
  const methods = [
    "eval",
    "evalsha",
    "scan",
    "type",
    "exists",
    "hget",
    "hmget",
    "pttl",
    "del",
    "get",
    "multi",
  ];
  const client = Object.fromEntries(
    methods.map((m) => [
      m,
      () => {
        calls.push(m);
        throw new Error(`${m} was called`);
      },
    ]),
  );
  return Object.assign(client as unknown as UpstashAdminClient, { calls });
}

describe("lockConsole refuses bad options when it is made, before any request", () => {
  const redis = untouchable();
  const base = { redis, authorize: () => true };
  const cases: [string, unknown, ErrorConstructor, RegExp][] = [
    ["no authorize", { redis }, TypeError, /`authorize` is required/],
    ["authorize not a function", { redis, authorize: true }, TypeError, /`authorize` is required/],
    [
      "writable without onAudit",
      { ...base, writable: true },
      TypeError,
      /`writable: true` needs `onAudit`/,
    ],
    [
      "writable not a boolean",
      { ...base, writable: "yes" },
      TypeError,
      /`writable` must be a boolean/,
    ],
    ["onAudit not a function", { ...base, onAudit: 1 }, TypeError, /`onAudit` must be a function/],
    ["identify not a function", { ...base, identify: "x" }, TypeError, /`identify` must be/],
    ["no redis", { authorize: () => true }, TypeError, /`redis` must be an @upstash\/redis client/],
    [
      "a redis without the reads",
      { redis: { eval() {}, evalsha() {} }, authorize: () => true },
      TypeError,
      /\(it has no scan, type, exists, hget, hmget, pttl, del, get, multi\)/,
    ],
    ["names not an array", { ...base, names: "a" }, TypeError, /`names` must be an array/],
    ["a name with braces", { ...base, names: ["ok", "a{b}"] }, RangeError, /`names\[1\]`/],
    ["an empty name", { ...base, names: [""] }, RangeError, /`names\[0\]`/],
    [
      "over 100 names",
      { ...base, names: Array.from({ length: 101 }, (_, i) => `n${i}`) },
      RangeError,
      /at most 100 names/,
    ],
    [
      "an unknown scan option",
      { ...base, scan: { limit: 5 } },
      TypeError,
      /unknown option `limit`/,
    ],
    [
      "scan.count 0",
      { ...base, scan: { count: 0 } },
      RangeError,
      /`scan.count` must be an integer in \[1, 1000\]/,
    ],
    ["scan.maxCalls 101", { ...base, scan: { maxCalls: 101 } }, RangeError, /`scan.maxCalls`/],
    ["scan.maxKeys 1.5", { ...base, scan: { maxKeys: 1.5 } }, RangeError, /`scan.maxKeys`/],
    [
      "scan.maxKeys a string",
      { ...base, scan: { maxKeys: "5" } },
      TypeError,
      /`scan.maxKeys` must be a number/,
    ],
    ["scan.match empty", { ...base, scan: { match: "" } }, TypeError, /`scan.match`/],
    ["scan true", { ...base, scan: true }, TypeError, /options must be an object/],
    [
      "origins not an array",
      { ...base, origins: "https://a.example" },
      TypeError,
      /`origins` must be an array/,
    ],
    [
      "an origin with a path",
      { ...base, origins: ["https://a.example/ops"] },
      TypeError,
      /`origins\[0\]`/,
    ],
    ["an unknown option", { ...base, readonly: true }, TypeError, /unknown option `readonly`/],
  ];
  it.each(cases)("%s", (_, options, type, message) => {
    expect(() => lockConsole(options as LockConsoleOptions)).toThrow(type);
    expect(() => lockConsole(options as LockConsoleOptions)).toThrow(message);
    expect(redis.calls).toEqual([]);
  });

  it("takes a function of the context for `redis`, called per request", async () => {
    const seen: unknown[] = [];
    const app = new Hono<{ Bindings: { REDIS: Redis } }>();
    app.route(
      "/locks",
      lockConsole<{ Bindings: { REDIS: Redis } }>({
        redis: (c) => {
          seen.push(c.env.REDIS);
          return c.env.REDIS;
        },
        authorize: () => true,
        scan: false,
      }),
    );
    const env = { REDIS: stack.client() };
    expect((await app.request("/locks", {}, env)).status).toBe(200);
    expect(seen).toEqual([env.REDIS]);
  });
});

describe("authorize", () => {
  it("is asked first, with the request: anything but true is answered 403 and nothing is read", async () => {
    const redis = untouchable();
    const asked: string[] = [];
    for (const answer of [false, "yes", 1, Promise.resolve(false)]) {
      const app = new Hono();
      app.route(
        "/locks",
        lockConsole({
          redis,
          authorize: (request) => {
            asked.push(`${request.method} ${new URL(request.url).pathname}`);
            return answer as boolean;
          },
          writable: true,
          onAudit: () => {},
        }),
      );
      for (const [path, init] of [
        ["/locks", {}],
        ["/locks/free?name=x", {}],
        ["/locks/free", { method: "POST", body: new URLSearchParams({ name: "x" }) }],
      ] as const) {
        const res = await app.request(path, init);
        expect(res.status).toBe(403);
        expect(await res.text()).toContain('id="forbidden"');
      }
    }
    expect(redis.calls).toEqual([]);
    expect(asked.slice(0, 3)).toEqual(["GET /locks", "GET /locks/free", "POST /locks/free"]);
  });

  it("lets a request in when it answers true, also through a promise", async () => {
    const app = mounted({ authorize: async (req) => req.headers.get("x-ops") === "yes" });
    expect((await app.request("/locks")).status).toBe(403);
    expect((await app.request("/locks", { headers: { "x-ops": "yes" } })).status).toBe(200);
  });
});

describe("the page", () => {
  let seeded: Seeded;
  const prefix = "kinds:";
  beforeAll(async () => {
    seeded = await seedEveryKind(() => stack.client(), prefix);
  });
  afterAll(async () => {
    await seeded?.stop();
  });

  it("shows every kind the scan finds, with holders, epoch, token, permits, count and waiters", async () => {
    const { names, leases } = seeded;
    const { status, html, res } = await page(mounted({ scan: { match: `${prefix}*` } }));
    expect(status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    // "no-referrer" would make a browser send `Origin: null` with the console's own form.
    expect(res.headers.get("referrer-policy")).toBe("same-origin");
    expect(res.headers.get("content-security-policy")).toMatch(
      /^default-src 'none'; style-src 'nonce-[0-9a-f]{32}'; script-src 'nonce-[0-9a-f]{32}'; form-action 'self'; frame-ancestors 'none'/,
    );
    expect(html).toContain('id="read-only"');
    expect(html).not.toContain("Free…");
    expect(html).toMatch(/<p class="scan" id="scan">Scanning <code>kinds:\*<\/code> .*complete/);

    // Found by the scan, shown in name order.
    const shown = [...html.matchAll(/<section class="name" data-name="([^"]+)"/g)].map((m) => m[1]);
    expect(shown).toEqual(Object.values(names).sort());

    const lock = section(html, names.lock);
    expect(lock).toContain('data-kind="lock"');
    expect(lock).toContain(`data-owner="${leases[names.lock]?.owner}"`);
    expect(lock).toMatch(/<td class="num holds">2<\/td>/);
    expect(lock).toContain(`<td class="num mono epoch">${leases[names.lock]?.epoch}</td>`);
    expect(lock).not.toContain("fencing token");
    expect(lock).toMatch(/Registered waiters, served in this order: 1/);
    expect(lock).toMatch(/hand-off to owner <code>worker-us-\d+:[0-9a-f]+<\/code> for 10 s/);

    const fenced = section(html, names.fenced);
    const token = leases[names.fenced]?.fencingToken;
    expect(fenced).toContain(`<td class="num mono token">${token}</td>`);
    expect(fenced).toContain(`Last fencing token issued: <b class="mono">${token}</b>`);
    expect(fenced).toContain(`<td class="num mono epoch">${leases[names.fenced]?.epoch}</td>`);

    const fair = section(html, names.fair);
    expect(fair).toContain('data-kind="fair-lock"');
    expect(fair).toMatch(/Queue, served in this order: 2/);
    // Both queued owners are edgelock's: each names its waiting call (the registry's HASH,
    // which the decoding client answers as an object).
    expect(
      fair.match(
        /<li class="waiter" data-owner="worker-us-\d+:[0-9a-f]+" data-waiter="[0-9a-f]+:[0-9a-f]+"/g,
      ),
    ).toHaveLength(2);

    const rw = section(html, names.rw);
    expect(rw).toMatch(/locked for read/);
    expect(rw.match(/<td class="num holds">1 \(read\)<\/td>/g)).toHaveLength(2);
    expect(rw).toContain(`<td class="num mono epoch">${leases[names.rw]?.epoch}</td>`);
    expect(rw).toMatch(/Registered waiters, served in this order: 1/);

    const semaphore = section(html, names.semaphore);
    expect(semaphore).toContain("Permits: <b>0</b> available of 3 set");
    expect(semaphore).toMatch(
      /waiter <code>[0-9a-f]+:[0-9a-f]+<\/code> · asks to be handed 2 permits · registration lapses/,
    );

    const pes = section(html, names.pes);
    expect(pes).toContain("Permits: <b>0</b> available, 2 acquired, of 2 set");
    expect(pes.match(/<tr class="holder" data-owner="[0-9a-f]{32}">/g)).toHaveLength(2);
    expect(pes).toMatch(/asks to be handed 1 permit, with a first lease of \d+(\.\d)? s ·/);

    const latch = section(html, names.latch);
    expect(latch).toContain("Count: <b>3</b>");
    expect(latch).toMatch(/Registered waiters, served in this order: 1/);
  });

  it("shows the names it is given first, also when nothing is stored or a key is not ours", async () => {
    const raw = stack.client();
    await raw.rpush("plain-list", "x");
    const { html } = await page(
      mounted({ names: ["nothing:here", "plain-list", seeded.names.latch], scan: false }),
    );
    expect(html).toContain("Not scanning: only the names given are shown.");
    const order = [...html.matchAll(/<section class="name" data-name="([^"]+)"/g)].map((m) => m[1]);
    expect(order).toEqual(["nothing:here", "plain-list", seeded.names.latch]);
    expect(section(html, "nothing:here")).toContain("free (nothing stored)");
    expect(section(html, "plain-list")).toContain(
      "Could not read it: &quot;plain-list&quot; holds a Redis list, which no edgelock primitive uses",
    );
  });

  it("escapes what it shows: a name or an owner cannot write HTML into the page", async () => {
    const name = "esc:<img src=x onerror=alert(1)>";
    const lease = await edgelock()
      .getLock(name)
      .tryLock({ leaseTime: 10_000, owner: `"><script>alert(2)</script>` });
    expect(lease).not.toBeNull();
    const { html } = await page(mounted({ names: [name], scan: false }));
    expect(html).not.toContain("<img src=x");
    expect(html).not.toContain("<script>alert");
    expect(html).toContain("&lt;img src=x onerror=alert(1)&gt;");
    expect(html).toContain("&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;");
  });

  it("reads the same through a client that does not decode replies", async () => {
    const decoded = await page(
      mounted({ names: [seeded.names.fair, seeded.names.fenced], scan: false }),
    );
    const raw = await page(
      mounted({
        redis: stack.client({ automaticDeserialization: false }),
        names: [seeded.names.fair, seeded.names.fenced],
        scan: false,
      }),
    );
    const strip = (html: string) =>
      html
        .replace(/data-ttl="\d+">[^<]*/g, "")
        .replace(/nonce="[0-9a-f]+"/g, "")
        .replace(/<p class="meta" id="cost">[\s\S]*?<\/p>/, "");
    expect(strip(raw.html)).toBe(strip(decoded.html));
  });

  it("shows what Redis could not answer, in the page", async () => {
    const wrong = new Redis({ url: stack.url, token: "wrong", enableTelemetry: false });
    const { status, html } = await page(
      mounted({ redis: wrong, names: [seeded.names.lock], scan: { match: `${prefix}*` } }),
    );
    expect(status).toBe(200);
    expect(html).toMatch(/<span class="warn">failed: [^<]*HTTP 401/);
    expect(section(html, seeded.names.lock)).toMatch(/Could not read it: [^<]*HTTP 401/);
    expect(html).not.toContain("wrong");
  });

  it("reloads itself every 5, 10, 30 or 60 seconds when asked, and never faster", async () => {
    const app = mounted({ scan: false });
    expect((await page(app, "/locks?every=5")).html).toContain(
      '<meta http-equiv="refresh" content="5">',
    );
    for (const every of ["1", "0", "abc", "7"]) {
      expect((await page(app, `/locks?every=${every}`)).html).not.toContain("http-equiv");
    }
  });
});

describe("the scan", () => {
  it("reads at most maxKeys keys, leaving out helper keys, cron marks and keys of no primitive", async () => {
    const e = edgelock();
    for (const n of [1, 2, 3]) await e.getLock(`scan:lock:${n}`).tryLock({ leaseTime: 30_000 });
    const raw = stack.client();
    await raw.set("scan:text", "hello");
    // The cron guard's mark of one scheduled run (a lock named <name>#<time>).
    await e.getLock("scan:cron#1700000000000").tryLock({ leaseTime: 30_000 });

    const all = await page(mounted({ scan: { match: "scan:*" } }));
    const shown = [...all.html.matchAll(/data-name="([^"]+)"/g)].map((m) => m[1]).sort();
    expect(shown).toEqual(["scan:lock:1", "scan:lock:2", "scan:lock:3"]);
    expect(all.html).toMatch(/complete; left out: 1 cron mark, 1 key of no primitive\./);

    // A name given is shown once, where it is given.
    const given = await page(mounted({ names: ["scan:lock:2"], scan: { match: "scan:*" } }));
    const order = [...given.html.matchAll(/data-name="([^"]+)"/g)].map((m) => m[1]);
    expect(order).toEqual(["scan:lock:2", "scan:lock:1", "scan:lock:3"]);

    // SCAN may return a key again (while Redis rehashes): it is read and shown once.
    const real = stack.client();
    const again: UpstashAdminClient = Object.assign(Object.create(real) as Redis, {
      scan: async (cursor: string | number, options: { match: string; count: number }) => {
        // The first page twice: its cursor is taken for "0" once more.
        const [next, keys] = await real.scan(cursor === "again" ? 0 : cursor, options);
        return [String(cursor) === "0" ? "again" : next, keys] as [string, string[]];
      },
    });
    const twice = await page(mounted({ redis: again, scan: { match: "scan:lock:*" } }));
    expect(twice.html).toMatch(/2 calls, 6 keys seen, 3 read, complete/);
    expect([...twice.html.matchAll(/data-name="/g)]).toHaveLength(3);

    const two = await page(mounted({ scan: { match: "scan:lock:*", maxKeys: 2 } }));
    expect([...two.html.matchAll(/data-name="/g)]).toHaveLength(2);
    expect(two.html).toContain('2 read, <span class="warn">stopped at 2 keys read: more may match');

    // A key of no primitive takes its place among the keys read: the bound is on the bill.
    const one = await page(mounted({ scan: { match: "scan:text*", maxKeys: 1 } }));
    expect([...one.html.matchAll(/data-name="/g)]).toHaveLength(0);
    expect(one.html).toContain("1 read, complete; left out: 1 key of no primitive.");

    const none = await page(mounted({ scan: { match: "scan:*", maxKeys: 0 } }));
    expect([...none.html.matchAll(/data-name="/g)]).toHaveLength(0);
    expect(none.html).toContain(
      '0 calls, 0 keys seen, 0 read, <span class="warn">stopped at 0 keys read',
    );
  });

  it("stops after maxCalls SCAN calls and says more keys may match", async () => {
    const raw = stack.client();
    for (let i = 0; i < 50; i++) await raw.set(`filler:${i}`, "x");
    const e = edgelock();
    await e.getLock("calls:lock").tryLock({ leaseTime: 30_000 });
    const { html } = await page(mounted({ scan: { match: "nomatch:*", count: 1, maxCalls: 3 } }));
    expect(html).toContain(
      '3 calls, 0 keys seen, 0 read, <span class="warn">stopped after 3 calls: more keys may match',
    );
    // A name that is not given and not found is not read: three SCANs are the whole bill.
    expect(billedOf(html)).toBe(3);
  });
});

describe("what a refresh costs", () => {
  it("the page's count is what Redis counts, and stays within its documented bound", async () => {
    // The kinds are written through a bridge that then goes away, with their waiters still
    // registered: nothing else sends a command while Redis counts the page's.
    const doomed: Bridge = await startBridge({ redisUrl: stack.redis.url, token: stack.token });
    const seeded = await seedEveryKind(
      () => new Redis({ url: doomed.url, token: stack.token, enableTelemetry: false }),
      "bill:",
    );
    await doomed.close();
    try {
      const app = mounted({ names: ["bill:absent"], scan: { match: "bill:*" } });
      await page(app); // the scripts' first runs load them (EVAL after NOSCRIPT)
      let html = "";
      const bill = await meter.measure(async () => {
        html = (await page(app)).html;
      });
      expect([...html.matchAll(/<section class="name"/g)]).toHaveLength(8);
      expect(html).toContain("1 given, 7 found by the scan");
      expect(billedOf(html)).toBe(bill.total);
      // The documented bound: 1 per SCAN call, 23 per name given or key read.
      const [, calls, read] = /(\d+) calls?, \d+ keys seen, (\d+) read/.exec(html) ?? [];
      expect(Number(read)).toBe(7);
      expect(bill.total).toBeLessThanOrEqual(Number(calls) + 23 * (1 + Number(read)));
      console.log(
        `a refresh of 1 absent name and 7 of every kind: ${bill.total} billed`,
        bill.commands,
      );
    } finally {
      await seeded.stop();
    }
  });
});

describe("freeing a name", () => {
  const audits: ConsoleAuditEvent[] = [];
  afterEach(() => {
    audits.length = 0;
  });
  const writable = (options: Partial<LockConsoleOptions> = {}) =>
    mounted({
      writable: true,
      onAudit: (event) => {
        audits.push(event);
      },
      identify: (req) => req.headers.get("x-user"),
      scan: false,
      ...options,
    });

  /** The dry run of `name`: its page, and the form's token with the cookie set beside it. */
  async function dryRun(app: Hono, name: string) {
    const res = await app.request(`/locks/free?name=${encodeURIComponent(name)}`);
    const html = await res.text();
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(html)?.[1] ?? "";
    const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
    return { status: res.status, html, csrf, cookie, setCookie: res.headers.get("set-cookie") };
  }

  function post(app: Hono, fields: Record<string, string>, headers: Record<string, string> = {}) {
    return app.request("http://localhost/locks/free", {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        origin: "http://localhost",
        "sec-fetch-site": "same-origin",
        ...headers,
      },
      body: new URLSearchParams(fields),
    });
  }

  async function held(name: string) {
    const lease = await edgelock().getLock(name).tryLock({ leaseTime: 30_000 });
    if (!lease) throw new Error(`${name} is busy`);
    return lease;
  }

  const isLocked = (name: string) => edgelock().getLock(name).isLocked();

  it("is refused by a read-only console (the default), which offers no free", async () => {
    await held("ro:lock");
    const app = mounted({ names: ["ro:lock"], scan: false });
    const dry = await app.request("/locks/free?name=ro:lock");
    expect(dry.status).toBe(403);
    expect(await dry.text()).toContain('id="read-only"');
    // Even with a form that would pass everywhere else: a token and its cookie, same origin.
    const token = "a".repeat(64);
    const res = await post(
      app,
      { name: "ro:lock", kind: "lock", confirm: "ro:lock", csrf: token },
      { cookie: `edgelock-csrf=${token}` },
    );
    expect(res.status).toBe(403);
    expect(await res.text()).toContain('id="read-only"');
    expect(await isLocked("ro:lock")).toBe(true);
  });

  it("shows first what it will do, changing nothing, with a form bound to a cookie", async () => {
    const lease = await held("dry:lock");
    const app = writable({ names: ["dry:lock"] });
    expect((await page(app)).html).toContain(
      '<a class="button danger free" href="/locks/free?name=dry%3Alock">Free…</a>',
    );
    const dry = await dryRun(app, "dry:lock");
    expect(dry.status).toBe(200);
    expect(dry.html).toContain("dry run: nothing has changed yet");
    expect(dry.html).toContain("Deletes the lock whoever holds it (Redisson&#39;s forceUnlock).");
    expect(dry.html).toContain(`data-owner="${lease.owner}"`);
    expect(dry.csrf).toMatch(/^[0-9a-f]{64}$/);
    expect(dry.setCookie).toBe(
      `edgelock-csrf=${dry.csrf}; Path=/locks/free; Max-Age=600; HttpOnly; SameSite=Strict`,
    );
    expect(await isLocked("dry:lock")).toBe(true);
    expect((await app.request("/locks/free?name=a{b}")).status).toBe(400);
    expect((await app.request("/locks/free")).status).toBe(400);
  });

  it("over HTTPS the cookie is __Host- and Secure", async () => {
    const app = writable();
    const res = await app.request("https://ops.example/locks/free?name=x");
    expect(res.headers.get("set-cookie")).toMatch(
      /^__Host-edgelock-csrf=[0-9a-f]{64}; Path=\/; Max-Age=600; HttpOnly; SameSite=Strict; Secure$/,
    );
  });

  it("frees the name typed again, and tells onAudit who, what and when", async () => {
    const lease = await held("free:lock");
    const waiter = edgelock().getLock("free:lock").tryLock({ waitTime: 10_000, leaseTime: 5_000 });
    await until(async () => (await stack.client().zcard("edgelock_waiting:{free:lock}")) === 1);
    const app = writable();
    const dry = await dryRun(app, "free:lock");
    expect(dry.html).toContain("Its 1 waiter is woken, as by a release.");
    const before = Date.now();
    const res = await post(
      app,
      { name: "free:lock", kind: "lock", confirm: "free:lock", csrf: dry.csrf },
      { cookie: dry.cookie, "x-user": "ops@example.com" },
    );
    expect(res.status).toBe(200);
    expect(await res.text()).toContain("Freed lock &quot;free:lock&quot;.");
    // The cookie is cleared with the answer.
    expect(res.headers.get("set-cookie")).toMatch(
      /^edgelock-csrf=; Path=\/locks\/free; Max-Age=0;/,
    );
    expect(audits).toEqual([
      {
        action: "free",
        name: "free:lock",
        kind: "lock",
        deleted: true,
        holders: [lease.owner],
        waiters: 1,
        who: "ops@example.com",
        at: expect.any(Number),
      },
    ]);
    expect(audits[0]?.at).toBeGreaterThanOrEqual(before);
    // The waiter was woken and took it.
    const next = await waiter;
    expect(next).not.toBeNull();
    await next?.release();
  });

  it("without the name typed again, or with another, changes nothing", async () => {
    await held("typed:lock");
    const app = writable();
    for (const confirm of ["", "typed:loc", "TYPED:LOCK", " typed:lock"]) {
      const dry = await dryRun(app, "typed:lock");
      const res = await post(
        app,
        { name: "typed:lock", kind: "lock", confirm, csrf: dry.csrf },
        { cookie: dry.cookie },
      );
      expect(res.status).toBe(400);
      expect(await res.text()).toContain('id="not-confirmed"');
    }
    expect(await isLocked("typed:lock")).toBe(true);
    expect(audits).toEqual([]);
  });

  it("refuses a form whose token is not the cookie's: missing, another, or no cookie", async () => {
    await held("csrf:lock");
    const app = writable();
    const dry = await dryRun(app, "csrf:lock");
    const other = await dryRun(app, "csrf:lock");
    const fields = { name: "csrf:lock", kind: "lock", confirm: "csrf:lock" };
    for (const [csrf, cookie] of [
      [dry.csrf, ""],
      ["", dry.cookie],
      [dry.csrf, other.cookie],
      [dry.csrf.slice(0, -1), dry.cookie],
      [dry.csrf, "edgelock-csrf="],
    ] as const) {
      const res = await post(app, { ...fields, csrf }, cookie ? { cookie } : {});
      expect(res.status).toBe(403);
      expect(await res.text()).toContain('id="csrf"');
    }
    expect(await isLocked("csrf:lock")).toBe(true);
    expect(audits).toEqual([]);
  });

  it("refuses a POST from another origin or site, even with a valid form and cookie", async () => {
    await held("site:lock");
    const app = writable();
    const refused: [Record<string, string>, string][] = [
      [{ origin: "http://evil.example" }, "another origin (http://evil.example)"],
      [{ origin: "null" }, "another origin (null)"],
      [{ "sec-fetch-site": "cross-site" }, "another site (Sec-Fetch-Site: cross-site)"],
      [
        { "sec-fetch-site": "same-site", origin: "http://ops.localhost" },
        "Sec-Fetch-Site: same-site",
      ],
    ];
    for (const [headers, reason] of refused) {
      const dry = await dryRun(app, "site:lock");
      const res = await post(
        app,
        { name: "site:lock", kind: "lock", confirm: "site:lock", csrf: dry.csrf },
        { cookie: dry.cookie, ...headers },
      );
      expect(res.status).toBe(403);
      const html = await res.text();
      expect(html).toContain('id="cross-site"');
      expect(html).toContain(reason);
    }
    expect(await isLocked("site:lock")).toBe(true);

    // A console behind a proxy names the origin its users see.
    const proxied = writable({ origins: ["https://ops.example.com"] });
    const dry = await dryRun(proxied, "site:lock");
    const res = await post(
      proxied,
      { name: "site:lock", kind: "lock", confirm: "site:lock", csrf: dry.csrf },
      { cookie: dry.cookie, origin: "https://ops.example.com" },
    );
    expect(res.status).toBe(200);
    expect(await isLocked("site:lock")).toBe(false);
  });

  it("a client that is no browser (no Origin, no Sec-Fetch-Site) still needs the form's token", async () => {
    await held("curl:lock");
    const app = writable();
    const dry = await dryRun(app, "curl:lock");
    const bare = (fields: Record<string, string>, headers: Record<string, string>) =>
      app.request("/locks/free", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
        body: new URLSearchParams(fields),
      });
    const fields = { name: "curl:lock", kind: "lock", confirm: "curl:lock" };
    expect((await bare({ ...fields, csrf: "0".repeat(64) }, {})).status).toBe(403);
    expect((await bare({ ...fields, csrf: dry.csrf }, { cookie: dry.cookie })).status).toBe(200);
    expect(await isLocked("curl:lock")).toBe(false);
  });

  it("refuses when the name holds another kind than the dry run showed, or a bad name or kind", async () => {
    const semaphore = edgelock().getSemaphore("kind:sem");
    await semaphore.trySetPermits(2);
    const app = writable();
    const dry = await dryRun(app, "kind:sem");
    expect(dry.html).toContain("Deletes the semaphore and its record of permits set");
    const send = (fields: Record<string, string>) =>
      post(app, { csrf: dry.csrf, ...fields }, { cookie: dry.cookie });
    const changed = await send({ name: "kind:sem", kind: "lock", confirm: "kind:sem" });
    expect(changed.status).toBe(409);
    expect(await changed.text()).toContain(
      "holds a semaphore now, not the lock the dry run showed",
    );
    expect((await send({ name: "kind:sem", kind: "mutex", confirm: "kind:sem" })).status).toBe(400);
    expect((await send({ name: "a{b}", kind: "lock", confirm: "a{b}" })).status).toBe(400);
    expect(await semaphore.availablePermits()).toBe(2);
    const gone = await send({ name: "kind:none", kind: "lock", confirm: "kind:none" });
    expect(gone.status).toBe(200);
    expect(await gone.text()).toContain('id="nothing"');
    expect(audits).toEqual([]);

    const freed = await send({ name: "kind:sem", kind: "semaphore", confirm: "kind:sem" });
    expect(freed.status).toBe(200);
    expect(await semaphore.availablePermits()).toBe(0);
    expect(audits).toMatchObject([
      { name: "kind:sem", kind: "semaphore", deleted: true, who: null },
    ]);
  });

  it("an audit hook that fails reaches app.onError, after the free", async () => {
    await held("audit:lock");
    const app = new Hono();
    app.onError((error, c) => c.text(`onError: ${error.message}`, 500));
    app.route(
      "/locks",
      lockConsole({
        redis: stack.client(),
        authorize: () => true,
        writable: true,
        onAudit: () => {
          throw new Error("audit log down");
        },
      }),
    );
    const dry = await dryRun(app, "audit:lock");
    const res = await post(
      app,
      { name: "audit:lock", kind: "lock", confirm: "audit:lock", csrf: dry.csrf },
      { cookie: dry.cookie },
    );
    expect(res.status).toBe(500);
    expect(await res.text()).toBe("onError: audit log down");
    expect(await isLocked("audit:lock")).toBe(false);
  });
});
