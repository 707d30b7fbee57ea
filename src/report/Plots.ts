/**
 * Reads the series a strategy plots (`StrategyDefinition.plots`) after every candle of a
 * backtest, for the report. Only a run that writes a report builds a recorder and passes its
 * `afterCandle` to the backtest; a strategy without plots gets none.
 */
import { Decimal, toFloat } from "../domain/Decimal.js"
import type { StrategyDefinition } from "../strategy/Strategy.js"

export interface PlotSeries {
  readonly name: string
  /** One value per candle, at its close; NaN where the series had none. */
  readonly values: Float64Array
}

export interface PlotRecorder<S> {
  /** The backtest's `afterCandle` hook. */
  readonly afterCandle: (index: number, state: S) => void
  readonly series: ReadonlyArray<PlotSeries>
}

export class PlotFailed extends Error {
  override readonly name = "PlotFailed"
}

export const plotRecorder = <S>(strategy: StrategyDefinition<any, S>, candles: number): PlotRecorder<S> | undefined => {
  const plots = strategy.plots
  if (plots === undefined) return undefined
  const readers = Object.entries(plots)
  if (readers.length === 0) return undefined
  const series = readers.map(([name]) => ({ name, values: new Float64Array(candles).fill(Number.NaN) }))
  const afterCandle = (index: number, state: S): void => {
    for (let s = 0; s < readers.length; s++) {
      const [name, read] = readers[s]!
      let value: unknown
      try {
        value = read(state)
      } catch (cause) {
        throw new PlotFailed(`strategy ${strategy.name}: plot "${name}" threw at candle ${index}: ${cause instanceof Error ? cause.message : String(cause)}`)
      }
      if (typeof value === "number") series[s]!.values[index] = value
      else if (value instanceof Decimal) series[s]!.values[index] = toFloat(value)
      else if (value !== undefined) {
        throw new PlotFailed(`strategy ${strategy.name}: plot "${name}" gave ${typeof value} at candle ${index} (return a number, a Decimal, or undefined while it has no value)`)
      }
    }
  }
  return { afterCandle, series }
}
