/**
 * The order journal: intents (written before anything is sent), orders with
 * their state, and every order event. Each state change is checked against the
 * order state machine and written in one transaction with its event row.
 */
import type BetterSqlite3 from "better-sqlite3"
import { Effect, Either } from "effect"
import { Decimal } from "../domain/Decimal.js"
import * as Json from "../domain/Json.js"
import { type InvalidTransition, isTerminal, type OrderEvent, type OrderState, transition } from "../domain/OrderState.js"
import type { OrderTerms, PlacementTerms } from "../domain/OrderTerms.js"
import type { OrderType, Side } from "../svc/Dialect.js"
import { Database } from "./Database.js"

export type OrderOrigin = "journal" | "external"

export interface OrderRow extends OrderTerms {
  readonly orderId: number
  readonly intentId: string | null
  readonly strategyId: string | null
  readonly tag: string | null
  readonly origin: OrderOrigin
  readonly clientOrderId: string | null
  readonly state: OrderState
  /** Order kinds as the service reported them, in order, without repeats in a row. */
  readonly kindsSeen: ReadonlyArray<string>
  readonly code: string | null
  readonly symbol: string
  readonly filledBaseQty: Decimal
  readonly avgPrice: Decimal | null
  readonly lockAsset: string | null
  readonly lockAmount: Decimal | null
  readonly cancelRequested: boolean
  readonly sentAt: number | null
  /** When the placement's answer was lost (state `unknown`). */
  readonly lostAt: number | null
  readonly acceptedAt: number | null
  /** The venue's own createdAt for the order, when its status answer carries one. */
  readonly venueCreatedAt: number | null
  /** The venue's own time of the cancel, when its status answer for the cancelled order carries one. */
  readonly venueCancelledAt: number | null
  readonly terminalAt: number | null
  readonly nextPollAt: number | null
  readonly polls: number
  /** Status probes in a row that answered ORDER_NOT_FOUND past the settle window. */
  readonly notFoundProbes: number
  /** When an operator acknowledged the order as lost. */
  readonly acknowledgedAt: number | null
  readonly createdAt: number
  readonly updatedAt: number
}

export interface PlacementRecord extends PlacementTerms {
  readonly maxSlippageBps?: number | undefined
  readonly lockAsset: string
  readonly lockAmount: Decimal
}

export interface IntentRecord {
  readonly intentId: string
  readonly strategyId: string
  readonly seq: number
  readonly tag: string
  readonly type: string
  readonly body: string
  readonly outcome: "approved" | "refused" | null
  readonly refusal: string | null
  readonly createdAt: number
}

/** Fields that change alongside a state change or on their own (progress, polling). */
export interface OrderPatch {
  readonly clientOrderId?: string
  readonly code?: string | null
  readonly kind?: string
  readonly filledBaseQty?: Decimal
  readonly avgPrice?: Decimal | null
  readonly sentAt?: number
  readonly lostAt?: number
  readonly acceptedAt?: number
  readonly venueCreatedAt?: number
  readonly venueCancelledAt?: number
  readonly nextPollAt?: number | null
  readonly polls?: number
  readonly cancelRequested?: boolean
  readonly notFoundProbes?: number
}

interface RawOrder {
  order_id: number
  intent_id: string | null
  strategy_id: string | null
  tag: string | null
  origin: OrderOrigin
  client_order_id: string | null
  state: OrderState
  kinds_seen: string
  code: string | null
  symbol: string
  side: Side
  type: OrderType
  base_qty: string | null
  quote_order_qty: string | null
  limit_price: string | null
  stop_price: string | null
  max_slippage_bps: number | null
  filled_base_qty: string
  avg_price: string | null
  lock_asset: string | null
  lock_amount: string | null
  cancel_requested: number
  sent_at: number | null
  lost_at: number | null
  accepted_at: number | null
  venue_created_at: number | null
  venue_cancelled_at: number | null
  terminal_at: number | null
  next_poll_at: number | null
  polls: number
  not_found_probes: number
  acknowledged_at: number | null
  created_at: number
  updated_at: number
}

const dec = (text: string | null): Decimal | null => (text === null ? null : new Decimal(text))
const text = (value: Decimal | undefined | null): string | null => (value === undefined || value === null ? null : value.toFixed())

const toRow = (raw: RawOrder): OrderRow => ({
  orderId: raw.order_id,
  intentId: raw.intent_id,
  strategyId: raw.strategy_id,
  tag: raw.tag,
  origin: raw.origin,
  clientOrderId: raw.client_order_id,
  state: raw.state,
  kindsSeen: raw.kinds_seen === "" ? [] : raw.kinds_seen.split(","),
  code: raw.code,
  symbol: raw.symbol,
  side: raw.side,
  type: raw.type,
  baseQty: dec(raw.base_qty),
  quoteOrderQty: dec(raw.quote_order_qty),
  limitPrice: dec(raw.limit_price),
  stopPrice: dec(raw.stop_price),
  maxSlippageBps: raw.max_slippage_bps,
  filledBaseQty: new Decimal(raw.filled_base_qty),
  avgPrice: dec(raw.avg_price),
  lockAsset: raw.lock_asset,
  lockAmount: dec(raw.lock_amount),
  cancelRequested: raw.cancel_requested === 1,
  sentAt: raw.sent_at,
  lostAt: raw.lost_at,
  acceptedAt: raw.accepted_at,
  venueCreatedAt: raw.venue_created_at,
  venueCancelledAt: raw.venue_cancelled_at,
  terminalAt: raw.terminal_at,
  nextPollAt: raw.next_poll_at,
  polls: raw.polls,
  notFoundProbes: raw.not_found_probes,
  acknowledgedAt: raw.acknowledged_at,
  createdAt: raw.created_at,
  updatedAt: raw.updated_at
})

const toIntent = (raw: {
  intent_id: string
  strategy_id: string
  seq: number
  tag: string
  type: string
  body: string
  outcome: "approved" | "refused" | null
  refusal: string | null
  created_at: number
}): IntentRecord => ({
  intentId: raw.intent_id,
  strategyId: raw.strategy_id,
  seq: raw.seq,
  tag: raw.tag,
  type: raw.type,
  body: raw.body,
  outcome: raw.outcome,
  refusal: raw.refusal,
  createdAt: raw.created_at
})

/** The deterministic id of a strategy's n-th intent. */
export const intentIdOf = (strategyId: string, seq: number): string => `${strategyId}:${String(seq).padStart(6, "0")}`

export class OrderJournal extends Effect.Service<OrderJournal>()("svcbot/OrderJournal", {
  effect: Effect.gen(function* () {
    const { sqlite } = yield* Database
    const q = {
      nextSeq: sqlite.prepare("SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM intents WHERE strategy_id = ?"),
      insertIntent: sqlite.prepare(
        "INSERT INTO intents (intent_id, strategy_id, seq, tag, type, body, outcome, refusal, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
      ),
      insertOrder: sqlite.prepare(`INSERT INTO orders (intent_id, strategy_id, tag, origin, client_order_id, state, kinds_seen,
        symbol, side, type, base_qty, quote_order_qty, limit_price, stop_price, max_slippage_bps, filled_base_qty,
        lock_asset, lock_amount, accepted_at, created_at, updated_at)
        VALUES (@intentId, @strategyId, @tag, @origin, @clientOrderId, @state, @kindsSeen, @symbol, @side, @type, @baseQty,
        @quoteOrderQty, @limitPrice, @stopPrice, @maxSlippageBps, @filledBaseQty, @lockAsset, @lockAmount, @acceptedAt, @now, @now)`),
      insertEvent: sqlite.prepare(
        "INSERT INTO order_events (order_id, from_state, to_state, kind, code, detail, at) VALUES (?, ?, ?, ?, ?, ?, ?)"
      ),
      byId: sqlite.prepare("SELECT * FROM orders WHERE order_id = ?"),
      byClientOrderId: sqlite.prepare("SELECT * FROM orders WHERE client_order_id = ?"),
      inFlight: sqlite.prepare("SELECT 1 FROM orders WHERE state IN ('submitting', 'unknown') LIMIT 1"),
      byIntent: sqlite.prepare("SELECT * FROM orders WHERE intent_id = ?"),
      latestByTag: sqlite.prepare("SELECT * FROM orders WHERE strategy_id = ? AND tag = ? ORDER BY order_id DESC LIMIT 1"),
      intentsByTag: sqlite.prepare("SELECT COUNT(*) AS n FROM intents WHERE strategy_id = ? AND tag = ?"),
      forStrategy: sqlite.prepare("SELECT * FROM orders WHERE strategy_id = ? ORDER BY order_id"),
      unfinished: sqlite.prepare(
        "SELECT * FROM orders WHERE state NOT IN ('fill', 'rejected', 'cancelled', 'not_placed', 'refused', 'lost') ORDER BY order_id"
      ),
      lostUnacknowledged: sqlite.prepare("SELECT * FROM orders WHERE state = 'lost' AND acknowledged_at IS NULL ORDER BY order_id"),
      acknowledge: sqlite.prepare("UPDATE orders SET acknowledged_at = ?, updated_at = ? WHERE state = 'lost' AND acknowledged_at IS NULL AND (? IS NULL OR client_order_id = ?)"),
      all: sqlite.prepare("SELECT * FROM orders ORDER BY order_id"),
      intents: sqlite.prepare("SELECT * FROM intents ORDER BY created_at, intent_id"),
      events: sqlite.prepare("SELECT * FROM order_events WHERE order_id = ? ORDER BY event_id")
    }
    const inStates = (states: ReadonlyArray<OrderState>) =>
      sqlite.prepare(`SELECT * FROM orders WHERE state IN (${states.map(() => "?").join(",")}) ORDER BY order_id`)

    // Patches touch a handful of column sets; each distinct UPDATE is prepared once.
    const updates = new Map<string, BetterSqlite3.Statement>()

    const getById = (orderId: number): OrderRow => {
      const raw = q.byId.get(orderId) as RawOrder | undefined
      if (raw === undefined) throw new Error(`order ${orderId} is not in the journal`)
      return toRow(raw)
    }

    const applyPatch = (orderId: number, patch: OrderPatch, state: OrderState | undefined, now: number): void => {
      const sets: Array<string> = ["updated_at = @now"]
      const params: Record<string, unknown> = { orderId, now }
      const set = (column: string, value: unknown) => {
        sets.push(`${column} = @${column}`)
        params[column] = value
      }
      const terminal = state !== undefined && isTerminal(state)
      if (state !== undefined) set("state", state)
      if (terminal) set("terminal_at", now)
      // A finished order is never polled again, whatever the patch asked for.
      if (terminal) set("next_poll_at", null)
      else if (patch.nextPollAt !== undefined) set("next_poll_at", patch.nextPollAt)
      if (patch.clientOrderId !== undefined) set("client_order_id", patch.clientOrderId)
      if (patch.code !== undefined) set("code", patch.code)
      if (patch.filledBaseQty !== undefined) set("filled_base_qty", patch.filledBaseQty.toFixed())
      if (patch.avgPrice !== undefined) set("avg_price", text(patch.avgPrice))
      if (patch.sentAt !== undefined) set("sent_at", patch.sentAt)
      if (patch.lostAt !== undefined) set("lost_at", patch.lostAt)
      if (patch.acceptedAt !== undefined) set("accepted_at", patch.acceptedAt)
      if (patch.venueCreatedAt !== undefined) set("venue_created_at", patch.venueCreatedAt)
      if (patch.venueCancelledAt !== undefined) set("venue_cancelled_at", patch.venueCancelledAt)
      if (patch.polls !== undefined) set("polls", patch.polls)
      if (patch.cancelRequested !== undefined) set("cancel_requested", patch.cancelRequested ? 1 : 0)
      if (patch.notFoundProbes !== undefined) set("not_found_probes", patch.notFoundProbes)
      if (patch.kind !== undefined) {
        const current = getById(orderId).kindsSeen
        if (current[current.length - 1] !== patch.kind) set("kinds_seen", [...current, patch.kind].join(","))
      }
      const sql = `UPDATE orders SET ${sets.join(", ")} WHERE order_id = @orderId`
      let update = updates.get(sql)
      if (update === undefined) {
        update = sqlite.prepare(sql)
        updates.set(sql, update)
      }
      update.run(params)
    }

    const takeOutbox = sqlite.prepare("DELETE FROM strategy_outbox WHERE id = ?")
    /** Journals one intent; the strategy outbox row it came from goes in the same transaction. */
    const journalIntent = (strategyId: string, tag: string, type: string, body: string, now: number, refusal: string | null, outboxId: number | undefined) => {
      if (outboxId !== undefined) takeOutbox.run(outboxId)
      const seq = (q.nextSeq.get(strategyId) as { seq: number }).seq
      const intentId = intentIdOf(strategyId, seq)
      q.insertIntent.run(intentId, strategyId, seq, tag, type, body, refusal === null ? "approved" : "refused", refusal, now)
      return intentId
    }

    return {
      /**
       * Journals an approved placement intent and its order (state `intent`) in one
       * transaction, before anything is sent.
       */
      journalPlacement: (input: {
        readonly strategyId: string
        readonly tag: string
        readonly body: unknown
        readonly placement: PlacementRecord
        readonly now: number
        /** The strategy outbox row this intent was saved in, if any. */
        readonly outboxId?: number | undefined
      }): Effect.Effect<OrderRow> =>
        Effect.sync(() =>
          sqlite.transaction(() => {
            const p = input.placement
            const intentId = journalIntent(input.strategyId, input.tag, p.type, Json.stringify(input.body), input.now, null, input.outboxId)
            const result = q.insertOrder.run({
              intentId,
              strategyId: input.strategyId,
              tag: input.tag,
              origin: "journal",
              clientOrderId: null,
              state: "intent",
              kindsSeen: "",
              symbol: p.symbol,
              side: p.side,
              type: p.type,
              baseQty: text(p.baseQty),
              quoteOrderQty: text(p.quoteOrderQty),
              limitPrice: text(p.limitPrice),
              stopPrice: text(p.stopPrice),
              maxSlippageBps: p.maxSlippageBps ?? null,
              filledBaseQty: "0",
              lockAsset: p.lockAsset,
              lockAmount: p.lockAmount.toFixed(),
              acceptedAt: null,
              now: input.now
            })
            const orderId = Number(result.lastInsertRowid)
            q.insertEvent.run(orderId, null, "intent", null, null, null, input.now)
            return getById(orderId)
          })()
        ),

      /** Journals an intent that was refused or needs no order row (cancels); returns its intent id. */
      journalIntent: (input: {
        readonly strategyId: string
        readonly tag: string
        readonly type: string
        readonly body: unknown
        readonly refusal: string | null
        readonly now: number
        readonly outboxId?: number | undefined
      }): Effect.Effect<string> =>
        Effect.sync(() =>
          sqlite.transaction(() =>
            journalIntent(input.strategyId, input.tag, input.type, Json.stringify(input.body), input.now, input.refusal, input.outboxId)
          )()
        ),

      /** Moves an order along the state machine and records the event, in one transaction. */
      transition: (
        orderId: number,
        event: OrderEvent,
        patch: OrderPatch,
        now: number,
        detail?: string
      ): Effect.Effect<OrderRow, InvalidTransition> =>
        Effect.suspend(() => {
          const outcome = sqlite.transaction((): Either.Either<OrderRow, InvalidTransition> => {
            const current = getById(orderId)
            const next = transition(current.state, event)
            if (Either.isLeft(next)) return Either.left(next.left)
            applyPatch(orderId, patch, next.right, now)
            q.insertEvent.run(orderId, current.state, next.right, patch.kind ?? null, patch.code ?? null, detail ?? null, now)
            return Either.right(getById(orderId))
          })()
          return Either.isLeft(outcome) ? Effect.fail(outcome.left) : Effect.succeed(outcome.right)
        }),

      /** Records progress that is not a state change (fills so far, poll schedule, cancel requested). */
      update: (orderId: number, patch: OrderPatch, now: number): Effect.Effect<OrderRow> =>
        Effect.sync(() =>
          sqlite.transaction(() => {
            applyPatch(orderId, patch, undefined, now)
            return getById(orderId)
          })()
        ),

      /** Several progress-only patches in one transaction (the tracker's poll schedule after a batch). */
      updateMany: (patches: ReadonlyArray<readonly [orderId: number, patch: OrderPatch]>, now: number): Effect.Effect<void> =>
        patches.length === 0
          ? Effect.void
          : Effect.sync(() =>
              sqlite.transaction(() => {
                for (const [orderId, patch] of patches) applyPatch(orderId, patch, undefined, now)
              })()
            ),

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
          sqlite.transaction(() => {
            if (q.byClientOrderId.get(order.clientOrderId) !== undefined || q.inFlight.get() !== undefined) return undefined
            const state: OrderState = order.kind === "resting" ? "resting" : order.kind === "pending" ? "pending" : "accepted"
            const result = q.insertOrder.run({
              intentId: null,
              strategyId: null,
              tag: null,
              origin: "external",
              clientOrderId: order.clientOrderId,
              state,
              kindsSeen: order.kind,
              symbol: order.symbol,
              side: order.side,
              type: order.type,
              baseQty: text(order.baseQty),
              quoteOrderQty: text(order.quoteOrderQty),
              limitPrice: text(order.limitPrice),
              stopPrice: text(order.stopPrice),
              maxSlippageBps: null,
              filledBaseQty: order.filledBaseQty.toFixed(),
              lockAsset: null,
              lockAmount: null,
              acceptedAt: order.now,
              now: order.now
            })
            const orderId = Number(result.lastInsertRowid)
            q.insertEvent.run(orderId, null, state, order.kind, null, "adopted as external", order.now)
            return getById(orderId)
          })()
        ),

      byId: (orderId: number): Effect.Effect<OrderRow> => Effect.sync(() => getById(orderId)),
      byClientOrderId: (clientOrderId: string): Effect.Effect<OrderRow | undefined> =>
        Effect.sync(() => {
          const raw = q.byClientOrderId.get(clientOrderId) as RawOrder | undefined
          return raw === undefined ? undefined : toRow(raw)
        }),
      byIntent: (intentId: string): Effect.Effect<OrderRow | undefined> =>
        Effect.sync(() => {
          const raw = q.byIntent.get(intentId) as RawOrder | undefined
          return raw === undefined ? undefined : toRow(raw)
        }),
      /** The strategy's most recent order with this tag. */
      latestByTag: (strategyId: string, tag: string): Effect.Effect<OrderRow | undefined> =>
        Effect.sync(() => {
          const raw = q.latestByTag.get(strategyId, tag) as RawOrder | undefined
          return raw === undefined ? undefined : toRow(raw)
        }),
      /** True when the strategy ever journaled an intent with this tag. */
      tagJournaled: (strategyId: string, tag: string): Effect.Effect<boolean> =>
        Effect.sync(() => (q.intentsByTag.get(strategyId, tag) as { n: number }).n > 0),
      inStates: (states: ReadonlyArray<OrderState>): Effect.Effect<ReadonlyArray<OrderRow>> =>
        Effect.sync(() => (inStates(states).all(...states) as Array<RawOrder>).map(toRow)),
      forStrategy: (strategyId: string): Effect.Effect<ReadonlyArray<OrderRow>> =>
        Effect.sync(() => (q.forStrategy.all(strategyId) as Array<RawOrder>).map(toRow)),
      /** Every order that has not reached a terminal state, of all strategies and external ones. */
      unfinished: Effect.sync(() => (q.unfinished.all() as Array<RawOrder>).map(toRow)),
      all: Effect.sync(() => (q.all.all() as Array<RawOrder>).map(toRow)),
      /** Orders marked lost that no operator has acknowledged yet. */
      lostUnacknowledged: Effect.sync(() => (q.lostUnacknowledged.all() as Array<RawOrder>).map(toRow)),
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
  })
}) {}
