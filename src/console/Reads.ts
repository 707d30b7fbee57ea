/**
 * What the console's API reads, from the same code as the CLI: the instances as
 * `svcbot status` sees them (PnL, book, open orders, fills), orders and fills of the
 * journal and the ledger, an instance's PnL over the run, and where each instance
 * stands on its way to live. Plain functions of an open database; the daemon calls
 * them on its read-only connection, so the console cannot write by mistake.
 */
import type BetterSqlite3 from "better-sqlite3"
import { Either } from "effect"
import { existsSync } from "node:fs"
import { readStatus } from "../cli/status.js"
import type { Config } from "../config/Config.js"
import { Decimal, ZERO } from "../domain/Decimal.js"
import { PnlWalk, type BookFill } from "../promotion/Book.js"
import { openReadOnlyDatabase } from "../store/Database.js"
import { strategyFills } from "../store/FillLedger.js"
import { decodeGates, type GateCheck } from "../promotion/Gates.js"
import { evaluate, identityOf } from "../promotion/Promotion.js"
import { promotionOf, type Stage } from "../promotion/Records.js"
import { replayPaperRun } from "../promotion/Replay.js"
import type { StrategyDefinition } from "../strategy/Strategy.js"

/** What the running daemon says of an instance, beyond what the database holds. */
export type InstanceState = "starting" | "running" | "paused" | "entries-stopped" | "stopping" | "disabled"

export interface LiveState {
  readonly state: InstanceState
  /** Why paused, or since when entries are stopped; null when running. */
  readonly reason: string | null
}

export interface InstanceRow {
  readonly id: string
  readonly strategy: string
  readonly symbol: string
  readonly state: InstanceState
  readonly reason: string | null
  readonly openOrders: number
  readonly fills: number
  readonly pnl: { readonly realised: string; readonly unrealised: string; readonly fees: string; readonly net: string }
  /** The instance's own balances (its allocation moved by its fills), or without an allocation its positions by base asset. */
  readonly book: Readonly<Record<string, string>>
}

const baseAssets = (db: BetterSqlite3.Database): ReadonlyMap<string, { readonly base: string; readonly quote: string }> =>
  db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pair_rules'").get() === undefined
    ? new Map()
    : new Map((db.prepare("SELECT symbol, base, quote FROM pair_rules").all() as Array<{ symbol: string; base: string; quote: string }>).map((r) => [r.symbol, r]))

/** Every configured instance, in config order, with the figures `svcbot status --config` shows for it. */
export const instancesReport = (db: BetterSqlite3.Database, path: string, config: Config, live: (id: string) => LiveState, now: number): { readonly instances: ReadonlyArray<InstanceRow> } => {
  const status = readStatus(db, path, now, config)
  const pnl = new Map(status.pnl.map((p) => [p.strategy, p]))
  const pairs = baseAssets(db)
  return {
    instances: config.strategies.map((instance): InstanceRow => {
      const own = pnl.get(instance.id)
      const { state, reason } = instance.enabled ? live(instance.id) : { state: "disabled" as const, reason: null }
      return {
        id: instance.id,
        strategy: instance.strategy,
        symbol: instance.symbol,
        state,
        reason,
        openOrders: status.openOrders.filter((o) => o.strategy === instance.id).length,
        fills: own?.fills ?? 0,
        pnl: { realised: own?.realizedPnl ?? "0", unrealised: own?.unrealizedPnl ?? "0", fees: own?.fees ?? "0", net: own?.netPnl ?? "0" },
        book: own?.balances ?? Object.fromEntries((own?.positions ?? []).map((p) => [pairs.get(p.symbol)?.base ?? p.symbol, p.baseQty]))
      }
    })
  }
}

/** Most points a PnL series carries; a longer run is thinned evenly, its last point kept. */
export const MAX_PNL_POINTS = 2000

/**
 * An instance's net PnL after each of its fills, valued at that fill's price: what its own
 * fills moved, base and quote, fees included (the paper evidence's book, src/promotion/Book.ts).
 * Exact strings; a chart turns them into numbers only to draw them.
 */
export const pnlSeries = (db: BetterSqlite3.Database, instance: string): { readonly instance: string; readonly fills: number; readonly points: ReadonlyArray<{ readonly time: string; readonly net: string }> } => {
  const rows = strategyFills(db).all(instance)
  const pairs = baseAssets(db)
  const walks = new Map<string, { walk: PnlWalk; fills: Array<BookFill>; last: Decimal }>()
  const points: Array<{ time: string; net: string }> = []
  const stride = Math.ceil(rows.length / MAX_PNL_POINTS)
  rows.forEach((row, i) => {
    let entry = walks.get(row.symbol)
    if (entry === undefined) {
      // Without stored pair rules, a fee in an asset the symbol starts with is a base fee.
      const pair = pairs.get(row.symbol) ?? (row.symbol.startsWith(row.fee_asset) ? { base: row.fee_asset, quote: row.symbol.slice(row.fee_asset.length) } : { base: row.symbol.slice(0, -row.fee_asset.length), quote: row.fee_asset })
      entry = { walk: new PnlWalk({ symbol: row.symbol, ...pair, minNotional: ZERO }), fills: [], last: ZERO }
      walks.set(row.symbol, entry)
    }
    entry.fills.push({ side: row.side, baseQty: new Decimal(row.base_qty), quoteQty: new Decimal(row.quote_qty), fee: new Decimal(row.fee), feeAsset: row.fee_asset })
    entry.last = entry.walk.close({ close: new Decimal(row.price), fillsKnown: entry.fills.length }, entry.fills)
    if (i % stride === 0 || i === rows.length - 1) {
      let net = ZERO
      for (const w of walks.values()) net = net.plus(w.last)
      points.push({ time: new Date(row.time).toISOString(), net: net.toFixed() })
    }
  })
  return { instance, fills: rows.length, points }
}

/** A running instance as the promotion gates see it: its plugin, source and params. */
export interface PromotionSubject {
  readonly id: string
  readonly definition: StrategyDefinition
  readonly sourcePath: string
  readonly params: unknown
  readonly rawParams: unknown
}

export interface PromotionRow {
  readonly instance: string
  readonly strategy: string
  /** The furthest stage this exact source and these params are promoted to; `backtest` before any promotion. */
  readonly stage: "backtest" | Stage
  readonly nextStage: Stage | null
  readonly evidenceDays: string
  /** Paper fills compared with their replay, over the runs the next gate counts. */
  readonly fillsCompared: number
  readonly mismatches: number
  /** The gates of the next stage that the evidence does not pass yet, with what each needs. */
  readonly nextGate: ReadonlyArray<GateCheck>
}

const DAY_MS = 86_400_000

/**
 * Each running instance's promotion stage and what its next gate still needs, evaluated
 * as `svcbot promote` would (replaying the recorded paper runs for the live gate).
 */
export const promotionsReport = (evidencePath: string, subjects: ReadonlyArray<PromotionSubject>, config: Config): { readonly promotions: ReadonlyArray<PromotionRow> } => {
  if (!existsSync(evidencePath)) return { promotions: subjects.map((s) => emptyRow(s)) }
  const db = openReadOnlyDatabase(evidencePath)
  try {
    db.pragma("busy_timeout = 5000")
    if (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'promotions'").get() === undefined) return { promotions: subjects.map((s) => emptyRow(s)) }
    return {
      promotions: subjects.map((subject): PromotionRow => {
        const identity = identityOf(subject.definition.name, subject.sourcePath, subject.rawParams)
        const stage = promotionOf(db, identity, "live") !== undefined ? "live" : promotionOf(db, identity, "paper") !== undefined ? "paper" : "backtest"
        if (stage === "live") return { ...emptyRow(subject), stage }
        const gates = Either.getOrElse(decodeGates(config.strategies.find((s) => s.id === subject.id)?.promotion), () => undefined)
        if (gates === undefined) return emptyRow(subject)
        const next: Stage = stage === "paper" ? "live" : "paper"
        const { checks, parity } = evaluate(db, identity, next, gates, (run, tolerance) =>
          Either.mapLeft(replayPaperRun(subject.definition, subject.params, run, tolerance), (e) => e.message)
        )
        // The live gate counts the paper runs since the paper promotion; before it, every paper run of this code and params.
        const counted = checks.find((c) => c.gate === "paper.minDays")?.actual
        const runs = db.prepare("SELECT data_from_ms AS fromMs, data_to_ms AS toMs FROM runs WHERE kind = 'paper' AND strategy = ? AND source_hash = ? AND params_hash = ?").all(identity.strategy, identity.sourceHash, identity.paramsHash) as Array<{ fromMs: number; toMs: number }>
        const days = counted !== undefined && counted !== "none" ? counted : new Decimal(runs.reduce((sum, r) => sum + Math.max(0, r.toMs - r.fromMs), 0) / DAY_MS).toDecimalPlaces(2).toFixed()
        return {
          instance: subject.id,
          strategy: subject.definition.name,
          stage,
          nextStage: next,
          evidenceDays: days,
          fillsCompared: parity.reduce((sum, p) => sum + p.paperFills, 0),
          mismatches: parity.reduce((sum, p) => sum + p.fillMismatches, 0),
          nextGate: checks.filter((c) => !c.passed)
        }
      })
    }
  } finally {
    db.close()
  }
}

const emptyRow = (subject: PromotionSubject): PromotionRow => ({
  instance: subject.id,
  strategy: subject.definition.name,
  stage: "backtest",
  nextStage: "paper",
  evidenceDays: "0",
  fillsCompared: 0,
  mismatches: 0,
  nextGate: []
})
