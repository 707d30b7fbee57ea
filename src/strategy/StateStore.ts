/** Strategy instance state in SQLite, so an instance resumes where it stopped. */
import { Effect } from "effect"
import { Database } from "../store/Database.js"

export interface StoredState {
  readonly strategy: string
  readonly version: string
  readonly state: string
  readonly lastCandleOpen: number | null
}

export class StrategyStateStore extends Effect.Service<StrategyStateStore>()("svcbot/StrategyStateStore", {
  effect: Effect.gen(function* () {
    const { sqlite } = yield* Database
    const select = sqlite.prepare<[string], { strategy: string; version: string; state: string; last_candle_open: number | null }>(
      "SELECT strategy, version, state, last_candle_open FROM strategy_state WHERE strategy_id = ?"
    )
    const upsert = sqlite.prepare(
      `INSERT INTO strategy_state (strategy_id, strategy, version, state, last_candle_open, paused_reason, updated_at)
       VALUES (@id, @strategy, @version, @state, @lastCandleOpen, NULL, @now)
       ON CONFLICT (strategy_id) DO UPDATE SET strategy = excluded.strategy, version = excluded.version, state = excluded.state,
         last_candle_open = COALESCE(excluded.last_candle_open, strategy_state.last_candle_open), updated_at = excluded.updated_at`
    )
    const pause = sqlite.prepare("UPDATE strategy_state SET paused_reason = ?, updated_at = ? WHERE strategy_id = ?")
    return {
      load: (id: string): Effect.Effect<StoredState | undefined> =>
        Effect.sync(() => {
          const row = select.get(id)
          return row === undefined ? undefined : { strategy: row.strategy, version: row.version, state: row.state, lastCandleOpen: row.last_candle_open }
        }),
      save: (id: string, stored: StoredState, now: number): Effect.Effect<void> =>
        Effect.sync(() => {
          upsert.run({ id, strategy: stored.strategy, version: stored.version, state: stored.state, lastCandleOpen: stored.lastCandleOpen, now })
        }),
      markPaused: (id: string, reason: string, now: number): Effect.Effect<void> =>
        Effect.sync(() => {
          pause.run(reason, now, id)
        })
    }
  })
}) {}
