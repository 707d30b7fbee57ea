import { defineConfig } from "vitest/config"
import { longestFirst } from "./test/support/tiers.js"

// The image built from the checkout, started with docker-compose.yml. Every file runs its own
// compose project (its own containers, network, volumes and published port), so two files run at
// once: most of their time is waiting for containers to turn healthy and for minutes of trading.
// The image is built once before them (build.global.ts); the file with the longest waits starts first.
export default defineConfig({
  test: {
    include: ["test/container/**/*.test.ts"],
    globalSetup: ["test/container/build.global.ts"],
    testTimeout: 600_000,
    hookTimeout: 900_000,
    pool: "forks",
    maxWorkers: 2,
    minWorkers: 1,
    sequence: { sequencer: longestFirst(["test/container/compose-paper.test.ts"]) },
    reporters: ["default"]
  }
})
