/**
 * The lock console in a real browser: headless Chromium (Debian's `chromium` package, driven by
 * `playwright-core` through its executable path; nothing is downloaded) on the console served by
 * Node on loopback, over a redis-server and a bridge of this file's own, through real
 * `@upstash/redis` clients. Every kind shows its holders and waiters; a waiter appears and
 * leaves as it does in Redis; the times to live count down under the page's
 * Content-Security-Policy; freeing a lock needs its name typed again; a request `authorize`
 * refuses and a cross-site form are refused. `UPDATE_SCREENSHOT=1` writes the page's picture
 * to docs/console.png.
 *
 * Needs /usr/bin/chromium (`apt-get install -y chromium`; .ci/run installs it when missing).
 */

import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ConsoleAuditEvent, lockConsole } from "../../src/console/index.js";
import { EdgeLock } from "../../src/index.js";
import { type Seeded, type Stack, seedEveryKind, startStack, until } from "./support.js";

const CHROMIUM = "/usr/bin/chromium";
const TOKEN = "Bearer ops-on-call";
const root = join(import.meta.dirname, "..", "..");

/** An app served by Node on a free loopback port. */
async function served(app: Hono, hostname = "127.0.0.1") {
  const { server, port } = await new Promise<{ server: ReturnType<typeof serve>; port: number }>(
    (resolve) => {
      const created = serve(
        { fetch: app.fetch, port: 0, hostname, overrideGlobalObjects: false },
        (info: AddressInfo) => resolve({ server: created, port: info.port }),
      );
    },
  );
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        if ("closeAllConnections" in server) server.closeAllConnections();
      }),
  };
}

let stack: Stack;
let browser: BrowserContext;
let profile: string;
let site: Awaited<ReturnType<typeof served>>;
let origin: string;
const audits: ConsoleAuditEvent[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run installs it)`);
  }
  stack = await startStack();
  const app = new Hono();
  const authorize = (req: Request) => req.headers.get("authorization") === TOKEN;
  // Read-only at /locks, writable at /ops/locks: the same app, two consoles.
  app.route("/locks", lockConsole({ redis: stack.client(), authorize }));
  app.route(
    "/ops/locks",
    lockConsole({
      redis: stack.client(),
      authorize,
      writable: true,
      onAudit: (event) => {
        audits.push(event);
      },
      identify: () => "on-call@example.com",
      scan: false,
      names: ["free:lock"],
    }),
  );
  site = await served(app);
  origin = `http://127.0.0.1:${site.port}`;
  profile = mkdtempSync(join(tmpdir(), "edgelock-chromium-"));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: { width: 1180, height: 900 },
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  await site?.close();
  await stack?.close();
});

/**
 * A tab that `authorize` lets in, recording every request it makes, every error its scripts
 * throw and every refusal of its Content-Security-Policy.
 */
async function tab(authorized = true) {
  const page = await browser.newPage();
  if (authorized) await page.setExtraHTTPHeaders({ authorization: TOKEN });
  const requests: string[] = [];
  const errors: string[] = [];
  page.on("request", (request) => requests.push(request.url()));
  page.on("console", (message) => {
    // A refusal's status (400, 403) is logged too: what counts is a refused script or style.
    const text = message.text();
    if (message.type() === "error" && !text.startsWith("Failed to load resource")) {
      errors.push(text);
    }
  });
  page.on("pageerror", (error) => errors.push(error.message));
  return { page, requests, errors };
}

/** The waiters a section lists, as `data-waiter` ids, in order. */
async function waitersOf(page: Page, name: string): Promise<string[]> {
  return page
    .locator(`section[data-name="${name}"] li.waiter`)
    .evaluateAll((items) => items.map((li) => li.getAttribute("data-waiter") ?? ""));
}

describe("the console in Chromium", () => {
  let seeded: Seeded;
  beforeAll(async () => {
    seeded = await seedEveryKind(() => stack.client(), "");
  });
  afterAll(async () => {
    await seeded?.stop();
  });

  it("shows every kind with its holders and waiters, from the page alone", async () => {
    const { page, requests, errors } = await tab();
    const response = await page.goto(`${origin}/locks`);
    expect(response?.status()).toBe(200);
    const { names } = seeded;
    const expected: [string, string, boolean][] = [
      [names.fair, "fair-lock", true],
      [names.lock, "lock", true],
      [names.fenced, "fenced-lock", true],
      [names.rw, "read-write-lock", true],
      [names.semaphore, "semaphore", false],
      [names.pes, "permit-expirable-semaphore", true],
      [names.latch, "count-down-latch", false],
    ];
    for (const [name, kind, holds] of expected) {
      const section = page.locator(`section[data-name="${name}"]`);
      await expect.poll(() => section.getAttribute("data-kind")).toBe(kind);
      expect(await section.locator("tr.holder").count(), `${name} holders`).toBe(
        holds ? (kind === "read-write-lock" || kind === "permit-expirable-semaphore" ? 2 : 1) : 0,
      );
      expect((await waitersOf(page, name)).length, `${name} waiters`).toBe(
        kind === "fair-lock" ? 2 : 1,
      );
    }
    expect(await page.locator(`section[data-name="${names.lock}"] td.holds`).innerText()).toBe("2");
    expect(await page.locator(`section[data-name="${names.fenced}"] td.token`).innerText()).toBe(
      String(seeded.leases[names.fenced]?.fencingToken),
    );
    expect(await page.locator(`section[data-name="${names.semaphore}"] .permits`).innerText()).toBe(
      "Permits: 0 available of 3 set",
    );
    expect(await page.locator(`section[data-name="${names.latch}"] .count`).innerText()).toBe(
      "Count: 3",
    );
    expect(await page.locator("#scan").innerText()).toMatch(
      /^Scanning \* \(at most 10 SCAN calls of COUNT 100, 25 keys read\): 1 call, \d+ keys seen, 7 read, complete\.$/,
    );
    expect(await page.locator("#cost").innerText()).toMatch(
      /^Last refresh: \d+ billed commands, \d+ ms, 7 names \(0 given, 7 found by the scan\)/,
    );
    expect(await page.locator("#read-only").isVisible()).toBe(true);
    expect(await page.locator("a.free").count()).toBe(0);

    // The times to live count down in the browser, between refreshes.
    const ttl = page.locator(`section[data-name="${names.lock}"] h2 .ttl`);
    const first = await ttl.innerText();
    await expect.poll(() => ttl.innerText(), { timeout: 3_000 }).not.toBe(first);
    // Everything came from the console itself, and nothing was refused by its CSP.
    expect(requests.every((url) => url.startsWith(`${origin}/`))).toBe(true);
    expect(errors).toEqual([]);

    const shot = await page.screenshot({ fullPage: true });
    expect(shot.subarray(1, 4).toString()).toBe("PNG");
    if (process.env.UPDATE_SCREENSHOT) writeFileSync(join(root, "docs", "console.png"), shot);
    await page.close();
  });

  it("a waiter appears and leaves as it does in Redis", async () => {
    const name = "live:lock";
    const edgelock = new EdgeLock({ redis: stack.client() });
    const lease = await edgelock.getLock(name).tryLock({ leaseTime: 30_000 });
    expect(lease).not.toBeNull();
    const registry = async () => {
      const members = await stack.client().zrange<string[]>(`edgelock_waiting:{${name}}`, 0, -1);
      return members.map((member) => String(member).split("|")[0] ?? "");
    };
    const { page } = await tab();
    await page.goto(`${origin}/locks`);
    expect(await page.locator(`section[data-name="${name}"] h3`).innerText()).toBe("No waiters");

    const stop = new AbortController();
    const waiting = new EdgeLock({ redis: stack.client() })
      .getLock(name)
      .tryLock({ waitTime: 20_000, leaseTime: 5_000, signal: stop.signal })
      .catch(() => null);
    await until(async () => (await registry()).length === 1, "the waiter registers");
    await page.reload();
    expect(await waitersOf(page, name)).toEqual(await registry());

    stop.abort(new Error("gave up"));
    await waiting;
    await until(async () => (await registry()).length === 0, "the waiter leaves");
    await page.reload();
    expect(await waitersOf(page, name)).toEqual([]);
    expect(await page.locator(`section[data-name="${name}"] h3`).innerText()).toBe("No waiters");
    await lease?.release();
    await page.close();
  });
});

describe("freeing a lock in Chromium", () => {
  const name = "free:lock";
  const isLocked = () => new EdgeLock({ redis: stack.client() }).getLock(name).isLocked();

  it("needs the name typed again: without it nothing changes, with it the lock is freed", async () => {
    const lease = await new EdgeLock({ redis: stack.client() })
      .getLock(name)
      .tryLock({ leaseTime: 30_000 });
    expect(lease).not.toBeNull();
    const { page, errors } = await tab();
    await page.goto(`${origin}/ops/locks`);
    await page.locator(`section[data-name="${name}"] a.free`).click();
    await page.waitForURL(/\/ops\/locks\/free\?name=free%3Alock$/);
    expect(await page.locator("#plan").innerText()).toContain(
      "Deletes the lock whoever holds it (Redisson's forceUnlock).",
    );
    expect(await page.locator("tr.holder").getAttribute("data-owner")).toBe(lease?.owner);

    // Submitted with a name that is not the one: refused, nothing changed.
    await page.locator("#confirm").fill("free:loc");
    const refused = page.waitForResponse((r) => r.request().method() === "POST");
    await page.locator("#do-free").click();
    expect((await refused).status()).toBe(400);
    expect(await page.locator("#not-confirmed").innerText()).toContain(
      'The name typed does not match "free:lock".',
    );
    expect(await isLocked()).toBe(true);

    // Submitted empty: the same.
    await page.goto(`${origin}/ops/locks/free?name=${encodeURIComponent(name)}`);
    await page.locator("#do-free").click();
    await page.locator("#not-confirmed").waitFor();
    expect(await isLocked()).toBe(true);
    expect(audits).toEqual([]);

    // The dry run again, the name typed: freed, and audited.
    await page.goto(`${origin}/ops/locks/free?name=${encodeURIComponent(name)}`);
    await page.locator("#confirm").fill(name);
    const done = page.waitForResponse((r) => r.request().method() === "POST");
    await page.locator("#do-free").click();
    expect((await done).status()).toBe(200);
    expect(await page.locator("#freed").innerText()).toContain('Freed lock "free:lock".');
    expect(await isLocked()).toBe(false);
    expect(audits).toMatchObject([
      { action: "free", name, kind: "lock", deleted: true, holders: [lease?.owner] },
    ]);
    expect(audits[0]?.who).toBe("on-call@example.com");
    expect(errors).toEqual([]);
    await page.close();
  });

  it("refuses a request that authorize does not let in", async () => {
    const { page } = await tab(false);
    for (const path of ["/locks", "/ops/locks", `/ops/locks/free?name=${name}`]) {
      const response = await page.goto(`${origin}${path}`);
      expect(response?.status()).toBe(403);
      expect(await page.locator("#forbidden").innerText()).toContain(
        "This request may not use the lock console.",
      );
      expect(await page.locator("section.name").count()).toBe(0);
    }
    await page.close();
  });

  it("refuses a free posted by a page of another site", async () => {
    await new EdgeLock({ redis: stack.client() }).getLock(name).tryLock({ leaseTime: 30_000 });
    // Another site (localhost is not 127.0.0.1's site) whose page posts the form at once.
    const evil = new Hono();
    evil.get("/", (c) =>
      c.html(`<!doctype html><form id="f" method="post" action="${origin}/ops/locks/free">
<input name="name" value="${name}"><input name="kind" value="lock">
<input name="confirm" value="${name}"><input name="csrf" value="${"0".repeat(64)}"></form>
<script>document.getElementById("f").submit()</script>`),
    );
    const other = await served(evil, "localhost");
    try {
      const { page } = await tab();
      const posted = page.waitForResponse((r) => r.request().method() === "POST");
      await page.goto(`http://localhost:${other.port}/`);
      const response = await posted;
      expect(response.status()).toBe(403);
      expect(await response.request().headerValue("sec-fetch-site")).toBe("cross-site");
      await page.locator("#cross-site").waitFor();
      expect(await page.locator("#cross-site").innerText()).toContain(
        "The request comes from another site (Sec-Fetch-Site: cross-site).",
      );
      expect(await isLocked()).toBe(true);
      expect(audits).toHaveLength(1);
      await page.close();
    } finally {
      await other.close();
    }
  });
});
