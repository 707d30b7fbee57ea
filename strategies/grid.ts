/**
 * grid: a ladder of resting limit orders on evenly spaced price lines between
 * lowerPrice and upperPrice (when both are absent, rangeBps below and above the first
 * price, so that the grid runs on any market without knowing its price). At the first price it leaves the line nearest the
 * price empty, bids on every line below and offers on every line above (as far
 * as the free balance goes). When a bid on line i fills it offers the bought
 * quantity on line i + 1; when an offer on line j fills it bids on line j - 1.
 * The empty line moves with the price, so each line holds at most one order and
 * every filled order is replaced by its counterpart — the grid's profit per
 * round trip is one line spacing.
 *
 * An order that ends without filling (rejected, refused, cancelled, not placed)
 * is placed again on the first price event after retryAfterMs, so a rejection
 * never turns into a loop of placements.
 */
import { Schema } from "effect"
import { Decimal, quantize } from "../src/domain/Decimal.js"
import type { Intent } from "../src/domain/Intent.js"
import type { Side } from "../src/svc/Dialect.js"
import { FreeFunds, limitOrder, tradingPair } from "../src/strategy/orders.js"
import { defineStrategy, isFinalUpdate, Param, result, type HandlerResult, type PairRules, type StrategyView } from "../src/strategy/Strategy.js"

const Params = Schema.Struct({
  lowerPrice: Schema.optionalWith(Param.decimal("the lowest grid line, a price such as \"25000\"; give it with upperPrice", { positive: true }), { exact: true }),
  upperPrice: Schema.optionalWith(Param.decimal("the highest grid line, a price above lowerPrice; give it with lowerPrice", { positive: true }), { exact: true }),
  rangeBps: Schema.optionalWith(
    Param.int("without lowerPrice and upperPrice: how far below and above the first price the ladder reaches, 1 to 5000 basis points", { min: 1, max: 5000 }),
    { default: () => 500, exact: true }
  ),
  levels: Schema.optionalWith(Param.int("the number of grid lines, 3 to 200", { min: 3, max: 200 }), { default: () => 11, exact: true }),
  orderQty: Schema.optionalWith(Param.decimal("the base quantity of each order, e.g. \"0.001\"", { positive: true }), {
    default: () => new Decimal("0.001"),
    exact: true
  }),
  retryAfterMs: Schema.optionalWith(
    Param.int("how long a line waits before an order that ended unfilled is placed again, 1000 to 86400000 ms", { min: 1000, max: 86_400_000 }),
    { default: () => 30_000, exact: true }
  )
}).pipe(
  Schema.filter((p) => {
    if (p.lowerPrice === undefined && p.upperPrice === undefined) return true
    if (p.lowerPrice === undefined) return { path: ["lowerPrice"], message: "is missing: give both bounds, or neither for a ladder around the first price" }
    if (p.upperPrice === undefined) return { path: ["upperPrice"], message: "is missing: give both bounds, or neither for a ladder around the first price" }
    return p.upperPrice.gt(p.lowerPrice) ? true : { path: ["upperPrice"], message: `${p.upperPrice.toFixed()} must be above lowerPrice (${p.lowerPrice.toFixed()})` }
  })
)
type Params = typeof Params.Type
type View = StrategyView<Params>

const Line = Schema.mutable(
  Schema.Struct({
    /** The order this line should hold; null for the empty line and for lines the funds did not cover. */
    side: Schema.NullOr(Schema.Literal("buy", "sell")),
    /** The tag of the line's order from its intent until its final update. */
    tag: Schema.NullOr(Schema.String),
    /** No placement on this line before this time (ms). */
    retryAt: Schema.Number
  })
)
type Line = typeof Line.Type

const StateSchema = Schema.mutable(
  Schema.Struct({
    /** The ladder the lines were laid out for; a different ladder in the params starts over. */
    ladder: Schema.String,
    /** The bounds the lines were laid out between (from the params, or around the first price); empty before the first layout. */
    lowerPrice: Schema.optionalWith(Schema.String, { default: () => "", exact: true }),
    upperPrice: Schema.optionalWith(Schema.String, { default: () => "", exact: true }),
    lines: Schema.mutable(Schema.Array(Line)),
    seq: Schema.Number
  })
)
type State = typeof StateSchema.Type

const ladderOf = (params: Params): string =>
  params.lowerPrice === undefined || params.upperPrice === undefined
    ? `around the first price ±${params.rangeBps} bps:${params.levels}`
    : `${params.lowerPrice.toFixed()}:${params.upperPrice.toFixed()}:${params.levels}`

/** The ladder's bounds: the params', else rangeBps either side of `price`. */
const boundsAt = (params: Params, price: Decimal): { readonly lower: Decimal; readonly upper: Decimal } => {
  if (params.lowerPrice !== undefined && params.upperPrice !== undefined) return { lower: params.lowerPrice, upper: params.upperPrice }
  const reach = price.mul(params.rangeBps).div(10_000)
  return { lower: price.sub(reach), upper: price.add(reach) }
}

/** Line prices, each on the tick; throws when the spacing is finer than the tick (two lines on one price). */
const linePrices = (state: State, levels: number, rules: PairRules): ReadonlyArray<Decimal> => {
  const lower = new Decimal(state.lowerPrice)
  const spacing = new Decimal(state.upperPrice).sub(lower).div(levels - 1)
  const prices = Array.from({ length: levels }, (_, i) => quantize(lower.add(spacing.mul(i)), rules.tickSize, "halfEven"))
  for (let i = 1; i < prices.length; i++) {
    if (prices[i]!.lte(prices[i - 1]!)) {
      throw new Error(`grid spacing ${spacing.toFixed()} is finer than the tick size ${rules.tickSize.toFixed()} of ${rules.symbol}: use fewer levels or a wider range`)
    }
  }
  return prices
}

const place = (state: State, index: number, side: Side, prices: ReadonlyArray<Decimal>, view: View, rules: PairRules, funds: FreeFunds): Intent | undefined => {
  const line = state.lines[index]!
  const tag = `grid-${side}-${index}-${state.seq + 1}`
  const intent = limitOrder({ tag, side, baseQty: view.params.orderQty, limitPrice: prices[index]! }, rules, funds)
  if (intent === undefined) {
    line.retryAt = view.now + view.params.retryAfterMs
    return undefined
  }
  state.seq++
  line.tag = tag
  return intent
}

/** Lays the ladder out around `price`: bids outward from the empty line down, offers outward up, while funds last. */
const layOut = (state: State, price: Decimal, view: View, rules: PairRules): HandlerResult<State> => {
  const bounds = boundsAt(view.params, price)
  state.lowerPrice = bounds.lower.toFixed()
  state.upperPrice = bounds.upper.toFixed()
  const prices = linePrices(state, view.params.levels, rules)
  let empty = 0
  for (let i = 1; i < prices.length; i++) {
    if (prices[i]!.sub(price).abs().lt(prices[empty]!.sub(price).abs())) empty = i
  }
  state.ladder = ladderOf(view.params)
  state.lines = prices.map(() => ({ side: null, tag: null, retryAt: 0 }))
  const funds = new FreeFunds(view)
  const intents: Array<Intent> = []
  const arm = (index: number, side: Side): boolean => {
    const intent = place(state, index, side, prices, view, rules, funds)
    if (intent === undefined) return false
    state.lines[index]!.side = side
    intents.push(intent)
    return true
  }
  for (let i = empty - 1; i >= 0; i--) if (!arm(i, "buy")) break
  for (let i = empty + 1; i < prices.length; i++) if (!arm(i, "sell")) break
  // Nothing was affordable (e.g. the wallet is not funded yet): lay out again at the next price.
  if (intents.length === 0) state.ladder = ""
  return result(state, intents)
}

/** Places every line that should hold an order and has none, once its retry time has come. */
const rearm = (state: State, view: View, rules: PairRules): HandlerResult<State> => {
  const due = state.lines.some((line) => line.side !== null && line.tag === null && line.retryAt <= view.now)
  if (!due) return result(state)
  const prices = linePrices(state, view.params.levels, rules)
  const funds = new FreeFunds(view)
  const intents: Array<Intent> = []
  state.lines.forEach((line, index) => {
    if (line.side === null || line.tag !== null || line.retryAt > view.now) return
    const intent = place(state, index, line.side, prices, view, rules, funds)
    if (intent !== undefined) intents.push(intent)
  })
  return result(state, intents)
}

const onPrice = (state: State, symbol: string, price: Decimal, view: View): HandlerResult<State> => {
  if (symbol !== view.symbol) return result(state)
  const rules = tradingPair(view, view.symbol)
  if (rules === undefined) return result(state)
  if (state.ladder !== ladderOf(view.params)) {
    // A new ladder: cancel what the old one still has working, lay the new one out once those are final.
    // A line with a tag but no side is one whose cancel was already sent.
    const toCancel = state.lines.filter((line) => line.tag !== null && line.side !== null)
    for (const line of toCancel) line.side = null
    if (state.lines.some((line) => line.tag !== null)) return result(state, toCancel.map((line): Intent => ({ type: "cancel", tag: line.tag! })))
    return layOut(state, price, view, rules)
  }
  return rearm(state, view, rules)
}

export default defineStrategy<Params, State>({
  name: "grid",
  version: "1.0.0",
  params: Params,
  state: StateSchema,
  init: () => ({ ladder: "", lowerPrice: "", upperPrice: "", lines: [], seq: 0 }),
  onTicker: (state, ticker, view) => onPrice(state, ticker.symbol, ticker.price, view),
  onCandle: (state, candle, view) => onPrice(state, candle.symbol, candle.close, view),
  onOrderUpdate: (state, update, view) => {
    if (!isFinalUpdate(update.kind)) return result(state)
    const index = state.lines.findIndex((line) => line.tag === update.tag)
    const line = state.lines[index]
    if (line === undefined) return result(state)
    line.tag = null
    if (update.kind !== "fill" || line.side === null) {
      line.retryAt = view.now + view.params.retryAfterMs
      return result(state)
    }
    const filledSide = line.side
    line.side = null
    const counter = filledSide === "buy" ? index + 1 : index - 1
    const target = state.lines[counter]
    const rules = tradingPair(view, view.symbol)
    // The counterpart line is normally the empty one; if it still holds an order the fill is not paired.
    if (target === undefined || target.tag !== null || rules === undefined) return result(state)
    target.side = filledSide === "buy" ? "sell" : "buy"
    target.retryAt = 0
    const intent = place(state, counter, target.side, linePrices(state, view.params.levels, rules), view, rules, new FreeFunds(view))
    return result(state, intent === undefined ? [] : [intent])
  }
})
