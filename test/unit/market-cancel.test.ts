/**
 * A market order cannot be cancelled, in the strategy API and in a backtest: the
 * cancel helper takes only limit and stop-limit orders, and a cancel intent naming a
 * market order changes nothing in the backtest (the matching engine refuses it, as
 * svc-venue and the daemon's engine do): the order is matched whole at settlement.
 */
import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { runBacktest } from "../../src/backtest/Backtest.js"
import type { Intent } from "../../src/domain/Intent.js"
import { cancelOrder, isCancellable } from "../../src/strategy/orders.js"
import { defineStrategy, result } from "../../src/strategy/Strategy.js"
import { openOrderOf } from "../../src/strategy/testing.js"
import type { VenueCandle } from "../../src/venue/PricePath.js"
import { d, MIN, T0, testPair } from "../support/pair.js"


const marketBuy: Intent = { type: "market", tag: "entry", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("1000"), maxSlippageBps: 50 }
const bid: Intent = { type: "limit", tag: "bid", symbol: "BTCUSDT", side: "buy", baseQty: d("1"), limitPrice: d("90") }

describe("the cancel helper", () => {
  it("cancels limit and stop-limit orders and does not accept a market order", () => {
    const market = openOrderOf(marketBuy, "pending")
    const resting = openOrderOf(bid)
    expect(isCancellable(market)).toBe(false)
    expect(isCancellable(resting)).toBe(true)
    if (!isCancellable(resting)) throw new Error("a limit order is cancellable")
    expect(cancelOrder(resting)).toEqual({ type: "cancel", tag: "bid" })
    // @ts-expect-error a market order fills or is rejected whole: there is no cancel to build for it
    cancelOrder(market)
  })
})

describe("a backtest", () => {
  const pair = testPair
  const candles: Array<VenueCandle> = [0, 1, 2].map((i) => ({ openTimeMs: T0 + i * MIN, open: d("100"), high: d("100"), low: d("100"), close: d("100"), volume: d("1") }))

  it("refuses a cancel of a market order placed in the same moment: it fills whole, no update says cancelled", () => {
    // Places a market buy and a limit bid on the first candle, cancels both at once and again on the next candle.
    const heard: Array<string> = []
    const strategy = defineStrategy({
      name: "cancels-its-orders",
      version: "1",
      params: Schema.Unknown,
      state: Schema.Number,
      init: () => 0,
      onCandle: (seen) => {
        const cancels: Array<Intent> = [{ type: "cancel", tag: "entry" }, { type: "cancel", tag: "bid" }]
        return result(seen + 1, seen === 0 ? [marketBuy, bid, ...cancels] : seen === 1 ? cancels : [])
      },
      onFill: (seen, fill) => {
        heard.push(`fill ${fill.tag} ${fill.baseQty.toFixed()}`)
        return result(seen)
      },
      onOrderUpdate: (seen, update) => {
        heard.push(`update ${update.tag} ${update.kind}`)
        return result(seen)
      }
    })
    const outcome = runBacktest({
      strategy,
      params: {},
      pair,
      fees: { maker: d("0.001"), taker: d("0.002") },
      settleDelayMs: 50,
      balances: { USDT: d("10000") },
      candles,
      intervalMs: MIN
    })
    if (Either.isLeft(outcome)) throw outcome.left
    const out = outcome.right
    expect(out.orders).toEqual({ placed: 2, refused: 0, rejected: 0, cancelled: 1 })
    // 1000 / 100.01 (the first ask), stepped down: the whole quote amount was matched.
    expect(out.fills.map((f) => [f.tag, f.baseQty.toFixed()])).toEqual([["entry", "9.999"]])
    expect(heard).toEqual(["update bid cancelled", "fill entry 9.999", "update entry fill"])
  })
})
