/**
 * Monthly and yearly returns from the exact equity at each close: a month's return is its last
 * close's equity over the equity it started from (the previous month's last close, or the
 * starting equity), in UTC calendar months by each candle's open time.
 */
import { type Decimal } from "../domain/Decimal.js"
import type { VenueCandle } from "../venue/PricePath.js"

export interface PeriodReturn {
  readonly year: number
  /** 0 = January; undefined for the whole year. */
  readonly month: number | undefined
  readonly startEquity: Decimal
  readonly endEquity: Decimal
  /** Undefined when the start equity is not positive. */
  readonly returnPct: Decimal | undefined
}

const periodReturn = (year: number, month: number | undefined, startEquity: Decimal, endEquity: Decimal): PeriodReturn => ({
  year,
  month,
  startEquity,
  endEquity,
  returnPct: startEquity.gt(0) ? endEquity.minus(startEquity).div(startEquity).mul(100) : undefined
})

/** The months in time order, then each year's return. */
export const periodReturns = (
  initialEquity: Decimal,
  candles: ReadonlyArray<VenueCandle>,
  equity: ReadonlyArray<Decimal>
): { readonly months: ReadonlyArray<PeriodReturn>; readonly years: ReadonlyArray<PeriodReturn> } => {
  const months: Array<PeriodReturn> = []
  const years: Array<PeriodReturn> = []
  let monthStart = initialEquity
  let yearStart = initialEquity
  // Dates are made only where a month turns, not per candle.
  let year = 0
  let month = 0
  let nextMonthMs = Number.NEGATIVE_INFINITY
  const enter = (openTimeMs: number) => {
    const open = new Date(openTimeMs)
    year = open.getUTCFullYear()
    month = open.getUTCMonth()
    nextMonthMs = Date.UTC(year, month + 1, 1)
  }
  if (candles.length > 0) enter(candles[0]!.openTimeMs)
  for (let i = 0; i < candles.length; i++) {
    const next = candles[i + 1]?.openTimeMs
    if (next !== undefined && next < nextMonthMs) continue
    const end = equity[i]!
    months.push(periodReturn(year, month, monthStart, end))
    monthStart = end
    const endedYear = year
    if (next !== undefined) enter(next)
    if (next === undefined || year !== endedYear) {
      years.push(periodReturn(endedYear, undefined, yearStart, end))
      yearStart = end
    }
  }
  return { months, years }
}
