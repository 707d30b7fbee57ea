/**
 * The operator's actions on the running daemon and the instances whose entries are
 * stopped: the one module that reads and writes `operator_actions` and
 * `entries_stopped` (migration 0060). The daemon writes through its own connection;
 * `svcbot status` and the console read, and a database from before the migration
 * simply has no actions to show.
 */
import type BetterSqlite3 from "better-sqlite3"

/** What the controls do; each is one row and one `operator.action` line. */
export const ACTIONS = ["pause", "resume", "stop-entries", "cancel-all", "ack-lost"] as const
export type OperatorActionName = (typeof ACTIONS)[number]

export interface OperatorAction {
  readonly at: number
  readonly action: OperatorActionName
  /** The strategy instance acted on; null for acknowledging lost orders. */
  readonly instance: string | null
  /** What came of it, in words: `paused`, `not paused`, `3 cancels sent`, ... */
  readonly outcome: string
  readonly detail: string | null
}

const hasTables = (db: BetterSqlite3.Database): boolean =>
  db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'operator_actions'").get() !== undefined

export const recordAction = (db: BetterSqlite3.Database, action: OperatorAction): void => {
  db.prepare("INSERT INTO operator_actions (at, action, instance, outcome, detail) VALUES (?, ?, ?, ?, ?)").run(
    action.at,
    action.action,
    action.instance,
    action.outcome,
    action.detail
  )
}

/** The newest actions first, at most `limit`. */
export const recentActions = (db: BetterSqlite3.Database, limit: number): Array<OperatorAction> =>
  hasTables(db)
    ? (db.prepare("SELECT at, action, instance, outcome, detail FROM operator_actions ORDER BY action_id DESC LIMIT ?").all(limit) as Array<OperatorAction>)
    : []

/** Since when each instance's entries are stopped. */
export const entriesStopped = (db: BetterSqlite3.Database): ReadonlyMap<string, number> =>
  hasTables(db)
    ? new Map((db.prepare("SELECT strategy_id, since FROM entries_stopped").all() as Array<{ strategy_id: string; since: number }>).map((row) => [row.strategy_id, row.since]))
    : new Map()

export const markEntriesStopped = (db: BetterSqlite3.Database, instance: string, at: number): void => {
  db.prepare("INSERT INTO entries_stopped (strategy_id, since) VALUES (?, ?) ON CONFLICT (strategy_id) DO NOTHING").run(instance, at)
}

/** Clears one instance's stop, or every instance's (a start resumes every instance). */
export const clearEntriesStopped = (db: BetterSqlite3.Database, instance?: string): void => {
  if (instance === undefined) db.prepare("DELETE FROM entries_stopped").run()
  else db.prepare("DELETE FROM entries_stopped WHERE strategy_id = ?").run(instance)
}
