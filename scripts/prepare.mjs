#!/usr/bin/env node
// `npm run prepare` (run by `npm pack`, `npm ci`, `npm install` in a clone, and by npm when it
// installs edgelock from git): builds the package. The build needs the development dependencies
// (typescript, esbuild); in a clone where they are not installed yet, say so instead of failing
// with `tsc: not found`.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const missing = ["typescript", "esbuild"].filter(
  (name) => !existsSync(join(root, "node_modules", name, "package.json")),
);
if (missing.length > 0) {
  console.error(
    [
      `edgelock: cannot build: ${missing.join(" and ")} ${missing.length > 1 ? "are" : "is"} not installed.`,
      "Run `npm ci` in this folder first (it installs the build tools and builds dist/),",
      "then `npm pack` or install the folder. Installing from git (npm install github:<owner>/edgelock)",
      "does both by itself.",
    ].join("\n"),
  );
  process.exit(1);
}
const build = spawnSync("npm", ["run", "build"], { cwd: root, stdio: "inherit" });
process.exit(build.status ?? 1);
