#!/usr/bin/env node
// What each package entry adds to a user's Worker, measured as users meet it: esbuild bundles a
// Worker that re-exports the entry next to the `@upstash/redis` client (Workers conditions,
// minified, ESM), the bundle is gzipped, and the same Worker without the entry is subtracted.
// `edgelock/*` resolves through the package's own `exports` map to dist/: run `npm run build`
// first (`npm run size` does). Fails when an entry is over its budget.
//
//   node scripts/entry-sizes.mjs           table of kB per entry, exit 1 over a budget
//   node scripts/entry-sizes.mjs --json    the same as JSON (bench/scenarios/bundle.ts)
//   node scripts/entry-sizes.mjs --modules edgelock/lock
//                                          where the entry's bytes go: minified bytes per
//                                          module, Lua (script text) and JavaScript apart
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));

const REDIS = 'export { Redis } from "@upstash/redis/cloudflare";';
const HONO = `${REDIS}\nexport { Hono } from "hono";`;

/**
 * Each scenario: the Worker's source, the Worker it is measured against, and the budget in kB
 * (1 kB = 1000 bytes, as size-limit counts). Budgets of issue "One primitive, one entry".
 * `budget: null` is measured and reported only.
 */
export const SCENARIOS = [
  { name: "edgelock", entries: ["edgelock"], base: REDIS, budget: 27.1 },
  { name: "edgelock/lock", entries: ["edgelock/lock"], base: REDIS, budget: 8 },
  { name: "edgelock/fair-lock", entries: ["edgelock/fair-lock"], base: REDIS, budget: 10 },
  { name: "edgelock/fenced-lock", entries: ["edgelock/fenced-lock"], base: REDIS, budget: 10 },
  {
    name: "edgelock/read-write-lock",
    entries: ["edgelock/read-write-lock"],
    base: REDIS,
    budget: 10,
  },
  { name: "edgelock/semaphore", entries: ["edgelock/semaphore"], base: REDIS, budget: 10 },
  {
    name: "edgelock/permit-expirable-semaphore",
    entries: ["edgelock/permit-expirable-semaphore"],
    base: REDIS,
    budget: 10,
  },
  {
    name: "edgelock/count-down-latch",
    entries: ["edgelock/count-down-latch"],
    base: REDIS,
    budget: 10,
  },
  { name: "edgelock/multi-lock", entries: ["edgelock/multi-lock"], base: REDIS, budget: 10 },
  { name: "edgelock/redlock", entries: ["edgelock/redlock"], base: REDIS, budget: 10 },
  {
    name: "hono withLock + edgelock/lock",
    entries: ["edgelock/hono", "edgelock/lock"],
    pick: { "edgelock/hono": ["withLock"] },
    base: HONO,
    budget: null,
  },
  { name: "edgelock/cloudflare", entries: ["edgelock/cloudflare"], base: REDIS, budget: null },
];

/** The file an `edgelock/...` specifier resolves to, or undefined when not built/exported. */
function entryFile(spec) {
  const sub = spec === "edgelock" ? "." : `.${spec.slice("edgelock".length)}`;
  const target = pkg.exports[sub]?.default;
  if (!target) return undefined;
  const file = join(root, target);
  return existsSync(file) ? file : undefined;
}

const selfResolve = {
  name: "edgelock-self",
  setup(b) {
    b.onResolve({ filter: /^edgelock(\/|$)/ }, (args) => {
      const path = entryFile(args.path);
      return path ? { path } : { errors: [{ text: `${args.path} is not built or exported` }] };
    });
  },
};

async function bundle(source) {
  const result = await build({
    stdin: { contents: source, resolveDir: root, loader: "js" },
    bundle: true,
    write: false,
    minify: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    external: ["cloudflare:*"],
    plugins: [selfResolve],
    logLevel: "silent",
    metafile: true,
  });
  const code = result.outputFiles[0].contents;
  return { gzip: gzipSync(code, { level: 9 }).length, result };
}

function workerSource(scenario) {
  const lines = scenario.entries.map((spec) => {
    const names = scenario.pick?.[spec];
    return names ? `export { ${names.join(", ")} } from "${spec}";` : `export * from "${spec}";`;
  });
  return `${scenario.base}\n${lines.join("\n")}\n`;
}

/** Gzip bytes each scenario adds to its base Worker; null when an entry is not built. */
export async function measure() {
  const bases = new Map();
  const rows = [];
  for (const s of SCENARIOS) {
    if (!s.entries.every(entryFile)) {
      rows.push({ name: s.name, bytes: null, budget: s.budget, passed: null });
      continue;
    }
    if (!bases.has(s.base)) bases.set(s.base, (await bundle(s.base)).gzip);
    const bytes = (await bundle(workerSource(s))).gzip - bases.get(s.base);
    const passed = s.budget === null ? null : bytes <= s.budget * 1000;
    rows.push({ name: s.name, bytes, budget: s.budget, passed });
  }
  return rows;
}

/** Minified bytes per module of one scenario (entry side only), Lua text counted apart. */
async function modules(name) {
  const s = SCENARIOS.find((x) => x.name === name);
  if (!s) throw new Error(`no scenario ${name}`);
  const { result } = await bundle(workerSource(s));
  const inputs = Object.values(result.metafile.outputs)[0].inputs;
  const out = [];
  for (const [file, v] of Object.entries(inputs)) {
    if (file.includes("node_modules") || v.bytesInOutput === 0) continue;
    const text = readFileSync(join(root, file), "utf8");
    const lua = [...text.matchAll(/source: ("(?:[^"\\]|\\.)*")/g)].reduce(
      (n, m) => n + m[1].length,
      0,
    );
    out.push({ module: file.replace(/^dist\//, ""), bytes: v.bytesInOutput, lua });
  }
  return out.sort((a, b) => b.bytes - a.bytes);
}

const isMain = process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain) {
  const args = process.argv.slice(2);
  if (args[0] === "--modules") {
    const rows = await modules(args[1] ?? "edgelock/lock");
    let js = 0;
    let lua = 0;
    for (const r of rows) {
      js += r.bytes - r.lua;
      lua += r.lua;
      console.log(`${String(r.bytes).padStart(7)}  lua ${String(r.lua).padStart(6)}  ${r.module}`);
    }
    console.log(`minified: ${js} bytes of JavaScript, ${lua} bytes of Lua text`);
  } else {
    const rows = await measure();
    if (args.includes("--json")) console.log(JSON.stringify(rows, null, 2));
    else {
      for (const r of rows) {
        const size = r.bytes === null ? "not built" : `${(r.bytes / 1000).toFixed(1)} kB`;
        const budget = r.budget === null ? "" : ` (budget ${r.budget} kB)`;
        const mark = r.passed === false ? "OVER" : r.passed ? "ok  " : "    ";
        console.log(`${mark} ${r.name.padEnd(36)} ${size.padStart(9)}${budget}`);
      }
    }
    if (rows.some((r) => r.passed === false)) {
      console.error("an entry is over its budget: see scripts/entry-sizes.mjs");
      process.exit(1);
    }
  }
}
