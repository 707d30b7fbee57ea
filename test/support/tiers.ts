/**
 * Which tier each test file runs in, by its folder, which says what it needs:
 *
 * - fast: pure units and strategies, in this process only (a SQLite file in a temp dir is
 *   fine; signer.test.ts asks the openssl command for its test vectors, milliseconds). No
 *   spawned svcbot, worker thread, venue, listening socket, browser or container.
 * - integration: svc-venue over loopback, spawned CLIs, worker threads, a local Postgres, the
 *   conformance suite.
 * - slow: whole daemons run for seconds to minutes (e2e), and the chaos suite.
 * - container: the image built and run with compose (vitest.container.config.ts).
 *
 * Every test file is in exactly one tier (test/unit/test-tiers.test.ts holds that), so
 * `npm test`, which runs every tier, runs every file.
 */
import { defineConfig, type ViteUserConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"

export type Tier = "fast" | "integration" | "slow" | "container"

const FOLDERS: ReadonlyArray<readonly [string, Tier]> = [
  ["test/unit/", "fast"],
  ["strategies/", "fast"],
  ["test/integration/", "integration"],
  ["test/conformance/", "integration"],
  ["test/e2e/", "slow"],
  ["test/chaos/", "slow"],
  ["test/container/", "container"]
]

/** The tier of a test file given relative to the checkout, or undefined for a file outside every tier's folders. */
export const tierOf = (file: string): Tier | undefined => FOLDERS.find(([folder]) => file.startsWith(folder))?.[1]

/** The include and exclude globs of a tier's vitest config, made from the same table as tierOf. */
export const tierFiles = (tier: Tier): { readonly include: Array<string>; readonly exclude: Array<string> } => {
  const folders = FOLDERS.filter(([, t]) => t === tier).map(([folder]) => `${folder}**/*.test.ts`)
  return { include: folders, exclude: ["**/node_modules/**"] }
}

/**
 * A tier's vitest config. `maxWorkers`: vitest's default on a 2-core machine is one file at a
 * time, which leaves the cores idle while files wait on a daemon or a venue. `isolate: false`
 * imports Effect and the sources once per worker instead of once per file, which is most of what
 * the pure units cost; only a tier whose files leave no state behind may share a worker's modules.
 */
export const tierConfig = (
  tier: Tier,
  options: { readonly maxWorkers: number; readonly isolate: boolean; readonly longestFirst?: ReadonlyArray<string>; readonly globalSetup?: ReadonlyArray<string> }
): ViteUserConfig =>
  defineConfig({
    test: {
      ...tierFiles(tier),
      testTimeout: 60_000,
      hookTimeout: 60_000,
      pool: "forks",
      poolOptions: { forks: { isolate: options.isolate } },
      maxWorkers: options.maxWorkers,
      minWorkers: 1,
      reporters: ["default"],
      ...(options.globalSetup === undefined ? {} : { globalSetup: [...options.globalSetup] }),
      ...(options.longestFirst === undefined ? {} : { sequence: { sequencer: longestFirst(options.longestFirst) } })
    }
  })

/**
 * The slow tier's files that take minutes, longest first (seconds with the tier alone on two
 * cores: crash-loop 150, paper-parity 137, kill9 124, daemon-resilience 114, crash-loop-budget 90,
 * console 70, daemon 50, fuzz-answers 45, engine-chaos 45, daemon-stop 43).
 */
export const SLOW_LONGEST_FIRST: ReadonlyArray<string> = [
  "test/chaos/crash-loop.test.ts",
  "test/e2e/paper-parity.test.ts",
  "test/chaos/kill9.test.ts",
  "test/e2e/daemon-resilience.test.ts",
  "test/chaos/crash-loop-budget.test.ts",
  "test/e2e/console.test.ts",
  "test/e2e/daemon.test.ts",
  "test/chaos/fuzz-answers.test.ts",
  "test/chaos/engine-chaos.test.ts",
  "test/e2e/daemon-stop.test.ts"
]

/**
 * Starts the files named (relative to the checkout, longest first) before the rest. A tier's wall
 * time is at least its longest file's; started last, a long file ends the tier alone. vitest
 * orders by the durations of the last run on the machine, which a clean clone (CI) does not have.
 */
export const longestFirst = (files: ReadonlyArray<string>) =>
  class LongestFirst extends BaseSequencer {
    override async sort(specifications: Array<TestSpecification>): Promise<Array<TestSpecification>> {
      const rank = (specification: TestSpecification): number => {
        const index = files.findIndex((file) => specification.moduleId.endsWith(`/${file}`))
        return index < 0 ? files.length : index
      }
      return (await super.sort(specifications)).sort((a, b) => rank(a) - rank(b))
    }
  }
