/**
 * Installing from a clone before `npm ci`: `npm pack` and a folder install run the `prepare`
 * script, which stops with a message saying what to run instead of `tsc: not found`.
 */
import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const root = join(import.meta.dirname, "..", "..");

it("prepare in a clone without its dev dependencies says to run npm ci first, and exits 1", async () => {
  const clone = mkdtempSync(join(tmpdir(), "edgelock-clone-"));
  try {
    cpSync(join(root, "package.json"), join(clone, "package.json"));
    cpSync(join(root, "scripts", "prepare.mjs"), join(clone, "scripts", "prepare.mjs"));
    const failed = await promisify(execFile)(process.execPath, ["scripts/prepare.mjs"], {
      cwd: clone,
    }).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stderr).toContain("typescript and esbuild are not installed");
    expect(failed?.stderr).toContain("Run `npm ci` in this folder first");
  } finally {
    rmSync(clone, { recursive: true, force: true });
  }
});
