/**
 * The fills ledger and its sync state. A page of fills and the cursor progress
 * it implies are written in one transaction, so a crash between pages resumes
 * exactly where it stopped; a fill id is stored once however often it is seen.
 */
import { Effect } from "effect"
import { type Decimal, fromString } from "../domain/Decimal.js"
import { Database } from "./Database.js"

/** A fill as stored: exact amounts plus the row exactly as the service sent it. */
export interface LedgerFill {
  readonly fillId: string
  readonly clientOrderId: string | null
  readonly symbol: string
  readonly side: string
  readonly liquidity: string
  readonly price: Decimal
  readonly baseQty: Decimal
  readonly quoteQty: Decimal
  readonly fee: Decimal
  readonly feeAsset: string
  readonly time: number
  readonly raw: string
}

export interface SyncState {
  readonly highWaterFillId: string | null
  readonly highWaterTime: number | null
  /** The `before` cursor an interrupted pass resumes from; null when no pass is in progress. */
  readonly backfillCursor: string | null
  readonly backfillDone: boolean
  readonly passTopFillId: string | null
  readonly passTopTime: number | null
}

/** What a stored page moves the sync state to. */
export type PageProgress =
  /** More pages follow; resume from `cursor`. `top` is set on the first page of a pass. */
  | { readonly _tag: "Continue"; readonly cursor: string; readonly top?: { readonly fillId: string; readonly time: number } }
  /** The pass met the high-water mark or the oldest page: the pass's top becomes the new mark. */
  | { readonly _tag: "Complete"; readonly top?: { readonly fillId: string; readonly time: number } }

const STREAM = "fills"

/** A row of the `fills` table as SQLite returns it: amounts as their exact decimal text. */
export interface FillTableRow {
  fill_id: string
  client_order_id: string | null
  symbol: string
  side: string
  liquidity: string
  price: string
  base_qty: string
  quote_qty: string
  fee: string
  fee_asset: string
  time: number
  raw: string
}

/** A stored fill; its amounts are read back within the bounds they were read from the service with. */
const toFill = (raw: FillTableRow): LedgerFill => ({
  fillId: raw.fill_id,
  clientOrderId: raw.client_order_id,
  symbol: raw.symbol,
  side: raw.side,
  liquidity: raw.liquidity,
  price: fromString(raw.price, "fills.price"),
  baseQty: fromString(raw.base_qty, "fills.base_qty"),
  quoteQty: fromString(raw.quote_qty, "fills.quote_qty"),
  fee: fromString(raw.fee, "fills.fee"),
  feeAsset: raw.fee_asset,
  time: raw.time,
  raw: raw.raw
})

const EMPTY_STATE: SyncState = {
  highWaterFillId: null,
  highWaterTime: null,
  backfillCursor: null,
  backfillDone: false,
  passTopFillId: null,
  passTopTime: null
}

export class FillLedger extends Effect.Service<FillLedger>()("svcbot/FillLedger", {
  effect: Effect.gen(function* () {
    const { sqlite } = yield* Database
    const q = {
      insert: sqlite.prepare(`INSERT INTO fills (fill_id, client_order_id, symbol, side, liquidity, price, base_qty, quote_qty,
        fee, fee_asset, time, raw, synced_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (fill_id) DO NOTHING`),
      state: sqlite.prepare("SELECT * FROM sync_state WHERE stream = ?"),
      upsertState: sqlite.prepare(`INSERT INTO sync_state (stream, high_water_fill_id, high_water_time, backfill_cursor,
        backfill_done, pass_top_fill_id, pass_top_time, updated_at)
        VALUES (@stream, @hwId, @hwTime, @cursor, @done, @topId, @topTime, @now)
        ON CONFLICT (stream) DO UPDATE SET high_water_fill_id = @hwId, high_water_time = @hwTime, backfill_cursor = @cursor,
        backfill_done = @done, pass_top_fill_id = @topId, pass_top_time = @topTime, updated_at = @now`),
      all: sqlite.prepare("SELECT * FROM fills ORDER BY time DESC, fill_id DESC"),
      byOrder: sqlite.prepare("SELECT * FROM fills WHERE client_order_id = ? ORDER BY time, fill_id"),
      forStrategy: sqlite.prepare(
        `SELECT f.* FROM fills f JOIN orders o ON o.client_order_id = f.client_order_id
         WHERE o.strategy_id = ? ORDER BY f.time, f.fill_id`
      ),
      has: sqlite.prepare("SELECT 1 FROM fills WHERE fill_id = ?"),
      orphans: sqlite.prepare(
        `SELECT client_order_id AS clientOrderId, MIN(time) AS firstTime FROM fills
         WHERE client_order_id IS NOT NULL
           AND client_order_id NOT IN (SELECT client_order_id FROM orders WHERE client_order_id IS NOT NULL)
         GROUP BY client_order_id ORDER BY firstTime`
      ),
      count: sqlite.prepare("SELECT COUNT(*) AS n FROM fills"),
      // From the fills not yet heard (few) to their orders, not from every order the strategy ever had.
      unheard: sqlite.prepare(
        `SELECT f.*, o.tag AS order_tag FROM fills f CROSS JOIN orders o ON o.client_order_id = f.client_order_id
         WHERE f.heard_at IS NULL AND o.strategy_id = ? ORDER BY f.time, f.fill_id`
      ),
      isUnheard: sqlite.prepare("SELECT 1 FROM fills WHERE fill_id = ? AND heard_at IS NULL"),
      hear: sqlite.prepare("UPDATE fills SET heard_at = ? WHERE fill_id = ?")
    }

    const readState = (): SyncState => {
      const raw = q.state.get(STREAM) as
        | {
            high_water_fill_id: string | null
            high_water_time: number | null
            backfill_cursor: string | null
            backfill_done: number
            pass_top_fill_id: string | null
            pass_top_time: number | null
          }
        | undefined
      if (raw === undefined) return EMPTY_STATE
      return {
        highWaterFillId: raw.high_water_fill_id,
        highWaterTime: raw.high_water_time,
        backfillCursor: raw.backfill_cursor,
        backfillDone: raw.backfill_done === 1,
        passTopFillId: raw.pass_top_fill_id,
        passTopTime: raw.pass_top_time
      }
    }

    /** One page and the progress it implies: one transaction, whatever the number of fills. */
    const storePage = sqlite.transaction((fills: ReadonlyArray<LedgerFill>, progress: PageProgress, now: number): ReadonlyArray<LedgerFill> => {
      // The fills of a page share one Decimal per repeated amount (as the client reads them): each is written out once.
      const texts = new Map<Decimal, string>()
      const text = (amount: Decimal): string => {
        let written = texts.get(amount)
        if (written === undefined) {
          written = amount.toFixed()
          texts.set(amount, written)
        }
        return written
      }
      const fresh: Array<LedgerFill> = []
      for (const f of fills) {
        const result = q.insert.run(
          f.fillId,
          f.clientOrderId,
          f.symbol,
          f.side,
          f.liquidity,
          text(f.price),
          text(f.baseQty),
          text(f.quoteQty),
          text(f.fee),
          f.feeAsset,
          f.time,
          f.raw,
          now
        )
        if (result.changes > 0) fresh.push(f)
      }
      const state = readState()
      const top = progress.top ?? (state.passTopFillId === null ? undefined : { fillId: state.passTopFillId, time: state.passTopTime ?? 0 })
      if (progress._tag === "Continue") {
        q.upsertState.run({
          stream: STREAM,
          hwId: state.highWaterFillId,
          hwTime: state.highWaterTime,
          cursor: progress.cursor,
          done: state.backfillDone ? 1 : 0,
          topId: top?.fillId ?? null,
          topTime: top?.time ?? null,
          now
        })
      } else {
        q.upsertState.run({
          stream: STREAM,
          hwId: top?.fillId ?? state.highWaterFillId,
          hwTime: top?.time ?? state.highWaterTime,
          cursor: null,
          done: 1,
          topId: null,
          topTime: null,
          now
        })
      }
      return fresh
    })

    return {
      syncState: Effect.sync(readState),

      /** Stores one page and the progress it implies in one transaction; returns the fills that were new. */
      storePage: (fills: ReadonlyArray<LedgerFill>, progress: PageProgress, now: number): Effect.Effect<ReadonlyArray<LedgerFill>> =>
        Effect.sync(() => storePage(fills, progress, now)),

      all: Effect.sync(() => (q.all.all() as Array<FillTableRow>).map(toFill)),
      forOrder: (clientOrderId: string) => Effect.sync(() => (q.byOrder.all(clientOrderId) as Array<FillTableRow>).map(toFill)),
      forStrategy: (strategyId: string) => Effect.sync(() => (q.forStrategy.all(strategyId) as Array<FillTableRow>).map(toFill)),
      /** Orders the ledger has fills of but the journal does not know, with their first fill's time. */
      orphanOrders: Effect.sync(() => q.orphans.all() as Array<{ clientOrderId: string; firstTime: number }>),
      has: (fillId: string) => Effect.sync(() => q.has.get(fillId) !== undefined),
      count: Effect.sync(() => (q.count.get() as { n: number }).n),
      /** The fills of the strategy's orders it was never handed, oldest first, each with its order's tag (a strategy's orders all have one). */
      unheardFor: (strategyId: string): Effect.Effect<ReadonlyArray<{ readonly fill: LedgerFill; readonly tag: string }>> =>
        Effect.sync(() => (q.unheard.all(strategyId) as Array<FillTableRow & { order_tag: string }>).map((raw) => ({ fill: toFill(raw), tag: raw.order_tag }))),
      /** False once the fill's strategy has been handed it. */
      isUnheard: (fillId: string): Effect.Effect<boolean> => Effect.sync(() => q.isUnheard.get(fillId) !== undefined),
      /** Records that the fills' strategy was handed them. Plain, for the transaction that saves the state it left. */
      markHeard: (fillIds: ReadonlyArray<string>, now: number): void => {
        for (const fillId of fillIds) q.hear.run(now, fillId)
      }
    }
  })
}) {}
