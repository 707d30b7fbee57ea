/**
 * sma-crossover: goes long when the fast simple moving average of candle closes
 * crosses above the slow one, and sells the position when it crosses back below.
 * Entries are market buys (bounded by maxSlippageBps) or limit buys below the
 * close; exits are always market sells, because an exit that does not fill is
 * the expensive failure. A market entry is never cancelled: a death cross while it
 * is pending waits for its fill or rejection and sells what it bought.
 *
 * onCandle is the backtest hot path: the averages are plain numbers updated in
 * O(1) in place, and Decimal math happens only on a crossing.
 */
import { Schema } from "effect"
import { compare, Decimal, min, sign, toFloat, ZERO } from "../src/domain/Decimal.js"
import type { Intent } from "../src/domain/Intent.js"
import { smaPush, smaReady, smaValue, smaWindow, SmaWindowState, type SmaWindow } from "../src/strategy/indicators.js"
import { cancelOrder, FreeFunds, isCancellable, limitOrder, marketBuy, marketSell, positionChange, qtyForQuote, shiftBps, tradingPair } from "../src/strategy/orders.js"
import { DecimalFromString, defineStrategy, isFinalUpdate, Param, result, type HandlerResult, type StrategyView } from "../src/strategy/Strategy.js"

const Params = Schema.Struct({
  fastPeriod: Schema.optionalWith(Param.int("the number of candles in the fast average, 1 to 10000", { min: 1, max: 10000 }), {
    default: () => 9,
    exact: true
  }),
  slowPeriod: Schema.optionalWith(
    Param.int("the number of candles in the slow average, 2 to 10000, more than fastPeriod", { min: 2, max: 10000 }),
    { default: () => 21, exact: true }
  ),
  entry: Schema.optionalWith(Param.choice('how to enter: "market" or "limit"', "market", "limit"), { default: () => "market" as const, exact: true }),
  quoteQty: Schema.optionalWith(Param.decimal("the quote amount spent on each entry, e.g. \"100\"", { positive: true }), {
    default: () => new Decimal("100"),
    exact: true
  }),
  limitOffsetBps: Schema.optionalWith(
    Param.int("for limit entries, how far below the close to bid, 0 to 1000 basis points", { min: 0, max: 1000 }),
    { default: () => 0, exact: true }
  ),
  maxSlippageBps: Schema.optionalWith(
    Param.int("the slippage a market order accepts, 1 to 1000 basis points", { min: 1, max: 1000 }),
    { default: () => 50, exact: true }
  )
}).pipe(Schema.filter((p) => (p.fastPeriod < p.slowPeriod ? true : { path: ["slowPeriod"], message: `${p.slowPeriod} must be more than fastPeriod (${p.fastPeriod})` })))
type Params = typeof Params.Type

interface State {
  fast: SmaWindow
  slow: SmaWindow
  /** 1 while fast > slow, -1 while fast < slow, 0 until both averages are ready. */
  trend: number
  /** Base bought by this strategy and not yet sold, net of fees paid in base. */
  position: Decimal
  entryTag: string | null
  entryCancelSent: boolean
  exitTag: string | null
  /** An exit is owed (the trend is down and base is held) and is retried on the next candle. */
  exitDue: boolean
  seq: number
}

const StateSchema = Schema.mutable(
  Schema.Struct({
    fast: SmaWindowState,
    slow: SmaWindowState,
    trend: Schema.Number,
    position: DecimalFromString,
    entryTag: Schema.NullOr(Schema.String),
    entryCancelSent: Schema.Boolean,
    exitTag: Schema.NullOr(Schema.String),
    exitDue: Schema.Boolean,
    seq: Schema.Number
  })
)

type View = StrategyView<Params>

/**
 * The answer to a candle that places nothing, kept while the state is the same object: the
 * state is updated in place, so one answer serves every such candle instead of one per candle.
 */
let placesNothing: HandlerResult<State> | undefined
const nothingToPlace = (state: State): HandlerResult<State> => (placesNothing?.state === state ? placesNothing : (placesNothing = result(state)))

const nextTag = (state: State, kind: "entry" | "exit"): string => `sma-${kind}-${++state.seq}`

const enter = (state: State, close: Decimal, view: View): HandlerResult<State> => {
  const rules = tradingPair(view, view.symbol)
  if (rules === undefined || state.entryTag !== null || state.exitTag !== null || compare(state.position, rules.minBaseQty) >= 0) return result(state)
  const funds = new FreeFunds(view)
  const quote = min(view.params.quoteQty, funds.available(rules.quote))
  const tag = nextTag(state, "entry")
  let intent: Intent | undefined
  if (view.params.entry === "market") {
    intent = marketBuy({ tag, quoteOrderQty: quote, maxSlippageBps: view.params.maxSlippageBps }, rules, funds)
  } else {
    const limitPrice = shiftBps(close, -view.params.limitOffsetBps)
    intent = limitOrder({ tag, side: "buy", baseQty: qtyForQuote(quote, limitPrice, rules), limitPrice }, rules, funds)
  }
  if (intent === undefined) return result(state)
  state.entryTag = tag
  state.entryCancelSent = false
  return result(state, [intent])
}

const exit = (state: State, price: Decimal, view: View): HandlerResult<State> => {
  state.exitDue = false
  if (state.exitTag !== null) return result(state)
  if (state.entryTag !== null) {
    // The exit follows the entry's final update. A resting limit entry is cancelled first; a market
    // entry cannot be (it fills or is rejected whole), and what it buys is sold once it is final.
    // An entry missing from the view is already final: its update is on its way.
    state.exitDue = true
    const entry = view.openOrders.get(state.entryTag)
    if (state.entryCancelSent || entry === undefined || !isCancellable(entry)) return result(state)
    state.entryCancelSent = true
    return result(state, [cancelOrder(entry)])
  }
  const rules = tradingPair(view, view.symbol)
  if (rules === undefined) {
    state.exitDue = sign(state.position) > 0
    return result(state)
  }
  const funds = new FreeFunds(view)
  const tag = nextTag(state, "exit")
  const intent = marketSell(
    { tag, baseQty: min(state.position, funds.available(rules.base)), maxSlippageBps: view.params.maxSlippageBps, referencePrice: price },
    rules,
    funds
  )
  if (intent === undefined) return result(state)
  state.exitTag = tag
  return result(state, [intent])
}

export default defineStrategy<Params, State>({
  name: "sma-crossover",
  version: "1.0.0",
  params: Params,
  state: StateSchema,
  init: (params) => ({
    fast: smaWindow(params.fastPeriod),
    slow: smaWindow(params.slowPeriod),
    trend: 0,
    position: ZERO,
    entryTag: null,
    entryCancelSent: false,
    exitTag: null,
    exitDue: false,
    seq: 0
  }),
  plots: {
    "fast SMA": (state) => (smaReady(state.fast) ? smaValue(state.fast) : undefined),
    "slow SMA": (state) => (smaReady(state.slow) ? smaValue(state.slow) : undefined)
  },
  onCandle: (state, candle, view) => {
    if (candle.symbol !== view.symbol) return result(state)
    const params = view.params
    if (state.fast.period !== params.fastPeriod || state.slow.period !== params.slowPeriod) {
      // The periods changed between runs: the old windows mean nothing for the new averages.
      state.fast = smaWindow(params.fastPeriod)
      state.slow = smaWindow(params.slowPeriod)
      state.trend = 0
    }
    const close = toFloat(candle.close)
    smaPush(state.fast, close)
    smaPush(state.slow, close)
    if (!smaReady(state.slow)) return nothingToPlace(state)
    const fast = smaValue(state.fast)
    const slow = smaValue(state.slow)
    const trend = fast > slow ? 1 : fast < slow ? -1 : state.trend
    // History feeds the averages only: the host drops what a warm-up candle emits, so nothing
    // may be recorded as entered or exited for it; the first live reading is not a crossing.
    if (candle.warmup === true) {
      state.trend = trend
      return nothingToPlace(state)
    }
    if (trend === state.trend) return state.exitDue ? exit(state, candle.close, view) : nothingToPlace(state)
    const previous = state.trend
    state.trend = trend
    // The first reading after the warm-up is where the averages stand, not a crossing.
    if (previous === 0) return result(state)
    return trend > 0 ? enter(state, candle.close, view) : exit(state, candle.close, view)
  },
  onOrderUpdate: (state, update, view) => {
    if (!isFinalUpdate(update.kind)) return result(state)
    if (update.tag === state.entryTag) {
      state.entryTag = null
      state.entryCancelSent = false
      const price = view.lastPrices.get(view.symbol)
      if (state.trend < 0 && sign(state.position) > 0 && price !== undefined) return exit(state, price, view)
    } else if (update.tag === state.exitTag) {
      state.exitTag = null
      // A rejected exit (e.g. slippage) is retried on the next candle, never in a tight loop.
      if (update.kind !== "fill" && state.trend < 0 && sign(state.position) > 0) state.exitDue = true
    }
    return result(state)
  },
  onFill: (state, fill, view) => {
    const base = view.pairs.get(view.symbol)?.base
    if (base === undefined) return result(state)
    const position = state.position.add(positionChange(fill, base))
    state.position = sign(position) > 0 ? position : ZERO
    // A buy that lands after the trend turned down (a late fill of a cancelled entry) is sold on the next candle.
    if (fill.side === "buy" && state.trend < 0) state.exitDue = true
    return result(state)
  }
})
