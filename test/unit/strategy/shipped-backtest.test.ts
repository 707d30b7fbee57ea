import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import { prepare, runPrepared } from "../../../src/backtest/Job.js"

/**
 * Each shipped strategy, with its config example, run over the venue's synthetic
 * tape through the backtester (svc-venue's matching module in-process): it must
 * trade, and the venue must never refuse one of its orders — prices on the tick,
 * quantities on the step, above the minimums, within the free balance.
 */
const EXAMPLES = join(import.meta.dirname, "../../../config/strategies")

interface Example {
  readonly strategy: string
  readonly symbol: string
  readonly schedule?: string
  readonly params: Record<string, unknown>
}

const example = (name: string): Example => JSON.parse(readFileSync(join(EXAMPLES, `${name}.json`), "utf8")) as Example

const runs: ReadonlyArray<{ readonly name: string; readonly candles: number; readonly params?: Record<string, unknown> }> = [
  { name: "sma-crossover", candles: 3000 },
  { name: "grid", candles: 3000 },
  { name: "dca", candles: 1500 },
  // the backtester trades one pair, so the portfolio is BTC and USDT only
  { name: "rebalance", candles: 1500, params: { quoteAsset: "USDT", targets: { BTC: "0.5", USDT: "0.5" }, thresholdBps: 50 } },
  { name: "market-maker", candles: 1500 },
  { name: "protective-stop", candles: 3000 }
]

describe("shipped strategies on the synthetic tape", () => {
  it.each(runs)("$name trades and is never refused", async ({ name, candles, params }) => {
    const config = example(name)
    const job = await Effect.runPromise(
      prepare({
        strategy: config.strategy,
        data: { kind: "synthetic", seed: 7, candles },
        symbol: config.symbol,
        balances: { USDT: "100000", BTC: "2", ETH: "20" },
        settleDelayMs: 50,
        cwd: process.cwd(),
        ...(config.schedule === undefined ? {} : { schedule: config.schedule })
      })
    )
    const outcome = runPrepared(job, params ?? config.params)
    if (Either.isLeft(outcome)) throw outcome.left
    const result = outcome.right
    expect(result.orders.refused).toBe(0)
    expect(result.orders.placed).toBeGreaterThan(0)
    expect(result.fills.length).toBeGreaterThan(0)
    for (const balance of result.balances.values()) expect(balance.free.gte(0) && balance.locked.gte(0)).toBe(true)
  })
})
