/**
 * Incremental indicators for signals. They work in plain JS numbers on purpose:
 * a signal decides *whether* to trade, never *how much or at what price*, so the
 * small float error is harmless, and it keeps a backtest's per-candle cost at a
 * few additions. Every price or quantity a strategy places is a Decimal
 * quantized to the pair rules (see `orders.ts`).
 *
 * The windows are plain JSON-safe objects so they live inside strategy state;
 * `push` updates them in place in O(1).
 */
import { Schema } from "effect"

/** A simple moving average over the last `period` values (a ring buffer). */
export interface SmaWindow {
  readonly period: number
  readonly values: Array<number>
  /** Index the next value is written to. */
  head: number
  count: number
  sum: number
}

export const smaWindow = (period: number): SmaWindow => {
  if (!Number.isSafeInteger(period) || period < 1) throw new RangeError(`an SMA period must be a whole number >= 1, got ${period}`)
  return { period, values: new Array<number>(period).fill(0), head: 0, count: 0, sum: 0 }
}

/**
 * An SMA window in strategy state: a window read back from storage must be one
 * `smaWindow` made, or the average would be computed from slots that do not exist.
 */
export const SmaWindowState = Schema.mutable(
  Schema.Struct({
    period: Schema.Int.pipe(Schema.positive()),
    values: Schema.mutable(Schema.Array(Schema.Number)),
    head: Schema.Int.pipe(Schema.nonNegative()),
    count: Schema.Int.pipe(Schema.nonNegative()),
    sum: Schema.Number
  })
).pipe(
  Schema.filter((w) =>
    w.values.length === w.period && w.head < w.period && w.count <= w.period
      ? true
      : `an SMA window of period ${w.period} needs ${w.period} values, a head below ${w.period} and a count of at most ${w.period}`
  )
)

export const smaPush = (window: SmaWindow, value: number): void => {
  const values = window.values
  const head = window.head
  // Every slot holds a number (see SmaWindowState); a fallback for a missing one
  // would make each read box its double, an allocation per candle.
  window.sum += value - values[head]!
  values[head] = value
  const next = head + 1
  if (next === window.period) {
    window.head = 0
    // Re-summing once per lap keeps float drift from accumulating over millions of candles, still O(1) amortized.
    let exact = 0
    for (let i = 0; i < window.period; i++) exact += values[i]!
    window.sum = exact
  } else {
    window.head = next
  }
  if (window.count < window.period) window.count++
}

export const smaReady = (window: SmaWindow): boolean => window.count === window.period

/** The average of the values seen so far, up to `period` of them; 0 before the first. */
export const smaValue = (window: SmaWindow): number => (window.count === 0 ? 0 : window.sum / window.count)

/**
 * An exponential moving average with smoothing 2 / (period + 1), seeded with the
 * SMA of its first `period` values so it does not start biased to the first value.
 */
export interface Ema {
  readonly period: number
  value: number
  count: number
}

export const ema = (period: number): Ema => {
  if (!Number.isSafeInteger(period) || period < 1) throw new RangeError(`an EMA period must be a whole number >= 1, got ${period}`)
  return { period, value: 0, count: 0 }
}

export const emaPush = (average: Ema, value: number): void => {
  if (average.count < average.period) {
    average.count++
    average.value += (value - average.value) / average.count
  } else {
    average.value += (2 / (average.period + 1)) * (value - average.value)
  }
}

export const emaReady = (average: Ema): boolean => average.count >= average.period
