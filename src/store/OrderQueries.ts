/**
 * The order journal's statements, prepared once per connection. Updates are prepared by the journal
 * per set of columns they touch; reads by a set of states here, per set.
 */
import type BetterSqlite3 from "better-sqlite3"
import { type OrderState, TERMINAL_STATES } from "../domain/OrderState.js"
import { sqlList } from "./Database.js"
import { INSERTED_COLUMNS } from "./OrderRow.js"

/** The states the queries name, from the state machine's own words. */
const FINISHED = sqlList(TERMINAL_STATES)
const LOST: OrderState = "lost"
const REFUSED: OrderState = "refused"

export const prepareOrderQueries = (sqlite: BetterSqlite3.Database) => {
const byStates = new Map<string, BetterSqlite3.Statement>()
return {
    nextSeq: sqlite.prepare("SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM intents WHERE strategy_id = ?"),
    insertIntent: sqlite.prepare(
      "INSERT INTO intents (intent_id, strategy_id, seq, tag, type, body, outcome, refusal, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    ),
    insertOrder: sqlite.prepare(`INSERT INTO orders (${INSERTED_COLUMNS.join(", ")}) VALUES (${INSERTED_COLUMNS.map(() => "?").join(", ")})`),
    byId: sqlite.prepare("SELECT * FROM orders WHERE order_id = ?"),
    byClientOrderId: sqlite.prepare("SELECT * FROM orders WHERE client_order_id = ?"),
    byIntent: sqlite.prepare("SELECT * FROM orders WHERE intent_id = ?"),
    latestByTag: sqlite.prepare("SELECT * FROM orders WHERE strategy_id = ? AND tag = ? ORDER BY order_id DESC LIMIT 1"),
    intentsByTag: sqlite.prepare("SELECT COUNT(*) AS n FROM intents WHERE strategy_id = ? AND tag = ?"),
    forStrategy: sqlite.prepare("SELECT * FROM orders WHERE strategy_id = ? ORDER BY order_id"),
    unfinished: sqlite.prepare(`SELECT * FROM orders WHERE state NOT IN ${FINISHED} ORDER BY order_id`),
    lostUnacknowledged: sqlite.prepare(`SELECT * FROM orders WHERE state = '${LOST}' AND acknowledged_at IS NULL ORDER BY order_id`),
    acknowledge: sqlite.prepare(`UPDATE orders SET acknowledged_at = ?, updated_at = ? WHERE state = '${LOST}' AND acknowledged_at IS NULL AND (? IS NULL OR client_order_id = ?)`),
    all: sqlite.prepare("SELECT * FROM orders ORDER BY order_id"),
    intents: sqlite.prepare("SELECT * FROM intents ORDER BY created_at, intent_id"),
    events: sqlite.prepare("SELECT * FROM order_events WHERE order_id = ? ORDER BY event_id"),
    // An intent without an order row is one the risk check refused: its answer is that refusal.
    owed: sqlite.prepare(
      `SELECT i.intent_id, i.tag, o.client_order_id, COALESCE(o.state, '${REFUSED}') AS state, COALESCE(o.code, i.refusal) AS code,
         COALESCE(o.filled_base_qty, '0') AS filled_base_qty
       FROM intents i LEFT JOIN orders o ON o.intent_id = i.intent_id
       WHERE i.strategy_id = ? AND i.answered_at IS NULL AND i.type <> 'cancel' AND COALESCE(o.state, '${REFUSED}') IN ${FINISHED}
       ORDER BY COALESCE(o.terminal_at, i.created_at), i.seq`
    ),
    owedFor: sqlite.prepare(
      `SELECT i.intent_id FROM intents i LEFT JOIN orders o ON o.intent_id = i.intent_id
       WHERE i.strategy_id = ? AND i.tag = ? AND i.answered_at IS NULL AND i.type <> 'cancel'
         AND COALESCE(o.state, '${REFUSED}') = ? AND o.client_order_id IS ?
       ORDER BY i.seq`
    ),
    answer: sqlite.prepare("UPDATE intents SET answered_at = ? WHERE intent_id = ?"),
    /** Orders in any of `states`, one statement per set of states, prepared once. */
    inStates: (states: ReadonlyArray<OrderState>): BetterSqlite3.Statement => {
      const key = states.join(",")
      let statement = byStates.get(key)
      if (statement === undefined) {
        statement = sqlite.prepare(`SELECT * FROM orders WHERE state IN (${states.map(() => "?").join(",")}) ORDER BY order_id`)
        byStates.set(key, statement)
      }
      return statement
    }
  }
}
