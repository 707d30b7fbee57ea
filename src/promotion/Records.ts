/**
 * The `runs` and `promotions` tables: every backtest and paper run with the
 * hashes of the code and params it ran, and every promotion granted. Plain
 * synchronous functions over the one better-sqlite3 connection of `Database`.
 */
import type BetterSqlite3 from "better-sqlite3"
import { type Metrics, metricsFromJson, metricsToJson } from "../backtest/Metrics.js"
import type { GateCheck } from "./Gates.js"

export type RunKind = "backtest" | "paper"
export type Stage = "paper" | "live"

/** What ran: the strategy by name and by the exact hashes of its source and params. */
export interface RunIdentity {
  readonly strategy: string
  readonly sourceHash: string
  readonly paramsHash: string
}

export interface NewRun extends RunIdentity {
  readonly kind: RunKind
  /** Canonical params JSON (`canonicalParams`). */
  readonly params: string
  readonly symbol: string
  readonly dataSource: string
  readonly metrics: Metrics
  readonly recordedAtMs: number
}

export interface RunRecord extends NewRun {
  readonly runId: number
  /** Paper runs: recording as it happens (`running`), ended cleanly, or cut off. */
  readonly status: "running" | "completed" | "interrupted"
  /** Paper runs written as they happen: when the instance started. */
  readonly startedAtMs: number | null
}

interface RunRow {
  run_id: number
  kind: RunKind
  strategy: string
  source_hash: string
  params_hash: string
  params: string
  symbol: string
  data_source: string
  metrics: string
  recorded_at: number
  status: "running" | "completed" | "interrupted"
  started_at: number | null
}

const toRun = (row: RunRow): RunRecord => ({
  runId: row.run_id,
  kind: row.kind,
  strategy: row.strategy,
  sourceHash: row.source_hash,
  paramsHash: row.params_hash,
  params: row.params,
  symbol: row.symbol,
  dataSource: row.data_source,
  metrics: metricsFromJson(JSON.parse(row.metrics) as Record<string, unknown>),
  recordedAtMs: row.recorded_at,
  status: row.status,
  startedAtMs: row.started_at
})

export const recordRun = (db: BetterSqlite3.Database, run: NewRun): number => {
  const result = db
    .prepare(
      `INSERT INTO runs (kind, strategy, source_hash, params_hash, params, symbol, data_source, data_from_ms, data_to_ms,
                         candles, metrics, recorded_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
    )
    .run(
      run.kind,
      run.strategy,
      run.sourceHash,
      run.paramsHash,
      run.params,
      run.symbol,
      run.dataSource,
      run.metrics.fromMs,
      run.metrics.toMs,
      run.metrics.candles,
      JSON.stringify(metricsToJson(run.metrics)),
      run.recordedAtMs
    )
  return Number(result.lastInsertRowid)
}

/** Runs of exactly this code and these params, newest first. */
export const runsOf = (db: BetterSqlite3.Database, identity: RunIdentity, kind: RunKind): ReadonlyArray<RunRecord> =>
  (
    db
      .prepare(
        `SELECT * FROM runs WHERE strategy = ? AND source_hash = ? AND params_hash = ? AND kind = ? ORDER BY run_id DESC`
      )
      .all(identity.strategy, identity.sourceHash, identity.paramsHash, kind) as Array<RunRow>
  ).map(toRun)

export const listRuns = (db: BetterSqlite3.Database, strategy?: string): ReadonlyArray<RunRecord> =>
  (
    (strategy === undefined
      ? db.prepare("SELECT * FROM runs ORDER BY run_id")
      : db.prepare("SELECT * FROM runs WHERE strategy = ? ORDER BY run_id").bind(strategy)
    ).all() as Array<RunRow>
  ).map(toRun)

/** A paper run's replay as a promotion record keeps it. */
export interface ParitySummary {
  readonly runId: number
  readonly status: RunRecord["status"]
  readonly paperFills: number
  readonly replayFills: number
  readonly fillMismatches: number
  /** Percent, 4 decimals; null when not measured. */
  readonly trackingErrorPct: string | null
  /** The first mismatches, one line each. */
  readonly worst: ReadonlyArray<string>
  /** Set when the run could not be replayed. */
  readonly error?: string
}

export interface PromotionEvidence {
  readonly runIds: ReadonlyArray<number>
  readonly checks: ReadonlyArray<GateCheck>
  /** Live promotions: every counted paper run's replay (absent in records made before replays). */
  readonly parity?: ReadonlyArray<ParitySummary>
}

export interface PromotionRecord extends RunIdentity {
  readonly promotionId: number
  readonly stage: Stage
  readonly sourcePath: string
  readonly evidence: PromotionEvidence
  readonly promotedAtMs: number
}

interface PromotionRow {
  promotion_id: number
  strategy: string
  stage: Stage
  source_hash: string
  params_hash: string
  source_path: string
  evidence: string
  promoted_at: number
}

const toPromotion = (row: PromotionRow): PromotionRecord => ({
  promotionId: row.promotion_id,
  strategy: row.strategy,
  stage: row.stage,
  sourceHash: row.source_hash,
  paramsHash: row.params_hash,
  sourcePath: row.source_path,
  evidence: JSON.parse(row.evidence) as PromotionEvidence,
  promotedAtMs: row.promoted_at
})

export const recordPromotion = (db: BetterSqlite3.Database, promotion: Omit<PromotionRecord, "promotionId">): PromotionRecord => {
  const result = db
    .prepare(
      `INSERT INTO promotions (strategy, stage, source_hash, params_hash, source_path, evidence, promoted_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`
    )
    .run(
      promotion.strategy,
      promotion.stage,
      promotion.sourceHash,
      promotion.paramsHash,
      promotion.sourcePath,
      JSON.stringify(promotion.evidence),
      promotion.promotedAtMs
    )
  return { ...promotion, promotionId: Number(result.lastInsertRowid) }
}

/** Promotions of a strategy (all strategies when absent), oldest first. */
export const listPromotions = (db: BetterSqlite3.Database, strategy?: string): ReadonlyArray<PromotionRecord> =>
  (
    (strategy === undefined
      ? db.prepare("SELECT * FROM promotions ORDER BY promotion_id")
      : db.prepare("SELECT * FROM promotions WHERE strategy = ? ORDER BY promotion_id").bind(strategy)
    ).all() as Array<PromotionRow>
  ).map(toPromotion)

/** The newest promotion of a strategy to `stage`, whatever its hashes. */
export const latestPromotion = (db: BetterSqlite3.Database, strategy: string, stage: Stage): PromotionRecord | undefined => {
  const row = db
    .prepare("SELECT * FROM promotions WHERE strategy = ? AND stage = ? ORDER BY promotion_id DESC LIMIT 1")
    .get(strategy, stage) as PromotionRow | undefined
  return row === undefined ? undefined : toPromotion(row)
}

export const promotionOf = (db: BetterSqlite3.Database, identity: RunIdentity, stage: Stage): PromotionRecord | undefined => {
  const row = db
    .prepare(
      `SELECT * FROM promotions WHERE strategy = ? AND source_hash = ? AND params_hash = ? AND stage = ?
       ORDER BY promotion_id DESC LIMIT 1`
    )
    .get(identity.strategy, identity.sourceHash, identity.paramsHash, stage) as PromotionRow | undefined
  return row === undefined ? undefined : toPromotion(row)
}
