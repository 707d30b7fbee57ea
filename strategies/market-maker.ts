/**
 * market-maker: rests one bid and one ask around the last price, halfSpreadBps
 * away on each side. Inventory skews both quotes: holding more base than at the
 * start moves them down (to sell more readily and buy less readily), holding
 * less moves them up, by up to skewBps at maxInventory; at maxInventory the
 * side that would grow the inventory further is not quoted at all.
 *
 * A quote is cancelled and replaced only when it is more than requoteBps away
 * from where it should be, so a jittering price does not turn into order spam,
 * and a replacement is placed only after the cancel is final, so the funds of
 * the old quote are never committed twice.
 */
import { Schema } from "effect"
import { Decimal, ONE_BPS, ZERO } from "../src/domain/Decimal.js"
import type { Intent } from "../src/domain/Intent.js"
import type { Side } from "../src/svc/Dialect.js"
import { FreeFunds, limitOrder, positionChange, roundPrice, shiftBps, tradingPair } from "../src/strategy/orders.js"
import { DecimalFromString, defineStrategy, isFinalUpdate, Param, result, type HandlerResult, type PairRules, type StrategyView } from "../src/strategy/Strategy.js"

const Params = Schema.Struct({
  halfSpreadBps: Schema.optionalWith(Param.int("how far each quote rests from the (skewed) mid, 1 to 5000 basis points", { min: 1, max: 5000 }), {
    default: () => 10,
    exact: true
  }),
  orderQty: Schema.optionalWith(Param.decimal("the base quantity of each quote, e.g. \"0.001\"", { positive: true }), {
    default: () => new Decimal("0.001"),
    exact: true
  }),
  maxInventory: Schema.optionalWith(
    Param.decimal("the base inventory, up or down from the start, at which the skew is full and the growing side stops quoting", { positive: true }),
    { default: () => new Decimal("0.01"), exact: true }
  ),
  skewBps: Schema.optionalWith(
    Param.int("how far the quotes move at maxInventory, 0 to 5000 basis points", { min: 0, max: 5000 }),
    { default: () => 0, exact: true }
  ),
  requoteBps: Schema.optionalWith(
    Param.int("how far a quote may drift from its target before it is replaced, 1 to 5000 basis points; half of halfSpreadBps when absent", { min: 1, max: 5000 }),
    { exact: true }
  )
})
type Params = typeof Params.Type
type View = StrategyView<Params>

const Quote = Schema.mutable(Schema.Struct({ tag: Schema.String, price: DecimalFromString, cancelSent: Schema.Boolean }))
type Quote = typeof Quote.Type

const StateSchema = Schema.mutable(
  Schema.Struct({
    bid: Schema.NullOr(Quote),
    ask: Schema.NullOr(Quote),
    /** Base bought minus base sold by this instance, net of fees paid in base. */
    inventory: DecimalFromString,
    seq: Schema.Number
  })
)
type State = typeof StateSchema.Type

/** Where the bid and ask should rest now; undefined for a side that is not quoted. */
const targets = (mid: Decimal, state: State, view: View, rules: PairRules): Record<Side, Decimal | undefined> => {
  const { halfSpreadBps, maxInventory, skewBps } = view.params
  const fullness = Decimal.max(-1, Decimal.min(1, state.inventory.div(maxInventory)))
  const reservation = shiftBps(mid, fullness.mul(skewBps).neg())
  return {
    buy: fullness.gte(1) ? undefined : roundPrice(shiftBps(reservation, -halfSpreadBps), "buy", rules),
    sell: fullness.lte(-1) ? undefined : roundPrice(shiftBps(reservation, halfSpreadBps), "sell", rules)
  }
}

const requote = (state: State, mid: Decimal, view: View): HandlerResult<State> => {
  const rules = tradingPair(view, view.symbol)
  if (rules === undefined) return result(state)
  const wanted = targets(mid, state, view, rules)
  const requoteBps = view.params.requoteBps ?? Math.max(1, Math.floor(view.params.halfSpreadBps / 2))
  const funds = new FreeFunds(view)
  const intents: Array<Intent> = []
  for (const side of ["buy", "sell"] as const) {
    const key = side === "buy" ? "bid" : "ask"
    const quote = state[key]
    const target = wanted[side]
    if (quote !== null) {
      const stale = target === undefined || quote.price.sub(target).abs().gt(target.mul(requoteBps).mul(ONE_BPS))
      if (stale && !quote.cancelSent) {
        quote.cancelSent = true
        intents.push({ type: "cancel", tag: quote.tag })
      }
      continue
    }
    if (target === undefined) continue
    const tag = `mm-${key}-${state.seq + 1}`
    const intent = limitOrder({ tag, side, baseQty: view.params.orderQty, limitPrice: target }, rules, funds)
    if (intent === undefined) continue
    state.seq++
    state[key] = { tag, price: intent.limitPrice, cancelSent: false }
    intents.push(intent)
  }
  return result(state, intents)
}

export default defineStrategy<Params, State>({
  name: "market-maker",
  version: "1.0.0",
  params: Params,
  state: StateSchema,
  init: () => ({ bid: null, ask: null, inventory: ZERO, seq: 0 }),
  onTicker: (state, ticker, view) => (ticker.symbol === view.symbol ? requote(state, ticker.price, view) : result(state)),
  onOrderUpdate: (state, update, view) => {
    if (!isFinalUpdate(update.kind)) return result(state)
    if (state.bid?.tag === update.tag) state.bid = null
    else if (state.ask?.tag === update.tag) state.ask = null
    else return result(state)
    // Replace the quote now rather than at the next ticker.
    const mid = view.lastPrices.get(view.symbol)
    return mid === undefined ? result(state) : requote(state, mid, view)
  },
  onFill: (state, fill, view) => {
    const base = view.pairs.get(view.symbol)?.base
    if (base !== undefined) state.inventory = state.inventory.add(positionChange(fill, base))
    return result(state)
  }
})
