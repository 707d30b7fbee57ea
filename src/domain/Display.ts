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

/** What exchange-info says of a pair's increments. */
export interface PairIncrements {
  readonly symbol: string
  readonly base: string
  readonly quote: string
  readonly tickSize: Decimal
  readonly stepSize: Decimal
}

/**
 * Decimal places by asset and by pair, from exchange-info: an asset's amounts at the
 * finest step it is traded in as a base, or tick it is quoted in; a pair's prices at its tick.
 */
export interface Precision {
  readonly asset: (asset: string) => number | undefined
  readonly price: (symbol: string) => number | undefined
}

export const precisionOf = (pairs: Iterable<PairIncrements>): Precision => {
  const assets = new Map<string, number>()
  const prices = new Map<string, number>()
  const finer = (asset: string, places: number) => assets.set(asset, Math.max(assets.get(asset) ?? 0, places))
  for (const pair of pairs) {
    finer(pair.base, pair.stepSize.decimalPlaces())
    finer(pair.quote, pair.tickSize.decimalPlaces())
    prices.set(pair.symbol, pair.tickSize.decimalPlaces())
  }
  return { asset: (asset) => assets.get(asset), price: (symbol) => prices.get(symbol) }
}
