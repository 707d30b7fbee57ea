/**
 * The buy-and-hold benchmark: the run's starting equity put into the base asset at the first
 * candle's open (the price the starting equity is valued at), without fees, and held to the end.
 * The figures are exact; the curve is in doubles, as the strategy's own equity marks are.
 */
import { type Decimal, toFloat } from "../domain/Decimal.js"
import type { VenueCandle } from "../venue/PricePath.js"

export interface BuyAndHold {
  readonly entryPrice: Decimal
  /** Base the starting equity buys at `entryPrice`. */
  readonly baseQty: Decimal
  readonly initialEquity: Decimal
  /** What `baseQty` is worth at the last close. */
  readonly finalEquity: Decimal
  readonly pnl: Decimal
  readonly returnPct: Decimal
}

export const buyAndHold = (initialEquity: Decimal, candles: ReadonlyArray<VenueCandle>): BuyAndHold => {
  const first = candles[0]
  const last = candles[candles.length - 1]
  if (first === undefined || last === undefined) throw new RangeError("a buy-and-hold benchmark needs at least one candle")
  if (first.open.lte(0)) throw new RangeError(`the first candle opens at ${first.open.toFixed()}: a benchmark needs a positive price to buy at`)
  const entryPrice = first.open
  // Multiplied before dividing, so the final equity is rounded once, not carried through a 64-digit quotient.
  const finalEquity = initialEquity.mul(last.close).div(entryPrice)
  return {
    entryPrice,
    baseQty: initialEquity.div(entryPrice),
    initialEquity,
    finalEquity,
    pnl: finalEquity.minus(initialEquity),
    returnPct: last.close.minus(entryPrice).div(entryPrice).mul(100)
  }
}

/** The benchmark's value at each candle's close, for drawing, from the closes as doubles. */
export const buyAndHoldMarks = (benchmark: BuyAndHold, closes: ArrayLike<number>): Float64Array => {
  const perPrice = toFloat(benchmark.initialEquity) / toFloat(benchmark.entryPrice)
  const marks = new Float64Array(closes.length)
  for (let i = 0; i < closes.length; i++) marks[i] = perPrice * closes[i]!
  return marks
}
