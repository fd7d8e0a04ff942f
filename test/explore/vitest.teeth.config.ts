/**
 * `npm run explore:teeth`: the explorer's teeth (teeth.spec.ts) on their own, outside
 * `npm test` (a few minutes of exploration against each mutant).
 */
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    root: fileURLToPath(new URL("../..", import.meta.url)),
    include: ["test/explore/teeth.spec.ts"],
    reporters: ["default"],
    testTimeout: 6 * 60_000,
    hookTimeout: 60_000,
  },
});
