/**
 * Candle intervals as the candles endpoint names them (`1m`, `5m`, `1h`, `1d`, ...) and
 * their length. Candles open on the interval's grid counted from the epoch, so a `1d`
 * candle opens at 00:00 UTC.
 */
import { Either } from "effect"

const MINUTE_MS = 60_000
const UNIT_MS: Readonly<Record<string, number>> = { m: MINUTE_MS, h: 60 * MINUTE_MS, d: 1440 * MINUTE_MS }

/** The length of an interval in milliseconds, or what is wrong with its spelling. */
export const intervalMs = (interval: string): Either.Either<number, string> => {
  const match = /^([1-9]\d{0,3})([mhd])$/.exec(interval)
  if (match === null) return Either.left(`--interval must be a count of minutes, hours or days such as 1m, 5m, 15m, 1h, 4h or 1d, got "${interval}"`)
  return Either.right(Number(match[1]) * UNIT_MS[match[2]!]!)
}

/** The open time of the candle that holds `timeMs`. */
export const openTimeOf = (timeMs: number, stepMs: number): number => Math.floor(timeMs / stepMs) * stepMs

/** The first open time at or after `timeMs`. */
export const nextOpenTime = (timeMs: number, stepMs: number): number => Math.ceil(timeMs / stepMs) * stepMs
