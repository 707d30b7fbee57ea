/**
 * Performance metrics of a run. Money (equity, PnL, fees, turnover, trade PnL)
 * is exact Decimal. Ratios (Sharpe, Sortino, drawdown, annualised return) are
 * statistics over the equity marks and are computed in floating point: they are
 * estimates by nature and a float's 15 digits are plenty.
 */
import { Decimal, fromString, toBounds, toFloat, toJsonNumber, ZERO } from "../domain/Decimal.js"
import {
  EXACT_ZERO,
  type Exact,
  exactCompare,
  exactDiv,
  exactMinus,
  exactOf,
  exactPlus,
  exactSign,
  exactTimes,
  toDecimal
} from "../domain/Exact.js"
import type { FillEvent } from "../strategy/Strategy.js"

/** A fill of a run: what the strategy heard (`FillEvent`) and the venue's id of its order. */
export type RunFill = FillEvent & { readonly clientOrderId: string }

export interface MetricsInput {
  readonly baseAsset: string
  readonly quoteAsset: string
  readonly intervalMs: number
  /** Open time of the first candle. */
  readonly fromMs: number
  /** Equity (in quote) before the first candle, valued at its open. */
  readonly initialEquity: Decimal
  /** Base held before the first candle and its value per unit then: the cost basis of initial holdings. */
  readonly initialBase: Decimal
  readonly initialPrice: Decimal
  /** Equity at each candle's close, in floating point. */
  readonly equityMarks: ArrayLike<number>
  /** Equity at the last close, exact (the initial equity when there are no candles). */
  readonly finalEquity: Decimal
  /** Candles that closed holding base worth at least the pair's minimum notional. */
  readonly inMarketCandles: number
  readonly fills: ReadonlyArray<MetricsFill>
}

/** What the metrics read of a fill. */
export type MetricsFill = Pick<RunFill, "side" | "price" | "baseQty" | "quoteQty" | "fee" | "feeAsset">

export interface Metrics {
  readonly candles: number
  readonly fromMs: number
  /** Close time of the last candle. */
  readonly toMs: number
  readonly initialEquity: Decimal
  readonly finalEquity: Decimal
  readonly pnl: Decimal
  readonly totalReturnPct: Decimal
  readonly annualisedReturnPct: number | null
  readonly sharpe: number | null
  readonly sortino: number | null
  readonly maxDrawdownPct: number
  /** Longest time from an equity peak until equity was back at it (or the data ended). */
  readonly maxDrawdownDurationMs: number
  readonly fills: number
  /** Closed trades: sell fills matched first-in first-out against bought lots. */
  readonly trades: number
  readonly winRatePct: number | null
  /** Gross profit over gross loss of closed trades; null when there is no loss. */
  readonly profitFactor: number | null
  readonly exposurePct: number
  /** Fees in base and quote, valued in quote at the fill price. */
  readonly feesPaid: Decimal
  /** Quote value of all fills. */
  readonly turnover: Decimal
  /** Turnover over initial equity. */
  readonly turnoverRatio: number | null
}

const YEAR_MS = 365 * 24 * 60 * 60 * 1000

interface Lot {
  qty: Exact
  cost: Exact
}

/** What the account holds before its first fill, and in which assets fees are paid. */
export type MetricsStart = Pick<MetricsInput, "baseAsset" | "quoteAsset" | "initialEquity" | "initialBase" | "initialPrice">

/** What is known once the last candle has closed. */
export type MetricsEnd = Pick<MetricsInput, "intervalMs" | "fromMs" | "finalEquity" | "inMarketCandles">

/** Base bought and not sold yet, first in first out, each lot at what it cost: the basis of each sale's PnL. */
class Lots {
  private readonly lots: Array<Lot> = []

  constructor(private readonly start: MetricsStart) {
    const base = exactOf(start.initialBase)
    if (exactSign(base) > 0) this.lots.push({ qty: base, cost: exactTimes(base, exactOf(start.initialPrice)) })
  }

  /**
   * Books a fill; for a sell, answers its realised PnL, fees included. In whole-number arithmetic
   * (`Exact`), which answers what decimal.js would: a lot sold in part keeps a share of its cost
   * worked out to 64 digits, and every sum after it carries them.
   */
  take(fill: MetricsFill, quoteQty: Exact, fee: Exact): Exact | undefined {
    const lots = this.lots
    const baseFee = fill.feeAsset === this.start.baseAsset ? fee : EXACT_ZERO
    const quoteFee = fill.feeAsset === this.start.quoteAsset ? fee : EXACT_ZERO
    if (fill.side === "buy") {
      lots.push({ qty: exactMinus(exactOf(fill.baseQty), baseFee), cost: exactPlus(quoteQty, quoteFee) })
      return undefined
    }
    let remaining = exactPlus(exactOf(fill.baseQty), baseFee)
    let costBasis = EXACT_ZERO
    while (exactSign(remaining) > 0 && lots.length > 0) {
      const lot = lots[0]!
      if (exactCompare(lot.qty, remaining) <= 0) {
        costBasis = exactPlus(costBasis, lot.cost)
        remaining = exactMinus(remaining, lot.qty)
        lots.shift()
      } else {
        const taken = exactDiv(exactTimes(lot.cost, remaining), lot.qty)
        costBasis = exactPlus(costBasis, taken)
        lot.cost = exactMinus(lot.cost, taken)
        lot.qty = exactMinus(lot.qty, remaining)
        remaining = EXACT_ZERO
      }
    }
    // Base that no lot accounts for (e.g. a deposit) is taken at the fill price: no gain, no loss.
    if (exactSign(remaining) > 0) costBasis = exactPlus(costBasis, exactTimes(remaining, exactOf(fill.price)))
    return exactMinus(exactMinus(quoteQty, quoteFee), costBasis)
  }
}

/** Realised PnL of every closing fill, first-in first-out, fees included. */
export const closedTradePnls = (input: MetricsInput): ReadonlyArray<Decimal> => {
  const lots = new Lots(input)
  const pnls: Array<Decimal> = []
  for (const fill of input.fills) {
    const pnl = lots.take(fill, exactOf(fill.quoteQty), exactOf(fill.fee))
    if (pnl !== undefined) pnls.push(toDecimal(pnl))
  }
  return pnls
}

const periodReturn = (previous: number, next: number): number => (previous === 0 ? 0 : next / previous - 1)

/** Marks per call of `addDeviations`. */
const DEVIATION_CHUNK = 1024

/**
 * Adds the returns of marks `from` to `to` to `sums`: [squared deviations from `mean`, squared
 * downside returns, the mark before `from`, which becomes the mark before `to`]. Called once per
 * chunk of marks rather than looping over all of them: a loop run once per run is compiled in the
 * middle of the loop and thrown away when the code after it runs, at every run, while a function
 * called a thousand times per run is compiled once and kept. A chunk short enough that the first
 * call ends before the loop is compiled matters: compiled in the middle of its loop, the function
 * was thrown away at the end of every call. The sums are the same, added in the same order.
 */
const addDeviations = (marks: Float64Array, from: number, to: number, mean: number, sums: Float64Array): void => {
  let squares = sums[0]!
  let downside = sums[1]!
  let previous = sums[2]!
  for (let i = from; i < to; i++) {
    const mark = marks[i]!
    const r = periodReturn(previous, mark)
    previous = mark
    squares += (r - mean) * (r - mean)
    if (r < 0) downside += r * r
  }
  sums[0] = squares
  sums[1] = downside
  sums[2] = previous
}

/**
 * A run's metrics gathered as the run goes: each fill when it happens, the equity at each close.
 * Sums, trade PnLs, the drawdown and the sum of returns are kept up to date in the order the
 * fills and marks come, which gives the values a pass over all of them at the end would; the
 * end then reads the returns once more, for their deviation, and the fills not at all. A
 * backtest feeds it from its loop, while that code is running anyway.
 */
export class MetricsRecorder {
  /** Equity at each close, in floating point. */
  readonly marks: Float64Array
  private count = 0
  private readonly lots: Lots
  private fills = 0
  private trades = 0
  private wins = 0
  // Exact sums (see `Lots`), made Decimals once, at the end.
  private grossProfit = EXACT_ZERO
  private grossLoss = EXACT_ZERO
  private feesPaid = EXACT_ZERO
  private turnover = EXACT_ZERO
  // Given a number here, not left undefined until the constructor sets them: a field that has
  // held undefined keeps its doubles in boxes, a new one at each write, and these are written
  // at every mark.
  private previous = 0
  /** The equity before the first mark, which the first mark's return is taken on. */
  private readonly initial: number
  private returnsSum = 0
  private peak = 0
  /** Series index of the peak: mark `i` is series index `i + 1`. */
  private peakIndex = 0
  private underwater = false
  private maxDrawdownPct = 0
  private longestDrawdown = 0

  /** `candles`: how many marks the run will have. */
  constructor(private readonly start: MetricsStart, candles: number) {
    this.marks = new Float64Array(candles)
    this.lots = new Lots(start)
    // The series the statistics read starts with the initial equity, then has each mark.
    this.initial = toFloat(start.initialEquity)
    this.previous = this.initial
    this.peak = this.previous
  }

  fill(fill: MetricsFill): void {
    this.fills++
    const quoteQty = exactOf(fill.quoteQty)
    const fee = exactOf(fill.fee)
    const pnl = this.lots.take(fill, quoteQty, fee)
    if (pnl !== undefined) {
      this.trades++
      if (exactSign(pnl) > 0) {
        this.wins++
        this.grossProfit = exactPlus(this.grossProfit, pnl)
      } else {
        this.grossLoss = exactMinus(this.grossLoss, pnl)
      }
    }
    this.turnover = exactPlus(this.turnover, quoteQty)
    if (fill.feeAsset === this.start.quoteAsset) this.feesPaid = exactPlus(this.feesPaid, fee)
    else if (fill.feeAsset === this.start.baseAsset) this.feesPaid = exactPlus(this.feesPaid, exactTimes(fee, exactOf(fill.price)))
  }

  /** The equity at the next close. */
  mark(equity: number): void {
    const at = this.count++
    if (at >= this.marks.length) throw new RangeError(`more marks than the ${this.marks.length} candles this recorder was made for`)
    this.marks[at] = equity
    this.returnsSum += periodReturn(this.previous, equity)
    this.previous = equity
    if (equity >= this.peak) {
      if (this.underwater) this.longestDrawdown = Math.max(this.longestDrawdown, at + 1 - this.peakIndex)
      this.underwater = false
      this.peak = equity
      this.peakIndex = at + 1
    } else {
      this.underwater = true
      if (this.peak > 0) this.maxDrawdownPct = Math.max(this.maxDrawdownPct, ((this.peak - equity) / this.peak) * 100)
    }
  }

  finish(end: MetricsEnd): Metrics {
    const candles = this.count
    const { initialEquity } = this.start
    const finalEquity = end.finalEquity
    const pnl = finalEquity.minus(initialEquity)
    const durationMs = candles * end.intervalMs
    const growth = initialEquity.gt(0) ? finalEquity.div(initialEquity).toNumber() : Number.NaN
    const annualised = durationMs > 0 && growth >= 0 ? (Math.pow(growth, YEAR_MS / durationMs) - 1) * 100 : Number.NaN
    // Still below the peak when the data ends: the drawdown lasted at least until then.
    const longestDrawdown = this.underwater ? Math.max(this.longestDrawdown, candles - this.peakIndex) : this.longestDrawdown
    const turnover = toDecimal(this.turnover)
    return {
      candles,
      fromMs: end.fromMs,
      toMs: end.fromMs + durationMs,
      initialEquity,
      finalEquity,
      pnl,
      totalReturnPct: initialEquity.gt(0) ? pnl.div(initialEquity).mul(100).toDecimalPlaces(10) : ZERO,
      annualisedReturnPct: Number.isFinite(annualised) ? annualised : null,
      ...this.riskRatios(end.intervalMs),
      maxDrawdownPct: this.maxDrawdownPct,
      maxDrawdownDurationMs: longestDrawdown * end.intervalMs,
      fills: this.fills,
      trades: this.trades,
      winRatePct: this.trades > 0 ? (this.wins / this.trades) * 100 : null,
      profitFactor: exactSign(this.grossLoss) > 0 ? toDecimal(this.grossProfit).div(toDecimal(this.grossLoss)).toNumber() : null,
      exposurePct: candles > 0 ? (end.inMarketCandles / candles) * 100 : 0,
      feesPaid: toDecimal(this.feesPaid),
      turnover,
      turnoverRatio: initialEquity.gt(0) ? turnover.div(initialEquity).toNumber() : null
    }
  }

  /**
   * Annualised Sharpe and Sortino of per-candle returns, risk-free rate zero, markets open all year.
   * Each return is worked out again from the marks, the same division `mark` made, rather than
   * kept: kept, they cost 8 bytes a candle of memory fresh from the system at every run.
   */
  private riskRatios(intervalMs: number): { sharpe: number | null; sortino: number | null } {
    const n = this.count
    if (n < 2) return { sharpe: null, sortino: null }
    const mean = this.returnsSum / n
    const sums = new Float64Array([0, 0, this.initial])
    for (let from = 0; from < n; from += DEVIATION_CHUNK) addDeviations(this.marks, from, Math.min(n, from + DEVIATION_CHUNK), mean, sums)
    const squares = sums[0]!
    const downside = sums[1]!
    const stdev = Math.sqrt(squares / (n - 1))
    const downsideDeviation = Math.sqrt(downside / n)
    const scale = Math.sqrt(YEAR_MS / intervalMs)
    return {
      sharpe: stdev > 0 ? (mean / stdev) * scale : null,
      sortino: downsideDeviation > 0 ? (mean / downsideDeviation) * scale : null
    }
  }
}

export const computeMetrics = (input: MetricsInput): Metrics => {
  const marks = input.equityMarks
  const recorder = new MetricsRecorder(input, marks.length)
  for (const fill of input.fills) recorder.fill(fill)
  for (let i = 0; i < marks.length; i++) recorder.mark(marks[i]!)
  return recorder.finish(input)
}

/**
 * Metrics as JSON-ready values: exact amounts as decimal strings, ratios as numbers (null when
 * undefined). Amounts are rounded into the bounds they are read back with (a PnL whose cost
 * basis was a share of a lot carries 64 digits, which a worker's answer or a stored run must not).
 */
export const metricsToJson = (metrics: Metrics): Record<string, string | number | null> => {
  const out: Record<string, string | number | null> = {}
  for (const [name, value] of Object.entries(metrics)) {
    out[name] = Decimal.isDecimal(value) ? toJsonNumber(toBounds(value as Decimal)) : (value as number | null)
  }
  return out
}

/**
 * Metrics for people and log lines: money exact (sums of exact amounts), percentages and
 * ratios at 4 decimals. What is stored keeps every digit (`metricsToJson`).
 */
export const metricsShown = (metrics: Metrics): Record<string, string | number | null> => {
  const shown = metricsToJson(metrics)
  shown.totalReturnPct = metrics.totalReturnPct.toDecimalPlaces(4).toFixed()
  for (const [name, value] of Object.entries(shown)) {
    if (typeof value === "number" && !Number.isInteger(value)) shown[name] = Math.round(value * 1e4) / 1e4
  }
  return shown
}

/**
 * Reads metrics written by `metricsToJson` back (from the runs table, or a worker's answer);
 * an amount out of bounds throws InvalidDecimal naming it.
 */
export const metricsFromJson = (json: Record<string, unknown>): Metrics => {
  const amount = (name: string): Decimal => fromString(String(json[name] ?? "0"), name)
  const ratio = (name: string): number | null => (typeof json[name] === "number" ? (json[name] as number) : null)
  const count = (name: string): number => ratio(name) ?? 0
  return {
    candles: count("candles"),
    fromMs: count("fromMs"),
    toMs: count("toMs"),
    initialEquity: amount("initialEquity"),
    finalEquity: amount("finalEquity"),
    pnl: amount("pnl"),
    totalReturnPct: amount("totalReturnPct"),
    annualisedReturnPct: ratio("annualisedReturnPct"),
    sharpe: ratio("sharpe"),
    sortino: ratio("sortino"),
    maxDrawdownPct: count("maxDrawdownPct"),
    maxDrawdownDurationMs: count("maxDrawdownDurationMs"),
    fills: count("fills"),
    trades: count("trades"),
    winRatePct: ratio("winRatePct"),
    profitFactor: ratio("profitFactor"),
    exposurePct: count("exposurePct"),
    feesPaid: amount("feesPaid"),
    turnover: amount("turnover"),
    turnoverRatio: ratio("turnoverRatio")
  }
}

/** A fill as JSON: amounts as exact decimal strings, as the venue's fills answer writes them. */
export const fillToJson = (fill: RunFill): Record<string, string | number> => ({
  time: fill.time,
  fillId: fill.fillId,
  tag: fill.tag,
  clientOrderId: fill.clientOrderId,
  side: fill.side,
  price: toJsonNumber(fill.price),
  baseQty: toJsonNumber(fill.baseQty),
  quoteQty: toJsonNumber(fill.quoteQty),
  fee: toJsonNumber(fill.fee),
  feeAsset: fill.feeAsset,
  liquidity: fill.liquidity
})
