import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    // For `npx vitest run FILE...`: any test file but the container suite's. `npm test` runs the
    // tiers instead (test/support/tiers.ts), each with the workers its kind of test can use; the
    // container suite builds the image and runs compose projects, one file at a time.
    include: ["test/**/*.test.ts", "strategies/**/*.test.ts"],
    exclude: ["test/container/**", "**/node_modules/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    reporters: ["default"]
  }
})
