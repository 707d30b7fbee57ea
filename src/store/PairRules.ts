/**
 * The pairs' increments as exchange-info listed them (`pair_rules`), written by the
 * running daemon and read by commands that show its database without asking the
 * exchange, so that they show amounts at the exchange's own precision.
 */
import type BetterSqlite3 from "better-sqlite3"
import { Decimal } from "../domain/Decimal.js"
import { type Precision, precisionOf } from "../domain/Display.js"
import type { Database } from "./Database.js"

export interface StoredPair {
  readonly symbol: string
  readonly base: string
  readonly quote: string
  readonly tickSize: Decimal
  readonly stepSize: Decimal
}

/** Stores the pairs' rules, in one transaction. */
export const savePairRules = (database: Database, pairs: Iterable<StoredPair>, now: number) =>
  database.transaction(() => {
    const upsert = database.sqlite.prepare(
      `INSERT INTO pair_rules (symbol, base, quote, tick_size, step_size, updated_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (symbol) DO UPDATE SET base = excluded.base, quote = excluded.quote, tick_size = excluded.tick_size,
         step_size = excluded.step_size, updated_at = excluded.updated_at`
    )
    for (const pair of pairs) upsert.run(pair.symbol, pair.base, pair.quote, pair.tickSize.toFixed(), pair.stepSize.toFixed(), now)
  })

/** The stored pairs; none in a database from before pair rules were stored, or where the daemon stored none yet. */
export const storedPairs = (db: BetterSqlite3.Database): ReadonlyArray<StoredPair> => {
  if (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pair_rules'").get() === undefined) return []
  const rows = db.prepare("SELECT symbol, base, quote, tick_size, step_size FROM pair_rules").all() as Array<{
    symbol: string
    base: string
    quote: string
    tick_size: string
    step_size: string
  }>
  return rows.map((r) => ({ symbol: r.symbol, base: r.base, quote: r.quote, tickSize: new Decimal(r.tick_size), stepSize: new Decimal(r.step_size) }))
}

/** The step size of each stored pair. */
export const storedStepSizes = (db: BetterSqlite3.Database): ReadonlyMap<string, Decimal> => new Map(storedPairs(db).map((p) => [p.symbol, p.stepSize]))

/** The precision of what the stored pairs trade. */
export const storedPrecision = (db: BetterSqlite3.Database): Precision => precisionOf(storedPairs(db))
