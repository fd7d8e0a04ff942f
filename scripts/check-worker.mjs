#!/usr/bin/env node
// Proves the reference Worker (wrangler.toml) bundles for deployment: `wrangler deploy
// --dry-run` into a temporary directory that is removed afterwards. No account is needed.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const outdir = mkdtempSync(join(tmpdir(), "edgelock-dry-run-"));
try {
  const { status, error } = spawnSync(
    "npx",
    ["--no-install", "wrangler", "deploy", "--dry-run", "--outdir", outdir],
    { stdio: "inherit", env: { ...process.env, WRANGLER_SEND_METRICS: "false" } },
  );
  if (error) throw error;
  process.exitCode = status ?? 1;
} finally {
  rmSync(outdir, { recursive: true, force: true });
}
