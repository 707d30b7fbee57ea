/**
 * The backtester lets its matching engine forget ended orders and fills a day after they
 * happened (the run has read them by then). A recorded run's strategy may hear of an order later
 * than that: the run must still deliver the update at the recorded time, and go on trading.
 */
import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { runBacktest } from "../../src/backtest/Backtest.js"
import type { ReplayTiming } from "../../src/backtest/ReplayRun.js"
import type { Intent } from "../../src/domain/Intent.js"
import { defineStrategy, result } from "../../src/strategy/Strategy.js"
import type { VenueCandle } from "../../src/venue/PricePath.js"
import { d, T0, testPair } from "../support/pair.js"

const HOUR = 3_600_000

const hourly = (n: number): ReadonlyArray<VenueCandle> =>
  Array.from({ length: n }, (_, i) => ({ openTimeMs: T0 + i * HOUR, open: d("100"), high: d("100"), low: d("100"), close: d("100"), volume: d("1") }))

const buy = (tag: string): Intent => ({ type: "market", tag, symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("100"), maxSlippageBps: 50 })

interface Heard {
  candles: number
  readonly heard: Array<string>
}

/** Buys "early" at the first close and "late" at the 27th, and notes every update with the hour it heard it. */
const strategy = defineStrategy<unknown, Heard>({
  name: "two-buys",
  version: "1",
  params: Schema.Unknown,
  state: Schema.Any,
  init: () => ({ candles: 0, heard: [] }),
  onCandle: (state) => {
    const intents = state.candles === 0 ? [buy("early")] : state.candles === 26 ? [buy("late")] : []
    state.candles += 1
    return result(state, intents)
  },
  onOrderUpdate: (state, update, view) => {
    state.heard.push(`${update.tag} ${update.kind} at ${(view.now - T0) / HOUR}h`)
    return result(state)
  }
})

describe("an order the engine has forgotten", () => {
  it("is heard of when the recorded run heard it, two days after it filled, while later orders fill", () => {
    const timing: ReplayTiming = {
      placedAt: () => undefined,
      cancelledAt: () => undefined,
      updateHeardAt: (tag, _occurrence, kind) => (tag === "early" && kind === "fill" ? { atMs: T0 + 49 * HOUR, seq: 0 } : undefined)
    }
    let state: Heard | undefined
    const outcome = runBacktest({
      strategy: { ...strategy, init: (p, v) => (state = strategy.init(p, v)) },
      params: {},
      pair: testPair,
      fees: { maker: d("0.001"), taker: d("0.001") },
      settleDelayMs: 50,
      balances: { USDT: d("1000") },
      candles: hourly(52),
      intervalMs: HOUR,
      timing
    })
    if (Either.isLeft(outcome)) throw outcome.left
    // Each settles 50 ms after the close it was placed at, and "late" is heard at the next close.
    expect(outcome.right.fills.map((f) => `${f.tag} ${f.side} at ${f.time - T0}`)).toEqual([`early buy at ${HOUR + 50}`, `late buy at ${27 * HOUR + 50}`])
    expect(state!.heard).toEqual(["late fill at 28h", "early fill at 49h"])
  })
})
