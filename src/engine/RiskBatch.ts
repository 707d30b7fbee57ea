/**
 * The risk decisions of one strategy's batch of placements: a pure function of the
 * unfinished orders, what the market and the books said before the batch, and the
 * placements in the order the strategy emitted them. Each placement is checked with
 * `assess` against the orders before it, those approved earlier in the batch
 * included: their locks are reserved and they count against the caps.
 */
import { type Decimal, ZERO } from "../domain/Decimal.js"
import type { PlaceIntent } from "../domain/Intent.js"
import type { OrderRow } from "../store/OrderRow.js"
import type { Balance } from "../strategy/Strategy.js"
import { stillHeld } from "./Portfolio.js"
import { type Assessment, assess, type ListedPair, type RiskLimits } from "./Risk.js"

/** What the risk checks read of an unfinished order. */
export type HeldOrder = Pick<OrderRow, "strategyId" | "tag" | "lockAsset" | "lockAmount" | "limitPrice" | "baseQty" | "filledBaseQty" | "acceptedAt">

/** What a batch's checks read from the market and the books, once, before the batch. */
export interface BatchInputs {
  /** The wallet, and the local time it was read. */
  readonly balances: { readonly at: number; readonly byAsset: ReadonlyMap<string, Balance> }
  readonly pairs: ReadonlyMap<string, ListedPair>
  readonly lastPrices: ReadonlyMap<string, Decimal | undefined>
  /** The strategy's PnL today (zero when no daily loss limit is set). */
  readonly dailyPnl: Decimal
  /** The instance's allocation and that allocation moved by its fills, when it has one. */
  readonly allocation?: { readonly allocated: Readonly<Record<string, Decimal>>; readonly afterFills: ReadonlyMap<string, Decimal> } | undefined
}

const addTo = (map: Map<string, Decimal>, key: string, amount: Decimal) => map.set(key, (map.get(key) ?? ZERO).plus(amount))

/**
 * A strategy's unfinished orders through one batch, with what its risk checks read kept up as
 * orders join, in the order they joined (the same sums a fold over the list gives), instead of
 * folded again over every order for each placement.
 */
const ownOrders = (afterFills: ReadonlyMap<string, Decimal> | undefined) => {
  const rows: Array<HeldOrder> = []
  const tags = new Set<string>()
  /** Per symbol a placement was checked for: the open notional as its pair and last price value it, over the first `counted` orders. */
  const notional = new Map<string, { sum: Decimal; counted: number }>()
  /** The instance's own free balances: its allocation moved by its fills, less what its unfinished orders still hold. */
  const free = new Map(afterFills)
  return {
    add: (order: HeldOrder) => {
      rows.push(order)
      if (order.tag !== null) tags.add(order.tag)
      if (afterFills !== undefined && order.lockAsset !== null && order.lockAmount !== null) addTo(free, order.lockAsset, stillHeld(order).neg())
    },
    count: () => rows.length,
    hasTag: (tag: string) => tags.has(tag),
    free: (asset: string): Decimal => free.get(asset) ?? ZERO,
    notional: (symbol: string, quote: string | undefined, lastPrice: Decimal | undefined): Decimal => {
      const entry = notional.get(symbol) ?? { sum: ZERO, counted: 0 }
      for (; entry.counted < rows.length; entry.counted++) {
        const o = rows[entry.counted]!
        entry.sum = entry.sum.plus(o.lockAsset === quote ? (o.lockAmount ?? ZERO) : (o.lockAmount ?? ZERO).mul(o.limitPrice ?? lastPrice ?? ZERO))
      }
      notional.set(symbol, entry)
      return entry.sum
    }
  }
}

/** The order an approved placement journals, as the checks after it read it. */
const heldOf = (strategyId: string, intent: PlaceIntent, approved: Extract<Assessment, { _tag: "Approved" }>): HeldOrder => ({
  strategyId,
  tag: intent.tag,
  lockAsset: approved.lock.asset,
  lockAmount: approved.lock.amount,
  limitPrice: approved.order.limitPrice ?? null,
  baseQty: approved.order.baseQty ?? null,
  filledBaseQty: ZERO,
  acceptedAt: null
})

/**
 * Decides a strategy's placements in order. `unfinished` are every unfinished order (of all
 * strategies: the wallet does not show yet what those sent since it was read will lock);
 * `blocked` is, per placement, why placements are stopped when they are.
 */
export const decideBatch = (
  strategyId: string,
  placements: ReadonlyArray<PlaceIntent>,
  unfinished: ReadonlyArray<HeldOrder>,
  inputs: BatchInputs,
  blocked: ReadonlyArray<string | undefined>,
  limits: RiskLimits
): Array<Assessment> => {
  const reserved = new Map<string, Decimal>()
  for (const o of unfinished) {
    if (o.lockAsset !== null && o.lockAmount !== null && (o.acceptedAt === null || o.acceptedAt >= inputs.balances.at)) addTo(reserved, o.lockAsset, o.lockAmount)
  }
  const own = ownOrders(inputs.allocation?.afterFills)
  for (const o of unfinished) if (o.strategyId === strategyId) own.add(o)
  const { allocation } = inputs
  return placements.map((intent, i) => {
    const pair = inputs.pairs.get(intent.symbol)
    const lastPrice = pair === undefined ? undefined : inputs.lastPrices.get(intent.symbol)
    const assessment = assess(
      intent,
      {
        pair,
        lastPrice,
        available: (asset) => (inputs.balances.byAsset.get(asset)?.free ?? ZERO).minus(reserved.get(asset) ?? ZERO),
        openOrders: own.count(),
        openNotional: own.notional(intent.symbol, pair?.quote, lastPrice),
        tagInUse: own.hasTag(intent.tag),
        dailyPnl: inputs.dailyPnl,
        placementsBlocked: blocked[i],
        allocation: allocation === undefined ? undefined : { free: own.free, allocated: (asset) => allocation.allocated[asset] ?? ZERO }
      },
      limits
    )
    if (assessment._tag === "Approved") {
      own.add(heldOf(strategyId, intent, assessment))
      addTo(reserved, assessment.lock.asset, assessment.lock.amount)
    }
    return assessment
  })
}
