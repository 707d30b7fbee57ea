/**
 * `runBacktest`: a strategy played over candles in-process (`Run`, whose header says
 * how each candle is played), or a recorded paper run replayed over the venue's own
 * price steps and timings (`ReplayRun`). Synchronous, no Effect, no I/O: one run is a
 * pure function of its setup.
 */
import { Data, Either } from "effect"
import { type Decimal, toFloat } from "../domain/Decimal.js"
import type { Balance } from "../strategy/Strategy.js"
import type { VenueCandle } from "../venue/PricePath.js"
import { MINUTE_MS } from "../venue/Tape.js"
import { CronSchedule } from "./CronSchedule.js"
import type { Metrics, RunFill } from "./Metrics.js"
import { isReplay, type RecordedRun, ReplayRun } from "./ReplayRun.js"
import { type Holdings, type OrderCounts, type OrderIntent, Run, type RunSetup, StrategyFailed } from "./Run.js"

/** A run's setup and, to replay a recorded paper run, what was recorded of it. */
export interface BacktestSetup<P = unknown, S = unknown> extends RunSetup<P, S>, RecordedRun {}

export interface BacktestResult {
  readonly fills: ReadonlyArray<RunFill>
  /**
   * Equity at each candle's close, exact. Computed on first read from the holdings
   * between fills: a million Decimal marks cost more than the run itself.
   */
  readonly equity: ReadonlyArray<Decimal>
  /** Equity at each candle's close in floating point: what drawdown, Sharpe and Sortino are computed from. */
  readonly equityMarks: Float64Array
  readonly metrics: Metrics
  readonly balances: ReadonlyMap<string, Balance>
  readonly orders: Readonly<OrderCounts>
  /** The intent behind every order the run placed, by its clientOrderId. */
  readonly placements: ReadonlyMap<string, OrderIntent>
}

export class BacktestSetupInvalid extends Data.TaggedError("BacktestSetupInvalid")<{ readonly message: string }> {}

export type BacktestFailed = StrategyFailed | BacktestSetupInvalid

const cronSchedule = (expression: string | undefined): CronSchedule | undefined => {
  if (expression === undefined) return undefined
  const schedule = CronSchedule.of(expression)
  if (schedule === undefined) throw new BacktestSetupInvalid({ message: `schedule "${expression}" is not a valid cron expression` })
  return schedule
}

const checkSetup = (setup: BacktestSetup<any, any>): void => {
  if (setup.candles.length === 0) throw new BacktestSetupInvalid({ message: "no candles to run on (check --from/--to and the data)" })
  if (!Number.isSafeInteger(setup.intervalMs) || setup.intervalMs <= 0) {
    throw new BacktestSetupInvalid({ message: `the candle interval must be a positive whole number of milliseconds, got ${setup.intervalMs}` })
  }
  if (setup.schedule !== undefined && setup.intervalMs % MINUTE_MS !== 0) {
    throw new BacktestSetupInvalid({ message: "a cron schedule needs candles of whole minutes" })
  }
  const tape = setup.tape ?? []
  for (let i = 0; i < tape.length; i++) {
    const timeMs = tape[i]!.timeMs
    if (!Number.isFinite(timeMs)) throw new BacktestSetupInvalid({ message: `tape step ${i} has no time (${timeMs})` })
    if (i > 0 && timeMs < tape[i - 1]!.timeMs) {
      throw new BacktestSetupInvalid({ message: `the tape must be sorted by time: step ${i} at ${timeMs} comes after step ${i - 1} at ${tape[i - 1]!.timeMs}` })
    }
  }
  const others = (setup.strategy.symbols?.(setup.params) ?? []).filter((symbol) => symbol !== setup.pair.symbol)
  if (others.length > 0) {
    throw new BacktestSetupInvalid({
      message: `a backtest runs one pair (${setup.pair.symbol}); ${setup.strategy.name} also reads ${others.join(", ")} with these params`
    })
  }
}

/** The exact equity at every close, from the holdings and the closes: the same Decimals a mark per candle would give. */
const exactEquity = (candles: ReadonlyArray<VenueCandle>, holdings: ReadonlyArray<Holdings>): ReadonlyArray<Decimal> => {
  const equity = new Array<Decimal>(candles.length)
  for (let h = 0; h < holdings.length; h++) {
    const { from, base, quote } = holdings[h]!
    const to = holdings[h + 1]?.from ?? candles.length
    for (let i = from; i < to; i++) equity[i] = base.isZero() ? quote : quote.plus(base.mul(candles[i]!.close))
  }
  return equity
}

/**
 * Each tape's closes in floating point, worked out on its first run and kept while the tape is: the
 * equity at every close where base is held needs the close as a double, and a tape is run again
 * and again (an optimiser's trials, a sweep), where reading a double costs far less than
 * converting a Decimal.
 */
const closeFloats = new WeakMap<ReadonlyArray<VenueCandle>, Float64Array>()

const closesOf = (candles: ReadonlyArray<VenueCandle>): Float64Array => {
  let closes = closeFloats.get(candles)
  if (closes === undefined) {
    closes = new Float64Array(candles.length)
    for (let i = 0; i < candles.length; i++) closes[i] = toFloat(candles[i]!.close)
    closeFloats.set(candles, closes)
  }
  return closes
}

/** Runs one backtest. Deterministic: the same setup gives the same fills, equity and metrics. */
export const runBacktest = <P, S>(setup: BacktestSetup<P, S>): Either.Either<BacktestResult, BacktestFailed> => {
  try {
    checkSetup(setup)
    const candles = setup.candles
    const first = candles[0]!
    const intervalMs = setup.intervalMs
    const schedule = cronSchedule(setup.schedule)
    const run = isReplay(setup) ? new ReplayRun(setup, first.open, first.openTimeMs) : new Run(setup, first.open, first.openTimeMs)
    const noTimers: ReadonlyArray<number> = []
    for (const candle of setup.warmup ?? []) {
      run.warmUp(candle, candle.openTimeMs + intervalMs)
    }
    const closes = closesOf(candles)
    const afterCandle = setup.afterCandle
    for (let i = 0; i < candles.length; i++) {
      const candle = candles[i]!
      let timers = noTimers
      if (schedule !== undefined) {
        const closeMs = candle.openTimeMs + intervalMs
        // Most candles fire nothing: an array only for those that do.
        let due: Array<number> | undefined
        for (let minute = candle.openTimeMs + MINUTE_MS; minute <= closeMs; minute += MINUTE_MS) if (schedule.matches(minute)) (due ??= []).push(minute)
        if (due !== undefined) timers = due
      }
      run.candle(candle, timers)
      run.markClose(i, candle, closes[i]!)
      if (afterCandle !== undefined) afterCandle(i, run.strategyState)
    }
    const last = candles[candles.length - 1]!
    const finalEquity = run.base.isZero() ? run.quote : run.quote.plus(run.base.mul(last.close))
    const recorder = run.recorder
    const metrics = recorder.finish({ intervalMs, fromMs: first.openTimeMs, finalEquity, inMarketCandles: run.inMarketCandles })
    const holdings = run.holdings
    let equity: ReadonlyArray<Decimal> | undefined
    return Either.right({
      fills: run.fills,
      get equity() {
        return (equity ??= exactEquity(candles, holdings))
      },
      equityMarks: recorder.marks,
      metrics,
      balances: run.finalBalances,
      orders: run.counts,
      placements: run.placements
    })
  } catch (error) {
    if (error instanceof StrategyFailed || error instanceof BacktestSetupInvalid) return Either.left(error)
    throw error
  }
}
