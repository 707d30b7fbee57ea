/**
 * The endpoint weights a key's budget governor learned, kept across restarts
 * (`budget_weights`). Read before the database is opened for writing (the key
 * check comes first, and must not create the file), written by the running daemon.
 */
import { createHash } from "node:crypto"
import { existsSync } from "node:fs"
import { type Database, openReadOnlyDatabase } from "./Database.js"

/** Weights belong to a key's budget; the key id itself is not written to the file. */
const keyRef = (keyId: string): string => createHash("sha256").update(keyId).digest("hex").slice(0, 32)

/** The weights stored for `keyId`; none when the file or the table does not exist yet. */
export const loadBudgetWeights = (path: string, keyId: string): ReadonlyMap<string, number> => {
  if (path === ":memory:" || !existsSync(path)) return new Map()
  const db = openReadOnlyDatabase(path)
  try {
    const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'budget_weights'").get()
    if (table === undefined) return new Map()
    const rows = db.prepare("SELECT endpoint, weight FROM budget_weights WHERE key_id = ?").all(keyRef(keyId)) as Array<{ endpoint: string; weight: number }>
    return new Map(rows.map((row) => [row.endpoint, row.weight]))
  } finally {
    db.close()
  }
}

/** Stores the weights learned so far, in one transaction. */
export const saveBudgetWeights = (database: Database, keyId: string, weights: ReadonlyMap<string, number>, now: number) =>
  database.transaction(() => {
    const upsert = database.sqlite.prepare(
      "INSERT INTO budget_weights (key_id, endpoint, weight, learned_at) VALUES (?, ?, ?, ?) ON CONFLICT (key_id, endpoint) DO UPDATE SET weight = excluded.weight, learned_at = excluded.learned_at"
    )
    for (const [endpoint, weight] of weights) upsert.run(keyRef(keyId), endpoint, weight, now)
  })
