/**
 * Promotion from backtest to paper to live, on evidence for the exact code and
 * params: `promote` checks the gates and writes a record or refuses with every
 * failed gate; `liveStatus` tells the daemon whether a strategy may trade live.
 */
import type BetterSqlite3 from "better-sqlite3"
import { Data, Either } from "effect"
import { Decimal } from "../domain/Decimal.js"
import { describeIntentMismatches } from "../backtest/Parity.js"
import { loadPaperRun, type PaperRunEvidence } from "./PaperStore.js"
import type { RunParity } from "./Replay.js"
import { checkBacktest, checkPaper, type GateCheck, type PromotionGates } from "./Gates.js"
import { paramsHash, sourceHashOfFile } from "../domain/Hash.js"
import {
  latestPromotion,
  type ParitySummary,
  promotionOf,
  type PromotionRecord,
  recordPromotion,
  type RunIdentity,
  runsOf,
  type Stage
} from "./Records.js"

/** A replayed run as the promotion record keeps it: exact decimals as text, mismatches as lines. */
const summarise = (p: RunParity): ParitySummary => ({
  runId: p.runId,
  status: p.status,
  paperFills: p.paperFills,
  replayFills: p.replayFills,
  fillMismatches: p.fillMismatches,
  trackingErrorPct: p.trackingErrorPct === undefined ? null : p.trackingErrorPct.toDecimalPlaces(4).toFixed(),
  worst: p.worst.length === 0 ? [] : describeIntentMismatches(p.worst).split("\n")
})

const DAY_MS = 86_400_000

export interface PromotionRequest {
  readonly strategy: string
  /** The strategy's source file; its bytes are hashed now. */
  readonly sourcePath: string
  readonly params: unknown
  readonly to: Stage
  readonly gates: PromotionGates
  readonly nowMs: number
  /** Replays a recorded paper run of this code and these params (the live gate). */
  readonly replay: PaperReplay
}

/** The parity of one recorded run, or why it could not be replayed. */
export type PaperReplay = (run: PaperRunEvidence, latencyToleranceMs: number) => Either.Either<RunParity, string>

export class PromotionRefused extends Data.TaggedError("PromotionRefused")<RunIdentity & {
  readonly stage: Stage
  readonly failed: ReadonlyArray<GateCheck>
  readonly checks: ReadonlyArray<GateCheck>
  readonly parity: ReadonlyArray<ParitySummary>
}> {
  override get message(): string {
    return `promotion of ${this.strategy} to ${this.stage} refused; failed gates:\n${this.failed
      .map((c) => `  - ${c.gate}: required ${c.required}, evidence ${c.actual}`)
      .join("\n")}${describeParity(this.parity)}`
  }
}

export const identityOf = (strategy: string, sourcePath: string, params: unknown): RunIdentity => ({
  strategy,
  sourceHash: sourceHashOfFile(sourcePath),
  paramsHash: paramsHash(params)
})

/** One line per replayed run and one per mismatch kept, under the gates. */
export const describeParity = (parity: ReadonlyArray<ParitySummary>): string =>
  parity.length === 0
    ? ""
    : `\npaper runs replayed:\n${parity
        .map(
          (p) =>
            `  run ${p.runId} (${p.status}): ${p.error ?? `${p.fillMismatches} of ${p.paperFills} paper fills differ from ${p.replayFills} replayed, tracking error ${p.trackingErrorPct ?? "not measured (no allocation)"}`}${p.worst.map((line) => `\n      ${line}`).join("")}`
        )
        .join("\n")}`

interface Evaluation {
  readonly checks: ReadonlyArray<GateCheck>
  readonly runIds: ReadonlyArray<number>
  readonly parity: ReadonlyArray<ParitySummary>
}

/**
 * Paper needs the newest backtest of this exact code and params to pass the
 * backtest gates (the newest, so that a later, worse backtest cannot be hidden
 * behind an older, better one). Live needs a paper promotion of the same hashes
 * and paper runs recorded after it whose fills match their replay and whose book
 * tracked it closely.
 */
export const evaluate = (db: BetterSqlite3.Database, identity: RunIdentity, to: Stage, gates: PromotionGates, replay: PaperReplay): Evaluation => {
  if (to === "paper") {
    const latest = runsOf(db, identity, "backtest")[0]
    return {
      checks: [
        { gate: "backtest.run", required: "a backtest of this exact source and params", actual: latest === undefined ? "none" : `run ${latest.runId}`, passed: latest !== undefined },
        ...checkBacktest(gates.backtest, latest)
      ],
      runIds: latest === undefined ? [] : [latest.runId],
      parity: []
    }
  }
  const paperPromotion = promotionOf(db, identity, "paper")
  // Evidence counts from the paper promotion of exactly this code and these params on.
  const counted =
    paperPromotion === undefined
      ? []
      : runsOf(db, identity, "paper").filter((run) => run.startedAtMs !== null && run.startedAtMs >= paperPromotion.promotedAtMs && run.metrics.candles > 0)
  let days = 0
  let mismatches: number | null = 0
  let worst: Decimal | null = counted.length > 0 ? new Decimal(0) : null
  let missing: string | undefined
  const parity: Array<ParitySummary> = []
  for (const run of [...counted].reverse()) {
    days += (run.metrics.toMs - run.metrics.fromMs) / DAY_MS
    const evidence = loadPaperRun(db, run.runId)
    const replayed = evidence === undefined ? Either.left(`run ${run.runId} has no recorded tape`) : replay(evidence, gates.paper.latencyToleranceMs)
    if (Either.isLeft(replayed)) {
      parity.push({ runId: run.runId, status: run.status, paperFills: 0, replayFills: 0, fillMismatches: 0, trackingErrorPct: null, worst: [], error: `not replayed: ${replayed.left}` })
      mismatches = null
      worst = null
      missing = `run ${run.runId} could not be replayed`
      continue
    }
    const result = replayed.right
    parity.push(summarise(result))
    if (mismatches !== null) mismatches += result.fillMismatches
    if (result.trackingErrorPct === undefined) {
      worst = null
      missing ??= `run ${run.runId} had no allocation: set strategies[].allocation`
    } else if (worst !== null && result.trackingErrorPct.gt(worst)) {
      worst = result.trackingErrorPct
    }
  }
  return {
    checks: [
      {
        gate: "paper.promoted",
        required: "promoted to paper with this exact source and params",
        actual: paperPromotion === undefined ? "none" : `promotion ${paperPromotion.promotionId}`,
        passed: paperPromotion !== undefined
      },
      ...checkPaper(gates.paper, { days, runs: counted.length, fillMismatches: mismatches, trackingErrorPct: worst, ...(missing === undefined ? {} : { trackingErrorMissing: missing }) })
    ],
    runIds: counted.map((run) => run.runId),
    parity
  }
}

export const promote = (db: BetterSqlite3.Database, request: PromotionRequest): Either.Either<PromotionRecord, PromotionRefused> => {
  const identity = identityOf(request.strategy, request.sourcePath, request.params)
  const { checks, runIds, parity } = evaluate(db, identity, request.to, request.gates, request.replay)
  const failed = checks.filter((c) => !c.passed)
  if (failed.length > 0) return Either.left(new PromotionRefused({ ...identity, stage: request.to, failed, checks, parity }))
  return Either.right(
    recordPromotion(db, {
      ...identity,
      stage: request.to,
      sourcePath: request.sourcePath,
      evidence: { runIds, checks, parity },
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
