#!/usr/bin/env node
// Type-checks every ```ts code block of README.md and docs/*.md against the BUILT package, the
// way a user's project would compile it: `strict`, `exactOptionalPropertyTypes`,
// `moduleResolution: "bundler"`. Run `npm run build` first.
//
// - Each block is its own module. `edgelock`, `edgelock/hono`, ... resolve through the
//   package's own `exports` map to dist/ (a package may import itself by name); `hono`,
//   `@upstash/redis` and the other imports resolve from node_modules, as in a user's project.
// - A block that imports `edgelock/cloudflare`, `@upstash/redis/cloudflare` or `cloudflare:*` is
//   Worker code: it is checked with @cloudflare/workers-types; every other block with Node's
//   types and the DOM library.
// - Names a sample uses without defining (the application's own functions, such as `fulfil`)
//   are declared in scripts/samples.d.ts; keep that list short. Worker samples also see the
//   global `Env` that `wrangler types` would generate (scripts/samples.workers.d.ts).
// - A fragment that cannot be made complete opts out with the fence ```ts nocheck.
// - scripts/run-samples.mjs then runs them (`npm run check:samples` does both).
//
// Exit code 1 with `file:line:column` of each error when a sample does not compile.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";
import { extract, isWorkerCode, markdown, root } from "./samples.mjs";

const preludes = {
  node: [join(root, "scripts", "samples.d.ts")],
  workers: [join(root, "scripts", "samples.d.ts"), join(root, "scripts", "samples.workers.d.ts")],
};

const common = {
  strict: true,
  exactOptionalPropertyTypes: true,
  noUncheckedIndexedAccess: true,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  moduleDetection: ts.ModuleDetectionKind.Force,
  target: ts.ScriptTarget.ES2022,
  verbatimModuleSyntax: true,
  noEmit: true,
  skipLibCheck: true,
};
const environments = {
  node: {
    ...common,
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts", "lib.esnext.disposable.d.ts"],
    types: ["node"],
  },
  workers: {
    ...common,
    lib: ["lib.es2022.d.ts", "lib.esnext.disposable.d.ts"],
    types: ["@cloudflare/workers-types"],
  },
};

// Inside the package (so that `edgelock` resolves to itself), removed afterwards.
const dir = join(root, ".samples");
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });

const samples = markdown.flatMap(extract).map((block, i) => {
  const path = join(dir, `sample-${String(i + 1).padStart(2, "0")}.ts`);
  writeFileSync(path, `${block.code}\n`);
  return { ...block, path, env: isWorkerCode(block.code) ? "workers" : "node" };
});

let errors = 0;
try {
  for (const [env, options] of Object.entries(environments)) {
    const files = samples.filter((s) => s.env === env);
    if (files.length === 0) continue;
    const program = ts.createProgram([...preludes[env], ...files.map((s) => s.path)], options);
    const diagnostics = ts.getPreEmitDiagnostics(program);
    for (const d of diagnostics) {
      const message = ts.flattenDiagnosticMessageText(d.messageText, "\n  ");
      const sample = d.file && files.find((s) => s.path === d.file.fileName);
      if (sample && d.start !== undefined) {
        const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
        console.error(`${sample.file}:${sample.line + line}:${character + 1} (${env}) ${message}`);
      } else {
        const where = d.file ? relative(root, d.file.fileName) : "(options)";
        console.error(`${where} (${env}) ${message}`);
      }
      errors += 1;
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const counts = markdown.map((f) => `${f} ${samples.filter((s) => s.file === f).length}`).join(", ");
if (errors > 0) {
  console.error(`\n${errors} error(s) in the code samples (${counts})`);
  process.exit(1);
}
console.log(`${samples.length} code samples compile (${counts})`);
