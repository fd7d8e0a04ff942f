// Size budgets per package entry, minified + gzip, with peers left out (what a bundler adds to
// a user's Worker). `npm run size` builds and fails when an entry is over its budget; the
// benchmark (bench/scenarios/bundle.ts) reads the same numbers with `size-limit --json`.
// An entry whose source file does not exist yet is skipped, so the budgets can be set ahead.
// The core budget is the size first measured plus a little headroom (the benchmark issue aims
// at 6 kB: bench/RESULTS.md says by how much and why it is missed); the others are the sizes first
// measured plus some headroom, so that growth is a decision rather than an accident.
const { existsSync } = require("node:fs");

const PEERS = ["@upstash/redis", "hono", "hono/*", "@opentelemetry/api", "cloudflare:*"];

// The root, hono, vercel and cloudflare limits raised to the measured size + 0.05 kB (rounded up
// to 0.05) when each request's hedge began to ring on its own deadline timer (src/abort.ts) and
// ScriptRunner.run lost two async layers: +0.15 to +0.2 kB, for about 50-90 µs less per
// uncontended lock cycle on the bench machine. Raised again the same way (+0.15 to +0.25 kB) when
// the lock scripts' common paths began to run before the rest of each script is defined (26-46
// µs less per cycle) and the closures of a request's copies, a wait's spec and a lease's host
// became objects with methods. Raised again the same way (+0.1 to +0.2 kB) when the lock
// scripts' free-lock acquire and last-hold release began to run before anything is defined,
// written out with KEYS and ARGV (16 µs less per uncontended cycle, paired).
// Every limit but otel's and the console's (still under theirs) raised by the growth its entry
// measured (+0.91 to +1.01 kB, rounded up to 0.05 kB; the commit before and after, nothing else
// changed) when the service's limits became a typed error and every HTTP answer kept its status
// and text (src/errors.ts ServiceLimitError, src/transport/scrub.ts, retries.ts; the
// keep-alives' stop on a limit: src/lease/).
const ENTRIES = [
  // 7.2 kB, then 7.4 kB with lock.inspect() and its script (+0.1 kB measured), then 9.2 kB
  // with the hardening (8.9 kB measured): request time limits and error classification
  // (transport/), the expiry timer and keep-alive split, and the replay and epoch libraries
  // pasted into the acquire, release and cancel scripts (lua/lib/; 7.1 kB of the bundle before
  // gzip is Lua source, which Redis needs whole), then 12 kB with the fair lock (11.4 kB
  // measured): `getFairLock` lives on EdgeLock, so its wait loop and its four scripts with the
  // queue library (lua/lib/fair.lua) ship with every client; then 13 kB with the reentrant
  // lock's wake-ups (12.2 kB measured: the BLPOP wait, and lua/lib/wake.lua in five scripts),
  // then 16 kB with the fenced and read-write locks (14.9 kB measured: two factories on EdgeLock
  // and eight scripts, lua/lib/rw.lua in four). Every primitive on EdgeLock ships with every
  // client; then 24 kB with the synchronizers (semaphore, permit-expirable semaphore, latch:
  // three factories, 17 scripts, lua/lib/permits.lua), MultiLock and RedLock (21.8 kB measured,
  // after gen.mjs stopped shipping library functions a script never calls). Splitting the
  // family into entries of their own, or loading scripts lazily, is what would bring it down.
  // Then 27.5 kB (26.7 kB measured) with the pub/sub wake-ups and hand-offs (locks/wakes.ts,
  // the subscription in transport/), definite releases (locks/definite.ts, permit handles),
  // the network retries made by edgelock itself, and the Redisson-interop keys (taken permits,
  // the read-write epoch key, the fair queue's recorded slots). Issue "One primitive, one entry"
  // is what brings it down. Then 25.7 kB measured once each primitive had its own entry and the
  // root placed every kind's scripts side by side (src/client.ts). The primitives' entries have
  // their budgets in scripts/entry-sizes.mjs, measured as a Worker re-exporting them. 25 kB
  // (24.4 kB measured) since the scripts' SHA-1s are computed at first run and the shipped Lua
  // has short local names. 27 kB (26.65 kB measured) since the scripts keep the replay state with
  // the hold and skip the waiter registry when nobody is registered (a lock cycle: 27 billed
  // commands down to 9; docs/cost.md).
  // 29.1 kB (29.09 kB measured) since the subscription streams are read with eventsource-parser
  // (1.4 kB) and src/transport/sse.ts, and wake channels are named by digest where a REST path
  // cannot carry the name (issue "Waiting at the hand-off limit", items 4 and 5). 29.8 kB (29.65 kB
  // measured) with the bill in every event as well (src/transport/billed.ts, the `call` event).
  // 32.7 kB (32.5 kB measured, +1.1 kB) with the semaphores' hand-offs (lua/lib/permit-hand-off.lua
  // in five scripts, two leave scripts) and the event cost helper. 33.65 kB (33.59 kB measured,
  // +0.18 kB) with a call's deadline kept without an AbortController (src/abort.ts: about 45 µs
  // of CPU less per request on Node 20) and the round trips shared per REST URL (a client made
  // per invocation hedges at what earlier ones measured: src/transport/index.ts). 33.9 kB
  // (33.84 kB measured, +0.19 kB) since a wait's first attempt goes out before the wait sets
  // anything up (src/wait/loop.ts waitFor: a tryLock with a wait budget on a free lock costs
  // about what one attempt costs, some 30 µs less per uncontended cycle on loopback). 34.85 kB
  // (34.77 kB measured) since a wait holds no hand-off on its message while a cancel of
  // its attempts is unanswered, and a semaphore's attempt names the one it follows (a late copy
  // of a cancelled attempt could otherwise take a hand-off over under its caller: docs/waiting.md).
  // The root, hono, vercel and cloudflare limits raised to the measured size + 0.05 kB (rounded
  // up to 0.05) when a lock's change of hands began to tell the waiter then first when it must be
  // back (notices, confirm scripts, request id tags; +0.3 to +0.5 kB) and Hono's withLock
  // answered a bad key 400 (scripts/entry-sizes.mjs lists them).
  { name: "edgelock", source: "src/index.ts", path: "dist/src/index.js", limit: "36.6 kB" },
  // 1.7 kB while it took its locks from the EdgeLock the app passed (and the app bundled every
  // primitive with it); 14.0 kB since it takes them through `getLock` of `edgelock/lock`, the core
  // client included, so an app passing an `EdgeLockClient` holds the lock alone (13.4 kB over
  // Hono in scripts/entry-sizes.mjs, 26.0 kB with EdgeLock before); 14.5 kB measured with the
  // JVM wake-ups, the shared Lua libraries and the awaited leave of a waiter that gives up;
  // 14.0 kB with the SHA-1s computed at first run and the short Lua locals; 15.2 kB (14.85 kB
  // measured) with the cheaper scripts of the billed-commands work.
  // 17.45 kB measured with the stream reader (see the core entry); 18 kB (17.82 kB measured)
  // with the bill in every event; 19.95 kB (19.92 kB measured) with the call deadline and the
  // shared round trips (see the core entry); 20 kB (19.965 kB measured) with the rank that brings
  // the second waiter back a claim window after a crashed holder's expiry (lua/lib/reentrant.lua,
  // wait/backoff.ts expiryBound); 20.2 kB (20.16 kB measured) with the first attempt made before
  // the wait sets anything up (see the core entry).
  { name: "edgelock/hono", source: "src/hono.ts", path: "dist/src/hono.js", limit: "22.75 kB" },
  // 2.2 kB while it took its locks from the EdgeLock the app passed (and the app bundled every
  // primitive with it); 15.3 kB measured since it takes them through `getLock` of `edgelock/lock`
  // and `getIdempotencyKey` of `edgelock/idempotency`, the core client included, so an app
  // passing an `EdgeLockClient` holds the lock alone (15.0 kB in scripts/entry-sizes.mjs, 26.8 kB
  // with EdgeLock before); 14.8 kB with the SHA-1s computed at first run and the short Lua locals.
  {
    name: "edgelock/vercel",
    source: "src/vercel.ts",
    path: "dist/src/vercel.js",
    // 16 kB (15.68 kB measured) with the cheaper scripts of the billed-commands work; 18.24 kB
    // measured with the stream reader (see the core entry); 18.8 kB (18.62 kB measured) with the
    // bill in every event; 20.9 kB (20.84 kB measured) with the call deadline and the shared
    // round trips (see the core entry); 21.1 kB (21.07 kB measured) with the first attempt made
    // before the wait sets anything up (see the core entry); 21.15 kB (21.105 kB measured) with
    // scripts sent uncounted by a client without onEvent (about 30 us less per lock cycle:
    // src/transport/billed.ts); 21.95 kB (21.89 kB measured) with the late-copy guard of the
    // hand-offs (see the core entry).
    limit: "23.6 kB",
  },
  // The OpenTelemetry listener alone (it imports only `@opentelemetry/api`, a peer); 1.6 kB
  // (1.52 kB measured) with the `edgelock.billed` counter.
  { name: "edgelock/otel", source: "src/otel.ts", path: "dist/src/otel.js", limit: "1.6 kB" },
  // The lock console (an operators' route, not a hot path): 44.52 kB measured when it was added,
  // 45.58 kB with the core's changes then in flight.
  // Every kind's inspection and force-unlock or delete go through the primitives' entries, whose
  // classes bring every script of their kind (12.9 kB of Lua; the console runs 7 read and 7 delete
  // scripts of them), plus the admin readers (src/admin/) and the pages (CSS 2 kB).
  {
    name: "edgelock/console",
    source: "src/console/index.ts",
    path: "dist/src/console/index.js",
    limit: "46.1 kB",
  },
  {
    name: "edgelock/cloudflare",
    source: "worker/cloudflare.ts",
    path: "dist/worker/cloudflare.js",
    // The core plus LeaseKeeper: 12 kB, then 14 kB with the fair lock (13.3 kB measured), then
    // 15 kB with the reentrant lock's wake-ups (14.1 kB measured), then 18 kB with the fenced
    // and read-write locks (16.8 kB measured), then 26 kB with the synchronizers and the
    // keeper's renewal of read/write holds and permits (23.2 kB measured), then 29.5 kB with
    // the wake-ups, definite releases and interop keys above (28.3 kB measured), then 17.5 kB
    // once the keeper renews through src/renewers.ts and the cron guard takes `getLock` of
    // `edgelock/lock`, both over the core client instead of EdgeLock (16.7 kB measured), then
    // 18 kB with the JVM wake-ups and the shared Lua libraries (17.3 kB measured), then 14.5 kB
    // (13.9 kB measured) once the cron guard's one attempt left out the wait loop, the wake-up hub
    // was made at a client's first wait, the SHA-1s at a script's first run and the shipped Lua
    // took short local names; 15.1 kB (14.8 kB measured) with the cheaper scripts of the
    // billed-commands work; 15.15 kB measured with the digest wake channels in its scripts
    // (lua/lib/channel.lua); 15.75 kB (15.58 kB measured) with the bill in every event; 17.35 kB
    // (17.3 kB measured) with the call deadline and the shared round trips (see the core entry).
    limit: "19.5 kB",
  },
];

module.exports = [
  ...ENTRIES.filter((entry) => existsSync(entry.source)).map(({ source: _, ...entry }) => ({
    ...entry,
    gzip: true,
    ignore: PEERS,
  })),
  {
    name: "@upstash/lock",
    path: "node_modules/@upstash/lock/dist/index.mjs",
    gzip: true,
    ignore: PEERS,
  },
];
