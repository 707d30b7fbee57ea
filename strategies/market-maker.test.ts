import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Decimal } from "../src/domain/Decimal.js"
import type { Intent } from "../src/domain/Intent.js"
import { decodeParams, type StrategyView } from "../src/strategy/Strategy.js"
import { fill, openOrderOf, update, viewOf } from "../src/strategy/testing.js"
import marketMaker from "./market-maker.js"

type Params = typeof marketMaker.params.Type
type State = ReturnType<typeof marketMaker.init>

const paramsOf = (raw: Record<string, unknown>): Params => Either.getOrThrow(decodeParams(marketMaker, "mm", raw))
const params = paramsOf({ halfSpreadBps: 10, orderQty: "0.01", maxInventory: "0.02", skewBps: 20 })
const ticker = (price: string) => ({ symbol: "BTCUSDT", price: new Decimal(price), time: 0 })
const quotes = (intents: ReadonlyArray<Intent>) =>
  intents.map((i) => (i.type === "limit" ? `${i.side} ${i.baseQty.toFixed()} @ ${i.limitPrice.toFixed()}` : `${i.type} ${i.tag}`))

const funded = (extra: Partial<Parameters<typeof viewOf<Params>>[0]> = {}): StrategyView<Params> =>
  viewOf({ params, balances: { USDT: "1000", BTC: "0.05" }, lastPrices: { BTCUSDT: "10000" }, ...extra })

const quoted = () => {
  const view = funded()
  return marketMaker.onTicker!(marketMaker.init(params, view), ticker("10000"), view)
}

describe("market-maker", () => {
  it("quotes a bid and an ask halfSpreadBps around the price, on the tick", () => {
    expect(quotes(quoted().intents)).toEqual(["buy 0.01 @ 9990", "sell 0.01 @ 10010"])
  })

  it("sends nothing while the price stays within requoteBps of its quotes", () => {
    let { state } = quoted()
    for (const price of ["10000", "10004", "9996"]) {
      const next = marketMaker.onTicker!(state, ticker(price), funded())
      expect(next.intents).toEqual([])
      state = next.state
    }
  })

  it("cancels stale quotes once, and replaces each only after its cancel is final", () => {
    const first = quoted()
    const [bid, ask] = first.intents as [Intent, Intent]
    const resting = funded({ openOrders: [openOrderOf(bid), openOrderOf(ask)], lastPrices: { BTCUSDT: "10100" } })
    const moved = marketMaker.onTicker!(first.state, ticker("10100"), resting)
    expect(moved.intents).toEqual([
      { type: "cancel", tag: bid.tag },
      { type: "cancel", tag: ask.tag }
    ])
    expect(marketMaker.onTicker!(moved.state, ticker("10110"), resting).intents).toEqual([])
    const bidGone = marketMaker.onOrderUpdate!(moved.state, update(bid.tag, "cancelled"), funded({ lastPrices: { BTCUSDT: "10100" } }))
    expect(quotes(bidGone.intents)).toEqual(["buy 0.01 @ 10089.9"])
    const askGone = marketMaker.onOrderUpdate!(bidGone.state, update(ask.tag, "cancelled"), funded({ lastPrices: { BTCUSDT: "10100" } }))
    expect(quotes(askGone.intents)).toEqual(["sell 0.01 @ 10110.1"])
  })

  it("skews both quotes down as inventory builds, and stops bidding at maxInventory", () => {
    const first = quoted()
    const bid = first.intents[0]!
    let state: State = marketMaker.onFill!(first.state, fill(bid.tag, "buy", "9990", "0.01"), funded()).state
    expect(state.inventory.toFixed()).toBe("0.01")
    const halfFull = marketMaker.onOrderUpdate!(state, update(bid.tag, "fill", "0.01"), funded({ lastPrices: { BTCUSDT: "10000" } }))
    // half full: the mid moves down 10 bps to 9990, and the resting ask (10010) is further than requoteBps from 9999.99
    expect(quotes(halfFull.intents)).toEqual(["buy 0.01 @ 9980.01", `cancel ${first.intents[1]!.tag}`])
    state = halfFull.state
    const second = state.bid!.tag
    state = marketMaker.onFill!(state, fill(second, "buy", "9980.01", "0.01"), funded()).state
    const full = marketMaker.onOrderUpdate!(state, update(second, "fill", "0.01"), funded({ lastPrices: { BTCUSDT: "10000" } }))
    expect(full.state.bid).toBeNull()
    expect(full.intents).toEqual([])
    const askGone = marketMaker.onOrderUpdate!(full.state, update(first.intents[1]!.tag, "cancelled"), funded({ lastPrices: { BTCUSDT: "10000" } }))
    // full: the mid moves down 20 bps to 9980; only the ask is quoted
    expect(quotes(askGone.intents)).toEqual(["sell 0.01 @ 9989.98"])
  })

  it("quotes only the side its free balance covers", () => {
    const view = viewOf({ params, balances: { USDT: "50" } })
    expect(marketMaker.onTicker!(marketMaker.init(params, view), ticker("10000"), view).intents).toEqual([])
    const quoteOnly = viewOf({ params, balances: { USDT: "1000" } })
    expect(quotes(marketMaker.onTicker!(marketMaker.init(params, quoteOnly), ticker("10000"), quoteOnly).intents)).toEqual(["buy 0.01 @ 9990"])
  })
})
