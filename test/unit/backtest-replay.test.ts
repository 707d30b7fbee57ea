/**
 * Replaying a recorded paper run: the venue's price steps decide the fills instead
 * of the candle paths, a recorded placement time delays an order's settlement as
 * it was delayed at the venue, a recorded cancel time keeps the order live until
 * then, a strategy hears a step's fills at the step's time, and fills are compared
 * intent by intent.
 */
import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { type BacktestResult, type BacktestSetup, runBacktest } from "../../src/backtest/Backtest.js"
import { CARRIED, type GivenTicker, type ReplayTiming, type TapeStep } from "../../src/backtest/ReplayRun.js"
import { TAG_IN_USE } from "../../src/backtest/Run.js"
import { compareFillsByIntent, describeIntentMismatches, fillsByIntent, type IntentFill } from "../../src/backtest/Parity.js"
import { Decimal } from "../../src/domain/Decimal.js"
import type { Intent, PlaceIntent } from "../../src/domain/Intent.js"
import { defineStrategy, result, type StrategyDefinition } from "../../src/strategy/Strategy.js"
import type { PairSpec } from "../../src/venue/Orders.js"
import type { VenueCandle } from "../../src/venue/PricePath.js"
import { d, MIN, T0, testPair } from "../support/pair.js"

const SEC = 1000
/** The close of candle `i`, when the strategy hears it and places what it answers. */
const close = (i: number) => T0 + (i + 1) * MIN

const pair: PairSpec = testPair

const candle = (i: number, open: string, high: string, low: string, closePrice: string): VenueCandle => ({
  openTimeMs: T0 + i * MIN,
  open: d(open),
  high: d(high),
  low: d(low),
  close: d(closePrice),
  volume: d("1")
})

const flat = (n: number, price = "100"): Array<VenueCandle> => Array.from({ length: n }, (_, i) => candle(i, price, price, price, price))

/** Steps of candle `i`'s window: [seconds after its open, price]. */
const steps = (i: number, ...points: ReadonlyArray<readonly [number, string]>): Array<TapeStep> =>
  points.map(([seconds, price]) => ({ timeMs: T0 + i * MIN + seconds * SEC, price: d(price) }))

interface Heard {
  readonly lines: Array<string>
  candles: number
}

/**
 * Places the intents scripted for each candle index, answers fills with `onFillIntents`,
 * and records what it hears with the tape time it heard it at (seconds after T0).
 */
const scripted = (
  script: Record<number, ReadonlyArray<Intent>>,
  onFillIntents: (tag: string, baseQty: Decimal) => ReadonlyArray<Intent> = () => []
): StrategyDefinition<unknown, Heard> =>
  defineStrategy({
    name: "scripted",
    version: "1",
    params: Schema.Unknown,
    state: Schema.Any,
    init: () => ({ lines: [], candles: 0 }),
    onCandle: (state: Heard, event, view) => {
      state.lines.push(`${at(view.now)} candle ${(event.openTime - T0) / MIN}`)
      const intents = script[state.candles] ?? []
      state.candles += 1
      return result(state, intents)
    },
    onFill: (state: Heard, fill, view) => {
      state.lines.push(`${at(view.now)} fill ${fill.tag} ${fill.side} ${fill.baseQty.toFixed()} @ ${fill.price.toFixed()} ${fill.liquidity} t=${at(fill.time)}`)
      return result(state, onFillIntents(fill.tag, fill.baseQty))
    },
    onOrderUpdate: (state: Heard, update, view) => {
      state.lines.push(`${at(view.now)} update ${update.tag} ${update.kind}${update.code === undefined ? "" : ` ${update.code}`}`)
      return result(state)
    }
  })

const at = (ms: number): string => `${(ms - T0) / SEC}s`

const setup = (strategy: StrategyDefinition<unknown, Heard>, candles: ReadonlyArray<VenueCandle>, extra: Partial<BacktestSetup<unknown, Heard>> = {}): BacktestSetup<unknown, Heard> => ({
  strategy,
  params: {},
  pair,
  fees: { maker: d("0.001"), taker: d("0.002") },
  settleDelayMs: 50,
  balances: { USDT: d("10000"), BTC: d("10") },
  candles,
  intervalMs: MIN,
  ...extra
})

/** The run's result and what the strategy heard. */
const run = (s: BacktestSetup<unknown, Heard>): { readonly out: BacktestResult; readonly heard: ReadonlyArray<string> } => {
  let heard: Heard | undefined
  const spy: StrategyDefinition<unknown, Heard> = { ...s.strategy, init: (p, v) => (heard = s.strategy.init(p, v)) }
  const outcome = runBacktest({ ...s, strategy: spy })
  if (Either.isLeft(outcome)) throw outcome.left
  return { out: outcome.right, heard: heard!.lines }
}

const fillsOf = (out: BacktestResult): ReadonlyArray<string> =>
  out.fills.map((f) => `${f.tag} ${f.side} ${f.baseQty.toFixed()} @ ${f.price.toFixed()} ${f.liquidity} fee ${f.fee.toFixed()} t=${at(f.time)}`)

/** Placement times by `tag#occurrence`, cancel times by `cancel tag#occurrence`. */
const timingOf = (times: Record<string, number>): ReplayTiming => ({
  placedAt: (tag, occurrence) => times[`${tag}#${occurrence}`],
  cancelledAt: (tag, occurrence) => times[`cancel ${tag}#${occurrence}`]
})

const bid = (tag: string, price: string, qty = "2"): PlaceIntent => ({ type: "limit", tag, symbol: "BTCUSDT", side: "buy", baseQty: d(qty), limitPrice: d(price) })
const marketBuy = (tag: string): Intent => ({ type: "market", tag, symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("1000"), maxSlippageBps: 50 })

describe("a recorded tape decides fills instead of the candle paths", () => {
  it("fills a resting bid at the step that dips through it, not at a candle low the steps never visit", () => {
    // Candle 1 reports a low of 98, but the venue's steps in its window only went down to 99.5.
    const candles = [candle(0, "100", "100", "100", "100"), candle(1, "100", "100.5", "98", "100"), candle(2, "100", "100", "98.9", "100"), candle(3, "100", "100", "100", "100")]
    const tape = [...steps(0, [30, "100"]), ...steps(1, [10, "99.8"], [30, "99.5"], [50, "100"]), ...steps(2, [15, "99.6"], [40, "98.9"], [55, "100"])]
    const strategy = scripted({ 0: [bid("bid", "99")] })

    // The candle path of candle 1 passes 98: the whole bid fills there, at its close.
    expect(fillsOf(run(setup(strategy, candles)).out)).toEqual(["bid buy 2 @ 99 maker fee 0.002 t=120s"])

    const replay = run(setup(strategy, candles, { tape }))
    // The steps pass 99 only at 98.9, 40 s into candle 2: the whole bid fills as maker at its limit then.
    expect(fillsOf(replay.out)).toEqual([`bid buy 2 @ 99 maker fee 0.002 t=${60 + 60 + 40}s`])
    expect(replay.heard).toEqual(["60s candle 0", "70s update bid resting", "120s candle 1", "160s fill bid buy 2 @ 99 maker t=160s", "160s update bid fill", "180s candle 2", "240s candle 3"])
  })

  it("ignores steps before the first candle and after the last close, and refuses an unsorted tape", () => {
    const strategy = scripted({ 0: [bid("bid", "99")] })
    const outside = [{ timeMs: T0 - SEC, price: d("50") }, ...steps(1, [30, "99.5"]), { timeMs: close(2) + SEC, price: d("50") }]
    const { out } = run(setup(strategy, flat(3), { tape: outside }))
    expect(out.fills).toEqual([])
    const unsorted = runBacktest(setup(strategy, flat(3), { tape: [...steps(1, [30, "99.5"], [20, "99"])] }))
    expect(Either.isLeft(unsorted) && unsorted.left.message).toBe(
      `the tape must be sorted by time: step 1 at ${T0 + MIN + 20 * SEC} comes after step 0 at ${T0 + MIN + 30 * SEC}`
    )
  })
})

describe("recorded placement times", () => {
  const tape = [...steps(1, [10, "101"], [20, "102"], [30, "103"], [40, "104"])]

  it("settles a market order placed later than its intent at the price in effect at placedAt + settle delay", () => {
    const strategy = scripted({ 0: [marketBuy("buy")] })
    // Placed at the intent (candle 0's close), it settles 50 ms later against the last price, candle 0's open: the first ask is 100.01.
    expect(fillsOf(run(setup(strategy, flat(3), { tape })).out)).toEqual(["buy buy 9.999 @ 100.01 taker fee 0.019998 t=60.05s"])

    // Reaching the venue 25 s after the intent, it settles 25.05 s into candle 1, when the price was 102 (ask spacing 0.02).
    // 9.802 × 102.02 = 1000.00004 is more than 1000: 9.801 it is.
    const late = run(setup(strategy, flat(3), { tape, timing: timingOf({ "buy#0": close(0) + 25 * SEC }) }))
    expect(fillsOf(late.out)).toEqual(["buy buy 9.801 @ 102.02 taker fee 0.019602 t=85.05s"])
    // Heard at the next step after it settled, not at the close.
    expect(late.heard).toEqual(["60s candle 0", "90s fill buy buy 9.801 @ 102.02 taker t=85.05s", "90s update buy fill", "120s candle 1", "180s candle 2"])

    // Moved past the step at 30 s, it settles against 103 instead: 1000 / 103.02 = 9.7068..., stepped down to 9.706.
    const later = run(setup(strategy, flat(3), { tape, timing: timingOf({ "buy#0": close(0) + 35 * SEC }) }))
    expect(fillsOf(later.out)).toEqual(["buy buy 9.706 @ 103.02 taker fee 0.019412 t=95.05s"])
  })

  it("places at the intent's moment when the recorded time is missing or not later", () => {
    const strategy = scripted({ 0: [marketBuy("buy")] })
    const earlier = run(setup(strategy, flat(3), { tape, timing: timingOf({ "buy#0": close(0) - 5 * SEC }) }))
    expect(fillsOf(earlier.out)).toEqual(["buy buy 9.999 @ 100.01 taker fee 0.019998 t=60.05s"])
    const missing = run(setup(strategy, flat(3), { tape, timing: timingOf({}) }))
    expect(fillsOf(missing.out)).toEqual(fillsOf(earlier.out))
  })

  it("keeps a late-placed bid pending, unseen by the steps, until it settles", () => {
    const dips = [...steps(1, [10, "98.5"], [20, "100"], [30, "99.5"], [40, "98.8"])]
    const strategy = scripted({ 0: [bid("bid", "99")] })
    // Placed at the intent, the bid rests from 60.05 s and the dip to 98.5 at 70 s fills it.
    expect(fillsOf(run(setup(strategy, flat(3), { tape: dips })).out)).toEqual(["bid buy 2 @ 99 maker fee 0.002 t=70s"])
    // Reaching the venue at 85 s, it misses that dip, settles against 100 (no ask at or below 99), rests, and the dip to 98.8 fills it.
    const late = run(setup(strategy, flat(3), { tape: dips, timing: timingOf({ "bid#0": close(0) + 25 * SEC }) }))
    expect(fillsOf(late.out)).toEqual(["bid buy 2 @ 99 maker fee 0.002 t=100s"])
    expect(late.heard).toEqual(["60s candle 0", "90s update bid resting", "100s fill bid buy 2 @ 99 maker t=100s", "100s update bid fill", "120s candle 1", "180s candle 2"])
  })

  it("settles orders by their own settlement times when a later intent reached the venue first", () => {
    const strategy = scripted({ 0: [marketBuy("first"), marketBuy("second")] })
    const timing = timingOf({ "first#0": close(0) + 35 * SEC, "second#0": close(0) + 15 * SEC })
    const { out } = run(setup(strategy, flat(3), { tape, timing }))
    // The second settles first, at 75.05 s against 101 (ask spacing 0.02): 1000 / 101.02 = 9.899...; the first at 95.05 s against 103.
    expect(fillsOf(out)).toEqual(["second buy 9.899 @ 101.02 taker fee 0.019798 t=75.05s", "first buy 9.706 @ 103.02 taker fee 0.019412 t=95.05s"])
  })
})

describe("a strategy answering a fill in tape mode", () => {
  it("hears a step's fill at the step's time, and its answer settles from there", () => {
    const tape = [...steps(1, [10, "100"], [20, "98.9"], [25, "97"], [40, "99"])]
    const exit = (tag: string, qty: Decimal): ReadonlyArray<Intent> =>
      tag === "bid" ? [{ type: "market", tag: "exit", symbol: "BTCUSDT", side: "sell", baseQty: qty, maxSlippageBps: 50 }] : []
    const strategy = scripted({ 0: [bid("bid", "99")] }, exit)
    const { out, heard } = run(setup(strategy, flat(3), { tape }))
    // The bid fills at 80 s; the exit, placed then, settles 50 ms later against 98.9: the first bid of the book is 98.89.
    // 2 × 98.89 = 197.78 quote, taker fee 0.2 % of it.
    expect(fillsOf(out)).toEqual(["bid buy 2 @ 99 maker fee 0.002 t=80s", "exit sell 2 @ 98.89 taker fee 0.39556 t=80.05s"])
    expect(heard).toEqual([
      "60s candle 0",
      "70s update bid resting",
      "80s fill bid buy 2 @ 99 maker t=80s",
      "80s update bid fill",
      "85s fill exit sell 2 @ 98.89 taker t=80.05s",
      "85s update exit fill",
      "120s candle 1",
      "180s candle 2"
    ])
    // Without the tape the bid fills only on a candle path (never: the candles are flat at 100) and nothing answers.
    expect(run(setup(strategy, flat(3))).out.fills).toEqual([])
  })
})

describe("placements", () => {
  it("ties every order to its intent, counting every placement intent of a tag, refused ones included", () => {
    const strategy = scripted({
      0: [bid("bid", "90")],
      // The tag still names the resting bid: refused, and still occurrence 1.
      1: [bid("bid", "91")],
      2: [{ type: "cancel", tag: "bid" }, bid("bid", "99"), bid("tiny", "99", "0.001")],
      3: [bid("tiny", "99")]
    })
    const asked: Array<string> = []
    const timing: ReplayTiming = {
      placedAt: (tag, occurrence) => {
        asked.push(`${tag}#${occurrence}`)
        return undefined
      },
      cancelledAt: () => undefined
    }
    const tape = [...steps(3, [30, "98"])]
    const { out, heard } = run(setup(strategy, flat(5), { tape, timing }))
    expect(heard.filter((line) => line.includes("refused"))).toEqual([`120s update bid refused ${TAG_IN_USE}`, "180s update tiny refused INVALID_PARAMETER"])
    // A tag in use is refused before it could reach the venue; the engine's own refusals were placements the venue answered.
    expect(asked).toEqual(["bid#0", "bid#2", "tiny#0", "tiny#1"])
    expect([...out.placements.values()]).toEqual([
      { tag: "bid", occurrence: 0 },
      { tag: "bid", occurrence: 2 },
      { tag: "tiny", occurrence: 1 }
    ])
    expect(out.fills.map((f) => out.placements.get(f.clientOrderId))).toEqual([
      { tag: "bid", occurrence: 2 },
      { tag: "tiny", occurrence: 1 }
    ])
    // bid#2 rests from 180.05 s and the step to 98 at 210 s fills it; tiny#1 settles at 240.05 s against 98 and takes the ask 98.01.
    expect(fillsByIntent(out.fills, out.placements).map((f) => `${f.intent} ${f.price.toFixed()} ${f.liquidity}`)).toEqual(["bid#2 99 maker", "tiny#1 98.01 taker"])
  })
})

describe("without tape and timing the run is unchanged", () => {
  it("buys at market, sells on a limit the next candle passes, and ends with the equity worked out by hand", () => {
    const candles = [candle(0, "100", "100", "100", "100"), candle(1, "100", "100", "100", "100"), candle(2, "100", "101.5", "100", "101")]
    const strategy = scripted({
      0: [marketBuy("buy")],
      1: [{ type: "limit", tag: "sell", symbol: "BTCUSDT", side: "sell", baseQty: d("9.979"), limitPrice: d("101") }]
    })
    const { out } = run({ ...setup(strategy, candles), balances: { USDT: d("10000") } })
    // 1000 at the first ask 100.01: 9.999 BTC, less the 0.2 % taker fee in BTC = 9.979002 held.
    // The sell settles against 100 (no bid at 101), rests, and candle 2's path passes 101: 9.979 × 101 = 1007.879,
    // less the 0.1 % maker fee 1.007879.
    expect(fillsOf(out)).toEqual(["buy buy 9.999 @ 100.01 taker fee 0.019998 t=60.05s", "sell sell 9.979 @ 101 maker fee 1.007879 t=180s"])
    // USDT: 10000 − 999.98999 + 1007.879 − 1.007879 = 10006.871131; BTC left: 0.000002, worth 0.000202 at 101.
    expect(out.balances.get("USDT")!.free.toFixed()).toBe("10006.871131")
    expect(out.balances.get("BTC")!.free.toFixed()).toBe("0.000002")
    expect(out.metrics.finalEquity.toFixed()).toBe("10006.871333")
    expect(out.equity.map((e) => e.toFixed())).toEqual(["10000", "9997.90021", "10006.871333"])
    expect([...out.placements.values()]).toEqual([
      { tag: "buy", occurrence: 0 },
      { tag: "sell", occurrence: 0 }
    ])
  })
})

describe("compareFillsByIntent", () => {
  const f = (intent: string, price: string, fee = "0.001", liquidity: "maker" | "taker" = "maker"): IntentFill => ({
    intent,
    side: "buy",
    price: d(price),
    baseQty: d("1"),
    liquidity,
    fee: d(fee)
  })
  const expected = [f("bid#0", "99"), f("buy#0", "100.01", "0.002", "taker"), f("bid#0", "99"), f("bid#1", "98")]

  it("finds nothing between equal lists, however the intents interleave", () => {
    expect(compareFillsByIntent(expected, expected)).toEqual([])
    // Another order of intents in time is no mismatch: fills are matched within their intent.
    expect(compareFillsByIntent(expected, [expected[1]!, expected[0]!, expected[3]!, expected[2]!])).toEqual([])
  })

  it("reports a changed price, a changed fee, a missing and an extra fill with their intent and fields", () => {
    const actual = [f("bid#0", "99"), f("buy#0", "100.02", "0.002", "taker"), f("bid#0", "99", "0.002"), f("sell#0", "101")]
    const mismatches = compareFillsByIntent(expected, actual)
    // Intents in the order the expected run first filled them, then those only the actual run filled.
    expect(mismatches.map((m) => [m.intent, m.index, m.expected !== undefined, m.actual !== undefined, m.fields])).toEqual([
      ["bid#0", 1, true, true, ["fee"]],
      ["buy#0", 0, true, true, ["price"]],
      ["bid#1", 0, true, false, []],
      ["sell#0", 0, false, true, []]
    ])
    expect(describeIntentMismatches(mismatches).split("\n")).toEqual([
      "bid#0 fill 1: expected buy 1 @ 99 maker fee 0.001, got buy 1 @ 99 maker fee 0.002 (fee differ)",
      "buy#0 fill 0: expected buy 1 @ 100.01 taker fee 0.002, got buy 1 @ 100.02 taker fee 0.002 (price differ)",
      "bid#1 fill 0: expected buy 1 @ 98 maker fee 0.001, got nothing",
      "sell#0 fill 0: expected nothing, got buy 1 @ 101 maker fee 0.001"
    ])
  })
})

describe("a recorded run's tickers", () => {
  /** Buys 100 USDT of base the first time a ticker shows the price at or below 99; notes every ticker heard. */
  const dipBuyer = defineStrategy({
    name: "dip-buyer",
    version: "1",
    params: Schema.Unknown,
    state: Schema.Any,
    init: () => ({ lines: [], candles: 0 }),
    onTicker: (state: Heard, ticker, view) => {
      state.lines.push(`${at(view.now)} ticker ${ticker.price.toFixed()} t=${at(ticker.time)}`)
      const bought = state.candles > 0
      if (bought || ticker.price.gt(99)) return result(state)
      state.candles = 1
      return result(state, [{ type: "market", tag: "dip", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("100"), maxSlippageBps: 50 }])
    }
  })

  const givenAt = (...seconds: ReadonlyArray<number>): Array<GivenTicker> => seconds.map((s) => ({ atMs: T0 + s * SEC, timeMs: T0 + s * SEC, price: undefined }))

  it("without recorded prices, are heard at their times with the tape's price then, and no ticker is made up at the close", () => {
    const tape = steps(0, [30, "100"], [40, "98.5"], [50, "101"])
    const { out, heard } = run(setup(dipBuyer, flat(2), { tape, tickers: givenAt(35, 45, 55, 70) }))
    expect(heard).toEqual(["35s ticker 100 t=35s", "45s ticker 98.5 t=45s", "55s ticker 101 t=55s", "70s ticker 101 t=70s"])
    // Placed at 45 s, settled at 45.05 s against 98.5: the first ask is one tick above (1 bp of 98.5 is
    // less than the 0.01 tick): 100 / 98.51 = 1.01512…, stepped down to 1.015; taker fee 0.2 % in BTC.
    expect(fillsOf(out)).toEqual(["dip buy 1.015 @ 98.51 taker fee 0.00203 t=45.05s"])
  })

  it("are heard when they were given, with the price and time they showed", () => {
    const tape = steps(0, [30, "100"], [40, "98.5"], [50, "101"])
    // Given 0.3 s after the venue's time of it, showing the price of the step before.
    const tickers: Array<GivenTicker> = [
      { atMs: T0 + 40.3 * SEC, timeMs: T0 + 40 * SEC, price: d("100") },
      { atMs: T0 + 50.3 * SEC, timeMs: T0 + 50 * SEC, price: d("98.5") }
    ]
    const { out, heard } = run(setup(dipBuyer, flat(2), { tape, tickers }))
    expect(heard).toEqual(["40.3s ticker 100 t=40s", "50.3s ticker 98.5 t=50s"])
    // It bought on the 98.5 it was shown, at 50.3 s, when the book was at 101 already: 100 / 101.02 stepped down to 0.989.
    expect(fillsOf(out)).toEqual(["dip buy 0.989 @ 101.02 taker fee 0.001978 t=50.35s"])
  })

  it("without recorded tickers the strategy hears one at each close, as a plain backtest gives it", () => {
    const { heard } = run(setup(dipBuyer, flat(2), { tape: steps(0, [30, "98"]) }))
    expect(heard).toEqual(["60s ticker 100 t=60s", "120s ticker 100 t=120s"])
  })
})

describe("a recorded cancel takes effect when the venue applied it", () => {
  const cancel = (tag: string): Intent => ({ type: "cancel", tag })
  // The bid rests from 60 s; the strategy cancels it at the close of candle 1 (120 s); the price dips through it at 122 s.
  const candles = flat(4)
  const tape = [...steps(1, [10, "100"]), ...steps(2, [2, "98.9"], [30, "100"])]

  it("without a recorded time the cancel is applied at the decision, before the dip", () => {
    const { out, heard } = run(setup(scripted({ 0: [bid("bid", "99")], 1: [cancel("bid")] }), candles, { tape }))
    expect(out.fills).toEqual([])
    expect(heard).toContain("120s update bid cancelled")
  })

  it("an order the venue cancelled after the dip fills in the dip, as it did there, and the late cancel changes nothing", () => {
    const timing = timingOf({ "cancel bid#0": T0 + 125 * SEC })
    const { out, heard } = run(setup(scripted({ 0: [bid("bid", "99")], 1: [cancel("bid")] }), candles, { tape, timing }))
    expect(fillsOf(out)).toEqual(["bid buy 2 @ 99 maker fee 0.002 t=122s"])
    expect(heard.filter((line) => line.includes("bid"))).toEqual(["70s update bid resting", "122s fill bid buy 2 @ 99 maker t=122s", "122s update bid fill"])
    expect(out.orders.cancelled).toBe(0)
  })

  it("an order the venue cancelled before the dip stays live until then: its tag is still in use, and the strategy hears the cancel at that time", () => {
    const timing = timingOf({ "cancel bid#0": T0 + 121 * SEC })
    const { out, heard } = run(setup(scripted({ 0: [bid("bid", "99")], 1: [cancel("bid"), bid("bid", "98")] }), candles, { tape, timing }))
    expect(out.fills).toEqual([])
    expect(heard.filter((line) => line.includes("bid"))).toEqual(["70s update bid resting", `120s update bid refused ${TAG_IN_USE}`, "121s update bid cancelled"])
    expect(out.orders.cancelled).toBe(1)
  })

  it("counts cancels per tag apart from placements, and a cancel at the time of a step comes after it", () => {
    const asked: Array<string> = []
    const timing: ReplayTiming = {
      placedAt: () => undefined,
      cancelledAt: (tag, occurrence) => {
        asked.push(`${tag}#${occurrence}`)
        return T0 + 122 * SEC
      }
    }
    const { out } = run(setup(scripted({ 0: [bid("bid", "99")], 1: [cancel("bid"), cancel("bid")] }), candles, { tape, timing }))
    expect(asked).toEqual(["bid#0", "bid#1"])
    // The step at 122 s came first: the bid filled and the cancels found nothing to cancel.
    expect(fillsOf(out)).toEqual(["bid buy 2 @ 99 maker fee 0.002 t=122s"])
  })
})

describe("a recorded run's strategy hears fills and updates when it was given them", () => {
  const candles = flat(4)
  // The bid rests from 60 s and the price dips through it at 122 s.
  const tape = [...steps(1, [10, "100"]), ...steps(2, [2, "98.9"], [30, "100"])]
  const timing: ReplayTiming = {
    placedAt: () => undefined,
    cancelledAt: () => undefined,
    fillHeardAt: (tag, occurrence, index) => (tag === "bid" && occurrence === 0 && index === 0 ? { atMs: T0 + 122.4 * SEC, seq: 2 } : undefined),
    updateHeardAt: (tag, occurrence, kind, index) =>
      tag !== "bid" || occurrence !== 0 || index !== 0
        ? undefined
        : kind === "resting"
          ? { atMs: T0 + 71 * SEC, seq: 1 }
          : kind === "fill"
            ? { atMs: T0 + 122.6 * SEC, seq: 3 }
            : undefined
  }

  it("hears a fill and the final update at the recorded times, after the venue made them; the order's tag stays in use until then", () => {
    const { out, heard } = run(setup(scripted({ 0: [bid("bid", "99")] }, (tag) => (tag === "bid" ? [bid("bid", "98")] : [])), candles, { tape, timing }))
    expect(fillsOf(out)).toEqual(["bid buy 2 @ 99 maker fee 0.002 t=122s"])
    // Answering the fill at 122.4 s, before it heard the bid's final update, the strategy finds the tag still in use.
    expect(heard.filter((line) => line.includes("bid"))).toEqual([
      "71s update bid resting",
      "122.4s fill bid buy 2 @ 99 maker t=122s",
      `122.4s update bid refused ${TAG_IN_USE}`,
      "122.6s update bid fill"
    ])
  })

  it("hears what one moment brought in the order the recorded strategy heard it", () => {
    // Both bids fill in the dip at 122 s; the recorded strategy was told of b before a, in one moment.
    const inOrder: ReplayTiming = {
      placedAt: () => undefined,
      cancelledAt: () => undefined,
      updateHeardAt: (tag, _occurrence, kind) => (kind !== "fill" ? undefined : { atMs: T0 + 122.5 * SEC, seq: tag === "b" ? 7 : 8 })
    }
    const { heard } = run(setup(scripted({ 0: [bid("a", "99", "1"), bid("b", "99", "1")] }), candles, { tape, timing: inOrder }))
    expect(heard.filter((line) => line.includes("update") && line.includes("fill"))).toEqual(["122.5s update b fill", "122.5s update a fill"])
  })

  it("without recorded times it hears them the moment the venue made them, and the tag is free by then", () => {
    const { heard } = run(setup(scripted({ 0: [bid("bid", "99")] }, (tag) => (tag === "bid" ? [bid("bid", "98")] : [])), candles, { tape }))
    expect(heard.filter((line) => line.includes("bid")).slice(0, 3)).toEqual(["70s update bid resting", "122s fill bid buy 2 @ 99 maker t=122s", "122s update bid fill"])
  })
})

describe("a resumed run's live orders", () => {
  const candles = flat(4)
  const tape = [...steps(1, [10, "100"]), ...steps(2, [2, "98.9"], [30, "100"])]

  it("are on the book from the start, their tag in use, and their fills count under the carried occurrence", () => {
    // The stored state the run resumed; the scripted strategy notes what it hears in it.
    const resumed: Heard = { lines: [], candles: 0 }
    const outcome = runBacktest(setup(scripted({ 0: [bid("bid", "98")] }), candles, { tape, initialState: resumed, carried: [bid("bid", "99", "1.5")] }))
    if (Either.isLeft(outcome)) throw outcome.left
    const out = outcome.right
    const heard = resumed.lines
    expect(fillsOf(out)).toEqual(["bid buy 1.5 @ 99 maker fee 0.0015 t=122s"])
    expect(heard.filter((line) => line.includes("bid"))).toEqual([`60s update bid refused ${TAG_IN_USE}`, "122s fill bid buy 1.5 @ 99 maker t=122s", "122s update bid fill"])
    expect([...out.placements.values()]).toEqual([{ tag: "bid", occurrence: CARRIED }])
    expect(fillsByIntent(out.fills, out.placements).map((f) => f.intent)).toEqual(["bid#carried"])
  })
})

describe("what a resumed run's instance was handed first", () => {
  const candles = flat(4)
  const tape = [...steps(1, [10, "100"]), ...steps(2, [2, "98.9"], [30, "100"])]

  it("is heard at the start in its order, before anything of the run, and what the strategy answers is placed then", () => {
    const resumed: Heard = { lines: [], candles: 0 }
    const answer = (tag: string) => (tag === "old" ? [bid("again", "99")] : [])
    const outcome = runBacktest(
      setup(scripted({}, answer), candles, {
        tape,
        initialState: resumed,
        missed: [
          {
            _tag: "Fill",
            event: { tag: "old", fillId: "f-old", side: "buy", price: d("99.5"), baseQty: d("2"), quoteQty: d("199"), fee: d("0.002"), feeAsset: "BTC", liquidity: "maker", time: T0 - MIN }
          },
          { _tag: "OrderUpdate", event: { tag: "old", clientOrderId: "co-old", kind: "fill", filledBaseQty: d("2") } },
          { _tag: "OrderUpdate", event: { tag: "gone", kind: "cancelled", filledBaseQty: d("0") } }
        ]
      })
    )
    if (Either.isLeft(outcome)) throw outcome.left
    expect(resumed.lines.slice(0, 4)).toEqual(["0s fill old buy 2 @ 99.5 maker t=-60s", "0s update old fill", "0s update gone cancelled", "60s update again resting"])
    // The fill of what was missed is not one of the run's: only the order placed in answer to it is.
    expect(fillsOf(outcome.right)).toEqual(["again buy 2 @ 99 maker fee 0.002 t=122s"])
  })
})
