/**
 * The unit of work of an optimisation: one backtest of one params set on one time
 * slice of one data set. A trial is plain JSON and its result a pure function of
 * it and of the study it belongs to, so it can run on this thread, a worker
 * thread or another machine, and its result is stored once under its key.
 *
 * The key is the SHA-256 of the canonical JSON of everything the result depends
 * on: the strategy's name and source hash, the params, the content hash of the
 * candles, the slice [fromMs, toMs), and the run's setup (pair, balances, fees,
 * settle delay, schedule). The same key always means the same result.
 */
import { createHash } from "node:crypto"
import { Either } from "effect"
import { type JobSpec, type PreparedJob, runPrepared } from "../backtest/Job.js"
import { type CandleSeries, sliceByTime } from "../backtest/Candles.js"
import { metricsToJson } from "../backtest/Metrics.js"
import { paramsHash, sourceHashOfFile } from "../domain/Hash.js"
import { parse } from "../domain/Json.js"
import type { MetricsJson } from "./Objective.js"

/** What every trial of a run shares: the job (strategy, data, setup) and its hashes. */
export interface Study {
  readonly spec: JobSpec
  readonly strategy: string
  readonly sourceHash: string
  readonly dataHash: string
  /** The first candle's open time and the last candle's close time. */
  readonly fromMs: number
  readonly toMs: number
  readonly intervalMs: number
}

export interface Trial {
  readonly key: string
  /** Canonical params JSON. */
  readonly params: string
  readonly fromMs: number
  readonly toMs: number
}

export interface TrialResult {
  readonly key: string
  readonly metrics?: MetricsJson
  readonly error?: string
}

/** The SHA-256 of the candles themselves (interval, then each row's open time and OHLCV digits): equal data, equal hash, whatever file it came from. */
export const dataHashOf = (series: CandleSeries): string => {
  const hash = createHash("sha256").update(`interval ${series.intervalMs}\n`)
  for (const c of series.candles) {
    hash.update(`${c.openTimeMs},${c.open.toFixed()},${c.high.toFixed()},${c.low.toFixed()},${c.close.toFixed()},${c.volume.toFixed()}\n`)
  }
  return hash.digest("hex")
}

export const studyOf = (job: PreparedJob): Study => {
  const candles = job.series.candles
  return {
    spec: job.spec,
    strategy: job.definition.name,
    sourceHash: sourceHashOfFile(job.sourcePath),
    dataHash: dataHashOf(job.series),
    fromMs: candles[0]!.openTimeMs,
    toMs: candles[candles.length - 1]!.openTimeMs + job.series.intervalMs,
    intervalMs: job.series.intervalMs
  }
}

export const trialKey = (study: Study, params: string, fromMs: number, toMs: number): string =>
  paramsHash({
    strategy: study.strategy,
    sourceHash: study.sourceHash,
    params: parse(params),
    dataHash: study.dataHash,
    fromMs,
    toMs,
    symbol: study.spec.symbol,
    balances: study.spec.balances,
    fees: study.spec.fees ?? null,
    settleDelayMs: study.spec.settleDelayMs,
    schedule: study.spec.schedule ?? null
  })

export const trialOf = (study: Study, params: string, fromMs: number, toMs: number): Trial => ({ key: trialKey(study, params, fromMs, toMs), params, fromMs, toMs })

/** Runs a trial on a prepared job, synchronously: the backtest of its params on the candles opening in its slice. */
export const runTrial = (job: PreparedJob, trial: Trial): TrialResult => {
  const series = sliceByTime(job.series, trial.fromMs, trial.toMs)
  if (series.candles.length === 0) return { key: trial.key, error: `no candles open in [${new Date(trial.fromMs).toISOString()}, ${new Date(trial.toMs).toISOString()})` }
  const outcome = runPrepared({ ...job, series }, parse(trial.params))
  return Either.isRight(outcome) ? { key: trial.key, metrics: metricsToJson(outcome.right.metrics) } : { key: trial.key, error: outcome.left.message }
}
