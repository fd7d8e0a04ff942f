import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // Runs once for the whole run (both projects read its values through inject()).
    globalSetup: ["./test/global-setup.ts"],
    // A JSON report too, from which .ci/run prints a one-line "N passed, N failed" summary
    // (on every run, so that `bash .ci/run` passes outside CI as well).
    reporters: ["default", "json"],
    outputFile: { json: "node_modules/.vitest/report.json" },
    projects: [
      {
        test: {
          name: "node",
          // The Node files run first, then workerd's: the timing-sensitive keeper tests do not
          // share the 2 cores with the 16-client contention test.
          sequence: { groupOrder: 0 },
          include: ["test/**/*.test.ts"],
          // test/runtimes/kit/ holds the runtimes check:runtimes fetches, with packages of their own.
          exclude: ["test/worker/**", "**/node_modules/**"],
          testTimeout: 20000,
          hookTimeout: 30000,
        },
      },
      {
        plugins: [
          cloudflareTest(({ inject }) => ({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              // The Worker and its LeaseKeeper talk to the bridge reserved for worker tests,
              // whose faults no Node test touches.
              bindings: {
                UPSTASH_REDIS_REST_URL: inject("faultBridgeUrl"),
                UPSTASH_REDIS_REST_TOKEN: inject("bridgeToken"),
                DEMO_KEY_PREFIX: "wt:",
              },
            },
          })),
        ],
        test: {
          name: "workers",
          sequence: { groupOrder: 1 },
          include: ["test/worker/**/*.test.ts"],
          // One file at a time: the files share the worker bridge's fault configuration.
          fileParallelism: false,
          testTimeout: 20000,
          hookTimeout: 30000,
        },
      },
    ],
  },
});
