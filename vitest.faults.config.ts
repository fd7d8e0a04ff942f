import { defineConfig } from "vitest/config";

// `npm run test:faults`: the fault campaigns (test/faults/*.campaign.ts), apart from `npm test`
// (whose include pattern, test/**/*.test.ts, does not match them). One file, one fork: the
// campaigns start their own redis-servers and bridges, and time matters on small machines.
export default defineConfig({
  test: {
    include: ["test/faults/**/*.campaign.ts"],
    pool: "forks",
    fileParallelism: false,
    testTimeout: 900_000,
    hookTimeout: 60_000,
  },
});
