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
 * The book's net PnL close by close, counting the fills known by each close: what its
 * holdings are worth minus what the allocation alone would be worth, which is what its own
 * fills moved (base and quote, fees included) valued at the close. Exact: no average cost,
 * no division. A paper run walks its closes as they come, so its summary costs the new
 * closes and fills only, not the whole run again.
 */
export class PnlWalk {
  private base = ZERO
  private quote = ZERO
  private applied = 0
  /** Closes at which the book held a position worth at least the pair's minimum notional. */
  inMarket = 0
  /** Net PnL at the latest close. */
  last: Decimal = ZERO

  constructor(private readonly pair: BookPair) {}

  /** The PnL at `point`'s close; `fills` holds at least the `point.fillsKnown` oldest fills. */
  close(point: CurvePoint, fills: ReadonlyArray<BookFill>): Decimal {
    const pair = this.pair
    const known = Math.min(point.fillsKnown, fills.length)
    for (; this.applied < known; this.applied++) {
      const fill = fills[this.applied]!
      const buy = fill.side === "buy"
      this.base = buy ? this.base.plus(fill.baseQty) : this.base.minus(fill.baseQty)
      this.quote = buy ? this.quote.minus(fill.quoteQty) : this.quote.plus(fill.quoteQty)
      if (fill.feeAsset === pair.base) this.base = this.base.minus(fill.fee)
      else if (fill.feeAsset === pair.quote) this.quote = this.quote.minus(fill.fee)
    }
    this.last = this.applied === 0 ? ZERO : this.quote.plus(this.base.mul(point.close))
    if (this.base.abs().mul(point.close).gte(pair.minNotional)) this.inMarket += 1
    return this.last
  }
}

/** The book's net PnL at each close of a finished run (see PnlWalk). */
export const pnlCurve = (pair: BookPair, points: ReadonlyArray<CurvePoint>, fills: ReadonlyArray<BookFill>): PnlCurve => {
  const walk = new PnlWalk(pair)
  const pnl = points.map((point) => walk.close(point, fills))
  return { pnl, inMarket: walk.inMarket }
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
