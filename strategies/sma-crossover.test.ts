import { Either } from "effect"
import { describe, expect, it } from "vitest"
import type { Intent } from "../src/domain/Intent.js"
import { decodeParams, deserializeState, serializeState, type HandlerResult, type StrategyView } from "../src/strategy/Strategy.js"
import { smaValue } from "../src/strategy/indicators.js"
import { candle, fill, openOrderOf, update, viewOf } from "../src/strategy/testing.js"
import smaCrossover from "./sma-crossover.js"

type Params = typeof smaCrossover.params.Type
type State = ReturnType<typeof smaCrossover.init>

const paramsOf = (raw: Record<string, unknown>): Params => Either.getOrThrow(decodeParams(smaCrossover, "sma", raw))
const marketParams = paramsOf({ fastPeriod: 2, slowPeriod: 3, entry: "market", quoteQty: "100" })

const feed = (state: State, closes: ReadonlyArray<string>, view: StrategyView<Params>): { state: State; intents: Array<Intent> } => {
  const intents: Array<Intent> = []
  for (const close of closes) {
    const step: HandlerResult<State> = smaCrossover.onCandle!(state, candle(close), view)
    state = step.state
    intents.push(...step.intents)
  }
  return { state, intents }
}

describe("sma-crossover", () => {
  it("places nothing while warming up or on the first reading, then buys on a golden cross", () => {
    const view = viewOf({ params: marketParams, balances: { USDT: "1000" } })
    const warm = feed(smaCrossover.init(marketParams, view), ["10", "9", "8"], view)
    expect(warm.intents).toEqual([])
    expect(warm.state.trend).toBe(-1)
    const cross = feed(warm.state, ["12"], view)
    expect(cross.intents).toHaveLength(1)
    const buy = cross.intents[0]!
    expect(buy).toMatchObject({ type: "market", side: "buy", symbol: "BTCUSDT", maxSlippageBps: 50 })
    expect(buy.type === "market" && buy.side === "buy" && buy.quoteOrderQty.toFixed()).toBe("100")
  })

  it("does not buy again on later candles of the same trend (no order spam)", () => {
    const view = viewOf({ params: marketParams, balances: { USDT: "1000" } })
    const run = feed(smaCrossover.init(marketParams, view), ["10", "9", "8", "12", "13", "14", "15"], view)
    expect(run.intents).toHaveLength(1)
  })

  it("never spends more quote than is free", () => {
    const view = viewOf({ params: marketParams, balances: { USDT: "40" } })
    const run = feed(smaCrossover.init(marketParams, view), ["10", "9", "8", "12"], view)
    const buy = run.intents[0]
    expect(buy?.type === "market" && buy.side === "buy" && buy.quoteOrderQty.toFixed()).toBe("40")
    const poor = viewOf({ params: marketParams, balances: { USDT: "4" } })
    expect(feed(smaCrossover.init(marketParams, poor), ["10", "9", "8", "12"], poor).intents).toEqual([])
  })

  it("sells the position net of base fees on a death cross", () => {
    const view = viewOf({ params: marketParams, balances: { USDT: "1000", BTC: "0.00995" } })
    let { state, intents } = feed(smaCrossover.init(marketParams, view), ["10000", "9000", "8000", "12000"], view)
    const entryTag = intents[0]!.tag
    state = smaCrossover.onFill!(state, fill(entryTag, "buy", "10000", "0.01", { amount: "0.00005", asset: "BTC" }), view).state
    state = smaCrossover.onOrderUpdate!(state, update(entryTag, "fill", "0.01"), view).state
    expect(state.position.toFixed()).toBe("0.00995")
    const down = feed(state, ["13000", "5000"], view)
    expect(down.intents).toHaveLength(1)
    expect(down.intents[0]).toMatchObject({ type: "market", side: "sell" })
    expect(down.intents[0]!.type === "market" && down.intents[0]!.side === "sell" && down.intents[0]!.baseQty.toFixed()).toBe("0.00995")
  })

  it("limit entries bid below the close on the tick, and a death cross cancels a resting entry before selling", () => {
    const params = paramsOf({ fastPeriod: 2, slowPeriod: 3, entry: "limit", quoteQty: "100", limitOffsetBps: 10 })
    const view = viewOf({ params, balances: { USDT: "1000" } })
    let { state, intents } = feed(smaCrossover.init(params, view), ["10000", "9000", "8000", "12000"], view)
    const entry = intents[0]!
    expect(entry).toMatchObject({ type: "limit", side: "buy" })
    if (entry.type !== "limit") throw new Error("expected a limit entry")
    expect(entry.limitPrice.toFixed()).toBe("11988")
    expect(entry.baseQty.toFixed()).toBe("0.00834")
    const resting = viewOf({ params, balances: { USDT: "900", BTC: "0" }, openOrders: [openOrderOf(entry)], lastPrices: { BTCUSDT: "5000" } })
    state = smaCrossover.onFill!(state, fill(entry.tag, "buy", "11988", "0.004"), resting).state
    const down = feed(state, ["13000", "5000"], resting)
    expect(down.intents).toEqual([{ type: "cancel", tag: entry.tag }])
    // repeated candles while the cancel is in flight send nothing more
    const waiting = feed(down.state, ["4000", "3000"], resting)
    expect(waiting.intents).toEqual([])
    const afterCancel = viewOf({ params, balances: { USDT: "952", BTC: "0.004" }, lastPrices: { BTCUSDT: "3000" } })
    const sold = smaCrossover.onOrderUpdate!(waiting.state, update(entry.tag, "cancelled", "0.004"), afterCancel)
    expect(sold.intents).toHaveLength(1)
    expect(sold.intents[0]).toMatchObject({ type: "market", side: "sell" })
  })

  it("never cancels a pending market entry: a death cross waits for it, and sells what it filled", () => {
    const view = viewOf({ params: marketParams, balances: { USDT: "1000" } })
    const pending = (entry: Intent) =>
      viewOf({ params: marketParams, balances: { USDT: "900" }, openOrders: [openOrderOf(entry, "pending")], lastPrices: { BTCUSDT: "5000" } })
    /** A market entry, then a death cross while it is still pending (handlers update state in place: a fresh run each time). */
    const reversedWhilePending = () => {
      const { state, intents } = feed(smaCrossover.init(marketParams, view), ["10000", "9000", "8000", "12000"], view)
      const entry = intents[0]!
      expect(entry).toMatchObject({ type: "market", side: "buy" })
      const down = feed(state, ["13000", "5000", "4000"], pending(entry))
      expect(down.intents).toEqual([])
      expect(down.state).toMatchObject({ trend: -1, entryTag: entry.tag, exitTag: null })
      return { state: down.state, entry }
    }

    const waiting = reversedWhilePending()
    // a view that no longer lists the entry (its final update is on its way) sends no cancel either
    const lagging = viewOf({ params: marketParams, balances: { USDT: "900" }, lastPrices: { BTCUSDT: "4000" } })
    expect(feed(waiting.state, ["3000"], lagging).intents).toEqual([])
    const filled = viewOf({ params: marketParams, balances: { USDT: "900", BTC: "0.01" }, lastPrices: { BTCUSDT: "3000" } })
    const bought = smaCrossover.onFill!(waiting.state, fill(waiting.entry.tag, "buy", "10000", "0.01"), filled).state
    const sold = smaCrossover.onOrderUpdate!(bought, update(waiting.entry.tag, "fill", "0.01"), filled)
    expect(sold.intents).toHaveLength(1)
    const exit = sold.intents[0]!
    expect(exit.type === "market" && exit.side === "sell" && exit.baseQty.toFixed()).toBe("0.01")

    // a market entry rejected meanwhile bought nothing: nothing is sold, now or on later candles
    const rejectedRun = reversedWhilePending()
    const rejected = smaCrossover.onOrderUpdate!(rejectedRun.state, update(rejectedRun.entry.tag, "rejected", "0", "SPOT_SLIPPAGE_EXCEEDED"), lagging)
    expect(rejected.intents).toEqual([])
    expect(rejected.state).toMatchObject({ entryTag: null, exitTag: null })
    expect(feed(rejected.state, ["2000", "1000"], lagging).intents).toEqual([])
  })

  it("warm-up candles feed the averages only: a crossing in the history records no entry, the next live one trades", () => {
    const view = viewOf({ params: marketParams, balances: { USDT: "1000" } })
    let state = smaCrossover.init(marketParams, view)
    for (const close of ["10", "9", "8", "12", "13"]) {
      const step = smaCrossover.onCandle!(state, { ...candle(close), warmup: true }, view)
      expect(step.intents).toEqual([])
      state = step.state
    }
    expect(state.trend).toBe(1)
    expect(smaValue(state.fast)).toBe(12.5)
    expect(smaValue(state.slow)).toBe(11)
    expect(state).toMatchObject({ entryTag: null, exitTag: null, exitDue: false, seq: 0 })
    expect(state.position.isZero()).toBe(true)
    const live = feed(state, ["5", "4", "20"], view)
    expect(live.intents).toHaveLength(1)
    expect(live.intents[0]).toMatchObject({ type: "market", side: "buy" })
  })

  it("retries a rejected exit on the next candle, once", () => {
    const view = viewOf({ params: marketParams, balances: { USDT: "1000", BTC: "0.01" } })
    let { state, intents } = feed(smaCrossover.init(marketParams, view), ["10000", "9000", "8000", "12000"], view)
    state = smaCrossover.onFill!(state, fill(intents[0]!.tag, "buy", "10000", "0.01"), view).state
    state = smaCrossover.onOrderUpdate!(state, update(intents[0]!.tag, "fill", "0.01"), view).state
    ;({ state, intents } = feed(state, ["13000", "1000"], view))
    const exitTag = intents[0]!.tag
    const rejected = smaCrossover.onOrderUpdate!(state, update(exitTag, "rejected", "0", "SPOT_SLIPPAGE_EXCEEDED"), view)
    expect(rejected.intents).toEqual([])
    const retry = feed(rejected.state, ["1000"], view)
    expect(retry.intents).toHaveLength(1)
    expect(retry.intents[0]!.tag).not.toBe(exitTag)
    expect(feed(retry.state, ["1000", "1000"], view).intents).toEqual([])
  })

  it("places nothing on a halted pair", () => {
    const view = viewOf({
      params: marketParams,
      balances: { USDT: "1000" },
      pairs: [{ ...viewOf({ params: marketParams }).pairs.get("BTCUSDT")!, status: "halted" }]
    })
    expect(feed(smaCrossover.init(marketParams, view), ["10", "9", "8", "12"], view).intents).toEqual([])
  })

  it("state survives a restart through its schema, mid-window", () => {
    const view = viewOf({ params: marketParams, balances: { USDT: "1000" } })
    const before = feed(smaCrossover.init(marketParams, view), ["10", "9", "8"], view).state
    // a dust position below minBaseQty, kept digit for digit
    before.position = before.position.add("0.000000000123456789")
    const restored = Either.getOrThrow(deserializeState(smaCrossover, serializeState(smaCrossover, before)))
    expect(restored.position.toFixed()).toBe("0.000000000123456789")
    expect(feed(restored, ["12"], view).intents).toHaveLength(1)
  })

  it("rejects a slow period not above the fast one, naming the field", () => {
    const decoded = decodeParams(smaCrossover, "btc-sma", { fastPeriod: 5, slowPeriod: 5, entry: "market", quoteQty: "10" })
    expect(Either.isLeft(decoded) && decoded.left.problems).toEqual([
      "strategies[btc-sma].params.slowPeriod: 5 must be more than fastPeriod (5) (expected the number of candles in the slow average, 2 to 10000, more than fastPeriod)"
    ])
  })
})
