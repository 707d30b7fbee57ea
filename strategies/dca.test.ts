import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Decimal } from "../src/domain/Decimal.js"
import type { Intent } from "../src/domain/Intent.js"
import { decodeParams, SCHEDULE_TIMER, type StrategyView } from "../src/strategy/Strategy.js"
import { BTCUSDT, fill, update, viewOf } from "../src/strategy/testing.js"
import dca from "./dca.js"

type Params = typeof dca.params.Type
type State = ReturnType<typeof dca.init>

const paramsOf = (raw: Record<string, unknown>): Params => Either.getOrThrow(decodeParams(dca, "dca", raw))
const timer = (scheduledAt: number) => ({ name: SCHEDULE_TIMER, scheduledAt })
const quoteOf = (intent: Intent | undefined): string | undefined =>
  intent?.type === "market" && intent.side === "buy" ? intent.quoteOrderQty.toFixed() : undefined

/** Runs one scheduled buy to completion: timer, fill, final update. */
const buyOnce = (state: State, at: number, view: StrategyView<Params>) => {
  const run = dca.onTimer!(state, timer(at), view)
  const intent = run.intents[0]
  if (intent === undefined) return { state: run.state, quote: undefined }
  const quote = quoteOf(intent)!
  const baseQty = new Decimal(quote).div(10000).toFixed()
  let next = dca.onFill!(run.state, fill(intent.tag, "buy", "10000", baseQty), view).state
  next = dca.onOrderUpdate!(next, update(intent.tag, "fill", baseQty), view).state
  return { state: next, quote }
}

describe("dca", () => {
  const params = paramsOf({ quoteQty: 25, maxSlippageBps: 30 })

  it("buys quoteQty with a market order bounded by maxSlippageBps on each scheduled run", () => {
    const view = viewOf({ params, balances: { USDT: "100" } })
    const run = dca.onTimer!(dca.init(params, view), timer(1000), view)
    expect(run.intents).toHaveLength(1)
    expect(run.intents[0]).toMatchObject({ type: "market", tag: "dca-1", symbol: "BTCUSDT", side: "buy", maxSlippageBps: 30 })
    expect(quoteOf(run.intents[0])).toBe("25")
  })

  it("buys once for a timer delivered twice, and skips a run while the previous buy is working", () => {
    const view = viewOf({ params, balances: { USDT: "100" } })
    const first = dca.onTimer!(dca.init(params, view), timer(1000), view)
    expect(dca.onTimer!(first.state, timer(1000), view).intents).toEqual([])
    expect(dca.onTimer!(first.state, timer(2000), view).intents).toEqual([])
    const done = dca.onOrderUpdate!(first.state, update("dca-1", "rejected", "0", "SPOT_SLIPPAGE_EXCEEDED"), view).state
    expect(quoteOf(dca.onTimer!(done, timer(3000), view).intents[0])).toBe("25")
  })

  it("skips a run when the free quote balance is short or the pair is halted", () => {
    const short = viewOf({ params, balances: { USDT: "24.99" } })
    expect(dca.onTimer!(dca.init(params, short), timer(1000), short).intents).toEqual([])
    const halted = viewOf({ params, balances: { USDT: "100" }, pairs: [{ ...BTCUSDT, status: "halted" }] })
    expect(dca.onTimer!(dca.init(params, halted), timer(1000), halted).intents).toEqual([])
  })

  it("stops at maxQuoteTotal, spending only what is left of it on the last buy", () => {
    const capped = paramsOf({ quoteQty: "25", maxQuoteTotal: "60" })
    const view = viewOf({ params: capped, balances: { USDT: "1000" } })
    let state = dca.init(capped, view)
    const quotes: Array<string | undefined> = []
    for (const at of [1000, 2000, 3000, 4000]) {
      const run = buyOnce(state, at, view)
      state = run.state
      quotes.push(run.quote)
    }
    expect(quotes).toEqual(["25", "25", "10", undefined])
  })

  it("names an invalid optional param and its range", () => {
    const decoded = decodeParams(dca, "btc-dca", { quoteQty: "25", maxSlippageBps: 0, maxQuoteTotal: "-1" })
    expect(Either.isLeft(decoded) && decoded.left.problems).toEqual([
      "strategies[btc-dca].params.maxSlippageBps: 0 is below the minimum 1 (expected the slippage each market buy accepts, 1 to 1000 basis points)",
      'strategies[btc-dca].params.maxQuoteTotal: -1 must be greater than 0 (expected the most quote the instance spends in all, e.g. "1000"; no limit when absent)'
    ])
  })

  it("ignores timers that are not its schedule", () => {
    const view = viewOf({ params, balances: { USDT: "100" } })
    expect(dca.onTimer!(dca.init(params, view), { name: "other", scheduledAt: 1000 }, view).intents).toEqual([])
  })
})
