/**
 * A strategy instance's own book, for evidence: what its own fills did, measured
 * against simply holding its allocation. PnL is realised plus unrealised minus fees
 * of the position its fills built (a sale of allocated base is a position below zero
 * whose PnL is the gain or loss against holding it), so an instance with no fills
 * has PnL exactly 0 whatever the price does, and its equity is the allocation's value
 * at the start plus that PnL. Paper runs and their replays are both measured this
 * way, from the same function, so their curves compare like for like.
 */
import { type Decimal, ZERO } from "../domain/Decimal.js"
import { applyFill, emptyPosition, type PortfolioFill, type Position } from "../engine/Portfolio.js"

export interface BookPair {
  readonly symbol: string
  readonly base: string
  readonly quote: string
  readonly minNotional: Decimal
}

export interface CurvePoint {
  readonly close: Decimal
  /** How many of the fills (oldest first) the book counts at this close. */
  readonly fillsKnown: number
}

export interface PnlCurve {
  /** Net PnL at each close, exact. */
  readonly pnl: ReadonlyArray<Decimal>
  /** Closes at which the book held a position worth at least the pair's minimum notional. */
  readonly inMarket: number
}

const netPnl = (position: Position, price: Decimal): Decimal =>
  position.realizedPnl.plus(price.minus(position.avgCost).mul(position.baseQty)).minus(position.feesQuote)

/** The book's net PnL at each close, counting the fills known by then. */
export const pnlCurve = (pair: BookPair, points: ReadonlyArray<CurvePoint>, fills: ReadonlyArray<PortfolioFill>): PnlCurve => {
  let position = emptyPosition(pair.symbol)
  let applied = 0
  let inMarket = 0
  const pnl: Array<Decimal> = []
  for (const point of points) {
    const known = Math.min(point.fillsKnown, fills.length)
    for (; applied < known; applied++) position = applyFill(position, fills[applied]!, pair)
    pnl.push(position.fills === 0 ? ZERO : netPnl(position, point.close))
    if (position.baseQty.abs().mul(point.close).gte(pair.minNotional)) inMarket += 1
  }
  return { pnl, inMarket }
}

/** What an allocation is worth in the quote asset at `price`. */
export const allocationValue = (pair: BookPair, allocation: Readonly<Record<string, Decimal>>, price: Decimal): Decimal =>
  (allocation[pair.quote] ?? ZERO).plus((allocation[pair.base] ?? ZERO).mul(price))

/**
 * Largest gap between two PnL curves over the same closes, in percent of what the
 * allocation was worth at the start: how far paper trading strayed from its replay.
 * Undefined without an allocation (there is nothing to measure against).
 */
export const trackingErrorPct = (paper: ReadonlyArray<Decimal>, replay: ReadonlyArray<Decimal>, startValue: Decimal): Decimal | undefined => {
  if (startValue.lte(0)) return undefined
  const n = Math.max(paper.length, replay.length)
  let worst = ZERO
  for (let i = 0; i < n; i++) {
    const gap = (paper[i] ?? paper[paper.length - 1] ?? ZERO).minus(replay[i] ?? replay[replay.length - 1] ?? ZERO).abs()
    if (gap.gt(worst)) worst = gap
  }
  return worst.div(startValue).mul(100)
}
