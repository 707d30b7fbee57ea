import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { Effect, Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { StrategyInstanceConfig } from "../../../src/config/Config.js"
import { loadStrategy } from "../../../src/strategy/Loader.js"
import { decodeParams } from "../../../src/strategy/Strategy.js"

const EXAMPLES = join(import.meta.dirname, "../../../config/strategies")
const SHIPPED = ["dca", "grid", "market-maker", "protective-stop", "rebalance", "sma-crossover"]

describe("strategy config examples", () => {
  it("there is one example per shipped strategy", () => {
    expect(readdirSync(EXAMPLES).sort()).toEqual(SHIPPED.map((name) => `${name}.json`))
  })

  it.each(SHIPPED)("config/strategies/%s.json is a valid instance config whose params its strategy accepts", async (name) => {
    const instance = Schema.decodeUnknownSync(StrategyInstanceConfig)(JSON.parse(readFileSync(join(EXAMPLES, `${name}.json`), "utf8")))
    expect(instance.strategy).toBe(name)
    const { definition } = await Effect.runPromise(loadStrategy(instance.id, instance.strategy))
    expect(definition.name).toBe(name)
    const params = decodeParams(definition, instance.id, instance.params)
    expect(Either.isRight(params) ? [] : params.left.problems).toEqual([])
    if (definition.onTimer !== undefined && definition.onTicker === undefined && definition.onCandle === undefined) {
      expect(instance.schedule, `${name} acts only on its schedule`).toBeDefined()
    }
  })
})
