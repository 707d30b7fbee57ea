/**
 * Promotion gates: the evidence a strategy must show before it moves from
 * backtest to paper and from paper to live. Configured per strategy instance as
 * `promotion: { backtest: {...}, paper: {...} }`; every gate has a default.
 */
import { Either, Schema } from "effect"
import type { Decimal } from "../domain/Decimal.js"
import type { Metrics } from "../backtest/Metrics.js"

const NonNegative = (what: string) =>
  Schema.Number.pipe(Schema.nonNegative(), Schema.finite()).annotations({ message: () => `must be ${what}, a number of at least 0` })

export const BacktestGates = Schema.Struct({
  minTrades: Schema.optionalWith(Schema.Int.pipe(Schema.nonNegative()).annotations({ message: () => "must be a whole number of trades, at least 0" }), {
    default: () => 30
  }),
  maxDrawdownPct: Schema.optionalWith(NonNegative("a percentage"), { default: () => 20 }),
  minSharpe: Schema.optionalWith(Schema.Number.pipe(Schema.finite()).annotations({ message: () => "must be a number" }), { default: () => 1 })
})
export type BacktestGates = typeof BacktestGates.Type

export const PaperGates = Schema.Struct({
  minDays: Schema.optionalWith(NonNegative("a number of days"), { default: () => 7 }),
  maxTrackingErrorPct: Schema.optionalWith(NonNegative("a percentage"), { default: () => 2 })
})
export type PaperGates = typeof PaperGates.Type

export const PromotionGates = Schema.Struct({
  backtest: Schema.optionalWith(BacktestGates, { default: () => Schema.decodeSync(BacktestGates)({}) }),
  paper: Schema.optionalWith(PaperGates, { default: () => Schema.decodeSync(PaperGates)({}) })
})
export type PromotionGates = typeof PromotionGates.Type

export const defaultGates: PromotionGates = Schema.decodeSync(PromotionGates)({})

/** Reads the `promotion` value of a strategy's config (absent means the defaults). */
export const decodeGates = (raw: unknown): Either.Either<PromotionGates, string> =>
  Schema.decodeUnknownEither(PromotionGates, { errors: "all", onExcessProperty: "error" })(raw ?? {}).pipe(
    Either.mapLeft((error) => `promotion gates are invalid: ${error.message}`)
  )

/** One gate and how the evidence measured up; `actual` is "none" when there was no evidence. */
export interface GateCheck {
  readonly gate: string
  readonly required: string
  readonly actual: string
  readonly passed: boolean
}

const check = (gate: string, required: string, actual: number | null | undefined, passed: (value: number) => boolean): GateCheck => ({
  gate,
  required,
  actual: actual === null || actual === undefined ? "none" : String(Math.round(actual * 1e6) / 1e6),
  passed: actual !== null && actual !== undefined && passed(actual)
})

export const checkBacktest = (gates: BacktestGates, metrics: Metrics | undefined): ReadonlyArray<GateCheck> => [
  check("backtest.minTrades", `>= ${gates.minTrades}`, metrics?.trades, (v) => v >= gates.minTrades),
  check("backtest.maxDrawdownPct", `<= ${gates.maxDrawdownPct}`, metrics?.maxDrawdownPct, (v) => v <= gates.maxDrawdownPct),
  check("backtest.minSharpe", `>= ${gates.minSharpe}`, metrics?.sharpe, (v) => v >= gates.minSharpe)
]

export interface PaperEvidence {
  readonly days: number
  /** Worst tracking error over the paper runs; null when a run did not measure it. */
  readonly trackingErrorPct: Decimal | null
  readonly runs: number
}

export const checkPaper = (gates: PaperGates, evidence: PaperEvidence): ReadonlyArray<GateCheck> => [
  check("paper.minDays", `>= ${gates.minDays}`, evidence.runs > 0 ? evidence.days : null, (v) => v >= gates.minDays),
  {
    gate: "paper.maxTrackingErrorPct",
    required: `<= ${gates.maxTrackingErrorPct}`,
    actual: evidence.runs === 0 || evidence.trackingErrorPct === null ? "none" : evidence.trackingErrorPct.toDecimalPlaces(6).toFixed(),
    passed: evidence.runs > 0 && evidence.trackingErrorPct !== null && evidence.trackingErrorPct.lte(gates.maxTrackingErrorPct)
  }
]
