import { Either } from "effect"
import { describe, expect, it } from "vitest"
import type { Intent } from "../src/domain/Intent.js"
import { decodeParams, SCHEDULE_TIMER } from "../src/strategy/Strategy.js"
import { BTCUSDT, pair, update, viewOf } from "../src/strategy/testing.js"
import rebalance from "./rebalance.js"

type Params = typeof rebalance.params.Type

const paramsOf = (raw: Record<string, unknown>): Params => Either.getOrThrow(decodeParams(rebalance, "rebalance", raw))
const timer = (scheduledAt: number) => ({ name: SCHEDULE_TIMER, scheduledAt })
const ETHUSDT = pair("ETHUSDT", "ETH", "USDT", { stepSize: "0.0001", minBaseQty: "0.0001" })
const describeIntent = (intent: Intent): string =>
  intent.type === "market"
    ? intent.side === "buy"
      ? `buy ${intent.symbol} for ${intent.quoteOrderQty.toFixed()}`
      : `sell ${intent.baseQty.toFixed()} ${intent.symbol}`
    : intent.type

const params = paramsOf({ quoteAsset: "USDT", targets: { BTC: "0.5", ETH: "0.25", USDT: "0.25" }, thresholdBps: 200 })
const prices = { BTCUSDT: "20000", ETHUSDT: "1000" }

describe("rebalance", () => {
  it("declares the pairs whose prices it needs", () => {
    expect(rebalance.symbols!(params)).toEqual(["BTCUSDT", "ETHUSDT"])
  })

  it("sells the over-weight asset and buys the under-weight one from free quote", () => {
    // BTC 0.2 * 20000 = 4000, ETH 1 * 1000 = 1000, USDT 1000: total 6000; targets 3000 / 1500 / 1500
    const view = viewOf({ params, balances: { BTC: "0.2", ETH: "1", USDT: "1000" }, lastPrices: prices, pairs: [BTCUSDT, ETHUSDT] })
    const run = rebalance.onTimer!(rebalance.init(params, view), timer(1000), view)
    expect(run.intents.map(describeIntent)).toEqual(["sell 0.05 BTCUSDT", "buy ETHUSDT for 500"])
    expect(run.intents.every((i) => i.type === "market" && i.maxSlippageBps === 50)).toBe(true)
  })

  it("counts locked balances as held but never trades more than is free", () => {
    const view = viewOf({
      params,
      balances: { BTC: { free: "0.01", locked: "0.19" }, ETH: "1", USDT: { free: "100", locked: "900" } },
      lastPrices: prices,
      pairs: [BTCUSDT, ETHUSDT]
    })
    const run = rebalance.onTimer!(rebalance.init(params, view), timer(1000), view)
    expect(run.intents.map(describeIntent)).toEqual(["sell 0.01 BTCUSDT", "buy ETHUSDT for 100"])
  })

  it("leaves weights within the threshold alone", () => {
    // 3050 / 1480 / 1470 of 6000: every drift is under 2%
    const view = viewOf({ params, balances: { BTC: "0.1525", ETH: "1.48", USDT: "1470" }, lastPrices: prices, pairs: [BTCUSDT, ETHUSDT] })
    expect(rebalance.onTimer!(rebalance.init(params, view), timer(1000), view).intents).toEqual([])
  })

  it("skips a run without a price for every asset, and while the previous run's orders work", () => {
    const unpriced = viewOf({ params, balances: { BTC: "0.2", ETH: "1", USDT: "1000" }, lastPrices: { BTCUSDT: "20000" }, pairs: [BTCUSDT, ETHUSDT] })
    expect(rebalance.onTimer!(rebalance.init(params, unpriced), timer(1000), unpriced).intents).toEqual([])
    const view = viewOf({ params, balances: { BTC: "0.2", ETH: "1", USDT: "1000" }, lastPrices: prices, pairs: [BTCUSDT, ETHUSDT] })
    const first = rebalance.onTimer!(rebalance.init(params, view), timer(1000), view)
    expect(rebalance.onTimer!(first.state, timer(1000), view).intents).toEqual([])
    expect(rebalance.onTimer!(first.state, timer(2000), view).intents).toEqual([])
    let state = first.state
    for (const intent of first.intents) state = rebalance.onOrderUpdate!(state, update(intent.tag, "fill"), view).state
    const next = rebalance.onTimer!(state, timer(3000), view)
    expect(next.intents).toHaveLength(2)
    expect(next.intents.map((i) => i.tag)).not.toEqual(first.intents.map((i) => i.tag))
  })

  it("rejects weights that do not add up to 1, naming the field", () => {
    const decoded = decodeParams(rebalance, "folio", { quoteAsset: "USDT", targets: { BTC: "0.5", ETH: "0.3" } })
    expect(Either.isLeft(decoded) && decoded.left.problems).toEqual([
      'strategies[folio].params.targets: weights add up to 0.8, not 1 (expected target weights by asset, adding up to 1, e.g. { "BTC": "0.6", "USDT": "0.4" })'
    ])
  })
})
