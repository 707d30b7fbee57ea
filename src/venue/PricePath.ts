/**
 * A candle and the path of prices it stands for when the matching engine is fed it.
 */
import { compare, type Decimal } from "../domain/Decimal.js"

/** A candle as the venue's tape makes it and its engine is fed it (a backtest's too); the client reads the wire `Candle` of src/svc/Api.ts. */
export interface VenueCandle {
  readonly openTimeMs: number
  readonly open: Decimal
  readonly high: Decimal
  readonly low: Decimal
  readonly close: Decimal
  readonly volume: Decimal
}

/** The candle's price path: bullish candles dip first, bearish ones spike first (`onCandle` walks the same path). */
export const candlePath = (candle: VenueCandle): ReadonlyArray<Decimal> =>
  compare(candle.close, candle.open) >= 0
    ? [candle.open, candle.low, candle.high, candle.close]
    : [candle.open, candle.high, candle.low, candle.close]
