/**
 * Parity of a recorded paper run, from evidence written by hand: the candles its
 * strategy was given (history as warm-up), the venue's price steps, the placement
 * intents with when their orders reached the venue, and the paper fills. The
 * expected fills are worked out from svc-venue's rules: a market order settles at
 * placement + settle delay against the step in effect then and takes the synthetic
 * book (one basis point per level, at least a tick); a resting limit fills as maker
 * at its limit when a step crosses it; fees are the setup's maker and taker rates.
 */
import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { computeMetrics } from "../../src/backtest/Metrics.js"
import { describeIntentMismatches } from "../../src/backtest/Parity.js"
import { toFloat } from "../../src/domain/Decimal.js"
import type { Intent } from "../../src/domain/Intent.js"
import type { PaperCandleRow, PaperFillRow, PaperIntentRow, PaperRunEvidence, PaperSetup, PaperStepRow } from "../../src/promotion/PaperStore.js"
import { replayPaperRun } from "../../src/promotion/Replay.js"
import { defineStrategy, result, serializeState } from "../../src/strategy/Strategy.js"
import { d, MIN, T0, testPair } from "../support/pair.js"

const SEC = 1000
/** The close of live candle `i`, when the strategy hears it and decides. */
const close = (i: number) => T0 + (i + 1) * MIN
const TOLERANCE_MS = 1000

// ---------------------------------------------------------------------------
// The strategy

interface Params {
  /** Trade on the first candle heard, warm-up or not, instead of the first live one. */
  readonly onFirstHeard: boolean
  readonly exitPrice: string
}

/**
 * On its first live candle (or first candle heard at all) it places a market buy of
 * 1000 USDT tagged "entry" and a limit sell of 5 BTC (from its allocation) tagged "exit".
 */
const entryAndExit = defineStrategy({
  name: "entry-and-exit",
  version: "1",
  params: Schema.Struct({ onFirstHeard: Schema.Boolean, exitPrice: Schema.String }),
  state: Schema.Struct({ heard: Schema.Number, traded: Schema.Boolean }),
  init: () => ({ heard: 0, traded: false }),
  onCandle: (state, event, view) => {
    const first = view.params.onFirstHeard ? state.heard === 0 : event.warmup !== true && !state.traded
    const next = { heard: state.heard + 1, traded: state.traded || first }
    if (!first) return result(next)
    const intents: ReadonlyArray<Intent> = [
      { type: "market", tag: "entry", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("1000"), maxSlippageBps: 50 },
      { type: "limit", tag: "exit", symbol: "BTCUSDT", side: "sell", baseQty: d("5"), limitPrice: d(view.params.exitPrice) }
    ]
    return result(next, intents)
  }
})

const onFirstLive: Params = { onFirstHeard: false, exitPrice: "103" }

// ---------------------------------------------------------------------------
// The evidence

const setupOf = (overrides: Partial<PaperSetup> = {}): PaperSetup => ({
  instanceId: "ee-1",
  allocation: { USDT: "10000", BTC: "10" },
  startBalances: { USDT: "10000", BTC: "10" },
  startPrice: "100",
  pair: {
    symbol: testPair.symbol,
    base: testPair.base,
    quote: testPair.quote,
    tickSize: testPair.tickSize.toFixed(),
    stepSize: testPair.stepSize.toFixed(),
    minBaseQty: testPair.minBaseQty.toFixed(),
    minNotional: testPair.minNotional.toFixed(),
    depthNotional: testPair.depthNotional.toFixed()
  },
  fees: { maker: "0.001", taker: "0.002" },
  settleDelayMs: 50,
  intervalMs: MIN,
  schedule: null,
  startState: null,
  ...overrides
})

const row = (openTime: number, open: string, high: string, low: string, closePrice: string, warmup: boolean, fillsKnown: number): PaperCandleRow => ({
  openTime,
  open: d(open),
  high: d(high),
  low: d(low),
  close: d(closePrice),
  volume: d("1"),
  warmup,
  seenAt: openTime + MIN + 200,
  fillsKnown
})

/** Two warm-up candles, then three live ones; `fillsKnown` of the live ones as given. */
const candlesOf = (known: readonly [number, number, number]): Array<PaperCandleRow> => [
  row(T0 - 2 * MIN, "99", "99", "99", "99", true, 0),
  row(T0 - MIN, "99", "100", "99", "100", true, 0),
  row(T0, "100", "100", "100", "100", false, known[0]),
  row(T0 + MIN, "100", "103.5", "100", "103.5", false, known[1]),
  row(T0 + 2 * MIN, "103.5", "103.5", "102", "102", false, known[2])
]

/** The venue's steps, seconds after T0: one in live candle 0, the climb through candle 1, a dip in candle 2. */
const stepsAt = (...points: ReadonlyArray<readonly [number, string]>): Array<PaperStepRow> =>
  points.map(([seconds, price], seq) => ({ seq: seq + 1, timeMs: T0 + seconds * SEC, price: d(price) }))
const tape = stepsAt([30, "100"], [60.5, "101"], [63, "102"], [90, "103.5"], [150, "102"])

const intent = (intentId: string, tag: string, decidedAt: number, reachedVenueAt: number | null): PaperIntentRow => ({
  intentId,
  kind: "place",
  tag,
  occurrence: 0,
  decidedAt,
  clientOrderId: reachedVenueAt === null ? null : `c-${intentId}`,
  reachedVenueAt
})

const fill = (
  fillId: string,
  intentId: string | null,
  side: "buy" | "sell",
  liquidity: "maker" | "taker",
  qty: string,
  price: string,
  fee: string,
  time: number
): PaperFillRow => ({
  fillId,
  intentId,
  clientOrderId: intentId === null ? "c-before-the-run" : `c-${intentId}`,
  side,
  liquidity,
  price: d(price),
  baseQty: d(qty),
  quoteQty: d(qty).mul(d(price)),
  fee: d(fee),
  feeAsset: side === "buy" ? "BTC" : "USDT",
  time
})

const metrics = computeMetrics({
  baseAsset: "BTC",
  quoteAsset: "USDT",
  intervalMs: MIN,
  fromMs: T0,
  initialEquity: d("11000"),
  initialBase: d("10"),
  initialPrice: d("100"),
  equityMarks: [],
  finalEquity: d("11000"),
  inMarketCandles: 0,
  fills: []
})

const evidence = (parts: Partial<PaperRunEvidence>): PaperRunEvidence => ({
  runId: 7,
  status: "completed",
  startedAtMs: T0 - 2 * MIN,
  metrics,
  setup: setupOf(),
  candles: candlesOf([0, 2, 2]),
  tickers: [],
  heard: [],
  steps: tape,
  intents: [],
  fills: [],
  ...parts
})

// What svc-venue does with the entry, by the moment the order reaches it (settle delay 50 ms):
// - at close(0) + 5 ms it settles at close(0) + 55 ms against 100 (the step at 30 s); levels are 0.01 apart,
//   the first ask is 100.01: 1000 / 100.01 = 9.9990..., stepped down to 9.999; taker fee 0.2 % of it in BTC.
const entryOnTime = (time: number) => fill("f-entry", "i-entry", "buy", "taker", "9.999", "100.01", "0.019998", time)
// - at close(0) + 4 s it settles at close(0) + 4.05 s against 102 (the step at 63 s); levels 0.02 apart
//   (1 bp of 102 rounded up to the tick): 1000 / 102.02 = 9.8020..., 9.801; fee 0.019602.
const entryLate = fill("f-entry", "i-entry", "buy", "taker", "9.801", "102.02", "0.019602", close(0) + 4050)
// The exit rests (no bid at or above 103 around 100) and the step to 103.5 at 90 s crosses it: 5 @ 103 as maker,
// fee 0.1 % of 515 USDT.
const exitFill = fill("f-exit", "i-exit", "sell", "maker", "5", "103", "0.515", T0 + 90 * SEC)

const onTime = evidence({
  intents: [intent("i-entry", "entry", close(0), close(0) + 5), intent("i-exit", "exit", close(0), close(0) + 6)],
  fills: [entryOnTime(close(0) + 55), exitFill]
})

const replay = (strategyParams: Params, run: PaperRunEvidence) => {
  const outcome = replayPaperRun(entryAndExit, strategyParams, run, TOLERANCE_MS)
  if (Either.isLeft(outcome)) throw new Error(outcome.left.message)
  return outcome.right
}

const shown = (f: { readonly side: string; readonly baseQty: { toFixed(): string }; readonly price: { toFixed(): string }; readonly liquidity: string; readonly fee: { toFixed(): string } } | undefined) =>
  f === undefined ? undefined : `${f.side} ${f.baseQty.toFixed()} @ ${f.price.toFixed()} ${f.liquidity} fee ${f.fee.toFixed()}`

// ---------------------------------------------------------------------------

describe("replaying a paper run whose fills are what the venue would do", () => {
  it("finds no mismatch and no tracking error when the orders reached the venue a few ms after the decision", () => {
    const parity = replay(onFirstLive, onTime)
    expect(parity.runId).toBe(7)
    expect(parity.status).toBe("completed")
    expect(parity.paperFills).toBe(2)
    expect(parity.replayFills).toBe(2)
    expect(parity.fillMismatches).toBe(0)
    expect(parity.worst).toEqual([])
    expect(parity.trackingErrorPct?.toFixed()).toBe("0")
  })
})

describe("an order that reached the venue later than the tolerance", () => {
  const late = evidence({
    intents: [intent("i-entry", "entry", close(0), close(0) + 4000), intent("i-exit", "exit", close(0), close(0) + 6)],
    fills: [entryLate, exitFill]
  })

  it("is replayed as arriving at the decision + tolerance and its fill differs in price", () => {
    const parity = replay(onFirstLive, late)
    console.log(`late entry (4 s, tolerance 1 s):\n${describeIntentMismatches(parity.worst)}`)
    expect(parity.paperFills).toBe(2)
    expect(parity.replayFills).toBe(2)
    expect(parity.fillMismatches).toBe(1)
    const [m] = parity.worst
    expect(m!.intent).toBe("entry#0")
    expect(m!.index).toBe(0)
    // Placed at close(0) + 1 s, it settles at + 1.05 s against 101 (the step at 60.5 s): asks 0.02 apart,
    // 1000 / 101.02 = 9.8990..., 9.899, fee 0.019798. A market buy is sized in quote, so the quantity and fee move too.
    expect(shown(m!.expected)).toBe("buy 9.899 @ 101.02 taker fee 0.019798")
    expect(shown(m!.actual)).toBe("buy 9.801 @ 102.02 taker fee 0.019602")
    expect(m!.fields).toEqual(["price", "baseQty", "fee"])
    // The exit matched: 5 @ 103 maker on both sides.
    expect(parity.worst.some((w) => w.intent === "exit#0")).toBe(false)
  })

  it("shows a tracking error: the largest gap between the two PnL curves over the allocation's value", () => {
    // Paper: 9.781398 BTC at 102.02 (fee 0.019602 BTC = 1.99979604 USDT), then 5 sold at 103 (realised 4.9, fee 0.515).
    //   At 103.5: 4.9 + 1.48 × 4.781398 − 2.51479604 = 9.461673; at 102: 4.9 − 0.02 × 4.781398 − 2.51479604 = 2.289576.
    // Replay: 9.879202 BTC at 101.02 (fee 1.99999396 USDT), 5 sold at 103 (realised 9.9).
    //   At 103.5: 9.9 + 2.48 × 4.879202 − 2.51499396 = 19.485427; at 102: 9.9 + 0.98 × 4.879202 − 2.51499396 = 12.166624.
    // Largest gap 10.023754 at candle 1, over 10000 + 10 × 100 = 11000: 0.0911250363...%.
    const te = replay(onFirstLive, late).trackingErrorPct
    expect(te).toBeDefined()
    expect(toFloat(te!)).toBeCloseTo((10.023754 / 11000) * 100, 12)
  })
})

describe("an order that never reached the venue", () => {
  it("is one mismatch with the replay's fill expected and nothing actual", () => {
    const lost = evidence({
      intents: [intent("i-entry", "entry", close(0), null), intent("i-exit", "exit", close(0), close(0) + 6)],
      fills: [exitFill]
    })
    const parity = replay(onFirstLive, lost)
    console.log(`entry never reached the venue:\n${describeIntentMismatches(parity.worst)}`)
    expect(parity.paperFills).toBe(1)
    expect(parity.replayFills).toBe(2)
    expect(parity.fillMismatches).toBe(1)
    const [m] = parity.worst
    expect(m!.intent).toBe("entry#0")
    // Replayed as reaching the venue at the end of the tolerance: the same fill as the late entry's replay.
    expect(shown(m!.expected)).toBe("buy 9.899 @ 101.02 taker fee 0.019798")
    expect(m!.actual).toBeUndefined()
    expect(m!.fields).toEqual([])
    expect(describeIntentMismatches(parity.worst)).toBe("entry#0 fill 0: expected buy 9.899 @ 101.02 taker fee 0.019798, got nothing")
  })
})

describe("fills that are not compared", () => {
  it("leaves out fills of orders from before the run and fills after the last live candle's close", () => {
    const notCompared = evidence({
      // The exit at 104 is never crossed within the run; the paper venue filled it after the last close (180 s).
      steps: [...tape, ...stepsAt([185, "104.5"])],
      intents: [intent("i-entry", "entry", close(0), close(0) + 5), intent("i-exit", "exit", close(0), close(0) + 6)],
      fills: [
        entryOnTime(close(0) + 55),
        // A resting bid of the instance from before the run, filled by the dip to 102 at 150 s.
        fill("f-old", null, "buy", "maker", "1", "102.5", "0.001", T0 + 150 * SEC),
        fill("f-exit", "i-exit", "sell", "maker", "5", "104", "0.52", close(2) + 5 * SEC)
      ],
      candles: candlesOf([0, 1, 2])
    })
    const parity = replay({ onFirstHeard: false, exitPrice: "104" }, notCompared)
    // Only the entry is compared on the paper side; the replay's exit rests to the end without a fill.
    expect(parity.paperFills).toBe(1)
    expect(parity.replayFills).toBe(1)
    expect(parity.fillMismatches).toBe(0)
  })

  it("counts a fill exactly at the last close", () => {
    const atClose = evidence({
      intents: [intent("i-entry", "entry", close(0), close(0) + 5), intent("i-exit", "exit", close(0), close(0) + 6)],
      fills: [entryOnTime(close(0) + 55), fill("f-exit", "i-exit", "sell", "maker", "5", "104", "0.52", close(2))]
    })
    const parity = replay({ onFirstHeard: false, exitPrice: "104" }, atClose)
    expect(parity.paperFills).toBe(2)
    expect(parity.fillMismatches).toBe(1)
    expect(parity.worst[0]!.intent).toBe("exit#0")
    expect(parity.worst[0]!.expected).toBeUndefined()
  })
})

describe("warm-up candles", () => {
  it("drop the intents of a strategy that trades on a warm-up candle", () => {
    // It trades on the first candle it hears, a warm-up one: dropped, and it never trades again.
    const parity = replay({ onFirstHeard: true, exitPrice: "103" }, evidence({ candles: candlesOf([0, 0, 0]) }))
    expect(parity.replayFills).toBe(0)
    expect(parity.paperFills).toBe(0)
    expect(parity.fillMismatches).toBe(0)
    expect(parity.trackingErrorPct?.toFixed()).toBe("0")
  })

  it("keep the intents of the first live candle", () => {
    // The same strategy trading on the first candle it hears, given no history, trades on the first live one.
    const noHistory = { ...onTime, candles: onTime.candles.filter((c) => !c.warmup) }
    const first = replay({ onFirstHeard: true, exitPrice: "103" }, noHistory)
    expect(first.replayFills).toBe(2)
    expect(first.fillMismatches).toBe(0)
    // A strategy waiting for the first live candle trades on it after the history.
    expect(replay(onFirstLive, onTime).replayFills).toBe(2)
  })
})

describe("what cannot be measured", () => {
  it("leaves the tracking error undefined without an allocation", () => {
    const parity = replay(onFirstLive, { ...onTime, setup: setupOf({ allocation: null }) })
    expect(parity.fillMismatches).toBe(0)
    expect(parity.trackingErrorPct).toBeUndefined()
  })

  it("refuses a run with no live candle", () => {
    const onlyHistory = evidence({ candles: candlesOf([0, 0, 0]).map((c) => ({ ...c, warmup: true })) })
    const outcome = replayPaperRun(entryAndExit, onFirstLive, onlyHistory, TOLERANCE_MS)
    expect(Either.isLeft(outcome)).toBe(true)
    if (Either.isLeft(outcome)) {
      expect(outcome.left._tag).toBe("BacktestSetupInvalid")
      expect(outcome.left.message).toBe("paper run 7 recorded no live candle")
    }
  })
})

describe("a resumed run", () => {
  // The instance traded before the run; its exit (5 @ 103) was still resting when the run started.
  const resumed = (exitFillPrice: string) =>
    evidence({
      setup: setupOf({
        startState: serializeState(entryAndExit, { heard: 3, traded: true }),
        carried: [{ tag: "exit", clientOrderId: "c-before-the-run", side: "sell", type: "limit", baseQty: "5", limitPrice: "103", stopPrice: null }]
      }),
      fills: [fill("f-exit", null, "sell", "maker", "5", exitFillPrice, "0.515", T0 + 90 * SEC)]
    })

  it("starts with the orders it had live, and compares their fills under <tag>#carried", () => {
    const parity = replay(onFirstLive, resumed("103"))
    expect(parity.paperFills).toBe(1)
    expect(parity.replayFills).toBe(1)
    expect(parity.fillMismatches).toBe(0)
  })

  it("counts a carried order's fill that differs", () => {
    const parity = replay(onFirstLive, resumed("103.5"))
    expect(parity.fillMismatches).toBe(1)
    expect(parity.worst[0]!.intent).toBe("exit#carried")
    expect(parity.worst[0]!.fields).toContain("price")
  })
})
