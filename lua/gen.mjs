// Turns lua/<kind>/<script>.lua into one module per kind, src/lua/<kind>.gen.ts: one constant
// per script with its source and SHA1, so every runtime (tsc, vitest, workerd, wrangler, user
// bundlers) gets plain strings with no loader, and a primitive's entry imports only its own kind's
// scripts (a kind that builds on another, like the fenced lock on the lock, imports the scripts
// from their owner). src/lua.gen.ts re-exports every kind, for tests and tools.
// `node lua/gen.mjs --check` exits 1 when a committed file is stale.
// Code shared by several scripts lives in lua/lib/ and is pasted in where a script says
// `-- @include lib/<file>.lua` (Redis runs each script alone: there is no `require`); a library
// includes the libraries it needs the same way (expand). What ships is compacted: no comments,
// no spaces Lua does not need (compact), and short names for the locals (renameLocals, which
// reads each script with a Lua parser, luaparse); the readable script stays in lua/.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import luaparse from "luaparse";

const luaDir = dirname(fileURLToPath(import.meta.url));
const srcDir = join(luaDir, "..", "src");
const barrelFile = join(srcDir, "lua.gen.ts");
const kindDir = join(srcDir, "lua");

const libDir = join(luaDir, "lib");
const INCLUDE = /^\s*--\s*@include\s+(\S+)\s*$/;

function listLua(dir) {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return path === libDir ? [] : listLua(path);
      return entry.name.endsWith(".lua") ? [path] : [];
    })
    .sort();
}

function constName(rel) {
  return rel
    .replace(/\.lua$/, "")
    .split(/[/\\-]/)
    .map((part, i) => (i === 0 ? part : part[0].toUpperCase() + part.slice(1)))
    .join("");
}

/**
 * A script's text with every `-- @include lib/<file>.lua` line replaced by that library (paths
 * relative to `root`, lua/ by default). A library may include others the same way: each one a
 * script needs is pasted once, where the script (or the library that needs it) first asks for
 * it, after the libraries it includes, so every function is defined before the code that calls
 * it. A library's own `@include` lines are dropped (what they name is pasted before it). Throws
 * on an include cycle (naming it) and on a missing library.
 */
export function expand(source, root = luaDir) {
  const pasted = new Set();
  const paste = (path, chain) => {
    if (chain.includes(path)) {
      const cycle = [...chain.slice(chain.indexOf(path)), path].join(" -> ");
      throw new Error(`include cycle ${cycle}`);
    }
    if (pasted.has(path)) return [];
    const file = join(root, path);
    if (!existsSync(file)) {
      throw new Error(`no library ${path} (included by ${chain.at(-1) ?? "the script"})`);
    }
    const lines = readFileSync(file, "utf8").split("\n");
    const needs = lines.flatMap((line) => {
      const m = INCLUDE.exec(line);
      return m ? paste(m[1], [...chain, path]) : [];
    });
    pasted.add(path);
    return [...needs, ...lines.filter((line) => !INCLUDE.test(line))];
  };
  return source
    .split("\n")
    .flatMap((line) => {
      const m = INCLUDE.exec(line);
      return m ? paste(m[1], []) : [line];
    })
    .join("\n");
}

/**
 * The script without the library functions it never calls: a library is pasted whole, but each
 * script uses a few of its functions, and every byte ships in the bundle and in each EVAL. A
 * function is a top-level `local function <name>(` block ending at the next `end` at column 0;
 * it goes when its name appears nowhere else outside comments, until nothing more goes.
 */
export function pruneUnused(source) {
  let lines = source.split("\n");
  for (;;) {
    const blocks = [];
    for (let i = 0; i < lines.length; i++) {
      const m = /^local function ([A-Za-z_][A-Za-z0-9_]*)\(/.exec(lines[i]);
      if (!m) continue;
      const end = lines.indexOf("end", i + 1);
      if (end < 0) throw new Error(`lua: no column-0 \`end\` closes function ${m[1]}`);
      blocks.push({ name: m[1], start: i, end });
    }
    // A name in a comment is no call: comments go before the search.
    const code = lines.map((line) => line.replace(/--.*$/, ""));
    const unused = blocks.find(({ name, start, end }) => {
      const rest = [...code.slice(0, start), ...code.slice(end + 1)].join("\n");
      return !new RegExp(`\\b${name}\\b`).test(rest);
    });
    if (!unused) return lines.join("\n");
    lines = [...lines.slice(0, unused.start), ...lines.slice(unused.end + 1)];
  }
}

/**
 * What is shipped and sent to Redis: the script without comment lines, indentation, blank lines
 * or the spaces Lua does not need between tokens (squeeze). Comments and layout stay in lua/ for
 * readers; they would only cost bundle bytes and request bytes.
 */
export function compact(source) {
  return `${source
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("--"))
    .map(squeeze)
    .join("\n")}\n`;
}

// A string literal on one line (the scripts use no long brackets: squeeze refuses them).
const STRING = /('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")/;
const WORD = /[A-Za-z0-9_]/;

/**
 * Whether the space between characters `a` and `b` must stay: between two names, keywords or
 * numbers; between `-` and `-` (a comment); around `..` next to a number or another dot
 * (`1 ..` would read as a malformed number); inside `[ [` and `[ =` (long brackets).
 */
function spaceNeeded(a, b) {
  if (WORD.test(a) && WORD.test(b)) return true;
  if (a === "-" && b === "-") return true;
  if (b === "." && /[0-9.]/.test(a)) return true;
  if (a === "." && /[0-9.]/.test(b)) return true;
  return a === "[" && (b === "[" || b === "=");
}

/**
 * One code line without the spaces between tokens that Lua does not need; string literals are
 * left as they are. Throws on a line it cannot read safely: a comment after code, or a long
 * bracket (`[[`, `[=`), which could hide a string.
 */
function squeeze(line) {
  const parts = line.split(STRING);
  let out = "";
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    if (i % 2 === 1) {
      out += part;
      continue;
    }
    if (/--|\[\[|\[=|['"]/.test(part)) {
      throw new Error(
        `lua: cannot compact \`${line}\` (a comment after code, a long string or an unclosed quote)`,
      );
    }
    out += part.replace(/\s+/g, (space, at) => {
      const a = at > 0 ? part[at - 1] : (out.at(-1) ?? "");
      const b = part[at + space.length] ?? parts[i + 1]?.[0] ?? "";
      return spaceNeeded(a, b) ? " " : "";
    });
  }
  return out;
}

const KEYWORDS = new Set(
  "and break do else elseif end false for function goto if in local nil not or repeat return then true until while".split(
    " ",
  ),
);
// The globals a script in Redis can read (Lua 5.1's base library and Redis's own). A local of
// the same name (`local next = ...`) keeps its name: left alone it means what it meant,
// whichever of the two each use reads; and no short name is ever one of them.
const GLOBALS = new Set(
  "KEYS ARGV redis bit cjson cmsgpack struct assert error gcinfo getmetatable ipairs loadstring next pairs pcall print rawequal rawget rawset select setmetatable tonumber tostring type unpack xpcall _G _VERSION coroutine math os string table".split(
    " ",
  ),
);

/**
 * Every name of a script as Lua 5.1 reads it (luaparse, with scopes): `local` is true for a
 * local variable, where it is declared (a local, a local function, a parameter, a loop
 * variable) and where it is used; false for a global; a field after `.` or `:` and a table
 * constructor's key are not variables and are listed with `local` undefined. `range` is where
 * the name is in `source`. Throws luaparse's error (with line and column) on a script it cannot
 * parse.
 */
function identifiers(source) {
  const nodes = [];
  luaparse.parse(source, {
    scope: true,
    ranges: true,
    luaVersion: "5.1",
    onCreateNode: (node) => {
      if (node.type === "Identifier") nodes.push(node);
    },
  });
  // `isLocal` is settled once the whole chunk is read.
  return nodes.map((node) => ({ name: node.name, local: node.isLocal, range: node.range }));
}

/** The local names a script declares and uses, but those that are also a global's name. */
function locals(source) {
  return identifiers(source).filter((n) => n.local === true && !GLOBALS.has(n.name));
}

/** `a` ... `Z`, then `a0` ... `Z_`: the n-th short name. */
function shortName(n) {
  const first = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  const more = `${first}0123456789_`;
  if (n < first.length) return first[n];
  const k = n - first.length;
  if (k >= first.length * more.length) throw new Error("lua: too many local names to shorten");
  return first[Math.floor(k / more.length)] + more[k % more.length];
}

/**
 * One short name per local name of `sources` (every shipped script), the most used first, and
 * the same in every script: the libraries they share stay the same text, which gzip then
 * stores once. Never a keyword, nor a name a script uses as a global or a field.
 */
export function localNames(sources) {
  const counts = new Map();
  const taken = new Set([...KEYWORDS, ...GLOBALS]);
  for (const source of sources) {
    for (const n of identifiers(source)) {
      if (n.local === true && !GLOBALS.has(n.name)) {
        counts.set(n.name, (counts.get(n.name) ?? 0) + 1);
      } else {
        taken.add(n.name);
      }
    }
  }
  const short = new Map();
  const order = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  let n = 0;
  for (const [name] of order) {
    let next = shortName(n++);
    while (taken.has(next)) next = shortName(n++);
    short.set(name, next);
  }
  return short;
}

/**
 * The script with each local name (where it is declared and where it is used) replaced by its
 * short name in `short` (localNames): Redis never sees the readable names, and every EVAL and
 * bundle carries a few hundred bytes less. Strings, fields, table keys and globals are left as
 * they are, as luaparse reads them; the readable script stays in lua/.
 */
export function renameLocals(source, short) {
  let out = "";
  let at = 0;
  for (const n of locals(source).sort((a, b) => a.range[0] - b.range[0])) {
    out += source.slice(at, n.range[0]) + (short.get(n.name) ?? n.name);
    at = n.range[1];
  }
  return out + source.slice(at);
}

const HEADER = "// Generated by lua/gen.mjs from lua/**/*.lua. Do not edit: run `npm run gen`.";

/** Every generated file: path -> text. */
function render() {
  const scripts = [];
  for (const file of listLua(luaDir)) {
    const rel = relative(luaDir, file).split(sep).join("/");
    try {
      const source = compact(pruneUnused(expand(readFileSync(file, "utf8"))));
      identifiers(source); // parses it as renameLocals will, so that a parse error names the script
      scripts.push({ rel, source });
    } catch (e) {
      throw new Error(`lua/${rel}: ${e.message}`);
    }
  }
  const names = localNames(scripts.map((s) => s.source));
  const kinds = new Map();
  for (const { rel, source: readable } of scripts) {
    const kind = rel.split("/")[0];
    let source;
    try {
      source = renameLocals(readable, names);
    } catch (e) {
      throw new Error(`lua/${rel}: ${e.message}`);
    }
    const name = rel.replace(/\.lua$/, "");
    if (!kinds.has(kind)) {
      kinds.set(kind, [HEADER, "", 'import type { LuaScript } from "./script.js";', ""]);
    }
    kinds
      .get(kind)
      .push(
        `/** lua/${rel} */`,
        `export const ${constName(rel)}: LuaScript = { name: ${JSON.stringify(name)}, source: ${JSON.stringify(source)} };`,
        "",
      );
  }
  const files = new Map();
  const barrel = [
    HEADER,
    "// Every kind's scripts; a primitive imports its own src/lua/<kind>.gen.ts.",
    "",
  ];
  barrel.push('export type { LuaScript } from "./lua/script.js";');
  for (const [kind, lines] of kinds) {
    files.set(join(kindDir, `${kind}.gen.ts`), lines.join("\n"));
    barrel.push(`export * from "./lua/${kind}.gen.js";`);
  }
  files.set(barrelFile, `${barrel.join("\n")}\n`);
  return files;
}

/** Generated kind modules whose lua/<kind>/ is gone. */
function strays(files) {
  if (!existsSync(kindDir)) return [];
  return readdirSync(kindDir)
    .filter((f) => f.endsWith(".gen.ts"))
    .map((f) => join(kindDir, f))
    .filter((f) => !files.has(f));
}

/** render(), or exit 1 saying which script or library is wrong (an include cycle, say). */
function renderOrExit() {
  try {
    return render();
  } catch (e) {
    console.error(e instanceof Error ? e.message : String(e));
    process.exit(1);
  }
}

const isMain = process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1];
if (!isMain) {
  // Imported (by the tests) for expand(), pruneUnused(), compact(), localNames() and
  // renameLocals(): do nothing else.
} else if (process.argv.includes("--check")) {
  const files = renderOrExit();
  const stale = [...files]
    .filter(([file, text]) => {
      try {
        return readFileSync(file, "utf8") !== text;
      } catch {
        return true;
      }
    })
    .map(([file]) => file)
    .concat(strays(files));
  if (stale.length > 0) {
    const list = stale.map((f) => relative(process.cwd(), f)).join(", ");
    console.error(`${list} out of date with lua/: run \`npm run gen\` and commit it.`);
    process.exit(1);
  }
  console.log("src/lua.gen.ts and src/lua/*.gen.ts are up to date.");
} else {
  const files = renderOrExit();
  mkdirSync(kindDir, { recursive: true });
  for (const file of strays(files)) rmSync(file);
  for (const [file, text] of files) writeFileSync(file, text);
  console.log(`wrote ${[...files.keys()].map((f) => relative(process.cwd(), f)).join(", ")}`);
}
