// The ```ts code samples of README.md and docs/*.md, shared by scripts/check-samples.mjs (which
// type-checks them) and scripts/run-samples.mjs (which runs them).
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** README.md, then docs/*.md in name order. */
export const markdown = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`),
];

/**
 * The ```ts blocks of one markdown file that are checked (not fenced ```ts nocheck), with the
 * line (1-based) of their first code line and `norun`: the reason given after `norun` in the
 * fence (```ts norun: a Worker with a Durable Object), for a sample that cannot run on its own.
 * `outputs`: the text of each `<!-- output: ... -->` comment on the lines right after the block
 * (hidden when rendered), which its run must print, so that what a sample claims is checked.
 */
export function extract(file) {
  const lines = readFileSync(join(root, file), "utf8").split("\n");
  const blocks = [];
  let open;
  let last;
  lines.forEach((line, i) => {
    const fence = /^(\s*)(`{3,}|~{3,})\s*([^`]*)$/.exec(line);
    if (!open) {
      const output = /^\s*<!-- output: (.*) -->\s*$/.exec(line);
      if (output && last) {
        last.outputs.push(output[1]);
        return;
      }
      last = undefined;
      if (!fence) return;
      const [lang = "", ...flags] = fence[3].trim().split(/\s+/);
      open = { fence: fence[2], indent: fence[1].length, lang, flags, start: i + 2, code: [] };
    } else if (fence?.[2].startsWith(open.fence) && fence[3].trim() === "") {
      if (["ts", "typescript"].includes(open.lang) && !open.flags.includes("nocheck")) {
        const block = { file, line: open.start, code: open.code.join("\n"), outputs: [] };
        const norun = open.flags.findIndex((f) => /^norun:?$/.test(f));
        if (norun >= 0) {
          const reason = open.flags.slice(norun + 1).join(" ");
          if (reason === "") {
            throw new Error(`${file}:${open.start - 1}: a \`norun\` fence must give its reason`);
          }
          block.norun = reason;
        }
        blocks.push(block);
        last = block;
      }
      open = undefined;
    } else {
      open.code.push(line.slice(Math.min(open.indent, line.search(/\S|$/))));
    }
  });
  if (open) throw new Error(`${file}: unclosed code fence opened at line ${open.start - 1}`);
  return blocks;
}

/** Worker code: imports `edgelock/cloudflare`, `@upstash/redis/cloudflare` or `cloudflare:*`. */
export const isWorkerCode = (code) =>
  /from\s+["'](edgelock\/cloudflare|@upstash\/redis\/cloudflare|cloudflare:[^"']*)["']/.test(code);
