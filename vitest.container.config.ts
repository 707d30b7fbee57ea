import { defineConfig } from "vitest/config"

// The image built from the checkout, started with docker-compose.yml. One file at a time: every
// file runs its own compose project, and two builds or two compose projects at once on a small
// machine only make each other slower.
export default defineConfig({
  test: {
    include: ["test/container/**/*.test.ts"],
    testTimeout: 600_000,
    hookTimeout: 900_000,
    pool: "forks",
    fileParallelism: false,
    reporters: ["default"]
  }
})
