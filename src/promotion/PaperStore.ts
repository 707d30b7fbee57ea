/**
 * Paper runs in the evidence store (migration 0050): started when an instance
 * starts, extended at each checkpoint in one transaction with the rows the
 * checkpoint summarises, closed by a clean stop or marked interrupted by the next
 * start. Plain synchronous functions over one better-sqlite3 connection.
 */
import type BetterSqlite3 from "better-sqlite3"
import { Decimal } from "../domain/Decimal.js"
import { type Metrics, metricsFromJson, metricsToJson } from "../backtest/Metrics.js"
import type { GivenTicker } from "../backtest/ReplayRun.js"
import type { LedgerFill } from "../store/FillLedger.js"
import type { Liquidity, Side } from "../svc/Dialect.js"
import type { CandleEvent, OrderUpdateKind } from "../strategy/Strategy.js"
import type { RunIdentity } from "./Records.js"

export type PaperRunStatus = "running" | "completed" | "interrupted"

/** What a replay needs besides the tape: stored as JSON in `runs.setup`, amounts as decimal strings. */
export interface PaperSetup {
  readonly instanceId: string
  /** The instance's allocation; null when its config has none (tracking error cannot be measured). */
  readonly allocation: Readonly<Record<string, string>> | null
  /** What the replay's account starts with: the allocation, else the account's holdings of the pair. */
  readonly startBalances: Readonly<Record<string, string>>
  /** The pair's price when the run started (what the allocation was worth). */
  readonly startPrice: string
  readonly pair: {
    readonly symbol: string
    readonly base: string
    readonly quote: string
    readonly tickSize: string
    readonly stepSize: string
    readonly minBaseQty: string
    readonly minNotional: string
    readonly depthNotional: string
  }
  readonly fees: { readonly maker: string; readonly taker: string }
  readonly settleDelayMs: number
  readonly intervalMs: number
  readonly schedule: string | null
  /** The strategy's stored state when the run started, as stored; null: it started fresh. */
  readonly startState: string | null
  /**
   * The limit and stop-limit orders the instance had live when the run started (it resumed),
   * each with what was left of it; absent in runs recorded before it was kept.
   */
  readonly carried?: ReadonlyArray<CarriedOrder>
  /**
   * What the resumed instance was handed first, before anything of the run: the final updates
   * and fills of its orders that came about while it did not run; absent when there were none.
   */
  readonly missed?: ReadonlyArray<MissedOutcomeRow>
}

/** A final order update or a fill a resumed run started by handing its instance, amounts as exact strings. */
export type MissedOutcomeRow =
  | {
      readonly _tag: "OrderUpdate"
      readonly tag: string
      readonly clientOrderId: string | null
      readonly kind: OrderUpdateKind
      readonly code: string | null
      readonly filledBaseQty: string
    }
  | {
      readonly _tag: "Fill"
      readonly tag: string
      readonly fillId: string
      readonly side: Side
      readonly price: string
      readonly baseQty: string
      readonly quoteQty: string
      readonly fee: string
      readonly feeAsset: string
      readonly liquidity: Liquidity
      readonly time: number
    }

/** A live order a resumed run started with, as exact strings. */
export interface CarriedOrder {
  readonly tag: string
  readonly clientOrderId: string
  readonly side: Side
  readonly type: "limit" | "stop-limit"
  /** What was left to fill. */
  readonly baseQty: string
  readonly limitPrice: string
  readonly stopPrice: string | null
}

export interface NewPaperRun extends RunIdentity {
  readonly params: string
  readonly symbol: string
  readonly dataSource: string
  readonly setup: PaperSetup
  readonly startedAtMs: number
  readonly emptyMetrics: Metrics
}

/** A candle as the strategy was given it, when, and how many of the run's fills the daemon had by then. */
export interface PaperCandleRow extends Pick<CandleEvent, "openTime" | "open" | "high" | "low" | "close" | "volume"> {
  readonly warmup: boolean
  readonly seenAt: number
  readonly fillsKnown: number
}

export interface PaperStepRow {
  readonly seq: number
  readonly timeMs: number
  readonly price: Decimal
}

export interface PaperIntentRow {
  readonly intentId: string
  /** A placement, or a cancel of the tag's order. */
  readonly kind: "place" | "cancel"
  readonly tag: string
  /** How many intents of this kind and tag came before it in the run. */
  readonly occurrence: number
  readonly decidedAt: number
  /** The order placed, or the order the cancel was sent for. */
  readonly clientOrderId: string | null
  /** When the venue created the order, or cancelled it; null when it never did. */
  readonly reachedVenueAt: number | null
}

/** An order update or fill the strategy was given, and when (the daemon's clock). */
export interface PaperHeardRow {
  readonly seq: number
  readonly timeMs: number
  /** The updated order; null for a fill, which `fillId` names. */
  readonly clientOrderId: string | null
  /** The update's kind, or "fill". */
  readonly kind: string
  readonly fillId: string | null
}

/** A fill of the instance as the ledger holds it, tied to the run's intent that placed its order. */
export interface PaperFillRow extends Omit<LedgerFill, "symbol" | "side" | "liquidity" | "raw"> {
  /** Null for a fill of an order placed before the run: it is in the book but not compared. */
  readonly intentId: string | null
  readonly side: Side
  readonly liquidity: Liquidity
}

export interface Checkpoint {
  readonly runId: number
  readonly candles: ReadonlyArray<PaperCandleRow>
  readonly tickers: ReadonlyArray<GivenTicker>
  readonly steps: ReadonlyArray<PaperStepRow>
  readonly intents: ReadonlyArray<PaperIntentRow>
  readonly fills: ReadonlyArray<PaperFillRow>
  readonly heard: ReadonlyArray<PaperHeardRow>
  readonly metrics: Metrics
  readonly nowMs: number
}

export interface PaperRunEvidence {
  readonly runId: number
  readonly status: PaperRunStatus
  readonly startedAtMs: number
  readonly metrics: Metrics
  readonly setup: PaperSetup
  readonly candles: ReadonlyArray<PaperCandleRow>
  /** The tickers the strategy was given, in the order it was given them. */
  readonly tickers: ReadonlyArray<GivenTicker>
  readonly steps: ReadonlyArray<PaperStepRow>
  readonly intents: ReadonlyArray<PaperIntentRow>
  readonly fills: ReadonlyArray<PaperFillRow>
  /** Oldest first. */
  readonly heard: ReadonlyArray<PaperHeardRow>
}

/** Runs still `running` belong to a daemon that did not stop cleanly: they keep what they recorded. */
export const interruptRunningPaperRuns = (db: BetterSqlite3.Database, nowMs: number): number =>
  db.prepare("UPDATE runs SET status = 'interrupted', ended_at = ? WHERE kind = 'paper' AND status = 'running'").run(nowMs).changes

export const startPaperRun = (db: BetterSqlite3.Database, run: NewPaperRun): number =>
  Number(
    db
      .prepare(
        `INSERT INTO runs (kind, strategy, source_hash, params_hash, params, symbol, data_source, data_from_ms, data_to_ms,
                           candles, metrics, recorded_at, status, instance_id, started_at, setup)
         VALUES ('paper', ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, 'running', ?, ?, ?)`
      )
      .run(
        run.strategy,
        run.sourceHash,
        run.paramsHash,
        run.params,
        run.symbol,
        run.dataSource,
        run.startedAtMs,
        run.startedAtMs,
        JSON.stringify(metricsToJson(run.emptyMetrics)),
        run.startedAtMs,
        run.setup.instanceId,
        run.startedAtMs,
        JSON.stringify(run.setup)
      ).lastInsertRowid
  )

/** Prepared once per connection: a checkpoint runs every few seconds for the life of the daemon. */
export const paperWriter = (db: BetterSqlite3.Database) => {
  const candle = db.prepare(
    `INSERT OR IGNORE INTO paper_candles (run_id, open_time, open, high, low, close, volume, warmup, seen_at, fills_known)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
  )
  const step = db.prepare("INSERT OR IGNORE INTO paper_steps (run_id, seq, time, price) VALUES (?, ?, ?, ?)")
  const ticker = db.prepare("INSERT OR IGNORE INTO paper_tickers (run_id, time, given_at, price) VALUES (?, ?, ?, ?)")
  const intent = db.prepare(
    `INSERT INTO paper_intents (run_id, intent_id, kind, tag, occurrence, decided_at, client_order_id, reached_venue_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (run_id, intent_id) DO UPDATE SET client_order_id = excluded.client_order_id, reached_venue_at = excluded.reached_venue_at`
  )
  const fill = db.prepare(
    `INSERT OR IGNORE INTO paper_fills (run_id, fill_id, intent_id, client_order_id, side, liquidity, price, base_qty, quote_qty, fee, fee_asset, time)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
  )
  const heard = db.prepare("INSERT OR IGNORE INTO paper_heard (run_id, seq, time, client_order_id, kind, fill_id) VALUES (?, ?, ?, ?, ?, ?)")
  const summary = db.prepare(
    "UPDATE runs SET data_from_ms = ?, data_to_ms = ?, candles = ?, metrics = ?, recorded_at = ? WHERE run_id = ?"
  )
  const end = db.prepare("UPDATE runs SET status = 'completed', ended_at = ? WHERE run_id = ? AND status = 'running'")
  const checkpoint = db.transaction((c: Checkpoint) => {
    for (const k of c.candles) {
      candle.run(c.runId, k.openTime, k.open.toFixed(), k.high.toFixed(), k.low.toFixed(), k.close.toFixed(), k.volume.toFixed(), k.warmup ? 1 : 0, k.seenAt, k.fillsKnown)
    }
    for (const t of c.tickers) ticker.run(c.runId, t.timeMs, t.atMs, t.price?.toFixed() ?? null)
    for (const s of c.steps) step.run(c.runId, s.seq, s.timeMs, s.price.toFixed())
    for (const i of c.intents) intent.run(c.runId, i.intentId, i.kind, i.tag, i.occurrence, i.decidedAt, i.clientOrderId, i.reachedVenueAt)
    for (const f of c.fills) {
      fill.run(c.runId, f.fillId, f.intentId, f.clientOrderId, f.side, f.liquidity, f.price.toFixed(), f.baseQty.toFixed(), f.quoteQty.toFixed(), f.fee.toFixed(), f.feeAsset, f.time)
    }
    for (const h of c.heard) heard.run(c.runId, h.seq, h.timeMs, h.clientOrderId, h.kind, h.fillId)
    summary.run(c.metrics.fromMs, c.metrics.toMs, c.metrics.candles, JSON.stringify(metricsToJson(c.metrics)), c.nowMs, c.runId)
  })
  return {
    /** One transaction: the rows and the summary they make, or neither. */
    checkpoint: (c: Checkpoint): void => checkpoint.immediate(c),
    end: (runId: number, nowMs: number): void => void end.run(nowMs, runId)
  }
}

interface RunRow {
  run_id: number
  status: PaperRunStatus
  started_at: number
  metrics: string
  setup: string
}

/** Everything a paper run recorded, for its replay. */
export const loadPaperRun = (db: BetterSqlite3.Database, runId: number): PaperRunEvidence | undefined => {
  const run = db.prepare("SELECT run_id, status, started_at, metrics, setup FROM runs WHERE run_id = ? AND kind = 'paper' AND setup IS NOT NULL").get(runId) as
    | RunRow
    | undefined
  if (run === undefined) return undefined
  const candles = (
    db.prepare("SELECT * FROM paper_candles WHERE run_id = ? ORDER BY open_time").all(runId) as Array<{
      open_time: number
      open: string
      high: string
      low: string
      close: string
      volume: string
      warmup: number
      seen_at: number
      fills_known: number
    }>
  ).map((r) => ({
    openTime: r.open_time,
    open: new Decimal(r.open),
    high: new Decimal(r.high),
    low: new Decimal(r.low),
    close: new Decimal(r.close),
    volume: new Decimal(r.volume),
    warmup: r.warmup === 1,
    seenAt: r.seen_at,
    fillsKnown: r.fills_known
  }))
  // A run recorded before tickers kept when and at what price they were given was given each at its time.
  const tickers = (
    db.prepare("SELECT time, given_at, price FROM paper_tickers WHERE run_id = ? ORDER BY COALESCE(given_at, time), time").all(runId) as Array<{
      time: number
      given_at: number | null
      price: string | null
    }>
  ).map((r) => ({ atMs: r.given_at ?? r.time, timeMs: r.time, price: r.price === null ? undefined : new Decimal(r.price) }))
  const steps = (db.prepare("SELECT seq, time, price FROM paper_steps WHERE run_id = ? ORDER BY seq").all(runId) as Array<{ seq: number; time: number; price: string }>).map(
    (r) => ({ seq: r.seq, timeMs: r.time, price: new Decimal(r.price) })
  )
  const intents = (
    db.prepare("SELECT * FROM paper_intents WHERE run_id = ? ORDER BY decided_at, intent_id").all(runId) as Array<{
      intent_id: string
      kind: "place" | "cancel"
      tag: string
      occurrence: number
      decided_at: number
      client_order_id: string | null
      reached_venue_at: number | null
    }>
  ).map((r) => ({
    intentId: r.intent_id,
    kind: r.kind,
    tag: r.tag,
    occurrence: r.occurrence,
    decidedAt: r.decided_at,
    clientOrderId: r.client_order_id,
    reachedVenueAt: r.reached_venue_at
  }))
  const fills = (
    db.prepare("SELECT * FROM paper_fills WHERE run_id = ? ORDER BY rowid").all(runId) as Array<{
      fill_id: string
      intent_id: string | null
      client_order_id: string | null
      side: Side
      liquidity: Liquidity
      price: string
      base_qty: string
      quote_qty: string
      fee: string
      fee_asset: string
      time: number
    }>
  ).map((r) => ({
    fillId: r.fill_id,
    intentId: r.intent_id,
    clientOrderId: r.client_order_id,
    side: r.side,
    liquidity: r.liquidity,
    price: new Decimal(r.price),
    baseQty: new Decimal(r.base_qty),
    quoteQty: new Decimal(r.quote_qty),
    fee: new Decimal(r.fee),
    feeAsset: r.fee_asset,
    time: r.time
  }))
  const heard = (
    db.prepare("SELECT seq, time, client_order_id, kind, fill_id FROM paper_heard WHERE run_id = ? ORDER BY seq").all(runId) as Array<{
      seq: number
      time: number
      client_order_id: string | null
      kind: string
      fill_id: string | null
    }>
  ).map((r) => ({ seq: r.seq, timeMs: r.time, clientOrderId: r.client_order_id, kind: r.kind, fillId: r.fill_id }))
  return {
    runId: run.run_id,
    status: run.status,
    startedAtMs: run.started_at,
    metrics: metricsFromJson(JSON.parse(run.metrics) as Record<string, unknown>),
    setup: JSON.parse(run.setup) as PaperSetup,
    candles,
    tickers,
    steps,
    intents,
    fills,
    heard
  }
}
