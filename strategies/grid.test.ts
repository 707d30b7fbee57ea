import { Either } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal, isMultipleOf } from "../src/domain/Decimal.js"
import type { Intent, LimitIntent } from "../src/domain/Intent.js"
import { decodeParams, type StrategyView } from "../src/strategy/Strategy.js"
import { BTCUSDT, openOrderOf, update, viewOf } from "../src/strategy/testing.js"
import grid from "./grid.js"

type Params = typeof grid.params.Type
type State = ReturnType<typeof grid.init>

const paramsOf = (raw: Record<string, unknown>): Params => Either.getOrThrow(decodeParams(grid, "grid", raw))
const params = paramsOf({ lowerPrice: "9000", upperPrice: "11000", levels: 5, orderQty: "0.01" })

const ticker = (price: string, symbol = "BTCUSDT") => ({ symbol, price: new Decimal(price), time: 0 })
const limits = (intents: ReadonlyArray<Intent>): Array<LimitIntent> => intents.filter((i): i is LimitIntent => i.type === "limit")
const summary = (intents: ReadonlyArray<Intent>) => limits(intents).map((i) => `${i.side} ${i.baseQty.toFixed()} @ ${i.limitPrice.toFixed()}`)

const start = (view: StrategyView<Params>) => grid.onTicker!(grid.init(params, view), ticker("10100"), view)

describe("grid", () => {
  it("lays the ladder out around the first price, leaving the nearest line empty, as far as funds go", () => {
    const view = viewOf({ params, balances: { USDT: "1000", BTC: "0.015" } })
    const first = start(view)
    expect(summary(first.intents)).toEqual(["buy 0.01 @ 9500", "buy 0.01 @ 9000", "sell 0.01 @ 10500"])
  })

  it("without lowerPrice and upperPrice, lays the ladder out rangeBps either side of the first price", () => {
    const around = paramsOf({ rangeBps: 1000, levels: 5, orderQty: "0.01" })
    const view = viewOf({ params: around, balances: { USDT: "1000", BTC: "0.015" } })
    const first = grid.onTicker!(grid.init(around, view), ticker("10000"), view)
    expect(summary(first.intents)).toEqual(["buy 0.01 @ 9500", "buy 0.01 @ 9000", "sell 0.01 @ 10500"])
    // The ladder stays where it was laid out when the price moves on.
    const later = viewOf({ params: around, balances: { USDT: "815", BTC: "0.005" }, openOrders: first.intents.map((i) => openOrderOf(i)) })
    expect(grid.onTicker!(first.state, ticker("10400"), later).intents).toEqual([])
  })

  it("refuses one bound without the other", () => {
    const decoded = decodeParams(grid, "btc-grid", { lowerPrice: "9000" })
    expect(Either.isLeft(decoded) && decoded.left.problems).toEqual([
      "strategies[btc-grid].params.upperPrice: is missing: give both bounds, or neither for a ladder around the first price (expected the highest grid line, a price above lowerPrice; give it with lowerPrice)"
    ])
  })

  it("lays the ladder out once the wallet is funded, if it was empty at the first price", () => {
    const empty = viewOf({ params, balances: {} })
    const first = grid.onTicker!(grid.init(params, empty), ticker("10100"), empty)
    expect(first.intents).toEqual([])
    const funded = viewOf({ params, balances: { USDT: "100" } })
    expect(summary(grid.onTicker!(first.state, ticker("10100"), funded).intents)).toEqual(["buy 0.01 @ 9500"])
  })

  it("sends nothing more on repeated prices while its orders rest", () => {
    const view = viewOf({ params, balances: { USDT: "1000", BTC: "0.015" } })
    const first = start(view)
    const resting = viewOf({ params, balances: { USDT: "815", BTC: "0.005" }, openOrders: first.intents.map((i) => openOrderOf(i)) })
    let state = first.state
    for (const price of ["10100", "9800", "10400"]) {
      const next = grid.onTicker!(state, ticker(price), resting)
      expect(next.intents).toEqual([])
      state = next.state
    }
  })

  it("replaces a filled bid by an offer one line up, and a filled offer by a bid one line down", () => {
    const view = viewOf({ params, balances: { USDT: "1000", BTC: "0.015" } })
    const first = start(view)
    const bid = limits(first.intents).find((i) => i.limitPrice.eq(9500))!
    const afterBuy = viewOf({ params, balances: { USDT: "815", BTC: "0.015" } })
    const filled = grid.onOrderUpdate!(first.state, update(bid.tag, "fill", "0.01"), afterBuy)
    expect(summary(filled.intents)).toEqual(["sell 0.01 @ 10000"])
    const offer = limits(filled.intents)[0]!
    const afterSell = viewOf({ params, balances: { USDT: "915", BTC: "0.005" } })
    const sold = grid.onOrderUpdate!(filled.state, update(offer.tag, "fill", "0.01"), afterSell)
    expect(summary(sold.intents)).toEqual(["buy 0.01 @ 9500"])
    expect(sold.intents[0]!.tag).not.toBe(bid.tag)
  })

  it("places an order that ended unfilled again only after retryAfterMs", () => {
    const view = viewOf({ params, balances: { USDT: "1000", BTC: "0.015" }, now: 1_000_000 })
    const first = start(view)
    const bid = limits(first.intents)[0]!
    const rejected = grid.onOrderUpdate!(first.state, update(bid.tag, "rejected", "0", "SPOT_INSUFFICIENT_FUNDS"), view)
    expect(rejected.intents).toEqual([])
    const soon = grid.onTicker!(rejected.state, ticker("10100"), viewOf({ params, balances: { USDT: "1000" }, now: 1_029_999 }))
    expect(soon.intents).toEqual([])
    const later = grid.onTicker!(soon.state, ticker("10100"), viewOf({ params, balances: { USDT: "1000" }, now: 1_030_000 }))
    expect(summary(later.intents)).toEqual([`buy 0.01 @ ${bid.limitPrice.toFixed()}`])
    expect(later.intents[0]!.tag).not.toBe(bid.tag)
  })

  it("cancels the old ladder once when its params change, and lays out the new one after the cancels are final", () => {
    const view = viewOf({ params, balances: { USDT: "1000", BTC: "0.015" } })
    const first = start(view)
    const wider = paramsOf({ lowerPrice: "8000", upperPrice: "12000", levels: 5, orderQty: "0.01" })
    const wideView = viewOf({ params: wider, balances: { USDT: "815", BTC: "0.005" } })
    const cancelling = grid.onTicker!(first.state, ticker("10100"), wideView)
    const byTag = (a: { readonly tag: string }, b: { readonly tag: string }) => a.tag.localeCompare(b.tag)
    expect([...cancelling.intents].sort(byTag)).toEqual(first.intents.map((i) => ({ type: "cancel", tag: i.tag })).sort(byTag))
    const again = grid.onTicker!(cancelling.state, ticker("10100"), wideView)
    expect(again.intents).toEqual([])
    let state: State = again.state
    for (const intent of first.intents) state = grid.onOrderUpdate!(state, update(intent.tag, "cancelled"), wideView).state
    const laidOut = grid.onTicker!(state, ticker("10100"), viewOf({ params: wider, balances: { USDT: "1000", BTC: "0.015" } }))
    expect(summary(laidOut.intents)).toEqual(["buy 0.01 @ 9000", "buy 0.01 @ 8000", "sell 0.01 @ 11000"])
  })

  it("refuses a ladder finer than the tick size, saying how to fix it", () => {
    const fine = paramsOf({ lowerPrice: "10000", upperPrice: "10000.05", levels: 10, orderQty: "0.01" })
    const view = viewOf({ params: fine, balances: { USDT: "1000" } })
    expect(() => grid.onTicker!(grid.init(fine, view), ticker("10000"), view)).toThrow(/finer than the tick size 0.01 of BTCUSDT: use fewer levels/)
  })

  it("lists every params problem by field", () => {
    const decoded = decodeParams(grid, "btc-grid", { lowerPrice: "abc", upperPrice: -5, levels: 1.5, qty: 1 })
    expect(Either.isLeft(decoded) && decoded.left.problems).toEqual([
      "strategies[btc-grid].params.qty: is not a parameter of grid (remove it; grid takes lowerPrice, upperPrice, rangeBps, levels, orderQty, retryAfterMs)",
      'strategies[btc-grid].params.lowerPrice: "abc" is not a decimal number such as 12.345 (expected the lowest grid line, a price such as "25000"; give it with upperPrice)',
      "strategies[btc-grid].params.upperPrice: -5 must be greater than 0 (expected the highest grid line, a price above lowerPrice; give it with lowerPrice)",
      'strategies[btc-grid].params.levels: "1.5" is not a whole number (expected the number of grid lines, 3 to 200)'
    ])
  })

  it("never commits more than the free balance, with every price on the tick and every quantity on the step", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1000, max: 50_000 }),
        fc.integer({ min: 100, max: 20_000 }),
        fc.integer({ min: 3, max: 60 }),
        fc.integer({ min: 0, max: 100_000 }),
        fc.integer({ min: 1, max: 100_000 }),
        fc.integer({ min: 0, max: 5_000 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        (lower, width, levels, priceOffset, qtySteps, quote, baseSteps) => {
          const p = paramsOf({ lowerPrice: String(lower), upperPrice: String(lower + width), levels, orderQty: new Decimal(qtySteps).mul("0.00001").toFixed() })
          const freeQuote = new Decimal(quote)
          const freeBase = new Decimal(baseSteps).mul("0.00001")
          const view = viewOf({ params: p, balances: { USDT: freeQuote, BTC: freeBase } })
          const price = new Decimal(lower - 500 + (priceOffset % (width + 1000)))
          const placed = limits(grid.onTicker!(grid.init(p, view), { symbol: "BTCUSDT", price, time: 0 }, view).intents)
          const spent = placed.filter((i) => i.side === "buy").reduce((sum, i) => sum.add(i.baseQty.mul(i.limitPrice)), new Decimal(0))
          const offered = placed.filter((i) => i.side === "sell").reduce((sum, i) => sum.add(i.baseQty), new Decimal(0))
          expect(spent.lte(freeQuote)).toBe(true)
          expect(offered.lte(freeBase)).toBe(true)
          for (const intent of placed) {
            expect(isMultipleOf(intent.limitPrice, BTCUSDT.tickSize)).toBe(true)
            expect(isMultipleOf(intent.baseQty, BTCUSDT.stepSize)).toBe(true)
            expect(intent.baseQty.mul(intent.limitPrice).gte(BTCUSDT.minNotional)).toBe(true)
          }
          expect(new Set(placed.map((i) => i.tag)).size).toBe(placed.length)
        }
      ),
      { numRuns: 200 }
    )
  })
})
