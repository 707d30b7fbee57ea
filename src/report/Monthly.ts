/**
 * Monthly and yearly returns from the exact equity at each close: a month's return is its last
 * close's equity over the equity it started from (the previous month's last close, or the
 * starting equity), in UTC calendar months by each candle's open time.
 */
import { type Decimal } from "../domain/Decimal.js"
import type { Candle } from "../venue/Matching.js"

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
  candles: ReadonlyArray<Candle>,
  equity: ReadonlyArray<Decimal>
): { readonly months: ReadonlyArray<PeriodReturn>; readonly years: ReadonlyArray<PeriodReturn> } => {
  const months: Array<PeriodReturn> = []
  const years: Array<PeriodReturn> = []
  let monthStart = initialEquity
  let yearStart = initialEquity
  for (let i = 0; i < candles.length; i++) {
    const open = new Date(candles[i]!.openTimeMs)
    const next = candles[i + 1] === undefined ? undefined : new Date(candles[i + 1]!.openTimeMs)
    const year = open.getUTCFullYear()
    const month = open.getUTCMonth()
    const monthEnds = next === undefined || next.getUTCMonth() !== month || next.getUTCFullYear() !== year
    if (!monthEnds) continue
    const end = equity[i]!
    months.push(periodReturn(year, month, monthStart, end))
    monthStart = end
    if (next === undefined || next.getUTCFullYear() !== year) {
      years.push(periodReturn(year, undefined, yearStart, end))
      yearStart = end
    }
  }
  return { months, years }
}
