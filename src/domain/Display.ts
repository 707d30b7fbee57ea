/**
 * Numbers shown to a person or written to a log line: amounts at the precision the
 * exchange trades in, percentages and ratios at 4 decimals. An average cost or a PnL
 * derived by division can carry dozens of digits no exchange would ever show; they are
 * rounded half-even (the way the numbers are summed in the first place), never floats.
 */
import { Decimal } from "./Decimal.js"

export const RATIO_PLACES = 4

/** A value at `places` decimals, without trailing noise ("12.5", not "12.50000…01"). */
export const atPlaces = (value: Decimal, places: number): string => value.toDecimalPlaces(places, Decimal.ROUND_HALF_EVEN).toFixed()

/** A value at the precision of an exchange increment (a tick or step size). */
export const atIncrement = (value: Decimal, increment: Decimal): string => atPlaces(value, increment.decimalPlaces())

/** A percentage or ratio at 4 decimals. */
export const ratio = (value: Decimal): string => atPlaces(value, RATIO_PLACES)

/** The most decimal places among exact decimal strings as the exchange sent them: its own precision. */
export const placesSeen = (texts: Iterable<string>): number => {
  let places = 0
  for (const text of texts) {
    const dot = text.indexOf(".")
    if (dot !== -1) places = Math.max(places, text.length - dot - 1)
  }
  return places
}
