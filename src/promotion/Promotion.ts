/**
 * Promotion from backtest to paper to live, on evidence for the exact code and
 * params: `promote` checks the gates and writes a record or refuses with every
 * failed gate; `liveStatus` tells the daemon whether a strategy may trade live.
 */
import type BetterSqlite3 from "better-sqlite3"
import { Data, Either } from "effect"
import { Decimal } from "../domain/Decimal.js"
import { checkBacktest, checkPaper, type GateCheck, type PromotionGates } from "./Gates.js"
import { paramsHash, sourceHashOfFile } from "./Hash.js"
import { latestPromotion, promotionOf, type PromotionRecord, recordPromotion, type RunIdentity, runsOf, type Stage } from "./Records.js"

const DAY_MS = 86_400_000

export interface PromotionRequest {
  readonly strategy: string
  /** The strategy's source file; its bytes are hashed now. */
  readonly sourcePath: string
  readonly params: unknown
  readonly to: Stage
  readonly gates: PromotionGates
  readonly nowMs: number
}

export class PromotionRefused extends Data.TaggedError("PromotionRefused")<{
  readonly strategy: string
  readonly stage: Stage
  readonly failed: ReadonlyArray<GateCheck>
  readonly checks: ReadonlyArray<GateCheck>
}> {
  override get message(): string {
    return `promotion of ${this.strategy} to ${this.stage} refused; failed gates:\n${this.failed
      .map((c) => `  - ${c.gate}: required ${c.required}, evidence ${c.actual}`)
      .join("\n")}`
  }
}

export const identityOf = (strategy: string, sourcePath: string, params: unknown): RunIdentity => ({
  strategy,
  sourceHash: sourceHashOfFile(sourcePath),
  paramsHash: paramsHash(params)
})

/**
 * Paper needs the newest backtest of this exact code and params to pass the
 * backtest gates (the newest, so that a later, worse backtest cannot be hidden
 * behind an older, better one). Live needs a paper promotion of the same hashes
 * and enough paper trading that tracked its backtest closely.
 */
export const evaluate = (
  db: BetterSqlite3.Database,
  identity: RunIdentity,
  to: Stage,
  gates: PromotionGates
): { readonly checks: ReadonlyArray<GateCheck>; readonly runIds: ReadonlyArray<number> } => {
  if (to === "paper") {
    const latest = runsOf(db, identity, "backtest")[0]
    return {
      checks: [
        { gate: "backtest.run", required: "a backtest of this exact source and params", actual: latest === undefined ? "none" : `run ${latest.runId}`, passed: latest !== undefined },
        ...checkBacktest(gates.backtest, latest?.metrics)
      ],
      runIds: latest === undefined ? [] : [latest.runId]
    }
  }
  const paperPromotion = promotionOf(db, identity, "paper")
  const paperRuns = runsOf(db, identity, "paper")
  let days = 0
  let worst: Decimal | null = paperRuns.length > 0 ? new Decimal(0) : null
  for (const run of paperRuns) {
    days += (run.metrics.toMs - run.metrics.fromMs) / DAY_MS
    if (run.trackingErrorPct === undefined) worst = null
    else if (worst !== null && run.trackingErrorPct.gt(worst)) worst = run.trackingErrorPct
  }
  return {
    checks: [
      {
        gate: "paper.promoted",
        required: "promoted to paper with this exact source and params",
        actual: paperPromotion === undefined ? "none" : `promotion ${paperPromotion.promotionId}`,
        passed: paperPromotion !== undefined
      },
      ...checkPaper(gates.paper, { days, trackingErrorPct: worst, runs: paperRuns.length })
    ],
    runIds: paperRuns.map((run) => run.runId)
  }
}

export const promote = (db: BetterSqlite3.Database, request: PromotionRequest): Either.Either<PromotionRecord, PromotionRefused> => {
  const identity = identityOf(request.strategy, request.sourcePath, request.params)
  const { checks, runIds } = evaluate(db, identity, request.to, request.gates)
  const failed = checks.filter((c) => !c.passed)
  if (failed.length > 0) return Either.left(new PromotionRefused({ strategy: request.strategy, stage: request.to, failed, checks }))
  return Either.right(
    recordPromotion(db, {
      ...identity,
      stage: request.to,
      sourcePath: request.sourcePath,
      evidence: { runIds, checks },
      promotedAtMs: request.nowMs
    })
  )
}

export type LiveStatus =
  | { readonly live: true; readonly promotion: PromotionRecord }
  | {
      readonly live: false
      readonly reason: "never-promoted" | "source-changed" | "params-changed"
      /** One sentence for the log and the operator, naming what to do. */
      readonly message: string
    }

/**
 * May this strategy trade live with this file and these params? Only when a live
 * promotion carries exactly their hashes; otherwise the reason compares with the
 * newest live promotion, so a changed file or param reads as a demotion.
 */
export const liveStatus = (db: BetterSqlite3.Database, strategy: string, sourcePath: string, params: unknown): LiveStatus => {
  const identity = identityOf(strategy, sourcePath, params)
  const exact = promotionOf(db, identity, "live")
  if (exact !== undefined) return { live: true, promotion: exact }
  const latest = latestPromotion(db, strategy, "live")
  if (latest === undefined) {
    return {
      live: false,
      reason: "never-promoted",
      message: `${strategy} was never promoted to live; run a backtest, then svcbot promote ${strategy} --to paper, trade it on paper, then --to live`
    }
  }
  if (latest.sourceHash !== identity.sourceHash) {
    const alsoParams = latest.paramsHash !== identity.paramsHash ? " and its params" : ""
    return {
      live: false,
      reason: "source-changed",
      message: `${strategy} is demoted: ${sourcePath}${alsoParams} changed since its live promotion ${latest.promotionId} (source ${latest.sourceHash.slice(0, 12)} -> ${identity.sourceHash.slice(0, 12)}); the new code needs its own backtest, paper run and promotion`
    }
  }
  return {
    live: false,
    reason: "params-changed",
    message: `${strategy} is demoted: its params changed since its live promotion ${latest.promotionId} (params ${latest.paramsHash.slice(0, 12)} -> ${identity.paramsHash.slice(0, 12)}); promote the new params through paper first`
  }
}
