/**
 * Performance metrics of a run. Money (equity, PnL, fees, turnover, trade PnL)
 * is exact Decimal. Ratios (Sharpe, Sortino, drawdown, annualised return) are
 * statistics over the equity marks and are computed in floating point: they are
 * estimates by nature and a float's 15 digits are plenty.
 */
import { compare, Decimal, sign, toFloat, toJsonNumber, ZERO } from "../domain/Decimal.js"
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
  qty: Decimal
  cost: Decimal
}

/** Realised PnL of every closing fill, first-in first-out, fees included. */
export const closedTradePnls = (input: MetricsInput): ReadonlyArray<Decimal> => {
  const lots: Array<Lot> = []
  if (sign(input.initialBase) > 0) lots.push({ qty: input.initialBase, cost: input.initialBase.mul(input.initialPrice) })
  const pnls: Array<Decimal> = []
  for (const fill of input.fills) {
    const baseFee = fill.feeAsset === input.baseAsset ? fill.fee : ZERO
    const quoteFee = fill.feeAsset === input.quoteAsset ? fill.fee : ZERO
    if (fill.side === "buy") {
      lots.push({ qty: fill.baseQty.minus(baseFee), cost: fill.quoteQty.plus(quoteFee) })
      continue
    }
    let remaining = fill.baseQty.plus(baseFee)
    let costBasis = ZERO
    while (sign(remaining) > 0 && lots.length > 0) {
      const lot = lots[0]!
      if (compare(lot.qty, remaining) <= 0) {
        costBasis = costBasis.plus(lot.cost)
        remaining = remaining.minus(lot.qty)
        lots.shift()
      } else {
        const part = lot.cost.mul(remaining).div(lot.qty)
        costBasis = costBasis.plus(part)
        lot.cost = lot.cost.minus(part)
        lot.qty = lot.qty.minus(remaining)
        remaining = ZERO
      }
    }
    // Base that no lot accounts for (e.g. a deposit) is taken at the fill price: no gain, no loss.
    if (sign(remaining) > 0) costBasis = costBasis.plus(remaining.mul(fill.price))
    pnls.push(fill.quoteQty.minus(quoteFee).minus(costBasis))
  }
  return pnls
}

interface Drawdown {
  readonly maxDrawdownPct: number
  readonly maxDrawdownDurationMs: number
}

const drawdown = (series: Float64Array, intervalMs: number): Drawdown => {
  let peak = series[0] ?? 0
  let peakIndex = 0
  let underwater = false
  let maxPct = 0
  let longest = 0
  for (let i = 1; i < series.length; i++) {
    const value = series[i]!
    if (value >= peak) {
      if (underwater) longest = Math.max(longest, i - peakIndex)
      underwater = false
      peak = value
      peakIndex = i
    } else {
      underwater = true
      if (peak > 0) maxPct = Math.max(maxPct, ((peak - value) / peak) * 100)
    }
  }
  // Still below the peak when the data ends: the drawdown lasted at least until then.
  if (underwater) longest = Math.max(longest, series.length - 1 - peakIndex)
  return { maxDrawdownPct: maxPct, maxDrawdownDurationMs: longest * intervalMs }
}

/** Annualised Sharpe and Sortino of per-candle returns, risk-free rate zero, markets open all year. */
const riskRatios = (series: Float64Array, intervalMs: number): { sharpe: number | null; sortino: number | null } => {
  const n = series.length - 1
  if (n < 2) return { sharpe: null, sortino: null }
  let sum = 0
  const returns = new Float64Array(n)
  for (let i = 0; i < n; i++) {
    const previous = series[i]!
    const r = previous === 0 ? 0 : series[i + 1]! / previous - 1
    returns[i] = r
    sum += r
  }
  const mean = sum / n
  let squares = 0
  let downside = 0
  for (let i = 0; i < n; i++) {
    const r = returns[i]!
    squares += (r - mean) * (r - mean)
    if (r < 0) downside += r * r
  }
  const stdev = Math.sqrt(squares / (n - 1))
  const downsideDeviation = Math.sqrt(downside / n)
  const scale = Math.sqrt(YEAR_MS / intervalMs)
  return {
    sharpe: stdev > 0 ? (mean / stdev) * scale : null,
    sortino: downsideDeviation > 0 ? (mean / downsideDeviation) * scale : null
  }
}

export const computeMetrics = (input: MetricsInput): Metrics => {
  const candles = input.equityMarks.length
  const finalEquity = input.finalEquity
  const pnl = finalEquity.minus(input.initialEquity)
  const series = new Float64Array(candles + 1)
  series[0] = toFloat(input.initialEquity)
  series.set(input.equityMarks, 1)
  const durationMs = candles * input.intervalMs
  const growth = input.initialEquity.gt(0) ? finalEquity.div(input.initialEquity).toNumber() : Number.NaN
  const annualised = durationMs > 0 && growth >= 0 ? (Math.pow(growth, YEAR_MS / durationMs) - 1) * 100 : Number.NaN

  const pnls = closedTradePnls(input)
  let wins = 0
  let grossProfit = ZERO
  let grossLoss = ZERO
  for (const tradePnl of pnls) {
    if (sign(tradePnl) > 0) {
      wins++
      grossProfit = grossProfit.plus(tradePnl)
    } else {
      grossLoss = grossLoss.plus(tradePnl.negated())
    }
  }

  let feesPaid = ZERO
  let turnover = ZERO
  for (const fill of input.fills) {
    turnover = turnover.plus(fill.quoteQty)
    if (fill.feeAsset === input.quoteAsset) feesPaid = feesPaid.plus(fill.fee)
    else if (fill.feeAsset === input.baseAsset) feesPaid = feesPaid.plus(fill.fee.mul(fill.price))
  }

  return {
    candles,
    fromMs: input.fromMs,
    toMs: input.fromMs + durationMs,
    initialEquity: input.initialEquity,
    finalEquity,
    pnl,
    totalReturnPct: input.initialEquity.gt(0) ? pnl.div(input.initialEquity).mul(100).toDecimalPlaces(10) : ZERO,
    annualisedReturnPct: Number.isFinite(annualised) ? annualised : null,
    ...riskRatios(series, input.intervalMs),
    ...drawdown(series, input.intervalMs),
    fills: input.fills.length,
    trades: pnls.length,
    winRatePct: pnls.length > 0 ? (wins / pnls.length) * 100 : null,
    profitFactor: grossLoss.gt(0) ? grossProfit.div(grossLoss).toNumber() : null,
    exposurePct: candles > 0 ? (input.inMarketCandles / candles) * 100 : 0,
    feesPaid,
    turnover,
    turnoverRatio: input.initialEquity.gt(0) ? turnover.div(input.initialEquity).toNumber() : null
  }
}

/** Metrics as JSON-ready values: exact amounts as decimal strings, ratios as numbers (null when undefined). */
export const metricsToJson = (metrics: Metrics): Record<string, string | number | null> => {
  const out: Record<string, string | number | null> = {}
  for (const [name, value] of Object.entries(metrics)) {
    out[name] = Decimal.isDecimal(value) ? toJsonNumber(value as Decimal) : (value as number | null)
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

/** Reads metrics written by `metricsToJson` back (from the runs table). */
export const metricsFromJson = (json: Record<string, unknown>): Metrics => {
  const amount = (name: string): Decimal => new Decimal(String(json[name] ?? "0"))
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
