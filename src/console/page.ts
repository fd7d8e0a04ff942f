/**
 * The console's pages, rendered on the server: one document each, with its CSS inline and one
 * small inline script that counts the times to live down between refreshes (the page reads the
 * same without it). Nothing is loaded from elsewhere: no script, stylesheet, font or image.
 * @module
 */

import { KIND_LABEL, type Kind } from "../admin/kinds.js";
import type { QueuedWaiter, RegisteredWaiter, SemaphoreWaiter, Waiters } from "../admin/queues.js";
import { Html, h } from "./html.js";
import type { NameView, Refresh, ScanReport } from "./read.js";

/** The auto-refresh periods the page offers, in seconds (0: off). */
export const REFRESH_PERIODS = [0, 5, 10, 30, 60] as const;

const CSS = `
:root{color-scheme:light dark;--bg:#f6f7f9;--card:#fff;--ink:#1b1f24;--mute:#5b6470;--line:#dde1e6;
--accent:#2458d6;--held:#b4360f;--free:#1d7a3a;--warn:#8a5a00;--chip:#eef1f5}
@media (prefers-color-scheme:dark){:root{--bg:#14171b;--card:#1c2026;--ink:#e6e9ed;--mute:#98a1ad;
--line:#2e343c;--accent:#7aa2ff;--held:#ff8a65;--free:#6fd08c;--warn:#e0b252;--chip:#262b33}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
header{padding:16px 24px;border-bottom:1px solid var(--line);background:var(--card)}
h1{font-size:18px;margin:0 0 4px}h1 small{color:var(--mute);font-weight:400}
main{padding:16px 24px;display:grid;gap:12px;max-width:1200px}
.meta,.scan{color:var(--mute);margin:2px 0}.meta b{color:var(--ink)}
a{color:var(--accent)}code,.mono{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
section.name{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 16px}
section.name h2{font-size:15px;margin:0;display:flex;gap:10px;align-items:center;flex-wrap:wrap}
section.name h2 code{font-size:14px;font-weight:600}.state{font-size:13px;font-weight:500}
.chip{background:var(--chip);border-radius:999px;padding:1px 9px;font-size:12px;font-weight:500}
.held{color:var(--held)}.free{color:var(--free)}.warn{color:var(--warn)}
.spacer{flex:1}
table{border-collapse:collapse;width:100%;margin:8px 0 0}
th,td{text-align:left;padding:4px 8px;border-top:1px solid var(--line);vertical-align:top}
th{color:var(--mute);font-weight:500;font-size:12px;border-top:0}
td.num{font-variant-numeric:tabular-nums}
h3{font-size:13px;margin:10px 0 2px;color:var(--mute);font-weight:500}
ol{margin:4px 0 0;padding-left:24px}li{margin:2px 0}
.facts{margin:6px 0 0;display:flex;gap:18px;flex-wrap:wrap}
.button{display:inline-block;border:1px solid var(--line);border-radius:6px;padding:3px 10px;
background:var(--chip);color:var(--ink);text-decoration:none;font:inherit;cursor:pointer}
.danger{border-color:var(--held);color:var(--held)}
form{margin:12px 0 0}input[type=text]{font:inherit;padding:4px 8px;min-width:280px;border:1px solid var(--line);border-radius:6px;background:var(--bg);color:var(--ink)}
.notice{background:var(--card);border:1px solid var(--line);border-left:4px solid var(--accent);border-radius:8px;padding:12px 16px}
.notice.bad{border-left-color:var(--held)}ul.plan{margin:6px 0 0;padding-left:20px}
`;

/**
 * Counts every `data-ttl` (ms at render time) down, as the page's own clock advances; the text
 * rendered on the server stays where scripts do not run.
 */
const SCRIPT = `(()=>{const t0=performance.now(),els=document.querySelectorAll("[data-ttl]");
const f=${formatTtl.toString()};
const tick=()=>{const d=performance.now()-t0;for(const e of els){e.textContent=f(Number(e.dataset.ttl)-d)}};
tick();setInterval(tick,250)})()`;

/** A time to live as the page shows it (also run in the browser, by the countdown). */
export function formatTtl(ms: number): string {
  if (ms <= 0) return "expired";
  if (ms < 10000) return `${(Math.floor(ms / 100) / 10).toFixed(1)} s`;
  const s = Math.floor(ms / 1000);
  if (s < 120) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 120) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** One whole document. */
export function layout(options: {
  title: string;
  nonce: string;
  body: Html;
  /** Reload after this many seconds (meta refresh); 0: never. */
  every?: number;
}): string {
  const refresh = options.every ? h`<meta http-equiv="refresh" content="${options.every}">` : "";
  return h`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex">${refresh}
<title>${options.title}</title><style nonce="${options.nonce}">${new Html(CSS)}</style></head>
<body>${options.body}<script nonce="${options.nonce}">${new Html(SCRIPT)}</script></body></html>`
    .text;
}

/** Where the console is mounted, and what it may do. */
export interface PageContext {
  /** The console's own path (`/locks`), without a trailing slash. */
  base: string;
  writable: boolean;
}

/** The main page: every name's state, what the refresh cost, how far the scan went. */
export function mainPage(refresh: Refresh, ctx: PageContext, every: number): Html {
  const periods = REFRESH_PERIODS.map((s, i) => {
    const label = s === 0 ? "off" : `${s} s`;
    const sep = i === 0 ? "" : " · ";
    if (s === every) return h`${sep}<b>${label}</b>`;
    return h`${sep}<a href="${home(ctx, s)}">${label}</a>`;
  });
  const mode = ctx.writable ? "" : h` · <span class="chip" id="read-only">read-only</span>`;
  const given = refresh.names.filter((n) => n.source === "given").length;
  const body = h`<header><h1>Locks <small>edgelock console</small></h1>
<p class="meta" id="cost">Last refresh: <b>${refresh.billed}</b> billed command${plural(refresh.billed)},
${refresh.durationMs} ms, ${refresh.names.length} name${plural(refresh.names.length)}
(${given} given, ${refresh.names.length - given} found by the scan)${mode}</p>
<p class="meta"><a class="button" id="refresh" href="${home(ctx, every)}">Refresh</a>
&nbsp;Auto-refresh: ${periods}</p>
${scanLine(refresh.scan)}</header>
<main>${
    refresh.names.length === 0
      ? h`<p class="notice" id="empty">Nothing to show: no names given${refresh.scan ? " and the scan found none in use" : ""}.</p>`
      : refresh.names.map((n) => nameSection(n, ctx, true))
  }</main>`;
  return body;
}

function scanLine(scan: ScanReport | null): Html {
  if (!scan) return h`<p class="scan" id="scan">Not scanning: only the names given are shown.</p>`;
  const bounds = `at most ${scan.maxCalls} SCAN call${plural(scan.maxCalls)} of COUNT ${scan.count}, ${scan.maxKeys} key${plural(scan.maxKeys)} read`;
  let how: Html;
  if (scan.error !== null) how = h`<span class="warn">failed: ${scan.error}</span>`;
  else if (scan.complete) how = h`complete`;
  else if (scan.stoppedBy === "keys")
    how = h`<span class="warn">stopped at ${scan.maxKeys} keys read: more may match</span>`;
  else how = h`<span class="warn">stopped after ${scan.calls} calls: more keys may match</span>`;
  const left = [
    scan.marks ? `${scan.marks} cron mark${plural(scan.marks)}` : "",
    scan.foreign ? `${scan.foreign} key${plural(scan.foreign)} of no primitive` : "",
  ].filter(Boolean);
  return h`<p class="scan" id="scan">Scanning <code>${scan.match}</code> (${bounds}): ${scan.calls} call${plural(scan.calls)}, ${scan.keys} key${plural(scan.keys)} seen, ${scan.read} read, ${how}${left.length ? `; left out: ${left.join(", ")}` : ""}.</p>`;
}

/** One name: its kind, state, holders and waiters; with `freeLink`, the way to free it. */
export function nameSection(v: NameView, ctx: PageContext, freeLink: boolean): Html {
  const f = v.found;
  const kind = v.kind === null ? h`` : h`<span class="chip kind">${KIND_LABEL[v.kind]}</span>`;
  const link =
    freeLink && ctx.writable && v.kind !== null
      ? h`<span class="spacer"></span><a class="button danger free" href="${ctx.base}/free?name=${encodeURIComponent(v.name)}">Free…</a>`
      : "";
  const head = h`<h2><code>${v.name}</code>${kind}${state(v)}${link}</h2>`;
  const parts: Html[] = [];
  if (v.error !== undefined) parts.push(h`<p class="warn error">Could not read it: ${v.error}</p>`);
  if (f) {
    parts.push(facts(v));
    parts.push(holders(v));
    parts.push(waiters(v));
  }
  return h`<section class="name" data-name="${v.name}" data-kind="${v.kind ?? "none"}">${head}${parts}</section>`;
}

function state(v: NameView): Html {
  const f = v.found;
  if (v.error !== undefined) return h``;
  if (!f || v.kind === null) return h`<span class="free state">free (nothing stored)</span>`;
  const ttl = f.ttl >= 0 ? h` · expires in ${ttlCell(f.ttl)}` : "";
  switch (v.kind) {
    case "semaphore":
    case "permit-expirable-semaphore":
    case "count-down-latch":
    case "webhook-mark":
      return h`<span class="state">${ttl}</span>`;
    default: {
      if (f.holders.length === 0) return h`<span class="free state">free</span>`;
      const mode = typeof f.mode === "string" ? ` for ${f.mode}` : "";
      return h`<span class="held state">locked${mode}</span><span class="state">${ttl}</span>`;
    }
  }
}

function facts(v: NameView): Html {
  const f = v.found;
  if (!f) return h``;
  const items: Html[] = [];
  const num = (x: unknown) => (typeof x === "number" ? x : "?");
  switch (v.kind) {
    case "semaphore":
      items.push(
        h`<span class="permits">Permits: <b>${num(f.available)}</b> available of ${f.permits ?? "?"} set</span>`,
      );
      break;
    case "permit-expirable-semaphore":
      items.push(
        h`<span class="permits">Permits: <b>${num(f.available)}</b> available, ${num(f.acquired)} acquired, of ${f.permits ?? "?"} set</span>`,
      );
      break;
    case "count-down-latch":
      items.push(
        h`<span class="count">Count: <b>${num(f.count)}</b>${f.count === 0 ? " (open)" : ""}</span>`,
      );
      break;
    case "fenced-lock":
      items.push(
        h`<span class="last-token">Last fencing token issued: <b class="mono">${num(f.fencingToken)}</b></span>`,
      );
      break;
    case "webhook-mark":
      items.push(h`<span>Delivery completed; a redelivery is acknowledged without running.</span>`);
      break;
  }
  return items.length ? h`<div class="facts">${items}</div>` : h``;
}

function holders(v: NameView): Html {
  const f = v.found;
  if (!f || f.holders.length === 0) return h``;
  if (v.kind === "permit-expirable-semaphore") {
    const rows = f.holders.map((p) => {
      const id = "id" in p ? p.id : p.owner;
      const ttl = "ttl" in p && typeof p.ttl === "number" ? p.ttl : -1;
      return h`<tr class="holder" data-owner="${id}"><td><code>${id}</code></td><td class="num">${ttl >= 0 ? ttlCell(ttl) : "no lease"}</td></tr>`;
    });
    return h`<table class="holders"><thead><tr><th>permit</th><th>lease expires in</th></tr></thead><tbody>${rows}</tbody></table>`;
  }
  // Only a fenced lock's holder has a fencing token.
  const fenced = v.kind === "fenced-lock";
  const rows = f.holders.map((holder) => {
    const held = holder as { owner: string; holdCount?: number; side?: string };
    const side = held.side ? ` (${held.side})` : "";
    const ttl = f.ttl >= 0 ? ttlCell(f.ttl) : f.ttl === -1 ? "no expiry" : "gone";
    const token = fenced ? h`<td class="num mono token">${v.token ?? "–"}</td>` : "";
    return h`<tr class="holder" data-owner="${held.owner}"><td><code>${held.owner}</code></td>
<td class="num holds">${held.holdCount ?? "?"}${side}</td><td class="num">${ttl}</td>
<td class="num mono epoch">${v.epoch ?? "–"}</td>${token}</tr>`;
  });
  const tokenHead = fenced ? h`<th>fencing token</th>` : "";
  return h`<table class="holders"><thead><tr><th>owner</th><th>holds</th><th>expires in</th><th>epoch</th>${tokenHead}</tr></thead><tbody>${rows}</tbody></table>`;
}

function waiters(v: NameView): Html {
  const f = v.found;
  if (!f) return h``;
  if (f.queue) return list("Queue, served in this order", f.queue, queued, "queue");
  if (f.waiting)
    return list("Registered waiters, served in this order", f.waiting, registered, "waiting");
  if (v.registered)
    return list("Registered waiters, served in this order", v.registered, synchronizer, "waiting");
  return h``;
}

function list<T>(title: string, w: Waiters<T>, item: (t: T) => Html, kind: string): Html {
  if (w.count === 0) return h`<h3 class="${kind}">No waiters</h3>`;
  const more = w.count - w.entries.length;
  return h`<h3 class="${kind}">${title}: ${w.count}</h3><ol class="waiters ${kind}">${w.entries.map(item)}</ol>${
    more > 0 ? h`<p class="more">and ${more} more</p>` : ""
  }`;
}

function queued(q: QueuedWaiter): Html {
  const who =
    q.waiter === null
      ? h`<span class="chip">Redisson client</span>`
      : h`waiter <code>${q.waiter}</code>`;
  return h`<li class="waiter" data-owner="${q.owner}" data-waiter="${q.waiter ?? ""}">owner <code>${q.owner}</code> · ${who} · ${lapse("place", q.ttl)}</li>`;
}

function registered(w: RegisteredWaiter): Html {
  const grant =
    w.owner === null
      ? ""
      : h` · hand-off to owner <code>${w.owner}</code> for ${formatTtl(w.leaseTime ?? 0)}`;
  const raw = w.entry === undefined ? "" : h` · entry <code>${w.entry}</code>`;
  return h`<li class="waiter" data-waiter="${w.waiter}" data-owner="${w.owner ?? ""}">waiter <code>${w.waiter}</code>${grant} · ${lapse("registration", w.ttl)}${raw}</li>`;
}

function synchronizer(w: SemaphoreWaiter): Html {
  const lease = w.leaseTime === null ? "" : `, with a first lease of ${formatTtl(w.leaseTime)}`;
  const asks =
    w.permits === null
      ? ""
      : h` · asks to be handed ${w.permits} permit${plural(w.permits)}${lease}`;
  return h`<li class="waiter" data-waiter="${w.waiter}">waiter <code>${w.waiter}</code>${asks} · ${lapse("registration", w.ttl)}</li>`;
}

function lapse(what: string, ttl: number | null): Html {
  if (ttl === null) return h`${what}: no time recorded`;
  if (ttl <= 0) return h`${what} lapsed`;
  return h`${what} lapses in ${ttlCell(ttl)}`;
}

function ttlCell(ms: number): Html {
  return h`<span class="ttl" data-ttl="${ms}">${formatTtl(ms)}</span>`;
}

/** What freeing `v` will do, said before it is done. */
export function plan(v: NameView): string[] {
  const f = v.found;
  const owners = f?.holders.length ?? 0;
  const waiting = f?.queue?.count ?? f?.waiting?.count ?? v.registered?.count ?? 0;
  const woken = waiting
    ? `Its ${waiting} waiter${plural(waiting)} ${waiting === 1 ? "is" : "are"} woken, as by a release.`
    : "Nobody waits on it.";
  switch (v.kind) {
    case "lock":
    case "fair-lock":
    case "fenced-lock":
    case "read-write-lock":
    case "cron-mark":
      return [
        `Deletes the ${KIND_LABEL[v.kind]} whoever holds it (Redisson's forceUnlock).`,
        owners
          ? `Its ${owners === 1 ? "holder is" : `${owners} holders are`} not told and keep${owners === 1 ? "s" : ""} running unprotected: the lease is found lost at its next renewal or release.`
          : "Nobody holds it now.",
        woken,
      ];
    case "semaphore":
      return [
        "Deletes the semaphore and its record of permits set: the permits held are forgotten (their releases find nothing to give back).",
        "It must be set again (trySetPermits) before anyone can acquire.",
        woken,
      ];
    case "permit-expirable-semaphore":
      return [
        `Deletes the semaphore, its permits and their leases (${owners} permit${plural(owners)} held).`,
        "It must be set again (trySetPermits) before anyone can acquire.",
        woken,
      ];
    case "count-down-latch":
      return [`Deletes the count: the latch opens now (count ${f?.count ?? "?"}).`, woken];
    case "webhook-mark":
      return ["Deletes the completion record: a redelivery of this webhook runs again."];
    default:
      return ["Nothing is stored under this name: nothing to free."];
  }
}

/** The dry run: what freeing the name will do, and the form that does it. */
export function dryRunPage(v: NameView, ctx: PageContext, csrf: string): Html {
  const steps = plan(v);
  const form =
    v.kind === null
      ? h`<p><a href="${home(ctx)}">Back to the console</a></p>`
      : h`<form method="post" action="${ctx.base}/free" id="free-form">
<input type="hidden" name="name" value="${v.name}"><input type="hidden" name="kind" value="${v.kind}">
<input type="hidden" name="csrf" value="${csrf}">
<label>Type the name to confirm: <input type="text" name="confirm" autocomplete="off" spellcheck="false" id="confirm"></label>
<button class="button danger" type="submit" id="do-free">Free this ${KIND_LABEL[v.kind]}</button>
&nbsp;<a href="${home(ctx)}">Cancel</a></form>`;
  return h`<header><h1>Free <code>${v.name}</code>? <small>dry run: nothing has changed yet</small></h1></header>
<main><div class="notice" id="plan"><b>What it will do</b><ul class="plan">${steps.map((s) => h`<li>${s}</li>`)}</ul>${form}</div>
${nameSection(v, ctx, false)}</main>`;
}

/** An answer with a title and a few lines: a refusal, or what a free did. */
export function notice(
  ctx: PageContext,
  title: string,
  lines: readonly string[],
  bad: boolean,
  id: string,
): Html {
  return h`<header><h1>${title}</h1></header><main><div class="notice${bad ? " bad" : ""}" id="${id}">${lines.map(
    (line) => h`<p>${line}</p>`,
  )}<p><a href="${home(ctx)}">Back to the console</a></p></div></main>`;
}

/** The label of a kind, for messages. */
export function kindLabel(kind: Kind): string {
  return KIND_LABEL[kind];
}

/** The main page's address (the console's own route), reloading every `every` seconds. */
function home(ctx: PageContext, every = 0): string {
  return `${ctx.base || "/"}${every ? `?every=${every}` : ""}`;
}

function plural(n: number): string {
  return n === 1 ? "" : "s";
}
