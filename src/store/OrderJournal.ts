/**
 * The order journal: intents (written before anything is sent), orders with
 * their state, and every order event. Each state change is checked against the
 * order state machine and written in one transaction with its event row.
 *
 * The unfinished orders are also held in memory, in step with every write (a row
 * is rebuilt from the table when a transaction fails): risk checks, the tracker and
 * the strategies' views read them on every intent, poll and event without touching
 * SQLite. The table stays the truth; a start reads the unfinished orders from it.
 *
 * While the storage refuses writes (`StorageHealth`), what needs no disk to be safe goes on in
 * memory: an answer, a poll's progress, a cancel asked for, a withdrawal are kept as the
 * journal's backlog and written, before anything else, by the first write that succeeds (the
 * venue holds the truth of each, and a start reconciles with it should the process end
 * first). A placement never does: its intent and its mark as being sent are written before
 * it may go out, so a submit fails and a mark waits until the storage takes writes again.
 */
import type BetterSqlite3 from "better-sqlite3"
import { Effect, Either } from "effect"
import { Decimal } from "../domain/Decimal.js"
import * as Json from "../domain/Json.js"
import { type InvalidTransition, isTerminal, type OrderEvent, type OrderState, transition } from "../domain/OrderState.js"
import type { OrderType, Side } from "../svc/Dialect.js"
import { Database } from "./Database.js"
import { prepareOrderQueries } from "./OrderQueries.js"
import { insertedValues, MUTABLE_COLUMNS, type OrderPatch, type OrderRow, patched, type RawOrder, toRow } from "./OrderRow.js"
import { type IntentInput, intentIdOf, type PlacementInput, toIntent } from "./IntentRow.js"
import { type EventValues, makeEventWriter } from "./OrderEvents.js"
import { isStorageFailure } from "./StorageHealth.js"
import { StrategyOutbox } from "./StrategyOutbox.js"

export type { OrderRow } from "./OrderRow.js"

/**
 * The final order update a strategy is owed for one of its intents and has not been handed: the
 * end of its order, or the risk check's refusal of an intent that never had one.
 */
export interface OwedAnswer {
  readonly intentId: string
  readonly tag: string
  readonly clientOrderId: string | null
  /** The order's final state; `refused` for an intent the risk check refused. */
  readonly state: OrderState
  readonly code: string | null
  readonly filledBaseQty: Decimal
}

export interface Move {
  readonly orderId: number
  readonly event: OrderEvent
  readonly patch: OrderPatch
  readonly detail?: string | undefined
}

/** A strategy order that got its clientOrderId: its fills are the strategy's from then on. */
export interface Attribution {
  readonly strategyId: string
  readonly clientOrderId: string
}

export interface AppliedMoves {
  readonly outcomes: ReadonlyArray<Either.Either<OrderRow, InvalidTransition>>
  readonly attributed: ReadonlyArray<Attribution>
}

/** The journal's writes and reads inside one transaction (`OrderJournal.batch`): plain calls, no Effect. */
export interface JournalBatch {
  readonly journalPlacement: (input: PlacementInput) => OrderRow
  readonly journalIntent: (input: IntentInput) => string
  readonly update: (orderId: number, patch: OrderPatch, now: number) => OrderRow
  readonly latestByTag: (strategyId: string, tag: string) => OrderRow | undefined
  /** The unfinished orders, including those journaled earlier in this batch. */
  readonly unfinished: () => ReadonlyArray<OrderRow>
}

const LOST: OrderState = "lost"

export class OrderJournal extends Effect.Service<OrderJournal>()("svcbot/OrderJournal", {
  effect: Effect.gen(function* () {
    const { sqlite, storage } = yield* Database
    const outbox = yield* StrategyOutbox
    const q = prepareOrderQueries(sqlite)
    // Updates touch a handful of column sets (a poll, an acceptance, a fill...): each is prepared once.
    const updates = new Map<string, BetterSqlite3.Statement>()

    /** Unfinished orders by id, in id order (ids grow, and a Map keeps insertion order). */
    const open = new Map<number, OrderRow>()
    const openByClientOrderId = new Map<string, OrderRow>()
    /** The last intent sequence number of each strategy that journaled one since the start. */
    const seqs = new Map<string, number>()
    /** Orders changed in memory only while the storage refused writes, by id, as they are now; and their events. */
    const backlogRows = new Map<number, OrderRow>()
    const backlogEvents: Array<EventValues> = []
    /** The events of the transaction under way, written at its end. */
    const events = makeEventWriter(sqlite)
    /** Set while a change is kept in memory only: writes go to the backlog. */
    let deferring = false
    /** Set when the engine stops: a mark that waits for the storage gives up. */
    let waitsEnded = false
    const waitsEnd = Effect.unsafeMakeLatch(false)

    const hold = (row: OrderRow): void => {
      if (isTerminal(row.state)) {
        open.delete(row.orderId)
        if (row.clientOrderId !== null) openByClientOrderId.delete(row.clientOrderId)
        return
      }
      open.set(row.orderId, row)
      if (row.clientOrderId !== null) openByClientOrderId.set(row.clientOrderId, row)
    }
    const reload = (): void => {
      events.drop()
      open.clear()
      openByClientOrderId.clear()
      seqs.clear()
      for (const raw of q.unfinished.all() as Array<RawOrder>) hold(toRow(raw))
      for (const row of backlogRows.values()) hold(row)
    }
    reload()

    const recordEvent = (...event: EventValues): void => {
      if (deferring) backlogEvents.push(event)
      else events.record(event)
    }

    /** Writes what was kept in memory while the storage refused writes: inside the caller's transaction. */
    const writeBacklog = (): void => {
      for (const row of backlogRows.values()) writeRow(toRow(q.byId.get(row.orderId) as RawOrder), row)
      for (const event of backlogEvents) events.record(event)
    }

    const transact = sqlite.transaction((work: () => unknown) => {
      writeBacklog()
      const result = work()
      events.flush()
      return result
    })
    /**
     * Runs journal work as one IMMEDIATE transaction (a savepoint inside an open one; Database.ts
     * says why IMMEDIATE), the backlog written first. A failed one is rolled back, and the rows held in memory are read again from the
     * table it left and the backlog; a refusal by the storage is thrown as a `StorageFailure`.
     */
    const writing = <A>(work: () => A): A => {
      try {
        const result = storage.guard(() => transact.immediate(work) as A)
        backlogRows.clear()
        backlogEvents.length = 0
        return result
      } catch (error) {
        reload()
        throw error
      }
    }
    storage.retryOnProbe(() => {
      if (backlogRows.size + backlogEvents.length > 0) writing(() => undefined)
    })

    /** Journal work that needs no disk to be safe: written now, or kept in memory while the storage refuses writes. */
    const deferrable = <A>(work: () => A): A => {
      if (storage.fault === undefined) {
        try {
          return writing(work)
        } catch (error) {
          if (!isStorageFailure(error)) throw error
        }
      }
      deferring = true
      try {
        return work()
      } finally {
        deferring = false
      }
    }

    /** Marks placements as being sent: written before any may go out, so it waits while the storage refuses writes (until the stop). */
    const markSending = (moves: ReadonlyArray<Move>, now: number): Effect.Effect<ReadonlyArray<Either.Either<OrderRow, InvalidTransition>>> =>
      Effect.suspend(() => {
        try {
          return Effect.succeed(writing(() => moves.map((m) => move(m, now))))
        } catch (error) {
          if (!isStorageFailure(error) || waitsEnded) throw error
          // The marker runs uninterruptibly, and a race's loser inherits that: each wait is made
          // interruptible so that the first to end ends the race, rather than both.
          return Effect.zipRight(Effect.raceFirst(Effect.interruptible(storage.awaitWritable), Effect.interruptible(waitsEnd.await)), markSending(moves, now))
        }
      })

    /** A row read from the table as the journal holds it now: in memory when unfinished, or changed while the storage refused writes. */
    const current = (raw: RawOrder): OrderRow => open.get(raw.order_id) ?? backlogRows.get(raw.order_id) ?? toRow(raw)

    /**
     * The rows a query of the table found, as the journal holds them now, and any the backlog moved
     * into what `matches`: the table still holds such a row as it was, so the query alone would miss
     * it or name it wrongly.
     */
    const heldNow = (raws: ReadonlyArray<RawOrder>, matches: (row: OrderRow) => boolean): ReadonlyArray<OrderRow> => {
      const rows = raws.map(current)
      if (backlogRows.size === 0) return rows
      const found = new Set(rows.map((row) => row.orderId))
      for (const row of backlogRows.values()) if (!found.has(row.orderId)) rows.push(row)
      return rows.filter(matches).sort((a, b) => a.orderId - b.orderId)
    }

    const getById = (orderId: number): OrderRow => {
      const held = open.get(orderId) ?? backlogRows.get(orderId)
      if (held !== undefined) return held
      const raw = q.byId.get(orderId) as RawOrder | undefined
      if (raw === undefined) throw new Error(`order ${orderId} is not in the journal`)
      return toRow(raw)
    }

    /** Writes `after` to the table, or to the backlog while the storage refuses writes; holds it in memory. */
    const write = (before: OrderRow, after: OrderRow): OrderRow => {
      if (deferring) backlogRows.set(after.orderId, after)
      else writeRow(before, after)
      hold(after)
      return after
    }

    /** Writes the columns in which `after` differs from `before`; each set of columns is one statement, prepared once. */
    function writeRow(before: OrderRow, after: OrderRow): void {
      const columns: Array<string> = []
      const values: Array<unknown> = []
      for (const { column, changed, value } of MUTABLE_COLUMNS) {
        if (changed(before, after)) {
          columns.push(column)
          values.push(value(after))
        }
      }
      const key = columns.join(",")
      let statement = updates.get(key)
      if (statement === undefined) {
        statement = sqlite.prepare(`UPDATE orders SET ${columns.map((c) => `${c} = ?`).join(", ")} WHERE order_id = ?`)
        updates.set(key, statement)
      }
      statement.run(...values, after.orderId)
    }

    const update = (orderId: number, patch: OrderPatch, now: number): OrderRow => {
      const current = getById(orderId)
      return write(current, patched(current, patch, undefined, now))
    }

    const move = (m: Move, now: number): Either.Either<OrderRow, InvalidTransition> => {
      const current = getById(m.orderId)
      const next = transition(current.state, m.event)
      if (Either.isLeft(next)) return Either.left(next.left)
      const row = write(current, patched(current, m.patch, next.right, now))
      recordEvent(m.orderId, current.state, next.right, m.patch.kind ?? null, m.patch.code ?? null, m.detail ?? null, now)
      return Either.right(row)
    }

    const insertOrder = (row: Omit<OrderRow, "orderId">): OrderRow => {
      const result = q.insertOrder.run(...insertedValues(row))
      const inserted: OrderRow = { ...row, orderId: Number(result.lastInsertRowid) }
      hold(inserted)
      return inserted
    }

    /** Journals one intent; the strategy outbox row it came from goes in the same transaction. */
    const insertIntent = (strategyId: string, tag: string, type: string, body: string, now: number, refusal: string | null, outboxId: number | undefined) => {
      if (outboxId !== undefined) outbox.take(outboxId)
      const seq = (seqs.get(strategyId) ?? (q.nextSeq.get(strategyId) as { seq: number }).seq - 1) + 1
      const intentId = intentIdOf(strategyId, seq)
      q.insertIntent.run(intentId, strategyId, seq, tag, type, body, refusal === null ? "approved" : "refused", refusal, now)
      seqs.set(strategyId, seq)
      return intentId
    }

    const journalPlacement = (input: PlacementInput): OrderRow => {
      const p = input.placement
      const intentId = insertIntent(input.strategyId, input.tag, p.type, Json.stringify(input.body), input.now, null, input.outboxId)
      const order = insertOrder({
        intentId,
        strategyId: input.strategyId,
        tag: input.tag,
        origin: "journal",
        clientOrderId: null,
        state: "intent",
        kindsSeen: [],
        code: null,
        symbol: p.symbol,
        side: p.side,
        type: p.type,
        baseQty: p.baseQty ?? null,
        quoteOrderQty: p.quoteOrderQty ?? null,
        limitPrice: p.limitPrice ?? null,
        stopPrice: p.stopPrice ?? null,
        maxSlippageBps: p.maxSlippageBps ?? null,
        filledBaseQty: new Decimal(0),
        avgPrice: null,
        lockAsset: p.lockAsset,
        lockAmount: p.lockAmount,
        cancelRequested: false,
        sentAt: null,
        lostAt: null,
        acceptedAt: null,
        venueCreatedAt: null,
        venueCancelledAt: null,
        terminalAt: null,
        nextPollAt: null,
        polls: 0,
        notFoundProbes: 0,
        acknowledgedAt: null,
        createdAt: input.now,
        updatedAt: input.now
      })
      recordEvent(order.orderId, null, "intent", null, null, null, input.now)
      return order
    }

    const journalIntent = (input: IntentInput): string =>
      insertIntent(input.strategyId, input.tag, input.type, Json.stringify(input.body), input.now, input.refusal, input.outboxId)

    const latestByTag = (strategyId: string, tag: string): OrderRow | undefined => {
      const raw = q.latestByTag.get(strategyId, tag) as RawOrder | undefined
      return raw === undefined ? undefined : current(raw)
    }

    const unfinished = (): ReadonlyArray<OrderRow> => [...open.values()]
    const batchApi: JournalBatch = { journalPlacement, journalIntent, update, latestByTag, unfinished }

    return {
      /**
       * Journals an approved placement intent and its order (state `intent`) in one
       * transaction, before anything is sent.
       */
      journalPlacement: (input: PlacementInput): Effect.Effect<OrderRow> => Effect.sync(() => writing(() => journalPlacement(input))),

      /** Journals an intent that was refused or needs no order row (cancels); returns its intent id. */
      journalIntent: (input: IntentInput): Effect.Effect<string> => Effect.sync(() => writing(() => journalIntent(input))),

      /**
       * Runs `work` as one transaction: the intents of a strategy's batch, their orders and the
       * outbox rows they leave are committed together (or not at all).
       */
      batch: <A>(work: (journal: JournalBatch) => A): Effect.Effect<A> => Effect.sync(() => writing(() => work(batchApi))),

      /** Moves an order along the state machine and records the event, in one transaction (the engine moves orders through `applyMoves`). */
      transition: (
        orderId: number,
        event: OrderEvent,
        patch: OrderPatch,
        now: number,
        detail?: string
      ): Effect.Effect<OrderRow, InvalidTransition> =>
        Effect.suspend(() => {
          const outcome = writing(() => move({ orderId, event, patch, detail }, now))
          return Either.isLeft(outcome) ? Effect.fail(outcome.left) : Effect.succeed(outcome.right)
        }),

      /**
       * Several moves in one transaction, each checked on its own; plain, and with the strategy
       * orders among them that got their clientOrderId (a placement answered, a lost one found):
       * the fills the ledger holds for that id belong to the strategy from then on. The caller
       * hands these on to the books in the same synchronous step (`OrderMoves`), so that no read
       * of the books comes between the commit and the hand-off. The one way to give an order its
       * clientOrderId.
       */
      applyMoves: (moves: ReadonlyArray<Move>, now: number): AppliedMoves =>
        deferrable(() => {
          const attributed: Array<Attribution> = []
          const outcomes = moves.map((m) => {
            const named = getById(m.orderId).clientOrderId !== null
            const outcome = move(m, now)
            if (!named && Either.isRight(outcome) && outcome.right.clientOrderId !== null && outcome.right.strategyId !== null) {
              attributed.push({ strategyId: outcome.right.strategyId, clientOrderId: outcome.right.clientOrderId })
            }
            return outcome
          })
          return { outcomes, attributed }
        }),

      /**
       * Several moves in one transaction, each checked on its own (the sender's marks and withdrawals: none names an order;
       * `applyMoves` does). Marks as being sent wait for the storage; withdrawals are kept in memory while it refuses writes.
       */
      transitionMany: (moves: ReadonlyArray<Move>, now: number): Effect.Effect<ReadonlyArray<Either.Either<OrderRow, InvalidTransition>>> =>
        moves.length === 0
          ? Effect.succeed([])
          : moves.every((m) => m.event === "send")
            ? markSending(moves, now)
            : Effect.sync(() => deferrable(() => moves.map((m) => move(m, now)))),

      /** Records progress that is not a state change (fills so far, poll schedule, cancel requested). */
      update: (orderId: number, patch: OrderPatch, now: number): Effect.Effect<OrderRow> => Effect.sync(() => deferrable(() => update(orderId, patch, now))),

      /** Several progress-only patches in one transaction (the tracker's poll schedule after a batch). */
      updateMany: (patches: ReadonlyArray<readonly [orderId: number, patch: OrderPatch]>, now: number): Effect.Effect<void> =>
        patches.length === 0
          ? Effect.void
          : Effect.sync(() =>
              deferrable(() => {
                for (const [orderId, patch] of patches) update(orderId, patch, now)
              })
            ),

      /** Order changes kept in memory only, the storage having refused them: written by the first write that succeeds. */
      notRecorded: Effect.sync(() => backlogRows.size),
      /** The engine stops: a mark waiting for the storage gives up (its placements stay unsent intents, for the stop to count). */
      endWaits: Effect.sync(() => {
        waitsEnded = true
        waitsEnd.unsafeOpen()
      }),

      /**
       * Adopts an open order the journal does not know (placed by hand or by another program) as `external`.
       * Returns undefined, adopting nothing, while any placement of ours is being sent or is unknown:
       * that order may be ours and is left to reconciliation.
       */
      adoptExternal: (order: {
        readonly clientOrderId: string
        readonly symbol: string
        readonly side: Side
        readonly type: OrderType
        readonly kind: string
        readonly baseQty?: Decimal | undefined
        readonly quoteOrderQty?: Decimal | undefined
        readonly filledBaseQty: Decimal
        readonly limitPrice?: Decimal | undefined
        readonly stopPrice?: Decimal | undefined
        readonly now: number
      }): Effect.Effect<OrderRow | undefined> =>
        Effect.sync(() =>
          writing(() => {
            if (q.byClientOrderId.get(order.clientOrderId) !== undefined) return undefined
            for (const row of open.values()) if (row.state === "submitting" || row.state === "unknown") return undefined
            const state: OrderState = order.kind === "resting" ? "resting" : order.kind === "pending" ? "pending" : "accepted"
            const adopted = insertOrder({
              intentId: null,
              strategyId: null,
              tag: null,
              origin: "external",
              clientOrderId: order.clientOrderId,
              state,
              kindsSeen: [order.kind],
              code: null,
              symbol: order.symbol,
              side: order.side,
              type: order.type,
              baseQty: order.baseQty ?? null,
              quoteOrderQty: order.quoteOrderQty ?? null,
              limitPrice: order.limitPrice ?? null,
              stopPrice: order.stopPrice ?? null,
              maxSlippageBps: null,
              filledBaseQty: order.filledBaseQty,
              avgPrice: null,
              lockAsset: null,
              lockAmount: null,
              cancelRequested: false,
              sentAt: null,
              lostAt: null,
              acceptedAt: order.now,
              venueCreatedAt: null,
              venueCancelledAt: null,
              terminalAt: null,
              nextPollAt: null,
              polls: 0,
              notFoundProbes: 0,
              acknowledgedAt: null,
              createdAt: order.now,
              updatedAt: order.now
            })
            recordEvent(adopted.orderId, null, state, order.kind, null, "adopted as external", order.now)
            return adopted
          })
        ),

      byId: (orderId: number): Effect.Effect<OrderRow> => Effect.sync(() => getById(orderId)),
      byClientOrderId: (clientOrderId: string): Effect.Effect<OrderRow | undefined> =>
        Effect.sync(() => {
          const held = openByClientOrderId.get(clientOrderId)
          if (held !== undefined) return held
          for (const row of backlogRows.values()) if (row.clientOrderId === clientOrderId) return row
          const raw = q.byClientOrderId.get(clientOrderId) as RawOrder | undefined
          return raw === undefined ? undefined : toRow(raw)
        }),
      byIntent: (intentId: string): Effect.Effect<OrderRow | undefined> =>
        Effect.sync(() => {
          const raw = q.byIntent.get(intentId) as RawOrder | undefined
          return raw === undefined ? undefined : current(raw)
        }),
      /** The strategy's most recent order with this tag. */
      latestByTag: (strategyId: string, tag: string): Effect.Effect<OrderRow | undefined> => Effect.sync(() => latestByTag(strategyId, tag)),
      /** True when the strategy ever journaled an intent with this tag. */
      tagJournaled: (strategyId: string, tag: string): Effect.Effect<boolean> =>
        Effect.sync(() => (q.intentsByTag.get(strategyId, tag) as { n: number }).n > 0),
      inStates: (states: ReadonlyArray<OrderState>): Effect.Effect<ReadonlyArray<OrderRow>> =>
        Effect.sync(() =>
          states.some(isTerminal)
            ? heldNow(q.inStates(states).all(...states) as Array<RawOrder>, (row) => states.includes(row.state))
            : unfinished().filter((row) => states.includes(row.state))
        ),
      forStrategy: (strategyId: string): Effect.Effect<ReadonlyArray<OrderRow>> =>
        Effect.sync(() => (q.forStrategy.all(strategyId) as Array<RawOrder>).map(current)),
      /** Every order that has not reached a terminal state, of all strategies and external ones. */
      unfinished: Effect.sync(unfinished),
      all: Effect.sync(() => (q.all.all() as Array<RawOrder>).map(current)),
      /** Orders marked lost that no operator has acknowledged yet. */
      lostUnacknowledged: Effect.sync(() => heldNow(q.lostUnacknowledged.all() as Array<RawOrder>, (row) => row.state === LOST && row.acknowledgedAt === null)),
      /** Acknowledges one lost order by clientOrderId, or every one (undefined); returns the ids acknowledged. */
      acknowledgeLost: (clientOrderId: string | undefined, now: number): Effect.Effect<ReadonlyArray<string>> =>
        // IMMEDIATE: another process (the running daemon) writes the same file; a read that turns
        // into a write in a deferred transaction fails at once when that process wrote in between.
        Effect.sync(() =>
          sqlite.transaction(() => {
            const ids = (q.lostUnacknowledged.all() as Array<RawOrder>).map((o) => o.client_order_id!).filter((id) => clientOrderId === undefined || id === clientOrderId)
            q.acknowledge.run(now, now, clientOrderId ?? null, clientOrderId ?? null)
            return ids
          }).immediate()
        ),
      /**
       * The final order updates the strategy is owed and was never handed, in the order they came
       * about (orders by when they ended, refusals by when they were journaled).
       */
      owedAnswers: (strategyId: string): Effect.Effect<ReadonlyArray<OwedAnswer>> =>
        Effect.sync(() =>
          (
            q.owed.all(strategyId) as Array<{
              intent_id: string
              tag: string
              client_order_id: string | null
              state: OrderState
              code: string | null
              filled_base_qty: string
            }>
          ).map((raw) => ({
            intentId: raw.intent_id,
            tag: raw.tag,
            clientOrderId: raw.client_order_id,
            state: raw.state,
            code: raw.code,
            filledBaseQty: new Decimal(raw.filled_base_qty)
          }))
        ),
      /**
       * The intents whose owed answer is this final update (`state` the order's final state, or
       * `refused` for a risk refusal), oldest first: none once the strategy has been handed it.
       */
      owedFor: (strategyId: string, tag: string, state: OrderState, clientOrderId: string | undefined): Effect.Effect<ReadonlyArray<string>> =>
        Effect.sync(() => (q.owedFor.all(strategyId, tag, state, clientOrderId ?? null) as Array<{ intent_id: string }>).map((row) => row.intent_id)),
      /**
       * Records that the strategy was handed these intents' final updates. Plain, for the
       * transaction that saves the state the strategy left after handling them.
       */
      markAnswered: (intentIds: ReadonlyArray<string>, now: number): void => {
        for (const intentId of intentIds) q.answer.run(now, intentId)
      },
      intents: Effect.sync(() => (q.intents.all() as Array<Parameters<typeof toIntent>[0]>).map(toIntent)),
      events: (orderId: number) =>
        Effect.sync(
          () =>
            q.events.all(orderId) as Array<{
              event_id: number
              from_state: OrderState | null
              to_state: OrderState
              kind: string | null
              code: string | null
              detail: string | null
              at: number
            }>
        )
    }
  }),
  dependencies: [StrategyOutbox.Default]
}) {}
