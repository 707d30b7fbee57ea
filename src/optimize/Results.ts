/**
 * The results of optimisation runs, in a SQLite file of their own: one row per
 * run (its settings, and once finished its ranked candidates and walk-forward
 * folds) and one row per trial result, keyed by run id and trial key and written
 * once. Its schema is `migrations/results/`; the daemon's migrations never touch the file.
 */
import { resolve } from "node:path"
import { fileURLToPath } from "node:url"
import type BetterSqlite3 from "better-sqlite3"
import { Data } from "effect"
import { DatabaseRefused, openDatabase } from "../store/Database.js"
import { DatabaseFromNewerVersion } from "../store/Migrations.js"
import type { MetricsJson } from "./Objective.js"
import type { Trial, TrialResult } from "./Trial.js"

export class ResultsUnavailable extends Data.TaggedError("ResultsUnavailable")<{
  readonly message: string
  /** The file is one svcbot must not write (read-only, damaged, from a newer svcbot): a retry does not help, fixing the file does. */
  readonly refused: boolean
}> {}

/** The results file's own migrations: its schema is not the daemon's. */
const RESULTS_MIGRATIONS_DIR = fileURLToPath(new URL("../../migrations/results/", import.meta.url))

/** What a run records about itself when it starts. */
export interface RunHeader {
  readonly createdAtMs: number
  readonly strategy: string
  readonly sourceHash: string
  readonly data: string
  readonly dataHash: string
  readonly symbol: string
  /** The run's settings as JSON-safe values (space, objective, seed, job spec...). */
  readonly settings: unknown
}

export interface StoredRun extends RunHeader {
  readonly runId: number
  /** What the run found, once it finished. */
  readonly outcome: unknown
}

export interface StoredResult {
  readonly key: string
  readonly params: string
  readonly fromMs: number
  readonly toMs: number
  readonly metrics?: MetricsJson
  readonly error?: string
}

/** Rows as either store returns them: node-postgres gives BIGINT as text, so numbers go through Number (epoch milliseconds and ids are safe integers). */
export interface ResultRow {
  readonly job_key: string
  readonly params: string
  readonly from_ms: number | string
  readonly to_ms: number | string
  readonly metrics: string | null
  readonly error: string | null
}

export interface RunRow {
  readonly run_id: number | string
  readonly created_at_ms: number | string
  readonly strategy: string
  readonly source_hash: string
  readonly data: string
  readonly data_hash: string
  readonly symbol: string
  readonly settings: string
  readonly outcome: string | null
}

export const storedRunOf = (row: RunRow): StoredRun => ({
  runId: Number(row.run_id),
  createdAtMs: Number(row.created_at_ms),
  strategy: row.strategy,
  sourceHash: row.source_hash,
  data: row.data,
  dataHash: row.data_hash,
  symbol: row.symbol,
  settings: JSON.parse(row.settings) as unknown,
  outcome: row.outcome === null ? undefined : (JSON.parse(row.outcome) as unknown)
})

export const storedResultOf = (row: ResultRow): StoredResult => ({
  key: row.job_key,
  params: row.params,
  fromMs: Number(row.from_ms),
  toMs: Number(row.to_ms),
  ...(row.metrics === null ? {} : { metrics: JSON.parse(row.metrics) as MetricsJson }),
  ...(row.error === null ? {} : { error: row.error })
})

type Awaitable<T> = T | PromiseLike<T>

/**
 * Where runs and trial results are kept: this module's SQLite file locally, the
 * cluster's Postgres (`PgResults`) with `--cluster`. Callers await every answer.
 */
export interface ResultsBackend {
  /** Where the results are, for messages: a file path or the database's masked URL. */
  readonly where: string
  readonly startRun: (header: RunHeader) => Awaitable<number>
  readonly finishRun: (runId: number, outcome: unknown) => Awaitable<void>
  readonly run: (runId: number) => Awaitable<StoredRun | undefined>
  readonly runIds: () => Awaitable<ReadonlyArray<number>>
  /** The stored result of a trial key the run may reuse instead of running it. */
  readonly result: (runId: number, key: string) => Awaitable<TrialResult | undefined>
  readonly results: (runId: number) => Awaitable<ReadonlyArray<StoredResult>>
  readonly record: (runId: number, trials: ReadonlyArray<Trial>, results: ReadonlyArray<TrialResult>) => Awaitable<void>
  readonly close: () => Awaitable<void>
}

export class ResultsStore implements ResultsBackend {
  private constructor(
    private readonly db: BetterSqlite3.Database,
    readonly where: string
  ) {}

  /**
   * Opens (creating when missing, for its owner only) the results file; refuses, unchanged, one
   * that is read-only, locked, damaged or written by a newer svcbot.
   */
  static open(path: string): ResultsStore {
    try {
      return new ResultsStore(openDatabase({ path, migrationsDir: RESULTS_MIGRATIONS_DIR }), path === ":memory:" ? path : resolve(path))
    } catch (cause) {
      if (cause instanceof DatabaseRefused || cause instanceof DatabaseFromNewerVersion) throw new ResultsUnavailable({ message: cause.message, refused: true })
      throw new ResultsUnavailable({ message: `cannot open the results database ${path}: ${cause instanceof Error ? cause.message : String(cause)}`, refused: false })
    }
  }

  close = (): void => {
    this.db.close()
  }

  startRun = (header: RunHeader): number => {
    const info = this.db
      .prepare("INSERT INTO optimize_runs (created_at_ms, strategy, source_hash, data, data_hash, symbol, settings) VALUES (?, ?, ?, ?, ?, ?, ?)")
      .run(header.createdAtMs, header.strategy, header.sourceHash, header.data, header.dataHash, header.symbol, JSON.stringify(header.settings))
    return Number(info.lastInsertRowid)
  }

  finishRun = (runId: number, outcome: unknown): void => {
    this.db.prepare("UPDATE optimize_runs SET outcome = ? WHERE run_id = ?").run(JSON.stringify(outcome), runId)
  }

  run = (runId: number): StoredRun | undefined => {
    const row = this.db.prepare("SELECT * FROM optimize_runs WHERE run_id = ?").get(runId) as RunRow | undefined
    return row === undefined ? undefined : storedRunOf(row)
  }

  /** The newest runs first, for a listing. */
  runIds = (): ReadonlyArray<number> => {
    return (this.db.prepare("SELECT run_id FROM optimize_runs ORDER BY run_id DESC").all() as Array<{ run_id: number }>).map((r) => r.run_id)
  }

  result = (runId: number, key: string): TrialResult | undefined => {
    const row = this.db.prepare("SELECT * FROM optimize_results WHERE run_id = ? AND job_key = ?").get(runId, key) as ResultRow | undefined
    if (row === undefined) return undefined
    const { params: _params, fromMs: _from, toMs: _to, ...result } = storedResultOf(row)
    return result
  }

  results = (runId: number): ReadonlyArray<StoredResult> => {
    return (this.db.prepare("SELECT * FROM optimize_results WHERE run_id = ? ORDER BY from_ms, to_ms, params").all(runId) as Array<ResultRow>).map(storedResultOf)
  }

  /** Writes each trial's result once, in one transaction: a key already stored for the run keeps its first result. */
  record = (runId: number, trials: ReadonlyArray<Trial>, results: ReadonlyArray<TrialResult>): void => {
    const insert = this.db.prepare(
      "INSERT INTO optimize_results (run_id, job_key, params, from_ms, to_ms, metrics, error) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, job_key) DO NOTHING"
    )
    this.db.transaction(() => {
      trials.forEach((trial, i) => {
        const result = results[i]!
        insert.run(runId, trial.key, trial.params, trial.fromMs, trial.toMs, result.metrics === undefined ? null : JSON.stringify(result.metrics), result.error ?? null)
      })
    })()
  }
}
