/**
 * A strategy instance's own book, for evidence: what its own fills did, measured
 * against simply holding its allocation, so an instance with no fills has PnL exactly
 * 0 whatever the price does, and its equity is the allocation's value at the start
 * plus that PnL. Paper runs and their replays are both measured this
 * way, from the same function, so their curves compare like for like.
 */
import { type Decimal, ZERO } from "../domain/Decimal.js"

export interface BookPair {
  readonly symbol: string
  readonly base: string
  readonly quote: string
  readonly minNotional: Decimal
}

/** A fill as the book counts it. */
export interface BookFill {
  readonly side: string
  readonly baseQty: Decimal
  readonly quoteQty: Decimal
  readonly fee: Decimal
  readonly feeAsset: string
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

/**
 * The book's net PnL at each close, counting the fills known by then: what its holdings
 * are worth minus what the allocation alone would be worth, which is what its own fills
 * moved (base and quote, fees included) valued at the close. Exact: no average cost, no
 * division.
 */
export const pnlCurve = (pair: BookPair, points: ReadonlyArray<CurvePoint>, fills: ReadonlyArray<BookFill>): PnlCurve => {
  let base = ZERO
  let quote = ZERO
  let applied = 0
  let inMarket = 0
  const pnl: Array<Decimal> = []
  for (const point of points) {
    const known = Math.min(point.fillsKnown, fills.length)
    for (; applied < known; applied++) {
      const fill = fills[applied]!
      const buy = fill.side === "buy"
      base = buy ? base.plus(fill.baseQty) : base.minus(fill.baseQty)
      quote = buy ? quote.minus(fill.quoteQty) : quote.plus(fill.quoteQty)
      if (fill.feeAsset === pair.base) base = base.minus(fill.fee)
      else if (fill.feeAsset === pair.quote) quote = quote.minus(fill.fee)
    }
    pnl.push(applied === 0 ? ZERO : quote.plus(base.mul(point.close)))
    if (base.abs().mul(point.close).gte(pair.minNotional)) inMarket += 1
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
