/**
 * Finds a strategy plugin: a shipped one under strategies/ by name, or a file
 * given by path in the config. A plugin's default export (or its only export
 * that looks like a definition) must come from `defineStrategy`.
 */
import { existsSync } from "node:fs"
import { isAbsolute, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { Data, Effect } from "effect"
import type { StrategyDefinition } from "./Strategy.js"

export const STRATEGIES_DIR = fileURLToPath(new URL("../../strategies/", import.meta.url))

export class StrategyNotFound extends Data.TaggedError("StrategyNotFound")<{ readonly instanceId: string; readonly message: string }> {}

export interface LoadedStrategy {
  readonly definition: StrategyDefinition
  /** The plugin file, whose contents are hashed for promotion records. */
  readonly sourcePath: string
}

const isDefinition = (value: unknown): value is StrategyDefinition =>
  value !== null &&
  typeof value === "object" &&
  typeof (value as StrategyDefinition).name === "string" &&
  typeof (value as StrategyDefinition).init === "function"

const candidates = (reference: string, cwd: string): ReadonlyArray<string> => {
  const looksLikePath = reference.includes("/") || reference.endsWith(".ts") || reference.endsWith(".js")
  if (looksLikePath) return [isAbsolute(reference) ? reference : resolve(cwd, reference)]
  return [join(STRATEGIES_DIR, `${reference}.ts`), join(STRATEGIES_DIR, `${reference}.js`)]
}

/** Loads the plugin named by a config's `strategy` field. */
export const loadStrategy = (instanceId: string, reference: string, cwd: string = process.cwd()): Effect.Effect<LoadedStrategy, StrategyNotFound> =>
  Effect.gen(function* () {
    const path = candidates(reference, cwd).find((candidate) => existsSync(candidate))
    if (path === undefined) {
      return yield* new StrategyNotFound({
        instanceId,
        message: `strategies[${instanceId}].strategy: no strategy "${reference}" (use a shipped name such as sma-crossover, grid, dca, rebalance, market-maker, protective-stop, or a path to a plugin file)`
      })
    }
    const module = yield* Effect.tryPromise({
      try: () => import(pathToFileURL(path).href) as Promise<Record<string, unknown>>,
      catch: (cause) =>
        new StrategyNotFound({ instanceId, message: `strategies[${instanceId}].strategy: ${path} failed to load: ${cause instanceof Error ? cause.message : String(cause)}` })
    })
    const exported = isDefinition(module.default) ? module.default : Object.values(module).find(isDefinition)
    if (exported === undefined) {
      return yield* new StrategyNotFound({ instanceId, message: `strategies[${instanceId}].strategy: ${path} exports no strategy (export default defineStrategy({...}))` })
    }
    return { definition: exported, sourcePath: path }
  })
