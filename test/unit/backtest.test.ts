import { Effect, Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { type BacktestResult, type BacktestSetup, runBacktest } from "../../src/backtest/Backtest.js"
import { StrategyFailed, TAG_IN_USE } from "../../src/backtest/Run.js"
import { prepare, runPrepared } from "../../src/backtest/Job.js"
import { toFloat } from "../../src/domain/Decimal.js"
import type { Intent } from "../../src/domain/Intent.js"
import { decodeParams, defineStrategy, result, type StrategyDefinition } from "../../src/strategy/Strategy.js"
import type { PairSpec } from "../../src/venue/Orders.js"
import type { VenueCandle } from "../../src/venue/PricePath.js"
import { syntheticCandles } from "../../src/venue/Tape.js"
import smaCrossover from "../../strategies/sma-crossover.js"
import { d, MIN, T0, testPair } from "../support/pair.js"

const pair: PairSpec = testPair

const candle = (i: number, open: string, high: string, low: string, close: string): VenueCandle => ({
  openTimeMs: T0 + i * MIN,
  open: d(open),
  high: d(high),
  low: d(low),
  close: d(close),
  volume: d("1")
})

/** A strategy that places the intents scripted for each candle index and records everything it hears. */
const scripted = (script: Record<number, ReadonlyArray<Intent>>, onRefusal?: (tag: string) => ReadonlyArray<Intent>): StrategyDefinition<unknown, { heard: Array<string>; candles: number }> =>
  defineStrategy({
    name: "scripted",
    version: "1",
    params: Schema.Unknown,
    state: Schema.Any,
    init: () => ({ heard: [], candles: 0 }),
    onCandle: (state, event, view) => {
      state.heard.push(`candle ${(event.openTime - T0) / MIN} at ${(view.now - T0) / MIN}`)
      const intents = script[state.candles] ?? []
      state.candles += 1
      return result(state, intents)
    },
    onFill: (state, fill) => {
      state.heard.push(`fill ${fill.tag} ${fill.side} ${fill.baseQty.toFixed()} @ ${fill.price.toFixed()} ${fill.liquidity} fee ${fill.fee.toFixed()} ${fill.feeAsset}`)
      return result(state)
    },
    onOrderUpdate: (state, update) => {
      state.heard.push(`update ${update.tag} ${update.kind}${update.code === undefined ? "" : ` ${update.code}`} filled ${update.filledBaseQty.toFixed()}`)
      return result(state, update.kind === "refused" && onRefusal !== undefined ? onRefusal(update.tag) : [])
    }
  })

const setup = <P, S>(strategy: StrategyDefinition<P, S>, candles: ReadonlyArray<VenueCandle>, params: P, balances: Record<string, string> = { USDT: "10000" }): BacktestSetup<P, S> => ({
  strategy,
  params,
  pair,
  fees: { maker: d("0.001"), taker: d("0.002") },
  settleDelayMs: 50,
  balances: Object.fromEntries(Object.entries(balances).map(([asset, amount]) => [asset, d(amount)])),
  candles,
  intervalMs: MIN
})

const run = <P, S>(s: BacktestSetup<P, S>): BacktestResult => {
  const outcome = runBacktest(s)
  if (Either.isLeft(outcome)) throw outcome.left
  return outcome.right
}

const flat = (n: number, price = "100.00"): Array<VenueCandle> => Array.from({ length: n }, (_, i) => candle(i, price, price, price, price))

describe("the backtest event loop drives the venue's matching module", () => {
  it("settles a market buy before the next candle at the book's first ask and tells the strategy at that candle's close", () => {
    const strategy = scripted({ 0: [{ type: "market", tag: "buy-1", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("1000"), maxSlippageBps: 50 }] })
    const out = run(setup(strategy, flat(3), {}))
    // The book's first ask is one basis point above 100: 100.01. 1000 / 100.01 = 9.9990..., stepped down to 9.999.
    expect(out.fills).toHaveLength(1)
    const f = out.fills[0]!
    expect([f.tag, f.side, f.price.toFixed(), f.baseQty.toFixed(), f.liquidity]).toEqual(["buy-1", "buy", "100.01", "9.999", "taker"])
    // Taker fee 0.2 % of the base received.
    expect([f.fee.toFixed(), f.feeAsset]).toEqual(["0.019998", "BTC"])
    expect(f.time).toBe(T0 + MIN + 50)
    expect(out.balances.get("BTC")!.free.toFixed()).toBe("9.979002")
    expect(out.balances.get("USDT")!.free.toFixed()).toBe("9000.00001")
    // Equity at each close: 10000 before the fill, then 9000.00001 + 9.979002 * 100.
    expect(out.equity.map((e) => e.toFixed())).toEqual(["10000", "9997.90021", "9997.90021"])
    expect(out.metrics.finalEquity.toFixed()).toBe("9997.90021")
    expect(Array.from(out.equityMarks)).toEqual([10000, 9997.90021, 9997.90021])
    expect(out.metrics.pnl.toFixed()).toBe("-2.09979")
  })

  it("counts a close as in the market from exactly the minimum notional, deciding at the boundary on exact values", () => {
    // 0.05 BTC against a minimum notional of 5 USDT: worth exactly 5 at 100, a hair under and over it next to 100.
    const closes = ["100", "99.99999999999", "100.00000000001", "200"]
    const out = run(setup(scripted({}), closes.map((c, i) => candle(i, c, c, c, c)), {}, { BTC: "0.05" }))
    expect(out.metrics.exposurePct).toBe(75)
    expect(out.equity.map((e) => e.toFixed())).toEqual(["5", "4.9999999999995", "5.0000000000005", "10"])
    expect(out.metrics.finalEquity.toFixed()).toBe("10")
  })

  it("orders what a strategy hears: fills, then order updates, then the closed candle", () => {
    const strategy = scripted({ 0: [{ type: "market", tag: "buy-1", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("1000"), maxSlippageBps: 50 }] })
    const outcome = runBacktest(setup(strategy, flat(2), {}))
    expect(Either.isRight(outcome)).toBe(true)
    const heard = recordOf(strategy, flat(2))
    expect(heard).toEqual([
      "candle 0 at 1",
      "fill buy-1 buy 9.999 @ 100.01 taker fee 0.019998 BTC",
      "update buy-1 fill filled 9.999",
      "candle 1 at 2"
    ])
  })

  it("rests a limit buy and fills it as maker along the candle path: half on a touch, the rest when passed", () => {
    const candles = [candle(0, "100", "100", "100", "100"), candle(1, "100", "100.5", "99", "100.2"), candle(2, "100", "100.5", "98", "99")]
    const strategy = scripted({ 0: [{ type: "limit", tag: "bid", symbol: "BTCUSDT", side: "buy", baseQty: d("2"), limitPrice: d("99") }] })
    const out = run(setup(strategy, candles, {}))
    // Candle 1 only touches 99: half of 2 fills. Candle 2 goes through 99 to 98: the remaining 1 fills, at the limit price.
    expect(out.fills.map((f) => `${f.baseQty.toFixed()} @ ${f.price.toFixed()} ${f.liquidity} t+${(f.time - T0) / MIN}`)).toEqual([
      "1 @ 99 maker t+2",
      "1 @ 99 maker t+3"
    ])
    expect(out.fills[0]!.fee.toFixed()).toBe("0.001")
    expect(out.orders).toEqual({ placed: 1, refused: 0, rejected: 0, cancelled: 0 })
  })

  it("keeps a stop-limit pending until the path reaches its stop, then rests it and fills it as maker", () => {
    const candles = [candle(0, "100", "100", "100", "100"), candle(1, "100", "100", "94.5", "95"), candle(2, "95", "97", "95", "96.5")]
    const strategy = scripted({ 0: [{ type: "stop-limit", tag: "stop", symbol: "BTCUSDT", side: "sell", baseQty: d("1"), limitPrice: d("96"), stopPrice: d("95") }] })
    expect(recordOf(strategy, candles, { BTC: "1" })).toEqual([
      "candle 0 at 1",
      // Settled before candle 1: funds locked, the stop waits. Candle 1 falls through 95: the stop
      // triggers, and a sell limited at 96 finds no bid that high, so it rests.
      "update stop resting filled 0",
      "candle 1 at 2",
      "fill stop sell 1 @ 96 maker fee 0.096 USDT",
      "update stop fill filled 1",
      "candle 2 at 3"
    ])
  })

  it("answers a refused placement at once with the venue's code, and a settled order without funds with SPOT_INSUFFICIENT_FUNDS", () => {
    const strategy = scripted({
      0: [
        { type: "limit", tag: "tiny", symbol: "BTCUSDT", side: "buy", baseQty: d("0.001"), limitPrice: d("100") },
        { type: "limit", tag: "huge", symbol: "BTCUSDT", side: "buy", baseQty: d("1000"), limitPrice: d("100") },
        { type: "limit", tag: "elsewhere", symbol: "ETHUSDT", side: "buy", baseQty: d("1"), limitPrice: d("100") }
      ]
    })
    const heard = recordOf(strategy, flat(2))
    expect(heard).toEqual([
      "candle 0 at 1",
      "update tiny refused INVALID_PARAMETER filled 0",
      "update elsewhere refused UNKNOWN_SYMBOL filled 0",
      "update huge rejected SPOT_INSUFFICIENT_FUNDS filled 0",
      "candle 1 at 2"
    ])
    const out = run(setup(strategy, flat(2), {}))
    expect(out.orders).toEqual({ placed: 1, refused: 2, rejected: 1, cancelled: 0 })
  })

  it("frees a tag on cancel, so the same tag can be placed again in the same moment, and refuses a tag in use", () => {
    const bid = (price: string): Intent => ({ type: "limit", tag: "bid", symbol: "BTCUSDT", side: "buy", baseQty: d("1"), limitPrice: d(price) })
    const strategy = scripted({ 0: [bid("90")], 1: [bid("91")], 2: [{ type: "cancel", tag: "bid" }, bid("92")] })
    const heard = recordOf(strategy, flat(4))
    expect(heard).toEqual([
      "candle 0 at 1",
      "update bid resting filled 0",
      "candle 1 at 2",
      `update bid refused ${TAG_IN_USE} filled 0`,
      "candle 2 at 3",
      "update bid cancelled filled 0",
      "update bid resting filled 0",
      "candle 3 at 4"
    ])
  })

  it("stops a strategy that keeps answering its own refusals", () => {
    const retry = (tag: string): ReadonlyArray<Intent> => [{ type: "limit", tag, symbol: "BTCUSDT", side: "buy", baseQty: d("0.001"), limitPrice: d("1") }]
    const strategy = scripted({ 0: retry("again") }, retry)
    const outcome = runBacktest(setup(strategy, flat(2), {}))
    expect(Either.isLeft(outcome) && outcome.left.message).toMatch(/more than 10000 intents at one moment/)
  })

  it("reports a handler that throws with the strategy, handler and tape time", () => {
    const broken = defineStrategy({
      name: "broken",
      version: "1",
      params: Schema.Unknown,
      state: Schema.Any,
      init: () => 0,
      onCandle: (n: number) => {
        if (n === 2) throw new Error("boom")
        return result(n + 1)
      }
    })
    const outcome = runBacktest(setup(broken, flat(5), {}))
    expect(Either.isLeft(outcome)).toBe(true)
    const error = (outcome as Either.Left<StrategyFailed, BacktestResult>).left
    expect(error).toBeInstanceOf(StrategyFailed)
    expect(error.message).toBe(`strategy broken failed in onCandle at ${new Date(T0 + 3 * MIN).toISOString()}: boom`)
  })

  it("fires the schedule timer on the minutes its cron expression matches", () => {
    const timed = defineStrategy({
      name: "timed",
      version: "1",
      params: Schema.Unknown,
      state: Schema.Any,
      init: () => [] as Array<number>,
      onTimer: (fired: Array<number>, timer) => {
        fired.push(timer.scheduledAt)
        return result(fired)
      }
    })
    const start = Date.UTC(2024, 0, 1, 0, 0)
    const candles = Array.from({ length: 3 }, (_, i) => ({ ...candle(i, "100", "100", "100", "100"), openTimeMs: start + i * 3_600_000 }))
    const outcome = runBacktest({ ...setup(timed, candles, {}), intervalMs: 3_600_000, schedule: "30 * * * *" })
    expect(Either.isRight(outcome)).toBe(true)
    expect(firedOf(timed, candles)).toEqual([start + 30 * MIN, start + 90 * MIN, start + 150 * MIN])
  })
})

describe("sma-crossover on the venue's synthetic tape", () => {
  const candles = syntheticCandles(3000, { seed: 7, startPrice: d("60000"), tickSize: d("0.01"), stepSize: d("0.00001"), startMs: T0 })
  const btc: PairSpec = { ...pair, stepSize: d("0.00001"), minBaseQty: d("0.00001"), depthNotional: d("25000") }
  const params = Either.getOrThrow(decodeParams(smaCrossover, "test", { fastPeriod: 5, slowPeriod: 20, entry: "market", quoteQty: "1000" }))
  const make = () => ({ ...setup(smaCrossover, candles, params), pair: btc })

  it("trades, and the exact PnL equals the change of the wallets valued at the last close", () => {
    const out = run(make())
    expect(out.metrics.trades).toBeGreaterThan(10)
    const last = candles[candles.length - 1]!.close
    const btcHeld = out.balances.get("BTC")!
    const usdtHeld = out.balances.get("USDT")!
    const value = usdtHeld.free.plus(usdtHeld.locked).plus(btcHeld.free.plus(btcHeld.locked).mul(last))
    expect(out.metrics.pnl.toFixed()).toBe(value.minus(10000).toFixed())
    // Every entry and exit is a taker fill at the synthetic book, paying the taker fee.
    expect(out.fills.every((f) => f.liquidity === "taker")).toBe(true)
    expect(out.metrics.feesPaid.gt(0)).toBe(true)
  })

  it("is deterministic: the same tape and params give the same fills and metrics", () => {
    const a = run(make())
    const b = run(make())
    expect(b.fills).toEqual(a.fills)
    expect(b.metrics).toEqual(a.metrics)
  })
})

/** Runs a scripted strategy again and returns what it heard (its final state). */
function recordOf(
  strategy: StrategyDefinition<unknown, { heard: Array<string>; candles: number }>,
  candles: ReadonlyArray<VenueCandle>,
  balances?: Record<string, string>
): ReadonlyArray<string> {
  let last: { heard: Array<string> } | undefined
  const spy: StrategyDefinition<unknown, { heard: Array<string>; candles: number }> = {
    ...strategy,
    init: (p, v) => {
      const state = strategy.init(p, v)
      last = state
      return state
    }
  }
  run(setup(spy, candles, {}, balances))
  return last!.heard
}

function firedOf(strategy: StrategyDefinition<unknown, Array<number>>, candles: ReadonlyArray<VenueCandle>): ReadonlyArray<number> {
  let fired: Array<number> = []
  const spy: StrategyDefinition<unknown, Array<number>> = {
    ...strategy,
    init: (p, v) => (fired = strategy.init(p, v))
  }
  run({ ...setup(spy, candles, {}), intervalMs: 3_600_000, schedule: "30 * * * *" })
  return fired
}

describe("every shipped strategy runs through the backtester on the venue's tape", () => {
  const cases: ReadonlyArray<readonly [string, unknown, string | undefined, Record<string, string>]> = [
    ["sma-crossover", { fastPeriod: 5, slowPeriod: 20, entry: "limit", quoteQty: "1000", limitOffsetBps: 5 }, undefined, { USDT: "10000" }],
    ["grid", { lowerPrice: "58000", upperPrice: "62000", levels: 9, orderQty: "0.01" }, undefined, { USDT: "10000", BTC: "0.2" }],
    ["dca", { quoteQty: "25" }, "0 * * * *", { USDT: "10000" }],
    ["rebalance", { quoteAsset: "USDT", targets: { BTC: "0.5", USDT: "0.5" } }, "0 */4 * * *", { USDT: "10000" }],
    ["market-maker", { halfSpreadBps: 10, orderQty: "0.01", maxInventory: "0.1" }, undefined, { USDT: "10000", BTC: "0.2" }],
    ["protective-stop", { stopBps: 100 }, undefined, { USDT: "1000", BTC: "0.2" }]
  ]
  for (const [strategy, params, schedule, balances] of cases) {
    it(`${strategy}: fills, and final equity is exactly the wallets valued at the last close`, async () => {
      const job = await Effect.runPromise(
        prepare({ strategy, data: { kind: "synthetic", seed: 3, candles: 3000 }, symbol: "BTCUSDT", balances, settleDelayMs: 50, cwd: process.cwd(), ...(schedule === undefined ? {} : { schedule }) })
      )
      const out = Either.getOrThrow(runPrepared(job, params))
      expect(out.fills.length).toBeGreaterThan(0)
      const last = job.series.candles[job.series.candles.length - 1]!.close
      const held = (asset: string) => (out.balances.get(asset)?.free ?? d(0)).plus(out.balances.get(asset)?.locked ?? d(0))
      expect(out.metrics.finalEquity.toFixed()).toBe(held("USDT").plus(held("BTC").mul(last)).toFixed())
      expect(out.equity[out.equity.length - 1]!.toFixed()).toBe(out.metrics.finalEquity.toFixed())
      // The float marks the statistics use are the exact marks to within rounding.
      expect(out.equityMarks).toHaveLength(out.equity.length)
      out.equity.forEach((exact, i) => expect(Math.abs(out.equityMarks[i]! / toFloat(exact) - 1)).toBeLessThan(1e-12))
    })
  }

  it("refuses a strategy that reads a second pair, naming it", async () => {
    const job = await Effect.runPromise(prepare({ strategy: "rebalance", data: { kind: "synthetic", seed: 3, candles: 10 }, symbol: "BTCUSDT", balances: { USDT: "1" }, settleDelayMs: 50, cwd: process.cwd(), schedule: "0 * * * *" }))
    const outcome = runPrepared(job, { quoteAsset: "USDT", targets: { BTC: "0.4", ETH: "0.2", USDT: "0.4" } })
    expect(Either.isLeft(outcome) && outcome.left.message).toBe("a backtest runs one pair (BTCUSDT); rebalance also reads ETHUSDT with these params")
  })
})
