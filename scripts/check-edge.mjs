#!/usr/bin/env node
// Edge neutrality: bundles every edge entry point the way a Workers / Vercel Edge bundler would
// (esbuild, platform "neutral": no Node built-ins, no Node resolution conditions) with the peer
// dependencies and `cloudflare:*` left external, and fails on any Node built-in import (bare
// `fs` or `node:fs`) anywhere in the graph. `wrangler deploy --dry-run` does not catch these.
import { builtinModules } from "node:module";
import { build } from "esbuild";

const entries = {
  edgelock: "src/index.ts",
  "edgelock/hono": "src/hono.ts",
  "edgelock/vercel": "src/vercel.ts",
  "edgelock/cloudflare": "worker/cloudflare.ts",
  "edgelock/otel": "src/otel.ts",
  "edgelock/console": "src/console/index.ts",
  ...Object.fromEntries(
    [
      "lock",
      "fair-lock",
      "fenced-lock",
      "read-write-lock",
      "semaphore",
      "permit-expirable-semaphore",
      "count-down-latch",
      "multi-lock",
      "redlock",
      "idempotency",
    ].map((kind) => [`edgelock/${kind}`, `src/locks/${kind}/entry.ts`]),
  ),
};
// Peer dependencies (and their subpaths) stay external: the user's bundler resolves them.
const external = [
  "@upstash/redis",
  "@upstash/redis/*",
  "hono",
  "hono/*",
  "@opentelemetry/api",
  "cloudflare:*",
];
const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
const isBuiltin = (path) => path.startsWith("node:") || builtins.has(path.split("/")[0]);

const refuseNodeBuiltins = {
  name: "refuse-node-builtins",
  setup(b) {
    b.onResolve({ filter: /.*/ }, (args) =>
      isBuiltin(args.path)
        ? { errors: [{ text: `Node built-in "${args.path}" imported by ${args.importer}` }] }
        : undefined,
    );
  },
};

let failed = 0;
for (const [entry, file] of Object.entries(entries)) {
  try {
    const result = await build({
      entryPoints: [file],
      bundle: true,
      write: false,
      format: "esm",
      platform: "neutral",
      target: "es2022",
      conditions: ["worker", "browser"],
      mainFields: ["module", "main"],
      external,
      plugins: [refuseNodeBuiltins],
      logLevel: "silent",
      metafile: true,
    });
    const bytes = result.outputFiles.reduce((n, f) => n + f.contents.byteLength, 0);
    console.log(`ok   ${entry.padEnd(36)} ${file.padEnd(46)} ${bytes} bytes (unminified)`);
  } catch (error) {
    failed += 1;
    const messages = error.errors?.map((e) => e.text) ?? [String(error)];
    console.error(`FAIL ${entry.padEnd(20)} ${file}`);
    for (const m of messages) console.error(`     ${m}`);
  }
}
if (failed > 0) {
  console.error(`\n${failed} edge entry point(s) are not runtime-neutral`);
  process.exit(1);
}
