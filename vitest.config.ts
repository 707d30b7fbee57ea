import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "strategies/**/*.test.ts"],
    // The container suite builds the image and runs compose projects; it has its own config
    // (vitest.container.config.ts) so that it runs alone, after the rest, one file at a time.
    exclude: ["test/container/**", "**/node_modules/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    reporters: ["default"]
  }
})
