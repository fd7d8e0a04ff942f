/**
 * Scenario 5: minified + gzip size of each package entry next to @upstash/lock, read from
 * `size-limit --json` with the budgets of `.size-limit.cjs` (the same check `npm run size` runs),
 * on the build that bench/run.ts brought up to date (`tsc -b`) before any scenario ran.
 * @module
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import * as esbuild from "esbuild";
import type * as EntrySizesModule from "../../scripts/entry-sizes.mjs";
import type { EntrySize, ModuleSize } from "../../scripts/entry-sizes.mjs";

const run = promisify(execFile);

/** Entry keys of the Bench JSON, with the size-limit names and the sources they come from. */
export const ENTRIES = [
  { key: ".", name: "edgelock", source: "src/index.ts" },
  { key: "/hono", name: "edgelock/hono", source: "src/hono.ts" },
  { key: "/cloudflare", name: "edgelock/cloudflare", source: "worker/cloudflare.ts" },
  { key: "/vercel", name: "edgelock/vercel", source: "src/vercel.ts" },
  {
    key: "@upstash/lock",
    name: "@upstash/lock",
    source: "node_modules/@upstash/lock/package.json",
  },
] as const;

/** One entry: size in bytes (min+gzip, peers excluded) and its budget, or why there is none. */
export interface BundleEntry {
  minGzipBytes: number | null;
  limitBytes: number | null;
  passed: boolean | null;
  /** Set when there is no size: "not written yet" or the build/size-limit error. */
  note?: string;
}

interface SizeLimitRow {
  name: string;
  size?: number;
  sizeLimit?: number;
  passed?: boolean;
}

/** Measures every entry of the build with size-limit. Never throws. */
export async function runBundle(
  root: string,
  log: (line: string) => void,
): Promise<Record<string, BundleEntry>> {
  const out: Record<string, BundleEntry> = {};
  const missing = (note: string) => ({ minGzipBytes: null, limitBytes: null, passed: null, note });
  let rows: SizeLimitRow[] = [];
  let failure: string | undefined;
  try {
    rows = await sizeLimit(root);
  } catch (error) {
    failure = firstLine(error);
  }
  for (const entry of ENTRIES) {
    const row = rows.find((r) => r.name === entry.name);
    if (!existsSync(`${root}/${entry.source}`)) out[entry.key] = missing("not written yet");
    else if (!row || row.size === undefined) out[entry.key] = missing(failure ?? "not measured");
    else {
      out[entry.key] = {
        minGzipBytes: row.size,
        limitBytes: row.sizeLimit ?? null,
        passed: row.sizeLimit === undefined ? null : (row.passed ?? null),
      };
    }
  }
  log("  bundle: done");
  return out;
}

/** `size-limit --json`; it exits non-zero when a budget is exceeded but still prints the rows. */
async function sizeLimit(root: string): Promise<SizeLimitRow[]> {
  let stdout: string;
  try {
    ({ stdout } = await run(`${root}/node_modules/.bin/size-limit`, ["--json"], { cwd: root }));
  } catch (error) {
    const partial = (error as { stdout?: string }).stdout;
    if (!partial?.trim().startsWith("[")) throw error;
    stdout = partial;
  }
  return JSON.parse(stdout) as SizeLimitRow[];
}

function firstLine(error: unknown): string {
  const e = error as { stderr?: string; stdout?: string; message?: string };
  const text = `${e.stdout ?? ""}\n${e.stderr ?? ""}`.trim() || e.message || String(error);
  return `build or size-limit failed: ${text.split("\n")[0]?.slice(0, 200)}`;
}

/** What the core entry is made of, for the explanation in RESULTS.md. */
export interface CoreBreakdown {
  /** Minified bytes per source module (before gzip), largest first. */
  modules: { module: string; minifiedBytes: number }[];
  /** Characters of Lua script text embedded (string literals: no minifier shortens them). */
  luaChars: number;
  /** Of those, comments and indentation. */
  luaCommentChars: number;
  /** Gzip bytes saved by shipping the Lua text without comments and indentation. */
  luaStrippedSavingsGzipBytes: number;
}

/**
 * Bundles the built core entry with esbuild (minified, peers external) twice, as built and with
 * its Lua text stripped of comments and indentation, and lists its modules by size.
 */
export async function coreBreakdown(root: string): Promise<CoreBreakdown | null> {
  const entry = `${root}/dist/src/index.js`;
  if (!existsSync(entry)) return null;
  const build = async (strip: boolean) =>
    esbuild.build({
      entryPoints: [entry],
      bundle: true,
      minify: true,
      format: "esm",
      write: false,
      metafile: true,
      external: ["@upstash/redis"],
      plugins: strip ? [stripLuaPlugin] : [],
    });
  const [asBuilt, stripped] = await Promise.all([build(false), build(true)]);
  const gz = (r: esbuild.BuildResult & { outputFiles: esbuild.OutputFile[] }) =>
    gzipSync(r.outputFiles[0]?.contents ?? new Uint8Array()).length;
  const output = Object.values(asBuilt.metafile?.outputs ?? {})[0];
  const modules = Object.entries(output?.inputs ?? {})
    .map(([module, v]) => ({
      module: module.replace(/^.*dist\/src\//, "src/").replace(/\.js$/, ".ts"),
      minifiedBytes: v.bytesInOutput,
    }))
    .filter((m) => m.minifiedBytes > 0)
    .sort((a, b) => b.minifiedBytes - a.minifiedBytes);
  const lua = await luaSourceSize();
  return {
    modules,
    luaChars: lua.chars,
    luaCommentChars: lua.commentChars,
    luaStrippedSavingsGzipBytes: gz(asBuilt) - gz(stripped),
  };
}

/** Lua text without comment lines, trailing comments, indentation and blank lines. */
function stripLua(source: string): string {
  return source
    .split("\n")
    .map((line) => line.replace(/--.*$/, "").trim())
    .filter((line) => line !== "")
    .join("\n");
}

/** Rewrites the `source: "..."` string literals of the generated script module. */
const stripLuaPlugin: esbuild.Plugin = {
  name: "strip-lua",
  setup(build) {
    build.onLoad({ filter: /\.gen\.js$/ }, async (args) => ({
      contents: (await readFile(args.path, "utf8")).replace(
        /source: ("(?:[^"\\]|\\.)*")/g,
        (_, literal: string) =>
          `source: ${JSON.stringify(stripLua(JSON.parse(literal) as string))}`,
      ),
      loader: "js",
    }));
  },
};

async function luaSourceSize(): Promise<{ chars: number; commentChars: number }> {
  const lua: Record<string, unknown> = await import("../../src/lua.gen.js");
  let chars = 0;
  let stripped = 0;
  for (const v of Object.values(lua)) {
    const source = (v as { source?: unknown } | null)?.source;
    if (typeof source !== "string") continue;
    chars += source.length;
    stripped += stripLua(source).length;
  }
  return { chars, commentChars: chars - stripped };
}

/** Every package entry as a user's Worker meets it (scripts/entry-sizes.mjs), for RESULTS.md. */
export interface EntrySizes {
  entries: EntrySize[];
  /** Where the lock entry's bytes go: minified bytes per module, largest first. */
  lockModules: ModuleSize[];
}

/**
 * Measures every entry with scripts/entry-sizes.mjs (the budgets CI enforces) after the build
 * of {@link runBundle}, and the lock entry's modules. Never throws: null when it cannot measure.
 */
export async function entrySizes(
  root: string,
  log: (line: string) => void,
): Promise<EntrySizes | null> {
  try {
    const sizes = (await import(`${root}/scripts/entry-sizes.mjs`)) as typeof EntrySizesModule;
    const result = {
      entries: await sizes.measure(),
      lockModules: await sizes.modules("edgelock/lock"),
    };
    log("  entry sizes: done");
    return result;
  } catch (error) {
    log(`  entry sizes: ${firstLine(error)}`);
    return null;
  }
}
