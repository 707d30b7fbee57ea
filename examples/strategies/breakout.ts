/**
 * breakout: a Donchian channel breakout, as an example of a strategy kept
 * outside svcbot's source tree (a folder mounted into the container at
 * /strategies, named in the config as "strategy": "/strategies/breakout.ts").
 *
 * When a candle closes above the highest high of the `lookback` candles before
 * it and the instance holds nothing, it buys `quoteQty` of the base asset at
 * market; when a candle closes below the lowest low of those candles, it sells
 * what it holds. One order at a time: nothing new while one is working.
 *
 * It imports svcbot only through the public names (svcbot/strategy,
 * svcbot/strategy/orders, svcbot/decimal), which the plugin loader resolves to
 * the modules the daemon runs, and `effect` for its schemas.
 */
import { Schema } from "effect"
import { Decimal, ZERO } from "svcbot/decimal"
import { DecimalFromString, defineStrategy, isFinalUpdate, Param, result } from "svcbot/strategy"
import { FreeFunds, marketBuy, marketSell, positionChange, tradingPair } from "svcbot/strategy/orders"

const Params = Schema.Struct({
  lookback: Param.int("how many closed candles the channel spans, 2 to 500", { min: 2, max: 500 }),
  quoteQty: Param.decimal("the quote amount each entry spends, e.g. \"100\"", { positive: true }),
  maxSlippageBps: Schema.optionalWith(Param.int("the slippage each market order accepts, 1 to 1000 basis points", { min: 1, max: 1000 }), {
    default: () => 50,
    exact: true
  })
})
type Params = typeof Params.Type

const StateSchema = Schema.mutable(
  Schema.Struct({
    /** Highs and lows of the last `lookback` closed candles, oldest first. */
    highs: Schema.mutable(Schema.Array(DecimalFromString)),
    lows: Schema.mutable(Schema.Array(DecimalFromString)),
    /** Base asset held, from this instance's own fills. */
    position: DecimalFromString,
    /** The tag of the order in flight, if any. */
    orderTag: Schema.NullOr(Schema.String),
    seq: Schema.Number
  })
)
type State = typeof StateSchema.Type

export default defineStrategy<Params, State>({
  name: "breakout",
  version: "1.0.0",
  params: Params,
  state: StateSchema,
  init: () => ({ highs: [], lows: [], position: ZERO, orderTag: null, seq: 0 }),
  onCandle: (state, candle, view) => {
    const { lookback, quoteQty, maxSlippageBps } = view.params
    const full = state.highs.length === lookback
    const channelHigh = full ? Decimal.max(...state.highs) : undefined
    const channelLow = full ? Decimal.min(...state.lows) : undefined
    state.highs.push(candle.high)
    state.lows.push(candle.low)
    if (state.highs.length > lookback) {
      state.highs.shift()
      state.lows.shift()
    }
    const rules = tradingPair(view, view.symbol)
    if (channelHigh === undefined || channelLow === undefined || rules === undefined || state.orderTag !== null) return result(state)
    const tag = `breakout-${state.seq + 1}`
    const funds = new FreeFunds(view)
    const intent = state.position.isZero()
      ? candle.close.gt(channelHigh)
        ? marketBuy({ tag, quoteOrderQty: quoteQty, maxSlippageBps }, rules, funds)
        : undefined
      : candle.close.lt(channelLow)
        ? marketSell({ tag, baseQty: state.position, maxSlippageBps, referencePrice: candle.close }, rules, funds)
        : undefined
    if (intent === undefined) return result(state)
    state.seq++
    state.orderTag = tag
    return result(state, [intent])
  },
  onOrderUpdate: (state, update) => {
    if (update.tag === state.orderTag && isFinalUpdate(update.kind)) state.orderTag = null
    return result(state)
  },
  onFill: (state, fill, view) => {
    const base = view.pairs.get(view.symbol)?.base
    if (base !== undefined) state.position = state.position.add(positionChange(fill, base))
    return result(state)
  }
})
