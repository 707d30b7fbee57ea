/**
 * protective-stop: keeps a stop-limit sell under the base held on the symbol (a
 * position bought by hand or by another strategy) and trails it up. The stop
 * rests stopBps below the highest price seen since the position appeared, its
 * limit limitOffsetBps below the stop so it still fills in a fast fall. The
 * stop is moved only when it would rise by at least trailStepBps, or when more
 * base arrived to protect; a move is a cancel followed, once the cancel is
 * final, by a new stop (the API has no amend), so the position is briefly
 * unprotected during each move.
 *
 * It protects the free base up to maxBaseQty (all of it when absent). A stop
 * that ends without filling and without being cancelled by the strategy (e.g.
 * rejected) is placed again only after retryAfterMs.
 */
import { Schema } from "effect"
import { Decimal } from "../src/domain/Decimal.js"
import { FreeFunds, roundQty, shiftBps, stopLimitOrder, tradingPair } from "../src/strategy/orders.js"
import { DecimalFromString, defineStrategy, isFinalUpdate, Param, result, type HandlerResult, type StrategyView } from "../src/strategy/Strategy.js"

const Params = Schema.Struct({
  stopBps: Schema.optionalWith(Param.int("how far below the highest price the stop rests, 1 to 5000 basis points", { min: 1, max: 5000 }), {
    default: () => 200,
    exact: true
  }),
  limitOffsetBps: Schema.optionalWith(
    Param.int("how far below the stop its limit price is, 0 to 1000 basis points", { min: 0, max: 1000 }),
    { default: () => 50, exact: true }
  ),
  trailStepBps: Schema.optionalWith(
    Param.int("the least rise that moves the stop up, 1 to 5000 basis points", { min: 1, max: 5000 }),
    { default: () => 25, exact: true }
  ),
  maxBaseQty: Schema.optionalWith(
    Param.decimal("the most base the stop protects, e.g. \"0.5\"; all free base when absent", { positive: true }),
    { exact: true }
  ),
  retryAfterMs: Schema.optionalWith(
    Param.int("how long to wait before placing again a stop that ended unfilled, 1000 to 86400000 ms", { min: 1000, max: 86_400_000 }),
    { default: () => 30_000, exact: true }
  )
})
type Params = typeof Params.Type
type View = StrategyView<Params>

const Stop = Schema.mutable(Schema.Struct({ tag: Schema.String, stopPrice: DecimalFromString, baseQty: DecimalFromString, cancelSent: Schema.Boolean }))

const StateSchema = Schema.mutable(
  Schema.Struct({
    stop: Schema.NullOr(Stop),
    /** The highest price since the position appeared; null while nothing is held. */
    highWater: Schema.NullOr(DecimalFromString),
    /** No new stop before this time (ms). */
    retryAt: Schema.Number,
    seq: Schema.Number
  })
)
type State = typeof StateSchema.Type

const protect = (state: State, price: Decimal, view: View): HandlerResult<State> => {
  const rules = tradingPair(view, view.symbol)
  if (rules === undefined) return result(state)
  const { stopBps, limitOffsetBps, trailStepBps, maxBaseQty } = view.params
  const funds = new FreeFunds(view)
  const highWater = state.highWater === null || price.gt(state.highWater) ? price : state.highWater
  const stopPrice = shiftBps(highWater, -stopBps)
  const stop = state.stop
  if (stop !== null) {
    state.highWater = highWater
    if (stop.cancelSent) return result(state)
    const room = maxBaseQty === undefined ? funds.available(rules.base) : Decimal.min(funds.available(rules.base), maxBaseQty.sub(stop.baseQty))
    const topUp = roundQty(room, rules)
    const moreToProtect = topUp.gt(0) && topUp.gte(rules.minBaseQty)
    const trails = stopPrice.gte(shiftBps(stop.stopPrice, trailStepBps))
    if (!moreToProtect && !trails) return result(state)
    stop.cancelSent = true
    return result(state, [{ type: "cancel", tag: stop.tag }])
  }
  if (view.now < state.retryAt) return result(state)
  const free = funds.available(rules.base)
  const baseQty = maxBaseQty === undefined ? free : Decimal.min(free, maxBaseQty)
  const tag = `stop-${state.seq + 1}`
  const intent = stopLimitOrder({ tag, side: "sell", baseQty, stopPrice, limitPrice: shiftBps(stopPrice, -limitOffsetBps) }, rules, funds)
  if (intent === undefined) {
    // Nothing (or dust) is held: the next position's trail starts from its own price.
    state.highWater = null
    return result(state)
  }
  state.highWater = highWater
  state.seq++
  state.stop = { tag, stopPrice: intent.stopPrice, baseQty: intent.baseQty, cancelSent: false }
  return result(state, [intent])
}

export default defineStrategy<Params, State>({
  name: "protective-stop",
  version: "1.0.0",
  params: Params,
  state: StateSchema,
  init: () => ({ stop: null, highWater: null, retryAt: 0, seq: 0 }),
  onTicker: (state, ticker, view) => (ticker.symbol === view.symbol ? protect(state, ticker.price, view) : result(state)),
  onCandle: (state, candle, view) => (candle.symbol === view.symbol ? protect(state, candle.close, view) : result(state)),
  onOrderUpdate: (state, update, view) => {
    const stop = state.stop
    if (stop === null || update.tag !== stop.tag || !isFinalUpdate(update.kind)) return result(state)
    state.stop = null
    if (update.kind === "fill") {
      state.highWater = null
      return result(state)
    }
    if (!stop.cancelSent) {
      state.retryAt = view.now + view.params.retryAfterMs
      return result(state)
    }
    // The strategy's own cancel (a trail or a top-up): the new stop goes in at once.
    const price = view.lastPrices.get(view.symbol)
    return price === undefined ? result(state) : protect(state, price, view)
  }
})
