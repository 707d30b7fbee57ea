/**
 * The `order_events` rows of the transaction under way, written together at its end: a
 * statement per event cost more in the call into SQLite than in the row it wrote, so a
 * commit writes its events 32, 8 or one to a statement, each statement prepared once.
 */
import type BetterSqlite3 from "better-sqlite3"
import type { OrderState } from "../domain/OrderState.js"

/** One row of `order_events` as the journal records it: order, from state, to state, kind, code, detail, time. */
export type EventValues = [orderId: number, from: OrderState | null, to: OrderState, kind: string | null, code: string | null, detail: string | null, at: number]

const EVENT_COLUMNS = 7
/** How many events one statement writes, largest first, the last being one. */
const EVENTS_PER_INSERT = [32, 8, 1] as const

export const makeEventWriter = (sqlite: BetterSqlite3.Database) => {
  const inserts = EVENTS_PER_INSERT.map((count) =>
    sqlite.prepare(
      `INSERT INTO order_events (order_id, from_state, to_state, kind, code, detail, at) VALUES ${Array.from({ length: count }, () => "(?, ?, ?, ?, ?, ?, ?)").join(", ")}`
    )
  )
  /** The values of the events recorded since the last flush, one after the other. */
  let pending: Array<EventValues[number]> = []
  return {
    record: (event: EventValues): void => {
      for (const value of event) pending.push(value)
    },
    /** Writes the events recorded since the last flush, in the order they were recorded: inside the caller's transaction. */
    flush: (): void => {
      if (pending.length === 0) return
      const values = pending
      pending = []
      let i = 0
      for (const [k, count] of EVENTS_PER_INSERT.entries()) {
        const width = EVENT_COLUMNS * count
        for (; i + width <= values.length; i += width) inserts[k]!.run(values.slice(i, i + width))
      }
    },
    /** Forgets what was recorded since the last flush: its transaction was rolled back. */
    drop: (): void => {
      pending = []
    }
  }
}
