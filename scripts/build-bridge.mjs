#!/usr/bin/env node
// Bundles the Node-only bridge (`edgelock/bridge` and the `edgelock-bridge` bin) with its HTTP
// server and TCP Redis client into dist/src/bridge, so the published package has no runtime
// dependencies: an edge user installs none of them, and `npx edgelock-bridge` still works.
// `tsc -b` emits the bridge's declarations only (src/bridge/tsconfig.json); this writes the
// JavaScript, plus the licence notices of the bundled packages.
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const outdir = join(root, "dist", "src", "bridge");

// Only the declarations tsc wrote stay; stale JavaScript from an earlier build goes.
for (const entry of readdirSync(outdir, { withFileTypes: true })) {
  if (entry.isDirectory() || /\.(js|js\.map)$/.test(entry.name)) {
    rmSync(join(outdir, entry.name), { recursive: true, force: true });
  }
}

const result = await build({
  absWorkingDir: root,
  entryPoints: { index: "src/bridge/index.ts", cli: "src/bridge/cli.ts" },
  outdir,
  bundle: true,
  splitting: true,
  chunkNames: "chunks/[name]-[hash]",
  format: "esm",
  platform: "node",
  target: "node20",
  // Optional peers of @redis/client, loaded on demand inside try/catch: never bundled.
  external: ["@opentelemetry/api", "@node-rs/xxhash"],
  // The bundled CommonJS (@redis/client) calls require() for Node built-ins.
  banner: {
    js: 'import { createRequire as __edgelockCreateRequire } from "node:module";\nconst require = __edgelockCreateRequire(import.meta.url);',
  },
  // Small enough to ship (about 480 kB, 115 kB gzipped, mostly the Redis client), no source
  // map: the notices file below names what is inside.
  minify: true,
  legalComments: "none",
  metafile: true,
  logLevel: "warning",
});

// Licence notices of every package whose code is in the bundle.
const packages = new Map();
for (const input of Object.keys(result.metafile.inputs)) {
  const parts = input.split(/[/\\]/);
  const at = parts.lastIndexOf("node_modules");
  if (at < 0) continue;
  const depth = parts[at + 1]?.startsWith("@") ? 2 : 1;
  const dir = join(root, ...parts.slice(0, at + 1 + depth));
  if (!packages.has(dir))
    packages.set(dir, JSON.parse(readFileSync(join(dir, "package.json"), "utf8")));
}
const notices = [
  "The files in this folder bundle the following packages. Their licences follow.",
  "",
];
for (const [dir, pkg] of [...packages].sort((a, b) => a[1].name.localeCompare(b[1].name))) {
  const licenceFile = readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
  notices.push(`== ${pkg.name}@${pkg.version} (${pkg.license ?? "see below"})`, "");
  notices.push(
    licenceFile
      ? readFileSync(join(dir, licenceFile), "utf8").trim()
      : `No licence file in the package; package.json says: ${pkg.license}`,
    "",
  );
}
writeFileSync(join(outdir, "THIRD_PARTY_LICENSES.txt"), `${notices.join("\n")}\n`);

const written = Object.keys(result.metafile.outputs).map((f) =>
  relative(root, f).split(sep).join("/"),
);
console.log(`bundled the bridge: ${written.join(", ")} (${packages.size} packages inlined)`);
