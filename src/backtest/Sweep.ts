/**
 * Parameter sweeps: every combination of a grid of params, run across worker
 * threads, ranked by a metric. Each combination's result is a pure function of
 * the job and its params, results are kept by combination index, and ties rank
 * by index, so the ranked table is the same whatever the number of threads.
 */
import type { Worker } from "node:worker_threads"
import { Data, Either } from "effect"
import { type Decimal, fromJsNumber, fromString } from "../domain/Decimal.js"
import { parse } from "../domain/Json.js"
import { canonicalParams } from "../domain/Hash.js"
import type { JobSpec } from "./Job.js"
import { startModuleWorker } from "../domain/ModuleWorker.js"
import { collectForRepeatedRuns } from "./Collector.js"

/** Metrics a sweep can rank by, and whether larger is better. */
export const RANKABLE = {
  sharpe: "desc",
  sortino: "desc",
  pnl: "desc",
  totalReturnPct: "desc",
  annualisedReturnPct: "desc",
  profitFactor: "desc",
  winRatePct: "desc",
  trades: "desc",
  maxDrawdownPct: "asc"
} as const
export type RankBy = keyof typeof RANKABLE

export interface Grid {
  /** Each param maps to a list of alternatives, or to one fixed value. */
  readonly params: Readonly<Record<string, unknown>>
  readonly rankBy: RankBy
}

export class SweepInvalid extends Data.TaggedError("SweepInvalid")<{ readonly message: string }> {}

/** A grid larger than this is almost certainly a mistake in the grid file. */
export const MAX_COMBINATIONS = 100_000

/** Reads a grid file: `{"params": {"fastPeriod": [5, 10], "quoteQty": "100"}, "rankBy": "sharpe"}`. */
export const parseGrid = (text: string): Either.Either<Grid, SweepInvalid> => {
  let value: unknown
  try {
    value = parse(text)
  } catch (error) {
    return Either.left(new SweepInvalid({ message: `the sweep grid is not JSON: ${error instanceof Error ? error.message : String(error)}` }))
  }
  const grid = value as { params?: unknown; rankBy?: unknown }
  if (value === null || typeof value !== "object" || grid.params === null || typeof grid.params !== "object" || Array.isArray(grid.params)) {
    return Either.left(new SweepInvalid({ message: `the sweep grid needs "params": an object of param name to a list of values, e.g. {"params": {"fastPeriod": [5, 10]}}` }))
  }
  const rankBy = grid.rankBy ?? "sharpe"
  if (typeof rankBy !== "string" || !Object.hasOwn(RANKABLE, rankBy)) {
    return Either.left(new SweepInvalid({ message: `"rankBy" must be one of ${Object.keys(RANKABLE).join(", ")}, got ${JSON.stringify(rankBy)}` }))
  }
  const unknownKeys = Object.keys(value).filter((key) => key !== "params" && key !== "rankBy")
  if (unknownKeys.length > 0) return Either.left(new SweepInvalid({ message: `the sweep grid has unknown fields ${unknownKeys.join(", ")} (it takes params and rankBy)` }))
  for (const [name, alternatives] of Object.entries(grid.params)) {
    if (Array.isArray(alternatives) && alternatives.length === 0) {
      return Either.left(new SweepInvalid({ message: `params.${name} is an empty list; give at least one value` }))
    }
  }
  const count = combinationCount({ params: grid.params as Record<string, unknown>, rankBy: rankBy as RankBy })
  if (count > MAX_COMBINATIONS) {
    return Either.left(new SweepInvalid({ message: `the sweep grid makes ${count} combinations; at most ${MAX_COMBINATIONS} are run` }))
  }
  return Either.right({ params: grid.params as Record<string, unknown>, rankBy: rankBy as RankBy })
}

const alternativesOf = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [value])

const combinationCount = (grid: Grid): number =>
  Object.values(grid.params).reduce<number>((n, value) => n * alternativesOf(value).length, 1)

/** The combinations in a fixed order: names sorted, the last name varying fastest. */
export const combinations = (grid: Grid): ReadonlyArray<Record<string, unknown>> => {
  const names = Object.keys(grid.params).sort()
  let out: Array<Record<string, unknown>> = [{}]
  for (const name of names) {
    const next: Array<Record<string, unknown>> = []
    for (const partial of out) for (const value of alternativesOf(grid.params[name])) next.push({ ...partial, [name]: value })
    out = next
  }
  return out
}

/** One combination's outcome; metrics as `metricsToJson` wrote them. */
export interface SweepResult {
  readonly index: number
  /** Canonical params JSON. */
  readonly params: string
  readonly metrics?: Record<string, string | number | null>
  readonly error?: string
}

export interface SweepOptions {
  readonly threads: number
  readonly onProgress?: (done: number, total: number) => void
}

/** A message from a sweep worker. */
export type WorkerMessage =
  | { readonly type: "ready" }
  | { readonly type: "failed"; readonly message: string }
  | { readonly type: "result"; readonly result: SweepResult }


/**
 * Runs every combination across `threads` workers (each loads the strategy and
 * the data once) and returns the results in combination order.
 */
export const runSweep = (spec: JobSpec, grid: Grid, options: SweepOptions): Promise<ReadonlyArray<SweepResult>> => {
  const jobs = combinations(grid).map((params) => canonicalParams(params))
  const total = jobs.length
  const results = new Array<SweepResult>(total)
  const threads = Math.max(1, Math.min(options.threads, total))
  // Each thread runs backtest after backtest; the flag covers every thread of the process.
  collectForRepeatedRuns()
  return new Promise((resolve, reject) => {
    const workers: Array<Worker> = []
    let next = 0
    let done = 0
    let settled = false
    const finish = (error?: Error) => {
      if (settled) return
      settled = true
      for (const worker of workers) void worker.terminate()
      if (error === undefined) resolve(results)
      else reject(error)
    }
    const feed = (worker: Worker) => {
      if (next < total) {
        const index = next++
        worker.postMessage({ index, params: jobs[index] })
      }
    }
    for (let w = 0; w < threads; w++) {
      const worker = startModuleWorker(import.meta.url, "SweepWorker", spec)
      workers.push(worker)
      worker.on("message", (message: WorkerMessage) => {
        if (message.type === "failed") return finish(new SweepInvalid({ message: message.message }))
        if (message.type === "result") {
          results[message.result.index] = message.result
          done++
          options.onProgress?.(done, total)
          if (done === total) return finish()
        }
        feed(worker)
      })
      worker.on("error", (error) => finish(error))
      worker.on("exit", (code) => {
        if (code !== 0 && !settled) finish(new Error(`a sweep worker exited with code ${code}`))
      })
    }
  })
}

/** Ranked exactly: money metrics are decimal strings and are compared as decimals. */
const rankValue = (result: SweepResult, rankBy: RankBy): Decimal | undefined => {
  const value = result.metrics?.[rankBy]
  if (value === null || value === undefined) return undefined
  return typeof value === "number" ? fromJsNumber(value) : fromString(value)
}

/**
 * Results best first by `rankBy`; combinations without a value (an error, or no
 * trades for a ratio) come last; equal values keep combination order.
 */
export const rank = (results: ReadonlyArray<SweepResult>, rankBy: RankBy): ReadonlyArray<SweepResult> => {
  const direction = RANKABLE[rankBy] === "desc" ? -1 : 1
  const keyed = results.map((result) => ({ result, value: rankValue(result, rankBy) }))
  keyed.sort((a, b) => {
    if (a.value === undefined || b.value === undefined) {
      return a.value === b.value ? a.result.index - b.result.index : a.value === undefined ? 1 : -1
    }
    return a.value.cmp(b.value) * direction || a.result.index - b.result.index
  })
  return keyed.map((k) => k.result)
}

const TABLE_METRICS = ["sharpe", "sortino", "totalReturnPct", "maxDrawdownPct", "trades", "winRatePct", "profitFactor", "feesPaid", "pnl"] as const

const csvCell = (text: string): string => (/[",\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text)

/** The ranked table as CSV: rank, params, the main metrics, and the error of a failed combination. */
export const rankedCsv = (ranked: ReadonlyArray<SweepResult>): string => {
  const lines = [["rank", "combination", "params", ...TABLE_METRICS, "error"].join(",")]
  ranked.forEach((result, position) => {
    const metrics = TABLE_METRICS.map((name) => {
      const value = result.metrics?.[name]
      return value === null || value === undefined ? "" : String(value)
    })
    lines.push([String(position + 1), String(result.index), csvCell(result.params), ...metrics, csvCell(result.error ?? "")].join(","))
  })
  return `${lines.join("\n")}\n`
}
