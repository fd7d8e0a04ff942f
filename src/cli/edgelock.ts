#!/usr/bin/env node
/**
 * The `edgelock` bin: `npx edgelock inspect|unlock|list ...`; see `./main.ts`.
 * @module
 */
import { runCli } from "./main.js";

process.exitCode = await runCli(process.argv.slice(2), {
  env: process.env,
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
});
