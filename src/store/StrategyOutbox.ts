/**
 * The strategy outbox (`strategy_outbox`), its one owner: the intents a strategy's
 * handler emitted, added in the transaction that saves the state that emitted them
 * (`StrategyStateStore.save`) and taken out in the transaction that journals each
 * one (`OrderJournal`), so a crash between the two neither loses nor repeats one.
 * The adding and the taking are plain calls, for those transactions.
 */
import { Effect, Schema } from "effect"
import { type Intent, IntentFromJson } from "../domain/Intent.js"
import { Database } from "./Database.js"

export interface OutboxEntry {
  readonly outboxId: number
  readonly intent: Intent
}

export class StrategyOutbox extends Effect.Service<StrategyOutbox>()("svcbot/StrategyOutbox", {
  effect: Effect.gen(function* () {
    const { sqlite } = yield* Database
    const insert = sqlite.prepare("INSERT INTO strategy_outbox (strategy_id, intent, created_at) VALUES (?, ?, ?)")
    const select = sqlite.prepare<[string], { id: number; intent: string }>("SELECT id, intent FROM strategy_outbox WHERE strategy_id = ? ORDER BY id")
    const deleteAll = sqlite.prepare("DELETE FROM strategy_outbox WHERE strategy_id = ?")
    const deleteOne = sqlite.prepare("DELETE FROM strategy_outbox WHERE id = ?")
    const encodeIntent = Schema.encodeSync(IntentFromJson)
    const decodeIntent = Schema.decodeUnknownSync(IntentFromJson)
    return {
      /** Adds an instance's intents, oldest first; returns each one's outbox id. Plain: inside the caller's transaction. */
      add: (strategyId: string, intents: ReadonlyArray<Intent>, now: number): ReadonlyArray<number> =>
        intents.map((intent) => Number(insert.run(strategyId, JSON.stringify(encodeIntent(intent)), now).lastInsertRowid)),
      /** Takes out the row of an intent being journaled. Plain: inside the journal's transaction. */
      take: (outboxId: number): void => {
        deleteOne.run(outboxId)
      },
      /** Intents added and not yet taken out, oldest first. */
      forStrategy: (strategyId: string): Effect.Effect<ReadonlyArray<OutboxEntry>> =>
        Effect.sync(() => select.all(strategyId).map((row) => ({ outboxId: row.id, intent: decodeIntent(JSON.parse(row.intent)) }))),
      /** Forgets every intent of an instance. */
      drop: (strategyId: string): Effect.Effect<void> =>
        Effect.sync(() => {
          deleteAll.run(strategyId)
        })
    }
  })
}) {}
