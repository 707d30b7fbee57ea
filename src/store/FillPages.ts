/**
 * How a page of fills is written to the ledger: its rows and the sync progress it implies, in one
 * transaction. One definition for both writers of a ledger: its writer thread
 * (FillWriterThread.ts), which a file's pages go to, and the daemon's own connection, which takes
 * an in-memory database's. It loads nothing but types, for the thread's sake.
 */
import type BetterSqlite3 from "better-sqlite3"

/** What a stored page moves the sync state to. */
export type PageProgress =
  /** More pages follow; resume from `cursor`. `top` is set on the first page of a pass. */
  | { readonly _tag: "Continue"; readonly cursor: string; readonly top?: { readonly fillId: string; readonly time: number } }
  /** The pass met the high-water mark or the oldest page: the pass's top becomes the new mark. */
  | { readonly _tag: "Complete"; readonly top?: { readonly fillId: string; readonly time: number } }

export interface SyncState {
  readonly highWaterFillId: string | null
  readonly highWaterTime: number | null
  /** The `before` cursor an interrupted pass resumes from; null when no pass is in progress. */
  readonly backfillCursor: string | null
  readonly backfillDone: boolean
  readonly passTopFillId: string | null
  readonly passTopTime: number | null
}

/**
 * A fill as the `fills` table's columns, in their order: fill_id, client_order_id, symbol, side,
 * liquidity, price, base_qty, quote_qty, fee, fee_asset, time, raw (amounts as exact decimal text).
 * Plain values, so that a page crosses to the writer thread as a cheap copy.
 */
export type FillColumns = readonly [string, string | null, string, string, string, string, string, string, string, string, number, string]

const STREAM = "fills"

const EMPTY_STATE: SyncState = {
  highWaterFillId: null,
  highWaterTime: null,
  backfillCursor: null,
  backfillDone: false,
  passTopFillId: null,
  passTopTime: null
}

interface SyncStateRow {
  high_water_fill_id: string | null
  high_water_time: number | null
  backfill_cursor: string | null
  backfill_done: number
  pass_top_fill_id: string | null
  pass_top_time: number | null
}

/** The fill sync's state as `sqlite` sees it now. */
export const syncStateReader = (sqlite: BetterSqlite3.Database): (() => SyncState) => {
  const state = sqlite.prepare<[string], SyncStateRow>("SELECT * FROM sync_state WHERE stream = ?")
  return () => {
    const raw = state.get(STREAM)
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
}

/**
 * Writes pages through `sqlite`: each call stores one page's rows (a fill id once, however often
 * it comes) and its progress in one transaction, and returns the indexes of the rows that were new.
 * IMMEDIATE, as every write transaction of the file (Database.ts says why).
 */
export const pageWriter = (sqlite: BetterSqlite3.Database) => {
  const readState = syncStateReader(sqlite)
  const insert = sqlite.prepare(`INSERT INTO fills (fill_id, client_order_id, symbol, side, liquidity, price, base_qty, quote_qty,
    fee, fee_asset, time, raw, synced_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (fill_id) DO NOTHING`)
  const upsertState = sqlite.prepare(`INSERT INTO sync_state (stream, high_water_fill_id, high_water_time, backfill_cursor,
    backfill_done, pass_top_fill_id, pass_top_time, updated_at)
    VALUES (@stream, @hwId, @hwTime, @cursor, @done, @topId, @topTime, @now)
    ON CONFLICT (stream) DO UPDATE SET high_water_fill_id = @hwId, high_water_time = @hwTime, backfill_cursor = @cursor,
    backfill_done = @done, pass_top_fill_id = @topId, pass_top_time = @topTime, updated_at = @now`)
  const store = sqlite.transaction((rows: ReadonlyArray<FillColumns>, progress: PageProgress, now: number): Array<number> => {
    const fresh: Array<number> = []
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i]!
      if (insert.run(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], now).changes > 0) fresh.push(i)
    }
    const state = readState()
    const top = progress.top ?? (state.passTopFillId === null ? undefined : { fillId: state.passTopFillId, time: state.passTopTime ?? 0 })
    if (progress._tag === "Continue") {
      upsertState.run({
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
      upsertState.run({
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
  return (rows: ReadonlyArray<FillColumns>, progress: PageProgress, now: number): Array<number> => store.immediate(rows, progress, now)
}
