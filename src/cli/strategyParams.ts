/**
 * The params of a config's strategy instances, checked against each strategy's own schema
 * when the config is read by a command, so that a wrong param is reported like any other
 * config problem: `config/default.json: strategies[1].params.fastPeriod: ...`, by index as
 * the file is written. The daemon checks them again as it starts its instances. It sits with
 * the commands rather than in config/ because it loads the plugins: the strategy layer depends
 * on config (backpressure settings), not the other way round.
 */
import { Effect, Either } from "effect"
import type { Config, StrategyInstanceConfig } from "../config/Config.js"
import { ConfigError } from "../config/Load.js"
import { loadStrategy } from "../strategy/Loader.js"
import { decodeParams } from "../strategy/Strategy.js"

/** The instances' strategies found and their params valid (every instance's by default), or every problem at once. */
export const checkStrategyParams = (
  config: Config,
  source: string,
  instances: ReadonlyArray<StrategyInstanceConfig> = config.strategies,
  cwd: string = process.cwd()
): Effect.Effect<void, ConfigError> =>
  Effect.gen(function* () {
    const problems: Array<string> = []
    for (const instance of instances) {
      const index = config.strategies.indexOf(instance)
      // The loader and the params decoder name an instance by id; the file names it by its place.
      const byPlace = (line: string) => line.replaceAll(`strategies[${instance.id}]`, `strategies[${index}]`)
      const loaded = yield* Effect.either(loadStrategy(instance.id, instance.strategy, cwd))
      if (Either.isLeft(loaded)) {
        problems.push(byPlace(loaded.left.message))
        continue
      }
      const params = decodeParams(loaded.right.definition, instance.id, instance.params)
      if (Either.isLeft(params)) problems.push(...params.left.problems.map(byPlace))
    }
    if (problems.length > 0) return yield* new ConfigError({ source, problems })
  })
