import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globalSetup: ["./test/global-setup.ts"],
    include: ["test/**/*.test.ts"],
    exclude: ["test/worker/**", "node_modules/**"],
    testTimeout: 20000,
    hookTimeout: 30000,
  },
});
