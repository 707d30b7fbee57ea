/**
 * A backtest job as the CLI and the sweep workers describe it: which strategy,
 * which params, which data, which pair, fees and balances. `prepare` resolves
 * everything that needs I/O (strategy module, data file) once; `runPrepared`
 * then runs any number of param sets on it without I/O.
 */
import { readFileSync } from "node:fs"
import { resolve } from "node:path"
import { Data, Effect, Either } from "effect"
import { Decimal, fromString, InvalidDecimal } from "../domain/Decimal.js"
import { isLosslessNumber, parse } from "../domain/Json.js"
import { findStrategyFile, loadStrategy, type StrategyNotFound } from "../strategy/Loader.js"
import { decodeParams, type StrategyDefinition } from "../strategy/Strategy.js"
import { decodeAccounts, devAccounts, type PairEntry, toFees, toPairSpec } from "../venue/Accounts.js"
import type { Fees } from "../venue/Matching.js"
import type { PairSpec } from "../venue/Orders.js"
import { syntheticCandles } from "../venue/Tape.js"
import { type BacktestResult, runBacktest } from "./Backtest.js"
import { type CandleSeries, parseCsv, sliceByTime } from "./Candles.js"

/** Where candles come from: a CSV file or the venue's seeded synthetic tape. */
export type DataSpec =
  | { readonly kind: "csv"; readonly path: string }
  | { readonly kind: "synthetic"; readonly seed: number; readonly candles: number }

/** Everything a run needs, as plain JSON-safe values (it crosses to worker threads). */
export interface JobSpec {
  /** A shipped strategy name or a path to a plugin file. */
  readonly strategy: string
  readonly data: DataSpec
  readonly symbol: string
  /** Free balances per asset as decimal strings. */
  readonly balances: Readonly<Record<string, string>>
  /** Maker and taker rates as decimal strings; the venue's defaults when absent. */
  readonly fees?: { readonly maker: string; readonly taker: string }
  readonly settleDelayMs: number
  readonly fromMs?: number
  readonly toMs?: number
  readonly schedule?: string
  /** Working directory that relative paths are resolved against. */
  readonly cwd: string
}

export class JobInvalid extends Data.TaggedError("JobInvalid")<{ readonly message: string }> {}

/** Synthetic candles start here, not at the wall clock, so the same seed gives the same run on any day. */
export const SYNTHETIC_START_MS = Date.UTC(2024, 0, 1)
/** A synthetic tape longer than this would not fit in memory as Decimal candles. */
const MAX_SYNTHETIC_CANDLES = 5_000_000

const venuePairs: ReadonlyArray<PairEntry> = decodeAccounts(devAccounts).pairs

export const parseDataSpec = (data: string | undefined, synthetic: string | undefined): Either.Either<DataSpec, JobInvalid> => {
  if ((data === undefined) === (synthetic === undefined)) {
    return Either.left(new JobInvalid({ message: "give exactly one of --data FILE.csv or --synthetic SEED:CANDLES" }))
  }
  if (data !== undefined) return Either.right({ kind: "csv", path: data })
  const match = /^(\d{1,10}):(\d{1,8})$/.exec(synthetic!)
  const candles = match === null ? 0 : Number(match[2])
  if (match === null || candles < 1 || candles > MAX_SYNTHETIC_CANDLES) {
    return Either.left(new JobInvalid({ message: `--synthetic must be SEED:CANDLES with 1 to ${MAX_SYNTHETIC_CANDLES} candles, e.g. 42:10080, got "${synthetic}"` }))
  }
  return Either.right({ kind: "synthetic", seed: Number(match[1]), candles })
}

export const describeData = (data: DataSpec): string => (data.kind === "csv" ? `csv:${data.path}` : `synthetic:${data.seed}:${data.candles}`)

/** Reads `--balances`: a JSON object of asset to amount, numbers or decimal strings. */
export const parseBalances = (text: string): Either.Either<Record<string, string>, JobInvalid> => {
  let value: unknown
  try {
    value = parse(text)
  } catch (error) {
    return Either.left(new JobInvalid({ message: `--balances is not JSON: ${error instanceof Error ? error.message : String(error)}` }))
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return Either.left(new JobInvalid({ message: `--balances must be an object such as {"USDT": "10000"}` }))
  }
  const out: Record<string, string> = {}
  for (const [asset, amount] of Object.entries(value)) {
    const text = isLosslessNumber(amount) ? amount.value : typeof amount === "string" ? amount : undefined
    try {
      if (text === undefined || fromString(text).lt(0)) throw new InvalidDecimal(String(text), "not a non-negative amount")
      out[asset] = fromString(text).toFixed()
    } catch {
      return Either.left(new JobInvalid({ message: `--balances.${asset}: ${JSON.stringify(text ?? amount)} is not a non-negative amount such as "10000"` }))
    }
  }
  return Either.right(out)
}

/** Reads `--fees`: one rate for maker and taker ("0.001") or "MAKER,TAKER". */
export const parseFees = (text: string): Either.Either<{ maker: string; taker: string }, JobInvalid> => {
  const parts = text.split(",").map((p) => p.trim())
  const rates: Array<string> = []
  for (const part of parts) {
    try {
      const rate = fromString(part)
      if (rate.lt(0) || rate.gte(1)) throw new InvalidDecimal(part, "out of range")
      rates.push(rate.toFixed())
    } catch {
      return Either.left(new JobInvalid({ message: `--fees: "${part}" is not a fee rate from 0 to below 1, such as 0.001 (0.1 %)` }))
    }
  }
  if (rates.length === 1) return Either.right({ maker: rates[0]!, taker: rates[0]! })
  if (rates.length === 2) return Either.right({ maker: rates[0]!, taker: rates[1]! })
  return Either.left(new JobInvalid({ message: `--fees takes one rate or MAKER,TAKER, got "${text}"` }))
}

/** Reads `--params`: inline JSON (starting with `{`) or a JSON file; numbers stay exact. */
export const readParams = (text: string, cwd: string): Either.Either<unknown, JobInvalid> => {
  const inline = text.trimStart().startsWith("{")
  try {
    return Either.right(parse(inline ? text : readFileSync(resolve(cwd, text), "utf8")))
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error)
    return Either.left(new JobInvalid({ message: inline ? `--params is not valid JSON: ${reason}` : `--params file ${text}: ${reason}` }))
  }
}

export interface PreparedJob {
  readonly spec: JobSpec
  readonly definition: StrategyDefinition
  readonly sourcePath: string
  readonly pair: PairSpec
  readonly fees: Fees
  readonly series: CandleSeries
}

const pairEntry = (symbol: string): Either.Either<PairEntry, JobInvalid> => {
  const entry = venuePairs.find((p) => p.symbol === symbol)
  return entry === undefined
    ? Either.left(new JobInvalid({ message: `--symbol ${symbol} is not a venue pair (known: ${venuePairs.map((p) => p.symbol).join(", ")})` }))
    : Either.right(entry)
}

const loadSeries = (spec: JobSpec, entry: PairEntry): Either.Either<CandleSeries, JobInvalid> => {
  const data = spec.data
  let series: CandleSeries
  if (data.kind === "csv") {
    let text: string
    try {
      text = readFileSync(resolve(spec.cwd, data.path), "utf8")
    } catch (error) {
      return Either.left(new JobInvalid({ message: `cannot read --data ${data.path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}` }))
    }
    const parsed = parseCsv(text, { source: data.path })
    if (Either.isLeft(parsed)) return Either.left(new JobInvalid({ message: parsed.left.message }))
    series = parsed.right
  } else {
    const pair = toPairSpec(entry)
    series = {
      intervalMs: 60_000,
      candles: syntheticCandles(data.candles, {
        seed: data.seed,
        startPrice: fromString(entry.price),
        tickSize: pair.tickSize,
        stepSize: pair.stepSize,
        startMs: SYNTHETIC_START_MS
      })
    }
  }
  const sliced = sliceByTime(series, spec.fromMs, spec.toMs)
  return sliced.candles.length === 0
    ? Either.left(new JobInvalid({ message: `no candles of ${describeData(data)} fall in the --from/--to range` }))
    : Either.right(sliced)
}

const strategyProblem = (error: StrategyNotFound): JobInvalid => new JobInvalid({ message: error.message.replaceAll("strategies[backtest].strategy", "--strategy") })

/** The job's strategy plugin file, found without running its code. */
export const strategyFileOf = (spec: JobSpec): Effect.Effect<string, JobInvalid> =>
  findStrategyFile("backtest", spec.strategy, spec.cwd).pipe(Effect.mapError(strategyProblem))

/** Loads the strategy module and the candles; the one step with I/O. */
export const prepare = (spec: JobSpec): Effect.Effect<PreparedJob, JobInvalid> =>
  Effect.gen(function* () {
    const entry = yield* pairEntry(spec.symbol)
    const loaded = yield* loadStrategy("backtest", spec.strategy, spec.cwd).pipe(Effect.mapError(strategyProblem))
    const series = yield* loadSeries(spec, entry)
    return {
      spec,
      definition: loaded.definition,
      sourcePath: loaded.sourcePath,
      pair: toPairSpec(entry),
      fees: toFees(spec.fees ?? devAccounts.fees),
      series
    }
  })

/** Decodes the params and runs the backtest; synchronous. */
/** Runs the job with these params; `afterCandle` sees the strategy's state after each candle (the report's plots). */
export const runPrepared = (
  job: PreparedJob,
  rawParams: unknown,
  afterCandle?: (index: number, state: unknown) => void
): Either.Either<BacktestResult, JobInvalid> => {
  const params = decodeParams(job.definition, "backtest", rawParams)
  if (Either.isLeft(params)) return Either.left(new JobInvalid({ message: params.left.message.replaceAll("strategies[backtest].params", "--params") }))
  const balances: Record<string, Decimal> = {}
  for (const [asset, amount] of Object.entries(job.spec.balances)) balances[asset] = new Decimal(amount)
  const outcome = runBacktest({
    strategy: job.definition,
    params: params.right,
    pair: job.pair,
    fees: job.fees,
    settleDelayMs: job.spec.settleDelayMs,
    balances,
    candles: job.series.candles,
    intervalMs: job.series.intervalMs,
    ...(job.spec.schedule === undefined ? {} : { schedule: job.spec.schedule }),
    ...(afterCandle === undefined ? {} : { afterCandle })
  })
  return Either.mapLeft(outcome, (error) => new JobInvalid({ message: error.message }))
}
