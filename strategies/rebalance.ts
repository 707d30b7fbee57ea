/**
 * rebalance: keeps the portfolio of the assets named in `targets` at their
 * target weights, valued in `quoteAsset`. Each time the cron `schedule` fires it
 * values every target asset (free + locked) at its last price, and trades each
 * asset whose weight is off target by more than thresholdBps with market orders
 * bounded by maxSlippageBps: over-weight assets are sold, under-weight assets are
 * bought from the free quote balance. Sales settle after the run, so a portfolio
 * far from its targets converges over a few runs instead of borrowing ahead.
 *
 * Assets outside `targets` are not touched. A run is skipped while an order of
 * the previous run is still working, or when any target asset has no price yet.
 * Each non-quote asset trades on the pair `<asset><quoteAsset>` (e.g. ETHUSDT).
 */
import { Schema } from "effect"
import { Decimal, ONE_BPS, ZERO } from "../src/domain/Decimal.js"
import type { Intent } from "../src/domain/Intent.js"
import { FreeFunds, marketBuy, marketSell, tradingPair } from "../src/strategy/orders.js"
import { defineStrategy, isFinalUpdate, Param, result, SCHEDULE_TIMER, type PairRules, type StrategyView } from "../src/strategy/Strategy.js"

const Weight = Param.decimal('the target weight of the asset, 0 to 1; all weights add up to 1, e.g. { "BTC": "0.6", "USDT": "0.4" }', { min: 0, max: 1 })

const Params = Schema.Struct({
  quoteAsset: Schema.optionalWith(Param.asset('the asset the portfolio is valued in and trades against, e.g. "USDT"'), { default: () => "USDT", exact: true }),
  targets: Schema.optionalWith(
    Schema.Record({ key: Param.asset("an asset ticker"), value: Weight }).annotations({
      description: 'target weights by asset, adding up to 1, e.g. { "BTC": "0.6", "USDT": "0.4" }'
    }),
    { default: () => ({ BTC: new Decimal("0.5"), USDT: new Decimal("0.5") }), exact: true }
  ),
  thresholdBps: Schema.optionalWith(
    Param.int("how far an asset's weight may drift from its target before it is traded, 1 to 5000 basis points", { min: 1, max: 5000 }),
    { default: () => 100, exact: true }
  ),
  maxSlippageBps: Schema.optionalWith(
    Param.int("the slippage each market order accepts, 1 to 1000 basis points", { min: 1, max: 1000 }),
    { default: () => 50, exact: true }
  )
}).pipe(
  Schema.filter((p) => {
    const assets = Object.keys(p.targets)
    if (assets.filter((asset) => asset !== p.quoteAsset).length === 0) {
      return { path: ["targets"], message: `names no asset besides the quote asset ${p.quoteAsset}` }
    }
    const sum = Object.values(p.targets).reduce((total, weight) => total.add(weight), ZERO)
    return sum.eq(1) ? true : { path: ["targets"], message: `weights add up to ${sum.toFixed()}, not 1` }
  })
)
type Params = typeof Params.Type

const StateSchema = Schema.mutable(
  Schema.Struct({
    /** The scheduled time of the last run acted on, so a repeated timer is ignored. */
    lastRunAt: Schema.Number,
    /** Tags of the previous run's orders that are not final yet. */
    working: Schema.mutable(Schema.Array(Schema.String)),
    seq: Schema.Number
  })
)
type State = typeof StateSchema.Type

const symbolOf = (asset: string, params: Params): string => `${asset}${params.quoteAsset}`

const holding = (view: StrategyView, asset: string): Decimal => {
  const balance = view.balances.get(asset)
  return balance === undefined ? ZERO : balance.free.add(balance.locked)
}

interface Position {
  readonly asset: string
  readonly target: Decimal
  readonly value: Decimal
  /** Undefined for the quote asset. */
  readonly price?: Decimal
}

/** Every target asset valued in quote, or undefined when one has no price yet. */
const valuePortfolio = (view: StrategyView<Params>): ReadonlyArray<Position> | undefined => {
  const params = view.params
  const positions: Array<Position> = []
  for (const [asset, target] of Object.entries(params.targets)) {
    if (asset === params.quoteAsset) {
      positions.push({ asset, target, value: holding(view, asset) })
      continue
    }
    const price = view.lastPrices.get(symbolOf(asset, params))
    if (price === undefined) return undefined
    positions.push({ asset, target, value: holding(view, asset).mul(price), price })
  }
  return positions
}

export default defineStrategy<Params, State>({
  name: "rebalance",
  version: "1.0.0",
  params: Params,
  state: StateSchema,
  symbols: (params) => Object.keys(params.targets).filter((asset) => asset !== params.quoteAsset).map((asset) => symbolOf(asset, params)),
  init: () => ({ lastRunAt: 0, working: [], seq: 0 }),
  onTimer: (state, timer, view) => {
    if (timer.name !== SCHEDULE_TIMER || timer.scheduledAt <= state.lastRunAt) return result(state)
    state.lastRunAt = timer.scheduledAt
    if (state.working.length > 0) return result(state)
    const positions = valuePortfolio(view)
    if (positions === undefined) return result(state)
    const total = positions.reduce((sum, position) => sum.add(position.value), ZERO)
    if (total.lte(0)) return result(state)
    const { thresholdBps, maxSlippageBps } = view.params
    const run = ++state.seq
    const funds = new FreeFunds(view)
    const intents: Array<Intent> = []
    const shortfalls: Array<{ readonly tag: string; readonly rules: PairRules; readonly quote: Decimal }> = []
    for (const { asset, target, value, price } of positions) {
      const rules = price === undefined ? undefined : tradingPair(view, symbolOf(asset, view.params))
      const drift = value.sub(total.mul(target))
      if (price === undefined || rules === undefined || drift.abs().lte(total.mul(thresholdBps).mul(ONE_BPS))) continue
      const tag = `rebalance-${run}-${asset}`
      if (drift.lt(0)) {
        shortfalls.push({ tag, rules, quote: drift.neg() })
        continue
      }
      const sell = marketSell({ tag, baseQty: Decimal.min(drift.div(price), funds.available(rules.base)), maxSlippageBps, referencePrice: price }, rules, funds)
      if (sell !== undefined) intents.push(sell)
    }
    // Buys come after every sell is decided and spend only the quote that is free now.
    for (const { tag, rules, quote } of shortfalls) {
      const buy = marketBuy({ tag, quoteOrderQty: Decimal.min(quote, funds.available(rules.quote)), maxSlippageBps }, rules, funds)
      if (buy !== undefined) intents.push(buy)
    }
    state.working = intents.map((intent) => intent.tag)
    return result(state, intents)
  },
  onOrderUpdate: (state, update) => {
    if (isFinalUpdate(update.kind)) state.working = state.working.filter((tag) => tag !== update.tag)
    return result(state)
  }
})
