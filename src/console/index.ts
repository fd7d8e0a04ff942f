/**
 * `edgelock/console`: a page for operators, as a Hono app to mount on any route, that shows who
 * holds each lock, semaphore and latch, who waits and in what order, and frees a name after a
 * dry run. Runs wherever Hono runs (Workers, Node, Bun, Deno, Vercel): it imports nothing
 * Node-only and renders on the server, with no build step and nothing loaded from elsewhere.
 * @module
 */

import type { Context, Env } from "hono";
import { Hono } from "hono";
import {
  type AdminRedis,
  deleteAs,
  detectKind,
  ForeignKeyError,
  inspectAs,
  KINDS,
  type Kind,
  mayBe,
} from "../admin/kinds.js";
import { adminRedis, type UpstashAdminClient } from "../admin/redis.js";
import { EdgeLockClient } from "../core.js";
import { randomHex } from "../ids.js";
import { checkName, checkOptions } from "../validate.js";
import type { Html } from "./html.js";
import {
  dryRunPage,
  kindLabel,
  layout,
  mainPage,
  notice,
  type PageContext,
  REFRESH_PERIODS,
} from "./page.js";
import { type Reader, refresh, type ScanBounds } from "./read.js";

export type { Kind } from "../admin/kinds.js";
export type { UpstashAdminClient } from "../admin/redis.js";
export type { NameView, Refresh, ScanReport } from "./read.js";

/** The scan the console makes on each refresh, to find names beyond those it is given. */
export interface ConsoleScanOptions {
  /** SCAN `MATCH` glob: narrow it (`"lock:*"`) where the database holds other keys. @default "*" */
  match?: string;
  /** Keys asked of Redis per SCAN call (`COUNT`), integer in [1, 1000]. @default 100 */
  count?: number;
  /** Most SCAN calls per refresh, integer in [1, 100]. @default 10 */
  maxCalls?: number;
  /**
   * Most keys the scan reads per refresh, integer in [0, 200]: each key it returns that is no
   * helper key (told by its name, for free) has its kind detected (7 or 8 billed commands) and,
   * when it holds a primitive, is shown (up to 23 in all; docs/operations.md, "The lock
   * console"). @default 25
   */
  maxKeys?: number;
}

/** What `onAudit` is told once a name was freed. */
export interface ConsoleAuditEvent {
  /** What was done: `"free"` (a lock force-unlocked, a synchronizer or a mark deleted). */
  action: "free";
  /** The name freed. */
  name: string;
  /** Its kind, as the dry run showed it and the free found it. */
  kind: Kind;
  /** True when something was deleted; false when it was already free. */
  deleted: boolean;
  /**
   * Who held it just before: owner ids (a permit-expirable semaphore's: its permit ids). Owner
   * ids are credential-adjacent: keep the audit log as private as the console.
   */
  holders: string[];
  /** How many waited on it (they are woken, as by a release). */
  waiters: number;
  /** Who freed it, as `identify` says; null without `identify`. */
  who: string | null;
  /** When, epoch ms (`Date.now()`). */
  at: number;
}

/** Options of {@link lockConsole}. */
export interface LockConsoleOptions<E extends Env = Env> {
  /**
   * The `@upstash/redis` client to read through, or a function of the context returning it
   * (on Workers, where the credentials arrive per request on `c.env`). Required.
   */
  redis: UpstashAdminClient | ((c: Context<E>) => UpstashAdminClient);
  /**
   * Says whether a request may use the console, before anything is read: `true` lets it in,
   * anything else is answered `403`. Called for every request (pages and the free alike), e.g.
   * `(req) => req.headers.get("cf-access-authenticated-user-email") !== null` behind
   * Cloudflare Access. Required: a console without it is refused when it is made.
   */
  authorize: (request: Request, c: Context<E>) => boolean | Promise<boolean>;
  /**
   * Names always shown first, in this order (1–512 characters each, no `{` or `}`; at most
   * 100). @default []
   */
  names?: readonly string[];
  /**
   * The scan of each refresh, or `false` for none (only `names` are shown).
   * @default {} (the defaults of {@link ConsoleScanOptions})
   */
  scan?: ConsoleScanOptions | false;
  /**
   * True to offer freeing names (a dry run, then a POST that needs the name typed again).
   * Needs `onAudit`. @default false (read-only: the free is answered `403`)
   */
  writable?: boolean;
  /**
   * Told of every free once it is done, awaited before the answer: write it to your audit log.
   * An error it throws reaches `app.onError` (the name is freed already). Required with
   * `writable: true`.
   */
  onAudit?: (event: ConsoleAuditEvent) => void | Promise<void>;
  /** Who makes a request, for the audit event (e.g. the authenticated user's email). */
  identify?: (request: Request, c: Context<E>) => string | null | Promise<string | null>;
  /**
   * Origins (`https://ops.example.com`) allowed to POST a free besides the request's own, for a
   * console behind a proxy that changes the URL it sees. @default []
   */
  origins?: readonly string[];
}

const OPTION_KEYS = [
  "redis",
  "authorize",
  "names",
  "scan",
  "writable",
  "onAudit",
  "identify",
  "origins",
];
const SCAN_KEYS = ["match", "count", "maxCalls", "maxKeys"];
/** Most `names` a console is given: each is read on every refresh. */
export const MAX_CONSOLE_NAMES = 100;
/** How long a dry run's form stays valid, in seconds. */
const FORM_SECONDS = 600;

/**
 * A lock console: a Hono app that serves, under the route it is mounted on,
 *
 * - `GET /`: every name's kind, holders (owner, hold count, time to live counting down, epoch,
 *   fencing token), waiters in the order they are served, permits and the latch count, what the
 *   refresh cost in billed commands, and how far the scan went (`?every=5|10|30|60` reloads the
 *   page every so many seconds);
 * - `GET /free?name=<name>` (with `writable`): the dry run, what freeing the name will do, with
 *   the form that does it;
 * - `POST /free` (with `writable`): frees the name when the name typed matches, the form is the
 *   dry run's own (its token equals the cookie set with it: 10 minutes, cleared once used) and
 *   the request comes from the console's own origin (`Origin`, `Sec-Fetch-Site`); then tells
 *   `onAudit`.
 *
 * Every request is first put to `authorize` (`403` unless it answers `true`). Answers are not
 * cached, not framed by other sites, and carry a Content-Security-Policy that allows only the
 * page's own inline style and script.
 *
 * A refresh costs, in billed commands (as Redis counts them: a script's calls, a transaction's
 * MULTI and EXEC included), 18 to 23 per name shown (its kind's detection 7 or 8, its
 * inspection 4 to 10, who waits 5 to 7 in one MULTI/EXEC, a lock's epoch 1), 7 per name given
 * where nothing is stored, 7 or 8 per key the scan reads that holds no primitive, and 1 per
 * SCAN call: at most `scan.maxCalls + 23 × (names.length + scan.maxKeys)`, 585 with the
 * defaults and no `names`. The page says what the last one cost.
 *
 * @example
 * ```ts
 * import { Redis } from "@upstash/redis";
 * import { lockConsole } from "edgelock/console";
 * import { Hono } from "hono";
 *
 * const app = new Hono();
 * app.route(
 *   "/locks",
 *   lockConsole({
 *     redis: Redis.fromEnv(),
 *     authorize: (req) => req.headers.get("x-ops-token") === process.env.OPS_TOKEN,
 *     names: ["cron:nightly"],
 *     scan: { match: "order:*" },
 *   }),
 * );
 * ```
 * @throws TypeError / RangeError for bad options (no `authorize`, `writable` without
 * `onAudit`, a bad name or bound), when `lockConsole` is called, before any request.
 */
export function lockConsole<E extends Env = Env>(options: LockConsoleOptions<E>): Hono<E> {
  const o = checkOptions(options, "lockConsole", OPTION_KEYS);
  if (typeof o.authorize !== "function") {
    throw new TypeError(
      "lockConsole: `authorize` is required: a function (request) => boolean | Promise<boolean> that says who may use the console",
    );
  }
  const authorize = o.authorize;
  const redisOf = checkRedis(o.redis);
  const names = checkNames(o.names);
  const scan = checkScan(o.scan);
  if (o.writable !== undefined && typeof o.writable !== "boolean") {
    throw new TypeError("lockConsole: `writable` must be a boolean");
  }
  const writable = o.writable === true;
  const onAudit = optionalFunction<NonNullable<LockConsoleOptions<E>["onAudit"]>>(
    o.onAudit,
    "onAudit",
  );
  if (writable && !onAudit) {
    throw new TypeError(
      "lockConsole: `writable: true` needs `onAudit`: every free is told to it (who, what, when)",
    );
  }
  const identify = optionalFunction<NonNullable<LockConsoleOptions<E>["identify"]>>(
    o.identify,
    "identify",
  );
  const origins = checkOrigins(o.origins);

  const app = new Hono<E>();
  app.use(async (c, next) => {
    if ((await authorize(c.req.raw, c as Context<E>)) !== true) {
      const ctx = pageOf(c, writable);
      return send(
        c,
        403,
        "Not allowed",
        notice(
          ctx,
          "Not allowed",
          ["This request may not use the lock console."],
          true,
          "forbidden",
        ),
      );
    }
    await next();
  });

  app.get("/", async (c) => {
    const every = refreshPeriod(c.req.query("every"));
    const reader = readerOf(redisOf(c as Context<E>));
    const seen = await refresh(reader, names, scan);
    return send(
      c,
      200,
      "Locks · edgelock console",
      mainPage(seen, pageOf(c, writable), every),
      every,
    );
  });

  app.get("/free", async (c) => {
    const ctx = pageOf(c, writable);
    if (!writable) return readOnly(c, ctx);
    const name = nameOf(c.req.query("name"));
    if (name === null) return badName(c, ctx);
    const reader = readerOf(redisOf(c as Context<E>));
    const [seen] = (await refresh(reader, [name], null)).names;
    const csrf = randomHex(32);
    c.header("set-cookie", csrfCookie(c, ctx, csrf, FORM_SECONDS));
    return send(
      c,
      200,
      `Free ${name}? · edgelock console`,
      dryRunPage(seen ?? { name, source: "given", kind: null }, ctx, csrf),
    );
  });

  app.post("/free", async (c) => {
    const ctx = pageOf(c, writable);
    if (!writable) return readOnly(c, ctx);
    const crossSite = crossSiteReason(c.req.raw, origins);
    if (crossSite) {
      return send(
        c,
        403,
        "Refused",
        notice(
          ctx,
          "Refused: not from this console",
          [crossSite, "Nothing was changed."],
          true,
          "cross-site",
        ),
      );
    }
    const form = await c.req.parseBody();
    const field = (key: string) => (typeof form[key] === "string" ? (form[key] as string) : "");
    const cookie = cookieValue(c.req.header("cookie"), csrfName(c));
    // The form's token must be the cookie set with it: a page elsewhere can send the form but
    // can neither read the token nor set the cookie.
    if (cookie === null || !sameText(cookie, field("csrf"))) {
      return send(
        c,
        403,
        "Refused",
        notice(
          ctx,
          "Refused: the form has expired",
          [
            "Its token does not match this browser's: open the dry run again.",
            "Nothing was changed.",
          ],
          true,
          "csrf",
        ),
      );
    }
    c.header("set-cookie", csrfCookie(c, ctx, "", 0));
    const name = nameOf(field("name"));
    const asked = field("kind");
    if (name === null || !(KINDS as readonly string[]).includes(asked)) return badName(c, ctx);
    const kind = asked as Kind;
    if (field("confirm") !== name) {
      return send(
        c,
        400,
        "Not confirmed",
        notice(
          ctx,
          "Not confirmed",
          [`The name typed does not match "${name}".`, "Nothing was changed."],
          true,
          "not-confirmed",
        ),
      );
    }
    const redis = readerOf(redisOf(c as Context<E>));
    const stored = await detectKind(redis.redis, name).catch((error: unknown) => {
      if (error instanceof ForeignKeyError) return null;
      throw error;
    });
    if (stored === null) {
      return send(
        c,
        200,
        "Nothing to free",
        notice(
          ctx,
          "Nothing to free",
          [`Nothing is stored under "${name}" now.`],
          false,
          "nothing",
        ),
      );
    }
    if (!mayBe(stored, kind)) {
      return send(
        c,
        409,
        "Changed",
        notice(
          ctx,
          "Not freed: it changed",
          [
            `"${name}" holds a ${kindLabel(stored)} now, not the ${kindLabel(kind)} the dry run showed.`,
            "Nothing was changed.",
          ],
          true,
          "changed",
        ),
      );
    }
    const before = await inspectAs(redis.client, redis.redis, name, kind, true);
    const deleted = await deleteAs(redis.client, redis.redis, name, kind);
    const event: ConsoleAuditEvent = {
      action: "free",
      name,
      kind,
      deleted,
      holders: before.holders.map((holder) => ("owner" in holder ? holder.owner : holder.id)),
      waiters: before.queue?.count ?? before.waiting?.count ?? Number(before.waiters ?? 0),
      who: identify ? await identify(c.req.raw, c as Context<E>) : null,
      at: Date.now(),
    };
    await onAudit?.(event);
    const said = deleted
      ? `Freed ${kindLabel(kind)} "${name}".`
      : `"${name}" was already free: nothing to delete.`;
    return send(
      c,
      200,
      "Freed",
      notice(ctx, deleted ? "Freed" : "Already free", [said], false, "freed"),
    );
  });

  return app;
}

/** The console's own path: the request's, without the route inside the console. */
function pageOf(c: Context, writable: boolean): PageContext {
  const path = c.req.path.replace(/\/free$/, "").replace(/\/+$/, "");
  return { base: path, writable };
}

/** An HTML answer with the console's headers (no caching, no framing, only its own inline code). */
function send(
  c: Context,
  status: 200 | 400 | 403 | 409,
  title: string,
  body: Html,
  every = 0,
): Response {
  // A fresh nonce per answer: the only inline code the page may run is its own.
  const nonce = randomHex();
  c.header("cache-control", "no-store");
  c.header("x-frame-options", "DENY");
  // Not "no-referrer": a browser then sends `Origin: null` with the console's own form.
  c.header("referrer-policy", "same-origin");
  c.header("x-content-type-options", "nosniff");
  c.header(
    "content-security-policy",
    `default-src 'none'; style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  );
  return c.html(layout({ title, nonce, body, every }), status);
}

function readOnly(c: Context, ctx: PageContext): Response {
  return send(
    c,
    403,
    "Read-only",
    notice(
      ctx,
      "Read-only",
      ["This console is read-only: it frees nothing (lockConsole's `writable` is off)."],
      true,
      "read-only",
    ),
  );
}

function badName(c: Context, ctx: PageContext): Response {
  return send(
    c,
    400,
    "Bad request",
    notice(
      ctx,
      "Bad request",
      ["A name is 1 to 512 characters, without { or }."],
      true,
      "bad-name",
    ),
  );
}

/** Reads through `client` for one request, counting what it bills. */
function readerOf(client: UpstashAdminClient): Reader {
  let billed = 0;
  const count = (n: number) => {
    billed += n;
  };
  const redis: AdminRedis = adminRedis(client, count);
  const core = new EdgeLockClient({ redis: client, onEvent: (event) => count(event.billed) });
  return { redis, client: core, billed: () => billed };
}

function nameOf(value: string | undefined): string | null {
  try {
    return checkName(value);
  } catch {
    return null;
  }
}

function refreshPeriod(value: string | undefined): number {
  const n = Number(value);
  return (REFRESH_PERIODS as readonly number[]).includes(n) ? n : 0;
}

/**
 * Why a POST does not come from the console's own pages, or null. A browser says where a
 * request comes from: `Sec-Fetch-Site` (the console's own form is `same-origin`, also behind a
 * proxy, since the browser sees the page and the form's target on one origin) and `Origin`
 * (the request's own origin, or one of `origins` for a proxy that changes the URL the app
 * sees). A client that sends neither is not a browser: a page elsewhere cannot make it send
 * the CSRF cookie's token anyway.
 */
function crossSiteReason(request: Request, origins: readonly string[]): string | null {
  const site = request.headers.get("sec-fetch-site");
  if (site !== null && site !== "same-origin") {
    return `The request comes from another site (Sec-Fetch-Site: ${site}).`;
  }
  const origin = request.headers.get("origin");
  if (origin !== null && origin !== new URL(request.url).origin && !origins.includes(origin)) {
    return `The request comes from another origin (${origin}).`;
  }
  return null;
}

/** `__Host-` binds the cookie to this exact origin, but browsers take it over HTTPS only. */
function csrfName(c: Context): string {
  return new URL(c.req.url).protocol === "https:" ? "__Host-edgelock-csrf" : "edgelock-csrf";
}

function csrfCookie(c: Context, ctx: PageContext, value: string, maxAge: number): string {
  const secure = new URL(c.req.url).protocol === "https:";
  const path = secure ? "/" : `${ctx.base}/free`;
  return `${csrfName(c)}=${value}; Path=${path}; Max-Age=${maxAge}; HttpOnly; SameSite=Strict${secure ? "; Secure" : ""}`;
}

function cookieValue(header: string | undefined, name: string): string | null {
  for (const part of (header ?? "").split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return rest.join("=") || null;
  }
  return null;
}

/** Compares two tokens in time that does not depend on where they differ. */
function sameText(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

function checkRedis<E extends Env>(
  value: LockConsoleOptions<E>["redis"] | undefined,
): (c: Context<E>) => UpstashAdminClient {
  if (typeof value === "function") return value;
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
  const missing = methods.filter(
    (m) => typeof (value as unknown as Record<string, unknown> | undefined)?.[m] !== "function",
  );
  if (value === undefined || value === null || missing.length > 0) {
    throw new TypeError(
      `lockConsole: \`redis\` must be an @upstash/redis client or a function of the context returning one${value ? ` (it has no ${missing.join(", ")})` : ""}`,
    );
  }
  return () => value;
}

function checkNames(value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new TypeError("lockConsole: `names` must be an array of names");
  if (value.length > MAX_CONSOLE_NAMES) {
    throw new RangeError(`lockConsole: \`names\` holds at most ${MAX_CONSOLE_NAMES} names`);
  }
  const names = value.map((name, i) => checkName(name, `names[${i}]`));
  return [...new Set(names)];
}

function checkScan(value: unknown): ScanBounds | null {
  if (value === false) return null;
  const o = checkOptions(value as ConsoleScanOptions | undefined, "lockConsole: `scan`", SCAN_KEYS);
  if (o.match !== undefined && (typeof o.match !== "string" || o.match.length === 0)) {
    throw new TypeError("lockConsole: `scan.match` must be a non-empty glob pattern");
  }
  return {
    match: o.match ?? "*",
    count: bounded(o.count, "count", 1, 1000, 100),
    maxCalls: bounded(o.maxCalls, "maxCalls", 1, 100, 10),
    maxKeys: bounded(o.maxKeys, "maxKeys", 0, 200, 25),
  };
}

function bounded(
  value: unknown,
  label: string,
  min: number,
  max: number,
  fallback: number,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number")
    throw new TypeError(`lockConsole: \`scan.${label}\` must be a number`);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`lockConsole: \`scan.${label}\` must be an integer in [${min}, ${max}]`);
  }
  return value;
}

function checkOrigins(value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value))
    throw new TypeError("lockConsole: `origins` must be an array of origins");
  return value.map((origin, i) => {
    let parsed: URL | undefined;
    try {
      parsed = typeof origin === "string" ? new URL(origin) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!parsed || parsed.origin !== origin) {
      throw new TypeError(
        `lockConsole: \`origins[${i}]\` must be an origin such as "https://ops.example.com"`,
      );
    }
    return origin;
  });
}

function optionalFunction<F>(value: unknown, label: string): F | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "function")
    throw new TypeError(`lockConsole: \`${label}\` must be a function`);
  return value as F;
}
