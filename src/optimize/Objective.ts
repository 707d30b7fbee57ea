/**
 * What an optimisation maximises, the constraints a candidate must meet, and how
 * candidates are ranked. Objectives are read from the metrics a backtest stores
 * (`metricsToJson`): money as exact decimal strings, ratios as numbers.
 */
import { Decimal, fromJsNumber, fromString } from "../domain/Decimal.js"

export const OBJECTIVES = ["sharpe", "sortino", "calmar", "profit"] as const
export type Objective = (typeof OBJECTIVES)[number]

/** Names a sweep grid file ranks by that mean an objective here, so a grid file is a space file. */
export const OBJECTIVE_ALIASES = { pnl: "profit" } as const

export type MetricsJson = Readonly<Record<string, string | number | null>>

export interface Constraints {
  readonly minTrades?: number
  readonly maxDrawdownPct?: number
}

const ratio = (metrics: MetricsJson, name: string): number | undefined => {
  const value = metrics[name]
  return typeof value === "number" && Number.isFinite(value) ? value : undefined
}

/**
 * The objective's value, larger is better; undefined when the run gives it none (no trades or
 * a flat equity curve for a ratio, no drawdown for calmar).
 * - sharpe, sortino: the backtest's annualised ratios;
 * - calmar: annualised return in percent over the maximum drawdown in percent;
 * - profit: PnL in quote, exact.
 */
export const objectiveValue = (objective: Objective, metrics: MetricsJson): Decimal | undefined => {
  switch (objective) {
    case "sharpe":
    case "sortino": {
      const value = ratio(metrics, objective)
      return value === undefined ? undefined : fromJsNumber(value)
    }
    case "calmar": {
      const annualised = ratio(metrics, "annualisedReturnPct")
      const drawdown = ratio(metrics, "maxDrawdownPct")
      return annualised === undefined || drawdown === undefined || drawdown <= 0 ? undefined : fromJsNumber(annualised / drawdown)
    }
    case "profit": {
      const pnl = metrics.pnl
      return typeof pnl === "string" ? fromString(pnl) : typeof pnl === "number" ? fromJsNumber(pnl) : undefined
    }
  }
}

/** Each constraint the metrics break, as `what: measured vs required`; empty when all are met. */
export const violations = (constraints: Constraints, metrics: MetricsJson): ReadonlyArray<string> => {
  const out: Array<string> = []
  const trades = ratio(metrics, "trades") ?? 0
  if (constraints.minTrades !== undefined && trades < constraints.minTrades) out.push(`trades ${trades} < minTrades ${constraints.minTrades}`)
  const drawdown = ratio(metrics, "maxDrawdownPct") ?? 0
  if (constraints.maxDrawdownPct !== undefined && drawdown > constraints.maxDrawdownPct) {
    out.push(`maxDrawdownPct ${drawdown.toFixed(2)} > ${constraints.maxDrawdownPct}`)
  }
  return out
}

const DAY_MS = 24 * 60 * 60 * 1000

/**
 * The objective made comparable between windows of different lengths: the ratios are
 * annualised already; profit is taken per day of the window.
 */
export const perWindow = (objective: Objective, value: Decimal, windowMs: number): Decimal =>
  objective === "profit" ? value.mul(DAY_MS).div(windowMs) : value

/** Out-of-sample must keep at least this share of the in-sample objective, or the fold is flagged. */
export const OVERFIT_RETENTION = 0.5

/**
 * The overfitting rule of a walk-forward fold: the winner had a positive in-sample objective
 * and its out-of-sample objective (both per window, see `perWindow`) is missing or below
 * `OVERFIT_RETENTION` of it. A winner without a positive in-sample figure had no edge to lose,
 * and is not flagged by this rule.
 */
export const overfit = (inSample: Decimal | undefined, outOfSample: Decimal | undefined): boolean =>
  inSample !== undefined && inSample.gt(0) && (outOfSample === undefined || outOfSample.lt(inSample.mul(OVERFIT_RETENTION)))

/** What the ranking reads of a candidate. */
export interface Rankable {
  /** Canonical params JSON: the stable key that breaks ties. */
  readonly params: string
  /** How many halving rungs the candidate passed: later rungs rank first. */
  readonly rung: number
  readonly feasible: boolean
  readonly value: Decimal | undefined
}

/**
 * Best first: candidates that went further in the halving, then those meeting the
 * constraints, then by objective (a candidate without a value after those with one), and ties by
 * params, so the order never depends on which thread finished first.
 */
export const compareRanked = (a: Rankable, b: Rankable): number => {
  if (a.rung !== b.rung) return b.rung - a.rung
  if (a.feasible !== b.feasible) return a.feasible ? -1 : 1
  if (a.value === undefined || b.value === undefined) {
    if (a.value !== b.value) return a.value === undefined ? 1 : -1
  } else {
    const byValue = b.value.cmp(a.value)
    if (byValue !== 0) return byValue
  }
  return a.params < b.params ? -1 : a.params > b.params ? 1 : 0
}

export const decimalOrUndefined = (text: string | null | undefined): Decimal | undefined => (text === null || text === undefined ? undefined : new Decimal(text))
