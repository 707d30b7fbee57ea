/**
 * dca (dollar-cost averaging): each time the instance's cron `schedule` fires it
 * buys `quoteQty` of the base asset with a market order bounded by
 * maxSlippageBps. It skips a run — it never catches up later — when the previous
 * buy is still working, the free quote balance is short, the pair is halted, or
 * the optional `maxQuoteTotal` is spent (the last buy spends what is left of
 * it). A timer delivered twice for the same scheduled time buys once.
 */
import { Schema } from "effect"
import { Decimal, ZERO } from "../src/domain/Decimal.js"
import { FreeFunds, marketBuy, tradingPair } from "../src/strategy/orders.js"
import { DecimalFromString, defineStrategy, isFinalUpdate, Param, result, SCHEDULE_TIMER } from "../src/strategy/Strategy.js"

const Params = Schema.Struct({
  quoteQty: Schema.optionalWith(Param.decimal("the quote amount spent on each scheduled buy, e.g. \"25\"", { positive: true }), {
    default: () => new Decimal("25"),
    exact: true
  }),
  maxSlippageBps: Schema.optionalWith(
    Param.int("the slippage each market buy accepts, 1 to 1000 basis points", { min: 1, max: 1000 }),
    { default: () => 50, exact: true }
  ),
  maxQuoteTotal: Schema.optionalWith(
    Param.decimal("the most quote the instance spends in all, e.g. \"1000\"; no limit when absent", { positive: true }),
    { exact: true }
  )
})
type Params = typeof Params.Type

const StateSchema = Schema.mutable(
  Schema.Struct({
    /** The scheduled time of the last run acted on, so a repeated timer is ignored. */
    lastRunAt: Schema.Number,
    /** The tag of the buy in flight, if any. */
    buyTag: Schema.NullOr(Schema.String),
    /** Quote spent so far, from fills. */
    spent: DecimalFromString,
    seq: Schema.Number
  })
)
type State = typeof StateSchema.Type

export default defineStrategy<Params, State>({
  name: "dca",
  version: "1.0.0",
  params: Params,
  state: StateSchema,
  init: () => ({ lastRunAt: 0, buyTag: null, spent: ZERO, seq: 0 }),
  onTimer: (state, timer, view) => {
    if (timer.name !== SCHEDULE_TIMER || timer.scheduledAt <= state.lastRunAt) return result(state)
    state.lastRunAt = timer.scheduledAt
    const rules = tradingPair(view, view.symbol)
    if (rules === undefined || state.buyTag !== null) return result(state)
    const { quoteQty, maxQuoteTotal, maxSlippageBps } = view.params
    const allowance = maxQuoteTotal === undefined ? quoteQty : Decimal.min(quoteQty, maxQuoteTotal.sub(state.spent))
    const tag = `dca-${state.seq + 1}`
    const intent = marketBuy({ tag, quoteOrderQty: allowance, maxSlippageBps }, rules, new FreeFunds(view))
    if (intent === undefined) return result(state)
    state.seq++
    state.buyTag = tag
    return result(state, [intent])
  },
  onOrderUpdate: (state, update) => {
    if (update.tag === state.buyTag && isFinalUpdate(update.kind)) state.buyTag = null
    return result(state)
  },
  onFill: (state, fill) => {
    if (fill.side === "buy") state.spent = state.spent.add(fill.quoteQty)
    return result(state)
  }
})
