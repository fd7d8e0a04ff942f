#!/usr/bin/env node
// Checks the internal links of README.md and docs/*.md: every relative link names a file of the
// repository, and every `#anchor` (in the same page or another markdown page) names one of that
// page's headings, slugged as GitHub does. Links inside code blocks and to other sites are left
// alone. Exit code 1 with `file:line` of each broken link.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const pages = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`),
];

/** The lines of a markdown file outside fenced code blocks, with their 1-based numbers. */
function prose(file) {
  const out = [];
  let fence;
  readFileSync(file, "utf8")
    .split("\n")
    .forEach((line, i) => {
      const open = /^\s*(`{3,}|~{3,})/.exec(line);
      if (open) {
        if (!fence) fence = open[1];
        else if (open[1].startsWith(fence)) fence = undefined;
        return;
      }
      if (!fence) out.push({ line, number: i + 1 });
    });
  return out;
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, -1, -2 repeats. */
function anchors(file) {
  const seen = new Map();
  const out = new Set();
  for (const { line } of prose(file)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const text = heading[1]
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .replace(/<[^>]+>/g, "")
      .toLowerCase();
    const base = text
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .trim()
      .replace(/\s/g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

const problems = [];
const cache = new Map();
const anchorsOf = (file) => {
  if (!cache.has(file)) cache.set(file, anchors(file));
  return cache.get(file);
};

for (const page of pages) {
  const file = join(root, page);
  for (const { line, number } of prose(file)) {
    // Inline code spans may show link syntax: drop them first.
    const text = line.replace(/`[^`]*`/g, "");
    for (const match of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = match[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, ...
      const [path, anchor] = target.split("#");
      const resolved = path ? resolve(dirname(file), decodeURI(path)) : file;
      const where = `${page}:${number}`;
      if (!resolved.startsWith(root) || !existsSync(resolved)) {
        problems.push(`${where}: ${target}: no such file (${relative(root, resolved)})`);
        continue;
      }
      if (anchor !== undefined && resolved.endsWith(".md") && !anchorsOf(resolved).has(anchor)) {
        problems.push(`${where}: ${target}: no heading #${anchor} in ${relative(root, resolved)}`);
      }
    }
  }
}

if (problems.length > 0) {
  console.error(problems.join("\n"));
  console.error(`${problems.length} broken internal link(s)`);
  process.exit(1);
}
console.log(`internal links: ${pages.length} pages checked`);
