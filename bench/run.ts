/**
 * `npm run bench`. edgelock is measured as its users run it: the package's build (`tsc -b`,
 * `dist/`, imported as `edgelock`), as the peers are measured from theirs in node_modules. This
 * entry brings the build up to date first (half a second when it is), then runs ./main.ts.
 * Sources loaded through the TypeScript loader instead carry its helpers (a name set on every
 * function made at run time), which made edgelock's client code about a third slower per lock
 * cycle in a profile.
 * @module
 */
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";

const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-b"], {
  cwd: new URL("..", import.meta.url),
  stdio: ["ignore", 2, 2],
});
await import("./main.js");
