import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Decimal } from "../src/domain/Decimal.js"
import type { Intent } from "../src/domain/Intent.js"
import { decodeParams, type HandlerResult, type StrategyView } from "../src/strategy/Strategy.js"
import { openOrderOf, update, viewOf } from "../src/strategy/testing.js"
import protectiveStop from "./protective-stop.js"

type Params = typeof protectiveStop.params.Type
type State = ReturnType<typeof protectiveStop.init>

const paramsOf = (raw: Record<string, unknown>): Params => Either.getOrThrow(decodeParams(protectiveStop, "stop", raw))
const params = paramsOf({ stopBps: 200 })
const ticker = (price: string) => ({ symbol: "BTCUSDT", price: new Decimal(price), time: 0 })
const stops = (intents: ReadonlyArray<Intent>) =>
  intents.map((i) =>
    i.type === "stop-limit" ? `${i.side} ${i.baseQty.toFixed()} stop ${i.stopPrice.toFixed()} limit ${i.limitPrice.toFixed()}` : `${i.type} ${i.tag}`
  )

const holding = (btc: string, extra: { readonly openOrders?: ReadonlyArray<Intent>; readonly last?: string; readonly now?: number } = {}): StrategyView<Params> =>
  viewOf({
    params,
    balances: { BTC: btc, USDT: "0" },
    openOrders: (extra.openOrders ?? []).map((i) => openOrderOf(i, "pending")),
    lastPrices: { BTCUSDT: extra.last ?? "10000" },
    now: extra.now ?? 1_000_000
  })

const placed = (): HandlerResult<State> => {
  const view = holding("0.05")
  return protectiveStop.onTicker!(protectiveStop.init(params, view), ticker("10000"), view)
}

describe("protective-stop", () => {
  it("places a stop-limit sell for the free base stopBps under the price, its limit limitOffsetBps under the stop", () => {
    expect(stops(placed().intents)).toEqual(["sell 0.05 stop 9800 limit 9751"])
  })

  it("places nothing without a position", () => {
    const view = holding("0")
    expect(protectiveStop.onTicker!(protectiveStop.init(params, view), ticker("10000"), view).intents).toEqual([])
  })

  it("holds the stop through small rises and any fall, and trails it up once the rise reaches trailStepBps", () => {
    const first = placed()
    const resting = holding("0", { openOrders: first.intents })
    let state = first.state
    for (const price of ["10020", "9000", "10024"]) {
      const next = protectiveStop.onTicker!(state, ticker(price), resting)
      expect(next.intents).toEqual([])
      state = next.state
    }
    const risen = protectiveStop.onTicker!(state, ticker("10100"), resting)
    expect(stops(risen.intents)).toEqual([`cancel ${first.intents[0]!.tag}`])
    expect(protectiveStop.onTicker!(risen.state, ticker("10200"), resting).intents).toEqual([])
    const moved = protectiveStop.onOrderUpdate!(risen.state, update(first.intents[0]!.tag, "cancelled"), holding("0.05", { last: "10150" }))
    // the high water mark is 10200: stop 9996, limit 9946.02
    expect(stops(moved.intents)).toEqual(["sell 0.05 stop 9996 limit 9946.02"])
  })

  it("moves the stop to cover base that arrived, up to maxBaseQty", () => {
    const capped = paramsOf({ stopBps: 200, maxBaseQty: "0.08" })
    const view = viewOf({ params: capped, balances: { BTC: "0.05" }, lastPrices: { BTCUSDT: "10000" } })
    const first = protectiveStop.onTicker!(protectiveStop.init(capped, view), ticker("10000"), view)
    const more = viewOf({ params: capped, balances: { BTC: "0.1" }, lastPrices: { BTCUSDT: "10000" } })
    const topUp = protectiveStop.onTicker!(first.state, ticker("10000"), more)
    expect(stops(topUp.intents)).toEqual([`cancel ${first.intents[0]!.tag}`])
    const all = viewOf({ params: capped, balances: { BTC: "0.15" }, lastPrices: { BTCUSDT: "10000" } })
    const replaced = protectiveStop.onOrderUpdate!(topUp.state, update(first.intents[0]!.tag, "cancelled"), all)
    expect(stops(replaced.intents)).toEqual(["sell 0.08 stop 9800 limit 9751"])
    const full = viewOf({ params: capped, balances: { BTC: "0.07" }, lastPrices: { BTCUSDT: "10000" } })
    expect(protectiveStop.onTicker!(replaced.state, ticker("10000"), full).intents).toEqual([])
  })

  it("starts a new trail from the next position's price after the stop fills", () => {
    const first = placed()
    const high = protectiveStop.onTicker!(first.state, ticker("10010"), holding("0"))
    const filled = protectiveStop.onOrderUpdate!(high.state, update(first.intents[0]!.tag, "fill", "0.05"), holding("0"))
    expect(filled.intents).toEqual([])
    const next = protectiveStop.onTicker!(filled.state, ticker("5000"), holding("0.02"))
    expect(stops(next.intents)).toEqual(["sell 0.02 stop 4900 limit 4875.5"])
  })

  it("waits retryAfterMs before placing again a stop that was rejected", () => {
    const first = placed()
    const rejected = protectiveStop.onOrderUpdate!(first.state, update(first.intents[0]!.tag, "rejected", "0", "SPOT_INSUFFICIENT_FUNDS"), holding("0.05"))
    expect(rejected.intents).toEqual([])
    expect(protectiveStop.onTicker!(rejected.state, ticker("10000"), holding("0.05", { now: 1_029_999 })).intents).toEqual([])
    expect(stops(protectiveStop.onTicker!(rejected.state, ticker("10000"), holding("0.05", { now: 1_030_000 })).intents)).toEqual([
      "sell 0.05 stop 9800 limit 9751"
    ])
  })
})
