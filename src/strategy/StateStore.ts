/**
 * Strategy instance state in SQLite, so an instance resumes where it stopped. The
 * intents a handler emitted are added to the strategy outbox (`StrategyOutbox`) in
 * the transaction that saves the state that emitted them; what the handlers were
 * handed of their orders' outcomes is recorded in it too.
 */
import { Effect } from "effect"
import type { Intent } from "../domain/Intent.js"
import { Database } from "../store/Database.js"
import { type OutboxEntry, StrategyOutbox } from "../store/StrategyOutbox.js"

export interface StoredState {
  readonly strategy: string
  readonly version: string
  readonly state: string
  readonly lastCandleOpen: number | null
}

export class StrategyStateStore extends Effect.Service<StrategyStateStore>()("svcbot/StrategyStateStore", {
  effect: Effect.gen(function* () {
    const { sqlite, storage } = yield* Database
    const outbox = yield* StrategyOutbox
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
    const selectPaused = sqlite.prepare<[string], { paused_reason: string | null }>("SELECT paused_reason FROM strategy_state WHERE strategy_id = ?")
    const saveAll = sqlite.transaction((id: string, stored: StoredState | undefined, intents: ReadonlyArray<Intent>, now: number, recordHanded: () => void) => {
      recordHanded()
      if (stored !== undefined) {
        upsert.run({ id, strategy: stored.strategy, version: stored.version, state: stored.state, lastCandleOpen: stored.lastCandleOpen, now })
      }
      return outbox.add(id, intents, now)
    })
    return {
      /** The health of the database's writes: while they fail the host pauses its instances. */
      storage,
      load: (id: string): Effect.Effect<StoredState | undefined> =>
        Effect.sync(() => {
          const row = select.get(id)
          return row === undefined ? undefined : { strategy: row.strategy, version: row.version, state: row.state, lastCandleOpen: row.last_candle_open }
        }),
      /**
       * Saves the state a handler left (undefined when it is unchanged) and the intents
       * it emitted, in one transaction; returns each intent's outbox id. `recordHanded` writes,
       * in that transaction, which final order updates and fills the handlers were handed.
       */
      save: (
        id: string,
        stored: StoredState | undefined,
        intents: ReadonlyArray<Intent>,
        now: number,
        recordHanded: () => void = () => undefined
      ): Effect.Effect<ReadonlyArray<number>> => Effect.sync(() => storage.guard(() => saveAll.immediate(id, stored, intents, now, recordHanded))),
      /** Forgets an instance's unjournaled intents (they belong to a strategy that no longer runs under its id). */
      dropOutbox: (id: string): Effect.Effect<void> => outbox.drop(id),
      /** Intents saved and not yet journaled, oldest first: what a crash left between the two. */
      outbox: (id: string): Effect.Effect<ReadonlyArray<OutboxEntry>> => outbox.forStrategy(id),
      markPaused: (id: string, reason: string, now: number): Effect.Effect<void> =>
        Effect.sync(() => {
          storage.guard(() => pause.run(reason, now, id))
        }),
      /** The stored pause of an instance: its reason, null when it is not paused, undefined when it has no row. */
      pausedReason: (id: string): Effect.Effect<string | null | undefined> => Effect.sync(() => selectPaused.get(id)?.paused_reason),
      /** Clears a stored pause (`svcbot resume`, or a start: a restart resumes every instance). */
      resume: (id: string, now: number): Effect.Effect<"resumed" | "not-paused" | "unknown"> =>
        // IMMEDIATE: `svcbot resume` writes while the daemon does; see OrderJournal.acknowledgeLost.
        Effect.sync(() =>
          sqlite.transaction(() => {
            const row = selectPaused.get(id)
            if (row === undefined) return "unknown" as const
            if (row.paused_reason === null) return "not-paused" as const
            pause.run(null, now, id)
            return "resumed" as const
          }).immediate()
        )
    }
  }),
  dependencies: [StrategyOutbox.Default]
}) {}
