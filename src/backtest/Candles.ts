/**
 * Candle data for backtests: OHLCV CSV files, validated row by row so that a
 * backtest never runs on a tape with holes, disorder or impossible prices.
 *
 * Two layouts are read:
 * - `open_time_ms,open,high,low,close,volume` (a header line is optional);
 * - the common exchange kline layout: `open_time,open,high,low,close,volume,close_time,
 *   quote_volume,trades,taker_buy_base,taker_buy_quote,ignore` (with or without header).
 *   Open times in microseconds (16 digits, as some exchanges publish them) are read
 *   as milliseconds when they are whole milliseconds.
 */
import { Data, Either } from "effect"
import { firstNotBelow } from "../domain/Bisect.js"
import { compact, type Decimal, fromString } from "../domain/Decimal.js"
import type { VenueCandle } from "../venue/PricePath.js"

export interface CandleProblem {
  /** 1-based line number in the file. */
  readonly row: number
  readonly message: string
}

/** At most this many problems are listed; the rest are counted. */
const MAX_LISTED_PROBLEMS = 50

export class CandleDataInvalid extends Data.TaggedError("CandleDataInvalid")<{
  readonly source: string
  readonly problems: ReadonlyArray<CandleProblem>
  readonly moreProblems: number
}> {
  override get message(): string {
    const lines = this.problems.map((p) => `  row ${p.row}: ${p.message}`)
    if (this.moreProblems > 0) lines.push(`  ... and ${this.moreProblems} more`)
    return `candle data ${this.source} is invalid:\n${lines.join("\n")}`
  }
}

/** The interval of a file with a single candle. */
const ONE_MINUTE_MS = 60_000

export interface CsvOptions {
  /** Names the data in error messages (usually the file path). */
  readonly source: string
}

export interface CandleSeries {
  readonly candles: ReadonlyArray<VenueCandle>
  readonly intervalMs: number
}

const INTEGER = /^\d+$/
const DECIMAL = /^(?:0|[1-9]\d*)(?:\.\d+)?$/
const FIELDS = ["open_time_ms", "open", "high", "low", "close", "volume"] as const
const KLINE_COLUMNS = 12
/** Epoch milliseconds have 13 digits until the year 2286; 16 digits are microseconds. */
const MICROSECOND_DIGITS = 16

const looksLikeHeader = (cells: ReadonlyArray<string>): boolean => cells[0] !== undefined && /^[A-Za-z_]/.test(cells[0])

const readTime = (cell: string): number | string => {
  if (!INTEGER.test(cell)) return `open time ${JSON.stringify(cell)} is not an integer count of milliseconds`
  if (cell.length >= MICROSECOND_DIGITS) {
    if (!cell.endsWith("000")) return `open time ${cell} looks like microseconds but is not a whole millisecond`
    return Number(cell.slice(0, -3))
  }
  const ms = Number(cell)
  return Number.isSafeInteger(ms) ? ms : `open time ${cell} is out of range`
}

/**
 * Parses OHLCV CSV text. Every problem is reported with its line number:
 * wrong column count, non-numeric or negative values, high below low, open or
 * close outside [low, high], unsorted or duplicate times, and gaps.
 */
export const parseCsv = (text: string, options: CsvOptions): Either.Either<CandleSeries, CandleDataInvalid> => {
  const problems: Array<CandleProblem> = []
  let moreProblems = 0
  const problem = (row: number, message: string): void => {
    if (problems.length < MAX_LISTED_PROBLEMS) problems.push({ row, message })
    else moreProblems++
  }
  const candles: Array<VenueCandle> = []
  /** Every row with a readable time, valid values or not, so that order and gaps are checked on all of them. */
  const times: Array<{ readonly row: number; readonly time: number }> = []
  const lines = text.split(/\r?\n/)
  let columns: number | undefined
  for (let index = 0; index < lines.length; index++) {
    const row = index + 1
    const line = lines[index]!.trim()
    if (line === "") continue
    const cells = line.split(",").map((cell) => cell.trim().replace(/^"(.*)"$/, "$1"))
    if (columns === undefined && looksLikeHeader(cells)) {
      if (cells.length !== FIELDS.length && cells.length !== KLINE_COLUMNS) {
        problem(row, `header has ${cells.length} columns; expected ${FIELDS.join(",")} or the ${KLINE_COLUMNS}-column kline layout`)
      }
      columns = cells.length
      continue
    }
    if (columns === undefined) columns = cells.length
    if (cells.length !== columns || (columns !== FIELDS.length && columns !== KLINE_COLUMNS)) {
      problem(row, `has ${cells.length} columns; expected ${columns === KLINE_COLUMNS ? KLINE_COLUMNS : FIELDS.length}`)
      continue
    }
    const time = readTime(cells[0]!)
    if (typeof time === "string") {
      problem(row, time)
      continue
    }
    times.push({ row, time })
    const values: Array<Decimal> = []
    let numeric = true
    for (let f = 1; f < FIELDS.length; f++) {
      const cell = cells[f]!
      if (!DECIMAL.test(cell)) {
        problem(row, `${FIELDS[f]} ${JSON.stringify(cell.length > 64 ? `${cell.slice(0, 64)}...` : cell)} is not a non-negative decimal number`)
        numeric = false
        continue
      }
      try {
        values.push(compact(fromString(cell, FIELDS[f])))
      } catch (error) {
        problem(row, error instanceof Error ? error.message : String(error))
        numeric = false
      }
    }
    if (!numeric) continue
    const [open, high, low, close, volume] = values as [Decimal, Decimal, Decimal, Decimal, Decimal]
    if (high.lt(low)) problem(row, `high ${high.toFixed()} is below low ${low.toFixed()}`)
    else if (open.gt(high) || open.lt(low)) problem(row, `open ${open.toFixed()} is outside low..high`)
    else if (close.gt(high) || close.lt(low)) problem(row, `close ${close.toFixed()} is outside low..high`)
    else if (low.lte(0)) problem(row, `low ${low.toFixed()} is not a positive price`)
    candles.push({ openTimeMs: time, open, high, low, close, volume })
  }
  if (candles.length === 0 && problems.length === 0) problem(1, "no candles")
  const intervalMs = inferInterval(times)
  for (let i = 1; i < times.length; i++) {
    const previous = times[i - 1]!.time
    const { row, time: current } = times[i]!
    if (current === previous) problem(row, `duplicate open time ${current}`)
    else if (current < previous) problem(row, `open time ${current} is before the previous row's ${previous} (rows must be sorted)`)
    else if (current - previous !== intervalMs) {
      const missing = (current - previous) / intervalMs - 1
      problem(
        row,
        Number.isInteger(missing)
          ? `gap: ${missing} candle(s) missing between ${new Date(previous).toISOString()} and ${new Date(current).toISOString()}`
          : `open time ${current} is not on the ${intervalMs} ms grid of the previous row's ${previous}`
      )
    }
  }
  return problems.length > 0
    ? Either.left(new CandleDataInvalid({ source: options.source, problems: problems.sort((a, b) => a.row - b.row), moreProblems }))
    : Either.right({ candles, intervalMs })
}

/** The interval is the step between the first two rows; every later step must be that step. */
const inferInterval = (times: ReadonlyArray<{ readonly time: number }>): number => {
  const first = times[0]
  const second = times[1]
  return first !== undefined && second !== undefined && second.time > first.time ? second.time - first.time : ONE_MINUTE_MS
}

/** The index of the first candle opening at or after `ms` (the length when none does), in candles sorted by open time. */
const firstAtOrAfter = (candles: ReadonlyArray<VenueCandle>, ms: number): number => firstNotBelow(candles.length, (i) => candles[i]!.openTimeMs < ms)

/**
 * Keeps candles whose open time lies in [fromMs, toMs). A series is sorted by open time (parseCsv
 * refuses disorder, the synthetic tape is made in order), so the window is found by bisection, and
 * a window holding every candle is the series itself: an optimisation trial over the whole dataset
 * copies nothing.
 */
export const sliceByTime = (series: CandleSeries, fromMs: number | undefined, toMs: number | undefined): CandleSeries => {
  const candles = series.candles
  const from = fromMs === undefined ? 0 : firstAtOrAfter(candles, fromMs)
  const to = toMs === undefined ? candles.length : firstAtOrAfter(candles, toMs)
  if (from === 0 && to === candles.length) return series
  return { ...series, candles: candles.slice(from, Math.max(from, to)) }
}
