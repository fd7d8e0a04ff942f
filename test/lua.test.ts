/** Generated script constants match lua/, and the SHA1s the transport computes match Redis's. */
import { execFile } from "node:child_process";
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { compact, expand, localNames, pruneUnused, renameLocals } from "../lua/gen.mjs";
import { HAND_OFF_CLAIM_WINDOW_MS } from "../src/limits.js";
import * as scripts from "../src/lua.gen.js";
import { sentSource, splitBilled } from "../src/transport/billed.js";
import { sha1Of } from "../src/transport/sha1.js";
import { useRawRedis } from "./support/env.js";
import { replayKeys } from "./support/locks.js";

const run = promisify(execFile);
const all = Object.values(scripts).filter(
  (v): v is scripts.LuaScript =>
    typeof v === "object" && v !== null && "source" in v && "name" in v,
);
const raw = useRawRedis();

/** Runs `use` with a scratch lua/ root whose lib/ files `lib` writes, removed afterwards. */
async function withLibraries(
  use: (lib: (file: string, text: string) => Promise<void>, root: string) => Promise<void>,
): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), "edgelock-include-"));
  try {
    await mkdir(join(root, "lib"));
    await use((file, text) => writeFile(join(root, "lib", file), text), root);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** Each script as lua/ has it, libraries pasted in, unused functions and comments left out. */
async function readable(script: scripts.LuaScript): Promise<{ own: string; text: string }> {
  const own = await readFile(new URL(`../lua/${script.name}.lua`, import.meta.url), "utf8");
  // `-- @include lib/<file>.lua` lines stand for that library and the ones it includes
  // (gen.mjs expand, tested below); functions the script never calls are left out.
  return { own, text: pruneUnused(expand(own)) };
}
/** The short names gen.mjs gives the scripts' locals. */
const names = localNames(
  await Promise.all(all.map(async (s) => compact((await readable(s)).text))),
);

describe("lua scripts", () => {
  it("every script's SHA1 as the transport computes it equals SCRIPT LOAD's, counted or not", async () => {
    expect(all.length).toBeGreaterThanOrEqual(6);
    for (const script of all) {
      for (const counted of [true, false]) {
        expect(String(await raw.scriptLoad(sentSource(script, counted))), script.name).toBe(
          await sha1Of(script, counted),
        );
      }
      expect(sentSource(script, false)).toBe(script.source);
      expect(await sha1Of(script, false)).not.toBe(await sha1Of(script, true));
    }
  });

  it("the sent wrapper answers {billed, reply}: the calls made, every reply shape, errors as they are", async () => {
    const wrapped = (source: string) => sentSource({ name: "probe", source });
    // This client answers bulk strings as Buffers.
    const plain = (r: unknown): unknown =>
      Array.isArray(r) ? r.map(plain) : Buffer.isBuffer(r) ? r.toString() : r;
    const run = async (source: string, keys: string[] = [], args: string[] = []) =>
      plain(await raw.eval(wrapped(source), { keys, arguments: args }));
    const key = `${replayKeys("billed")[0]}:probe`;
    // The EVAL itself counts 1; every call, pcall included, one more, whatever the path.
    expect(await run("return 7")).toEqual([1, 7]);
    expect(
      await run(
        "redis.call('SET', KEYS[1], 'x') local v = redis.call('GET', KEYS[1]) redis.pcall('INCR', KEYS[1]) return v",
        [key],
      ),
    ).toEqual([4, "x"]);
    // nil and false both come back as nil; tables and status replies nest.
    expect(splitBilled(await run("return nil"))).toEqual({ billed: 1, reply: null });
    expect(splitBilled(await run("return false"))).toEqual({ billed: 1, reply: null });
    expect(await run("return {1, 'a', {2}}")).toEqual([1, [1, "a", [2]]]);
    expect(await run("return redis.status_reply('OK')")).toEqual([1, "OK"]);
    // What the real redis table offers besides call and pcall reads through.
    expect(await run("return redis.sha1hex('')")).toEqual([
      1,
      "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    ]);
    // An error reply stays an error (Redis answers it as one; it carries no count).
    await expect(run("return redis.error_reply('ERR probe')")).rejects.toThrow("ERR probe");
    await expect(run("redis.call('NOPE')")).rejects.toThrow();
    // A reply that is not a wrapped script's is refused.
    for (const reply of [7, [], [0, 1], ["x", 1], [1, 2, 3], null]) {
      expect(splitBilled(reply), JSON.stringify(reply)).toBeUndefined();
    }
  });

  it("every shipped source is its lua/ file without comments, with short local names", async () => {
    const back = new Map([...names].map(([long, short]) => [short, long]));
    for (const script of all) {
      const { own, text } = await readable(script);
      const code = text
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith("--"));
      // Line for line the same code, only spaces Lua does not need taken out (compact) and the
      // locals renamed (renameLocals); renamed back, it is the readable code again.
      expect(script.source).toBe(renameLocals(compact(text), names));
      const bare = (l: string) => l.replace(/\s/g, "");
      const restored = renameLocals(script.source, back);
      expect(restored.split("\n").filter(Boolean).map(bare)).toEqual(code.map(bare));
      expect(script.source).not.toMatch(/^\s*--/m);
      expect(script.source.length, script.name).toBeLessThanOrEqual(compact(text).length);
      const header = own
        .split("\n")
        .filter((l) => l.startsWith("--"))
        .join("\n");
      expect(header, script.name).toMatch(/KEYS\[/);
      expect(header, script.name).toMatch(/Returns/);
    }
  });

  it("compact drops the spaces Lua does not need, keeps the ones it does and leaves strings alone", () => {
    const source = [
      "-- a comment line",
      "",
      "  local a, b = unpack(KEYS)",
      "  if not a then",
      "    return {1, 'x, y', \"z = 1\"}",
      "  end",
      "  local n = b - -1",
      "  return 1 .. a .. 2 .. ' '",
    ].join("\n");
    expect(compact(source)).toBe(
      [
        "local a,b=unpack(KEYS)",
        "if not a then",
        "return{1,'x, y',\"z = 1\"}",
        "end",
        // `b--1` would start a comment; `1..` would read as a malformed number (and `..2` is
        // left spaced too: a dot next to a digit keeps its space).
        "local n=b- -1",
        "return 1 ..a.. 2 ..' '",
        "",
      ].join("\n"),
    );
    // What it cannot read safely it refuses, naming the line.
    expect(() => compact("local a = 1 -- one")).toThrow("cannot compact `local a = 1 -- one`");
    expect(() => compact("local s = [[a, b]]")).toThrow(/long string/);
    expect(() => compact("local s = 'open")).toThrow(/cannot compact/);
  });

  it("renameLocals shortens what a script declares and leaves strings, fields, keys and globals", () => {
    const source = compact(
      [
        "local name, owner = KEYS[1], ARGV[1]",
        "local function grant(count, next)",
        "  for index, field in ipairs(count) do",
        "    redis.call('hset', name, field, 'name' .. index)",
        "  end",
        "  return {owner = owner, n = 1.5e3}, string.format('%d', #count), next",
        "end",
        "local t = {}",
        "t.owner = owner",
        "return grant(t, name..owner)",
      ].join("\n"),
    );
    const short = localNames([source]);
    // Declared: locals, the local function, its parameters, the loop's variables; `next` is a
    // global's name, so the local keeps it.
    expect([...short.keys()].sort()).toEqual(
      ["count", "field", "grant", "index", "name", "owner", "t"].sort(),
    );
    for (const s of short.values()) expect(s).toMatch(/^[A-Za-z][A-Za-z0-9_]?$/);
    const renamed = renameLocals(source, short);
    const n = (name: string) => short.get(name) as string;
    expect(renamed).toContain(`local ${n("name")},${n("owner")}=KEYS[1],ARGV[1]`);
    expect(renamed).toContain(`'name'..${n("index")}`); // the string stays, the concat's name not
    expect(renamed).toContain(`{owner=${n("owner")},n=1.5e3}`); // a table key stays
    expect(renamed).toContain(`string.format(`); // a global's field stays
    expect(renamed).toContain(`${n("t")}.owner=${n("owner")}`); // a field stays
    expect(renamed).toContain(`,next\n`);
    expect(renamed).toContain(`${n("name")}..${n("owner")}`);
    // The most used name gets the shortest name; the same names in every script.
    expect(n("owner")).toHaveLength(1);
    expect(renameLocals(source, localNames([source, "local owner=1\nreturn owner\n"]))).toBe(
      renameLocals(source, localNames(["local owner=1\nreturn owner\n", source])),
    );
    // Read by a Lua parser: a function inside a table constructor, a method call, a field named
    // like a local, and a name used inside a local's own initializer, where it is still the
    // global (Lua scopes a local from the statement after its declaration).
    const tricky = "local t={f=function(count) x=count return t end}\nt:f(owner)\nreturn t.count\n";
    expect(renameLocals(tricky, short)).toBe(
      `local ${n("t")}={f=function(${n("count")}) x=${n("count")} return t end}\n` +
        `${n("t")}:f(owner)\nreturn ${n("t")}.count\n`,
    );
    // What is not Lua 5.1 (Redis's Lua) is refused with the parser's line and column.
    expect(() => renameLocals("::top::\nreturn 1\n", short)).toThrow(/\[1:\d+\]/);
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
    const defines = (name: string) => `local function ${names.get(name)}(`;
    expect(scripts.lockAcquire.source).toContain(defines("hold_register"));
    expect(scripts.lockAcquire.source).not.toContain(defines("wake_all"));
  });

  it("a library may include others: each pasted once, after what it includes", async () => {
    await withLibraries(async (lib, root) => {
      await lib("clock.lua", "local function c()\n  return 1\nend\n");
      await lib("a.lua", "-- @include lib/clock.lua\nlocal function a()\n  return c()\nend\n");
      await lib("b.lua", "-- @include lib/clock.lua\n-- @include lib/a.lua\nlocal B = 2\n");
      const text = expand(
        "local k = 0\n-- @include lib/b.lua\n-- @include lib/a.lua\nreturn a()",
        root,
      );
      const lines = text.split("\n").filter(Boolean);
      // Every library once, each after the ones it includes, where the script first asks for
      // one: clock before a before b, all after the script's own first line.
      expect(lines).toEqual([
        "local k = 0",
        "local function c()",
        "  return 1",
        "end",
        "local function a()",
        "  return c()",
        "end",
        "local B = 2",
        "return a()",
      ]);
      // Pruning follows calls through nested libraries: c stays while a calls it.
      expect(pruneUnused(text)).toContain("local function c()");
      expect(pruneUnused(expand("-- @include lib/b.lua\nreturn B", root))).not.toMatch(/function/);
    });
  });

  it("an include cycle or a missing library is refused, naming it", async () => {
    await withLibraries(async (lib, root) => {
      await lib("a.lua", "-- @include lib/b.lua\n");
      await lib("b.lua", "-- @include lib/c.lua\n");
      await lib("c.lua", "-- @include lib/a.lua\n");
      await lib("self.lua", "-- @include lib/self.lua\n");
      await lib("gap.lua", "-- @include lib/none.lua\n");
      expect(() => expand("-- @include lib/a.lua", root)).toThrow(
        "include cycle lib/a.lua -> lib/b.lua -> lib/c.lua -> lib/a.lua",
      );
      expect(() => expand("-- @include lib/self.lua", root)).toThrow(
        "include cycle lib/self.lua -> lib/self.lua",
      );
      expect(() => expand("-- @include lib/gap.lua", root)).toThrow(
        "no library lib/none.lua (included by lib/gap.lua)",
      );
      expect(() => expand("-- @include lib/none.lua", root)).toThrow(
        "no library lib/none.lua (included by the script)",
      );
    });
  });

  it("no shipped script defines a function twice", () => {
    for (const script of all) {
      const names = [...script.source.matchAll(/^local function ([A-Za-z_]\w*)\(/gm)].map(
        (m) => m[1],
      );
      expect(new Set(names).size, script.name).toBe(names.length);
    }
  });

  it("the lock's written-out common paths name the HASH fields as lib/hold-fields.lua does", async () => {
    const read = (file: string) => readFile(new URL(`../lua/${file}`, import.meta.url), "utf8");
    const fields = new Map(
      [...(await read("lib/hold-fields.lua")).matchAll(/^local ([A-Z]+) = '([^']+)'$/gm)].map(
        (m) => [m[1] as string, m[2] as string],
      ),
    );
    // acquire.lua and release.lua spell these out before anything is defined (their comments say
    // why): a field renamed in lib/hold-fields.lua must be renamed there too.
    for (const [file, names] of [
      ["lock/acquire.lua", ["EPOCH", "BY"]],
      ["lock/release.lua", ["EPOCH", "BY", "PARTIAL", "WAITERS"]],
    ] as const) {
      const head = (await read(file)).split(/^-- @include /m)[0] as string;
      const code = head.replace(/^\s*--.*$/gm, "");
      const used = [...code.matchAll(/'(edgelock:[^']*)'/g)].map((m) => m[1]);
      expect([...used].sort(), file).toEqual(names.map((n) => fields.get(n)).sort());
    }
  });

  it("gen.mjs --check passes on the tree, fails on a stale file and on an include cycle", async () => {
    await run(process.execPath, ["lua/gen.mjs", "--check"]);
    const dir = await mkdtemp(join(tmpdir(), "edgelock-gen-"));
    try {
      await cp("lua", join(dir, "lua"), { recursive: true });
      await cp("src/lua.gen.ts", join(dir, "src", "lua.gen.ts"));
      // The generator reads Lua with luaparse, from the project's node_modules.
      await symlink(join(process.cwd(), "node_modules"), join(dir, "node_modules"), "dir");
      await writeFile(join(dir, "lua", "lock", "renew.lua"), "return 0\n");
      const failed = await run(process.execPath, [join(dir, "lua", "gen.mjs"), "--check"]).catch(
        (e: { code: number; stderr: string }) => e,
      );
      expect(failed).toMatchObject({ code: 1 });
      expect((failed as { stderr: string }).stderr).toMatch(/out of date/);
      // A library that includes itself stops the generator with the script and the cycle named.
      await writeFile(join(dir, "lua", "lib", "wake.lua"), "-- @include lib/wake.lua\n");
      const cycle = await run(process.execPath, [join(dir, "lua", "gen.mjs"), "--check"]).catch(
        (e: { code: number; stderr: string }) => e,
      );
      expect(cycle).toMatchObject({ code: 1 });
      expect((cycle as { stderr: string }).stderr).toMatch(
        /^lua\/\S+\.lua: include cycle lib\/wake\.lua -> lib\/wake\.lua$/m,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("cancel script ordering", () => {
  // The cancel-after-apply order is proven end to end in wait/loop.test.ts and replay.test.ts;
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
      keys: [name, ...replayKeys(name), `edgelock_waiting:{${name}}`, `edgelock_wake:{${name}}`],
      arguments: ["10000", "o:1", "60000", id],
    });
    expect(reply).toEqual([-1, 0, 0]);
    expect(await raw.exists(name)).toBe(0);
    await raw.del(replayKeys(name));
  });
});

describe("constants the scripts share with the client", () => {
  it("lib/wake.lua's claim window is HAND_OFF_CLAIM_WINDOW_MS", async () => {
    const source = await readFile(new URL("../lua/lib/wake.lua", import.meta.url), "utf8");
    expect(source).toContain(`local CLAIM_WINDOW_MS = ${HAND_OFF_CLAIM_WINDOW_MS}\n`);
  });
});
