#!/usr/bin/env node
// Checks what `npm pack` would publish, from the package's own file list:
// - every relative import of a shipped .js/.d.ts file, and every source a shipped .map names,
//   is shipped too (an unshipped declaration silently turns a public type into `any`);
// - every `exports` target and `bin` is shipped;
// - nothing is imported at run time that is not a peer dependency, a Node built-in, a
//   `cloudflare:` module or one of the few runtime dependencies named below;
// - no build or development file is shipped (tsconfig, build info, lua/gen.mjs, tests).
// Run `npm run build` first.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { dirname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const [packed] = JSON.parse(
  execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: root,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  }),
);
const files = new Set(packed.files.map((f) => f.path));
const problems = [];

const peers = new Set(Object.keys(pkg.peerDependencies ?? {}));
// The runtime dependencies the package may have: small, runtime-neutral, well kept. The SSE
// parser reads the subscription streams (src/transport/sse.ts).
const allowedDependencies = new Set(["eventsource-parser"]);
const dependencies = new Set(Object.keys(pkg.dependencies ?? {}));
// Optional peers of the bundled Redis client, loaded on demand inside try/catch (see
// scripts/build-bridge.mjs).
const optional = new Set(["@opentelemetry/api", "@node-rs/xxhash"]);
const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
const packageOf = (spec) =>
  spec
    .split("/")
    .slice(0, spec.startsWith("@") ? 2 : 1)
    .join("/");

/** Import specifiers of a module, outside comments (TSDoc examples import "edgelock"). */
const specifiers = (source) => {
  const text = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  return [
    ...text.matchAll(/(?:^|[\s;}])(?:import|export)\s[^;]*?\sfrom\s*["']([^"']+)["']/g),
    ...text.matchAll(/(?:^|[\s;}])import\s*["']([^"']+)["']/g),
    ...text.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g),
  ].map((m) => m[1]);
};

for (const file of files) {
  const text = readFileSync(join(root, file), "utf8");
  if (file.endsWith(".map")) {
    const map = JSON.parse(text);
    for (const source of map.sources ?? []) {
      const target = normalize(join(dirname(file), map.sourceRoot ?? "", source));
      if (!files.has(target)) problems.push(`${file}: names ${source}, which is not shipped`);
    }
    continue;
  }
  if (!/\.(js|d\.ts)$/.test(file)) continue;
  for (const spec of specifiers(text)) {
    if (spec.startsWith(".")) {
      const target = normalize(join(dirname(file), spec));
      const candidates = file.endsWith(".d.ts")
        ? [target.replace(/\.js$/, ".d.ts"), `${target}.d.ts`, join(target, "index.d.ts")]
        : [target];
      if (!candidates.some((c) => files.has(c))) {
        problems.push(`${file}: imports ${spec}, which is not shipped`);
      }
    } else if (
      !file.endsWith(".d.ts") &&
      !builtins.has(spec) &&
      !spec.startsWith("cloudflare:") &&
      !peers.has(packageOf(spec)) &&
      !dependencies.has(packageOf(spec)) &&
      !optional.has(packageOf(spec))
    ) {
      problems.push(`${file}: imports ${spec}, neither a dependency nor a Node built-in`);
    }
  }
}

const targets = [];
const walk = (value) => {
  if (typeof value === "string") targets.push(value);
  else if (value && typeof value === "object") for (const v of Object.values(value)) walk(v);
};
walk(pkg.exports);
walk(pkg.bin);
for (const target of targets) {
  const path = normalize(target);
  if (path !== "package.json" && !files.has(path)) {
    problems.push(`package.json points at ${target}, which is not shipped`);
  }
}

for (const file of files) {
  if (/(^|\/)tsconfig[^/]*\.json$|\.tsbuildinfo$|^lua\/gen\.mjs$|^test\/|^scripts\//.test(file)) {
    problems.push(`${file} is shipped but is of no use to a user`);
  }
}
const unexpected = [...dependencies].filter((name) => !allowedDependencies.has(name));
if (unexpected.length > 0)
  problems.push(`unexpected runtime dependencies: ${unexpected.join(", ")}`);

if (problems.length > 0) {
  for (const p of problems) console.error(p);
  console.error(`\n${problems.length} packaging problem(s)`);
  process.exit(1);
}
const size = (packed.size / 1024).toFixed(1);
console.log(
  `${files.size} files, ${size} kB packed: every import, map source, export and bin is shipped; ` +
    `runtime dependencies: ${[...dependencies].join(", ") || "none"}`,
);
