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
  minSharpe: Schema.optionalWith(Schema.Number.pipe(Schema.finite()).annotations({ message: () => "must be a number" }), { default: () => 1 }),
  /** The backtest's market data must span at least this many days. */
  minDays: Schema.optionalWith(NonNegative("a number of days"), { default: () => 30 }),
  /** Synthetic tapes prove nothing about a market; they count only when this says so. */
  allowSynthetic: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /**
   * Only figures the params were not chosen on count: the backtest must be the out-of-sample
   * window of a walk-forward optimisation (`svcbot optimize --walk-forward … --evidence`).
   */
  outOfSample: Schema.optionalWith(Schema.Boolean, { default: () => false })
})
export type BacktestGates = typeof BacktestGates.Type

export const PaperGates = Schema.Struct({
  minDays: Schema.optionalWith(NonNegative("a number of days"), { default: () => 7 }),
  maxTrackingErrorPct: Schema.optionalWith(NonNegative("a percentage"), { default: () => 2 }),
  /** Paper fills that may differ from the replay of their own run (intent by intent). */
  maxFillMismatches: Schema.optionalWith(Schema.Int.pipe(Schema.nonNegative()).annotations({ message: () => "must be a whole number of fills, at least 0" }), {
    default: () => 0
  }),
  /** How late an order may reach the venue after the strategy decided and still be replayed as it happened. */
  latencyToleranceMs: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 60000)).annotations({ message: () => "must be milliseconds, an integer from 0 to 60000" }), {
    default: () => 1000
  })
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
  actual: actual === null || actual === undefined ? "none" : String(Math.round(actual * 1e4) / 1e4),
  passed: actual !== null && actual !== undefined && passed(actual)
})

const DAY_MS = 86_400_000

/** How a walk-forward's out-of-sample evidence names its data: this, the data, and the test window. */
const OUT_OF_SAMPLE = "out-of-sample:"

export const outOfSampleSource = (data: string, window: { readonly fromMs: number; readonly toMs: number }): string =>
  `${OUT_OF_SAMPLE}${data}@${new Date(window.fromMs).toISOString()}/${new Date(window.toMs).toISOString()}`

export const isOutOfSample = (dataSource: string): boolean => dataSource.startsWith(OUT_OF_SAMPLE)

/** A backtest's data: synthetic tapes are named `synthetic:…` (`describeData`), also inside an out-of-sample name. */
export const isSyntheticData = (dataSource: string): boolean =>
  (isOutOfSample(dataSource) ? dataSource.slice(OUT_OF_SAMPLE.length) : dataSource).startsWith("synthetic:")

export const checkBacktest = (gates: BacktestGates, run: { readonly metrics: Metrics; readonly dataSource: string } | undefined): ReadonlyArray<GateCheck> => {
  const metrics = run?.metrics
  const synthetic = run !== undefined && isSyntheticData(run.dataSource)
  return [
  {
    gate: "backtest.marketData",
    required: gates.allowSynthetic ? "market data or a synthetic tape (allowSynthetic)" : "market data (a CSV or recorded tape), not a synthetic tape",
    actual: run === undefined ? "none" : run.dataSource,
    passed: run !== undefined && (gates.allowSynthetic || !synthetic)
  },
  check("backtest.minDays", `>= ${gates.minDays}`, metrics === undefined ? undefined : (metrics.toMs - metrics.fromMs) / DAY_MS, (v) => v >= gates.minDays),
  check("backtest.minTrades", `>= ${gates.minTrades}`, metrics?.trades, (v) => v >= gates.minTrades),
  check("backtest.maxDrawdownPct", `<= ${gates.maxDrawdownPct}`, metrics?.maxDrawdownPct, (v) => v <= gates.maxDrawdownPct),
  check("backtest.minSharpe", `>= ${gates.minSharpe}`, metrics?.sharpe, (v) => v >= gates.minSharpe),
  ...(gates.outOfSample
    ? [
        {
          gate: "backtest.outOfSample",
          required: "the out-of-sample window of a walk-forward optimisation (svcbot optimize --walk-forward ... --evidence)",
          actual: run === undefined ? "none" : run.dataSource,
          passed: run !== undefined && isOutOfSample(run.dataSource)
        }
      ]
    : [])
  ]
}

export interface PaperEvidence {
  readonly days: number
  readonly runs: number
  /** Paper fills that differed from their replay, over all counted runs; null when a replay failed. */
  readonly fillMismatches: number | null
  /** Worst tracking error over the runs; null when a run could not measure it (no allocation, failed replay). */
  readonly trackingErrorPct: Decimal | null
  /** Why the tracking error is null, for the operator. */
  readonly trackingErrorMissing?: string
}

export const checkPaper = (gates: PaperGates, evidence: PaperEvidence): ReadonlyArray<GateCheck> => [
  check("paper.minDays", `>= ${gates.minDays}`, evidence.runs > 0 ? evidence.days : null, (v) => v >= gates.minDays),
  check("paper.maxFillMismatches", `<= ${gates.maxFillMismatches}`, evidence.runs > 0 ? evidence.fillMismatches : null, (v) => v <= gates.maxFillMismatches),
  {
    gate: "paper.maxTrackingErrorPct",
    required: `<= ${gates.maxTrackingErrorPct}`,
    actual:
      evidence.runs === 0 ? "none" : evidence.trackingErrorPct === null ? `none (${evidence.trackingErrorMissing ?? "not measured"})` : evidence.trackingErrorPct.toDecimalPlaces(4).toFixed(),
    passed: evidence.runs > 0 && evidence.trackingErrorPct !== null && evidence.trackingErrorPct.lte(gates.maxTrackingErrorPct)
  }
]
