/** Generated script constants match lua/ and the SHA1s Redis computes. */
import { execFile } from "node:child_process";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { pruneUnused } from "../lua/gen.mjs";
import * as scripts from "../src/lua.gen.js";
import { useRawRedis } from "./support/env.js";
import { replayKeys } from "./support/locks.js";

const run = promisify(execFile);
const all = Object.values(scripts).filter(
  (v): v is scripts.LuaScript => typeof v === "object" && v !== null && "sha1" in v,
);
const raw = useRawRedis();

describe("lua scripts", () => {
  it("every generated SHA1 equals SCRIPT LOAD's", async () => {
    expect(all.length).toBeGreaterThanOrEqual(6);
    for (const script of all) {
      expect(String(await raw.scriptLoad(script.source)), script.name).toBe(script.sha1);
    }
  });

  it("every shipped source is its lua/ file without comments, and the file has a header", async () => {
    for (const script of all) {
      const own = await readFile(new URL(`../lua/${script.name}.lua`, import.meta.url), "utf8");
      // `-- @include lib/<file>.lua` lines stand for that file's text.
      const parts = await Promise.all(
        own.split("\n").map(async (line) => {
          const m = /^\s*--\s*@include\s+(\S+)\s*$/.exec(line);
          return m ? readFile(new URL(`../lua/${m[1]}`, import.meta.url), "utf8") : line;
        }),
      );
      // Library functions the script never calls are left out (gen.mjs pruneUnused).
      const text = pruneUnused(parts.join("\n"));
      const code = text
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith("--"));
      expect(script.source.split("\n").filter(Boolean)).toEqual(code);
      expect(script.source).not.toMatch(/^\s*--/m);
      const header = own
        .split("\n")
        .filter((l) => l.startsWith("--"))
        .join("\n");
      expect(header, script.name).toMatch(/KEYS\[/);
      expect(header, script.name).toMatch(/Returns/);
    }
  });

  it("library functions a script never calls are left out, transitively; used ones stay", () => {
    const source = [
      "local function a()",
      "  return b()",
      "end",
      "local function b()",
      "  return 1",
      "end",
      "local function c()",
      "  return d()",
      "end",
      "local function d()",
      "  return 2",
      "end",
      "return a()",
    ].join("\n");
    const pruned = pruneUnused(source);
    expect(pruned).toContain("local function a()");
    expect(pruned).toContain("local function b()");
    expect(pruned).not.toContain("local function c()");
    expect(pruned).not.toContain("local function d()"); // used only by c, which went
    expect(() => pruneUnused("local function e()\n  return 1\n  end")).toThrow(/`end`/);
    // The shipped lock acquire keeps what it calls and drops what it does not.
    expect(scripts.lockAcquire.source).toContain("waiting_add");
    expect(scripts.lockAcquire.source).not.toContain("wake_all");
  });

  it("gen.mjs --check passes on the tree and fails on a stale file", async () => {
    await run(process.execPath, ["lua/gen.mjs", "--check"]);
    const dir = await mkdtemp(join(tmpdir(), "edgelock-gen-"));
    try {
      await cp("lua", join(dir, "lua"), { recursive: true });
      await cp("src/lua.gen.ts", join(dir, "src", "lua.gen.ts"));
      await writeFile(join(dir, "lua", "lock", "renew.lua"), "return 0\n");
      const failed = await run(process.execPath, [join(dir, "lua", "gen.mjs"), "--check"]).catch(
        (e: { code: number; stderr: string }) => e,
      );
      expect(failed).toMatchObject({ code: 1 });
      expect((failed as { stderr: string }).stderr).toMatch(/out of date/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("cancel script ordering", () => {
  // The cancel-after-apply order is proven end to end in wait.test.ts and replay.test.ts;
  // the cancel-before-apply order (the acquire arrives late) is only reachable this way.
  it("a cancel that reaches Redis first turns the late acquire into a no-op", async () => {
    const name = `t:lua:${Math.random().toString(16).slice(2)}`;
    const id = "a".repeat(32);
    const channel = `redisson_lock__channel:{${name}}`;
    expect(
      await raw.eval(scripts.lockCancel.source, {
        keys: [name, ...replayKeys(name), channel],
        arguments: ["o:1", "60000", id],
      }),
    ).toBe(0);
    const reply = await raw.eval(scripts.lockAcquire.source, {
      keys: [name, ...replayKeys(name)],
      arguments: ["10000", "o:1", "60000", id],
    });
    expect(reply).toEqual([-1, 0, 0]);
    expect(await raw.exists(name)).toBe(0);
    await raw.del(replayKeys(name));
  });
});
