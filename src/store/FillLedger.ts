/**
 * The fills ledger and its sync state. A page of fills and the cursor progress
 * it implies are written in one transaction (FillPages.ts, on the ledger's
 * writer thread for a file: FillWriter.ts), so a crash between pages resumes
 * exactly where it stopped; a fill id is stored once however often it is seen.
 * A fill belongs to a strategy through the order it fills: that join is written
 * once here (`FILLS_WITH_ORDERS`), and every read of a strategy's fills goes through it.
 */
import type BetterSqlite3 from "better-sqlite3"
import { Effect } from "effect"
import { type Decimal, fromString } from "../domain/Decimal.js"
import type { Side } from "../domain/OrderTerms.js"
import type { Liquidity } from "../svc/Dialect.js"
import { Database } from "./Database.js"
import { type FillColumns, type PageProgress, pageWriter, type SyncState, syncStateReader } from "./FillPages.js"
import { closeOnWriter, startOnWriter } from "./FillWriter.js"

export type { PageProgress, SyncState }

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

/** A row of the `fills` table as SQLite returns it: amounts as their exact decimal text. */
export interface FillTableRow {
  fill_id: string
  client_order_id: string | null
  symbol: string
  // Written only from fills the client decoded, so the words are the spec's.
  side: Side
  liquidity: Liquidity
  price: string
  base_qty: string
  quote_qty: string
  fee: string
  fee_asset: string
  time: number
  raw: string
}

/**
 * Each fill with the order it fills: that order's strategy, tag and intent, null for an order the
 * journal does not know. A condition on `strategy_id` makes SQLite read it as a plain join, from
 * the strategy's orders. `ledger_rowid` orders fills as they were stored.
 */
const FILLS_WITH_ORDERS = `SELECT f.rowid AS ledger_rowid, f.*, o.strategy_id, o.tag, o.intent_id
  FROM fills f LEFT JOIN orders o ON o.client_order_id = f.client_order_id`

/** A fill of a strategy's order, with what its order says of it. */
export interface StrategyFillRow extends FillTableRow {
  readonly ledger_rowid: number
  readonly strategy_id: string
  /** A strategy's orders all carry their intent's tag. */
  readonly tag: string
  readonly intent_id: string | null
}

/**
 * Reads of a strategy's fills, synchronous for the books and the paper evidence that fold them
 * inside their own reads (two statements in a row see the same table).
 */
export const strategyFills = (sqlite: BetterSqlite3.Database) => {
  const q = {
    lastRowid: sqlite.prepare<[], { n: number }>("SELECT COALESCE(MAX(rowid), 0) AS n FROM fills"),
    all: sqlite.prepare<[string], StrategyFillRow>(`SELECT * FROM (${FILLS_WITH_ORDERS}) WHERE strategy_id = ? ORDER BY time, fill_id`),
    storedAfter: sqlite.prepare<[string, number, number], StrategyFillRow>(
      `SELECT * FROM (${FILLS_WITH_ORDERS}) WHERE strategy_id = ? AND ledger_rowid > ? AND ledger_rowid <= ? ORDER BY ledger_rowid`
    ),
    countStoredAfter: sqlite.prepare<[string, number], { n: number }>(`SELECT count(*) AS n FROM (${FILLS_WITH_ORDERS}) WHERE strategy_id = ? AND ledger_rowid > ?`),
    ofOrder: sqlite.prepare<[string, string, number], StrategyFillRow>(
      `SELECT * FROM (${FILLS_WITH_ORDERS}) WHERE strategy_id = ? AND client_order_id = ? AND ledger_rowid <= ?`
    ),
    // From the fills not yet heard (few) to their orders, not from every order the strategy ever had:
    // the unary + keeps SQLite from starting at the orders' strategy index.
    unheard: sqlite.prepare<[string], StrategyFillRow>(`SELECT * FROM (${FILLS_WITH_ORDERS}) WHERE heard_at IS NULL AND +strategy_id = ? ORDER BY time, fill_id`)
  }
  return {
    /** The newest stored fill's `ledger_rowid`: a fill stored later has a greater one. */
    lastRowid: (): number => q.lastRowid.get()!.n,
    /** The strategy's fills, oldest first. */
    all: (strategyId: string): Array<StrategyFillRow> => q.all.all(strategyId),
    /** Its fills stored after `afterRowid` (up to `upToRowid`), in the order they were stored. */
    storedAfter: (strategyId: string, afterRowid: number, upToRowid = Number.MAX_SAFE_INTEGER): Array<StrategyFillRow> =>
      q.storedAfter.all(strategyId, afterRowid, upToRowid),
    countStoredAfter: (strategyId: string, afterRowid: number): number => q.countStoredAfter.get(strategyId, afterRowid)!.n,
    /** The fills of one of its orders stored up to `upToRowid`; none when the order is not (or no longer) the strategy's. */
    ofOrder: (strategyId: string, clientOrderId: string, upToRowid: number): Array<StrategyFillRow> => q.ofOrder.all(strategyId, clientOrderId, upToRowid),
    /** Its fills it was never handed, oldest first. */
    unheard: (strategyId: string): Array<StrategyFillRow> => q.unheard.all(strategyId)
  }
}

/** A stored fill as commands show it: without the raw row, with its order's strategy and tag (null: no strategy placed it). */
export interface AttributedFillRow extends Omit<FillTableRow, "raw"> {
  readonly strategy_id: string | null
  readonly tag: string | null
}

/** Every fill in the ledger with the strategy and tag of its order, oldest first. */
export const readAttributedFills = (db: BetterSqlite3.Database): Array<AttributedFillRow> =>
  db
    .prepare<[], AttributedFillRow>(
      `SELECT fill_id, client_order_id, strategy_id, tag, symbol, side, liquidity, price, base_qty, quote_qty, fee, fee_asset, time
       FROM (${FILLS_WITH_ORDERS}) ORDER BY time, fill_id`
    )
    .all()

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

/**
 * A page's fills as the table's columns. The fills of a page share one Decimal per repeated
 * amount (as the client reads them): each is written out once.
 */
const columnsOf = (fills: ReadonlyArray<LedgerFill>): Array<FillColumns> => {
  const texts = new Map<Decimal, string>()
  const text = (amount: Decimal): string => {
    let written = texts.get(amount)
    if (written === undefined) {
      written = amount.toFixed()
      texts.set(amount, written)
    }
    return written
  }
  return fills.map((f) => [f.fillId, f.clientOrderId, f.symbol, f.side, f.liquidity, text(f.price), text(f.baseQty), text(f.quoteQty), text(f.fee), f.feeAsset, f.time, f.raw])
}

export class FillLedger extends Effect.Service<FillLedger>()("svcbot/FillLedger", {
  scoped: Effect.gen(function* () {
    const { sqlite, storage, path } = yield* Database
    const ofStrategy = strategyFills(sqlite)
    const q = {
      all: sqlite.prepare("SELECT * FROM fills ORDER BY time DESC, fill_id DESC"),
      byOrder: sqlite.prepare("SELECT * FROM fills WHERE client_order_id = ? ORDER BY time, fill_id"),
      has: sqlite.prepare("SELECT 1 FROM fills WHERE fill_id = ?"),
      orphans: sqlite.prepare(
        `SELECT client_order_id AS clientOrderId, MIN(time) AS firstTime FROM fills
         WHERE client_order_id IS NOT NULL
           AND client_order_id NOT IN (SELECT client_order_id FROM orders WHERE client_order_id IS NOT NULL)
         GROUP BY client_order_id ORDER BY firstTime`
      ),
      count: sqlite.prepare("SELECT COUNT(*) AS n FROM fills"),
      isUnheard: sqlite.prepare("SELECT 1 FROM fills WHERE fill_id = ? AND heard_at IS NULL"),
      hear: sqlite.prepare("UPDATE fills SET heard_at = ? WHERE fill_id = ?")
    }

    const readState = syncStateReader(sqlite)

    /**
     * A file's pages are written on the writer thread (FillWriter.ts), an in-memory database's
     * here: a connection of another thread could not see it.
     */
    const writePage = path === ":memory:" ? pageWriter(sqlite) : undefined
    if (writePage === undefined) yield* Effect.addFinalizer(() => closeOnWriter(path))

    const startPage = (fills: ReadonlyArray<LedgerFill>, progress: PageProgress, now: number): Effect.Effect<Effect.Effect<ReadonlyArray<LedgerFill>>> =>
      Effect.suspend(() => {
        const rows = columnsOf(fills)
        const fresh = (indexes: Array<number>) => indexes.map((i) => fills[i]!)
        return writePage === undefined
          ? Effect.map(startOnWriter(storage, rows, progress, now), Effect.map(fresh))
          : Effect.sync(() => Effect.succeed(fresh(storage.guard(() => writePage(rows, progress, now)))))
      })

    return {
      /** The health of the database's writes, which the ledger's pages wait for. */
      storage,
      syncState: Effect.sync(readState),

      /**
       * Starts storing one page and the progress it implies, in one transaction: on the writer
       * thread, which the page is handed to at once. The effect returned waits for the fills that were new.
       */
      startPage,
      /** Stores one page and the progress it implies in one transaction; returns the fills that were new. */
      storePage: (fills: ReadonlyArray<LedgerFill>, progress: PageProgress, now: number): Effect.Effect<ReadonlyArray<LedgerFill>> =>
        Effect.flatten(startPage(fills, progress, now)),

      all: Effect.sync(() => (q.all.all() as Array<FillTableRow>).map(toFill)),
      forOrder: (clientOrderId: string) => Effect.sync(() => (q.byOrder.all(clientOrderId) as Array<FillTableRow>).map(toFill)),
      forStrategy: (strategyId: string) => Effect.sync(() => ofStrategy.all(strategyId).map(toFill)),
      /** Orders the ledger has fills of but the journal does not know, with their first fill's time. */
      orphanOrders: Effect.sync(() => q.orphans.all() as Array<{ clientOrderId: string; firstTime: number }>),
      has: (fillId: string) => Effect.sync(() => q.has.get(fillId) !== undefined),
      count: Effect.sync(() => (q.count.get() as { n: number }).n),
      /** The fills of the strategy's orders it was never handed, oldest first, each with its order's tag (a strategy's orders all have one). */
      unheardFor: (strategyId: string): Effect.Effect<ReadonlyArray<{ readonly fill: LedgerFill; readonly tag: string }>> =>
        Effect.sync(() => ofStrategy.unheard(strategyId).map((raw) => ({ fill: toFill(raw), tag: raw.tag }))),
      /** False once the fill's strategy has been handed it. */
      isUnheard: (fillId: string): Effect.Effect<boolean> => Effect.sync(() => q.isUnheard.get(fillId) !== undefined),
      /** Records that the fills' strategy was handed them. Plain, for the transaction that saves the state it left. */
      markHeard: (fillIds: ReadonlyArray<string>, now: number): void => {
        for (const fillId of fillIds) q.hear.run(now, fillId)
      }
    }
  })
}) {}
