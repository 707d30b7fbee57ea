/**
 * Order moves: the one way an order moves along the state machine outside a
 * submit. Each batch of moves is one journal transaction; the strategy orders it
 * named are handed to the books at once; every change is then logged under its
 * catalog name and published on the bus in one publish, and finished orders with
 * fills have the fills synced. The sender records answers
 * through it, the tracker what polls saw, reconciliation what it found.
 */
import { Clock, Effect, FiberRef, LogLevel } from "effect"
import { alreadyApplied, type InvalidTransition, isTerminal, type OrderEvent, type OrderState } from "../domain/OrderState.js"
import { EventCatalog, type EventName } from "../log/Events.js"
import { type EventLineInput, logEvent, logEvents } from "../log/Logger.js"
import { type Move, OrderJournal } from "../store/OrderJournal.js"
import type { OrderPatch, OrderRow } from "../store/OrderRow.js"
import { STOPPING } from "./AccountBlock.js"
import { Books } from "./Books.js"
import { Cancels } from "./Cancels.js"
import { EngineBus } from "./EngineBus.js"

const STATE_EVENTS: Partial<Record<OrderState, EventName>> = {
  submitting: "order.submitted",
  accepted: "order.accepted",
  refused: "order.refused",
  unknown: "order.unknown",
  not_placed: "order.reconciled",
  pending: "order.status",
  resting: "order.status",
  fill: "order.filled",
  rejected: "order.rejected",
  cancelled: "order.cancelled",
  lost: "order.lost"
}

export class OrderMoves extends Effect.Service<OrderMoves>()("svcbot/OrderMoves", {
  effect: Effect.gen(function* () {
    const journal = yield* OrderJournal
    const bus = yield* EngineBus
    const cancels = yield* Cancels
    const books = yield* Books

    /**
     * Logs the state changes of a batch (one commit's) and tells subscribers in one publish.
     * `fillsSynced`: whoever moved the orders synced the fills they report already; otherwise
     * finished orders with fills have them synced now.
     */
    const announce = (rows: ReadonlyArray<OrderRow>, details: ReadonlyArray<string | undefined>, now: number, fillsSynced: boolean): Effect.Effect<void> =>
      Effect.withFiberRuntime((fiber) => {
        // Read once for the batch: the debug events of every order's progress cost nothing while debug is off.
        const debugOn = !LogLevel.greaterThan(fiber.getFiberRef(FiberRef.currentMinimumLogLevel), LogLevel.Debug)
        const lines: Array<EventLineInput> = []
        let syncFills = false
        for (const [i, row] of rows.entries()) {
          const name = row.state === "refused" && row.code === STOPPING ? "order.withdrawn" : STATE_EVENTS[row.state]
          if (name !== undefined && (debugOn || EventCatalog[name].level !== "debug")) {
            const detail = details[i]
            lines.push([
              name,
              {
                strategy: row.strategyId,
                tag: row.tag,
                intentId: row.intentId,
                clientOrderId: row.clientOrderId,
                state: row.state,
                symbol: row.symbol,
                side: row.side,
                type: row.type,
                filledBaseQty: row.filledBaseQty.toFixed(),
                ...(row.code === null ? {} : { code: row.code }),
                ...(row.state === "not_placed" ? { outcome: "not_placed" } : {}),
                ...(detail === undefined ? {} : { detail })
              }
            ])
          }
          if (!fillsSynced && (row.state === "fill" || (isTerminal(row.state) && row.filledBaseQty.gt(0)))) syncFills = true
        }
        cancels.moved(rows)
        const published = syncFills ? Effect.zipRight(bus.publishOrders(rows, now), bus.triggerFillSync) : bus.publishOrders(rows, now)
        return lines.length === 0 ? published : Effect.zipRight(logEvents(lines), published)
      })

    /** What a move that the state machine refused means: nothing, when the outcome was reached already. */
    const refused = (orderId: number, refusal: InvalidTransition, detail: string | undefined) =>
      // The same outcome reached twice (the tracker and reconciliation, or two reconcile passes, raced): nothing changed.
      alreadyApplied(refusal.from, refusal.event)
        ? Effect.void
        : logEvent("reconcile.mismatch", { orderId, problem: refusal.message, ...(detail === undefined ? {} : { detail }) })

    /**
     * Moves orders along the state machine in one transaction, logs each change and tells
     * subscribers; a move the state machine refuses comes back undefined.
     */
    const moveMany = (moves: ReadonlyArray<Move>, options: { readonly fillsSynced?: boolean } = {}) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const outcomes = yield* Effect.sync(() => {
          const applied = journal.applyMoves(moves, now)
          // In the same synchronous step as the commit: no read of the books comes between.
          books.attributed(applied.attributed)
          return applied.outcomes
        })
        const rows: Array<OrderRow | undefined> = []
        const moved: Array<OrderRow> = []
        const details: Array<string | undefined> = []
        for (const [i, m] of moves.entries()) {
          const outcome = outcomes[i]!
          if (outcome._tag === "Left") {
            yield* refused(m.orderId, outcome.left, m.detail)
            rows.push(undefined)
            continue
          }
          rows.push(outcome.right)
          moved.push(outcome.right)
          details.push(m.detail)
        }
        yield* announce(moved, details, now, options.fillsSynced === true)
        return rows
      })

    return {
      /** Logs and publishes moves already written (a marked group, a withdrawal). */
      announce,
      /** Logs a move the state machine refused, unless its outcome was reached already. */
      refused,
      moveMany,
      /** Moves an order along the state machine, logs the change and tells subscribers. */
      move: (orderId: number, event: OrderEvent, patch: OrderPatch = {}, detail?: string) =>
        Effect.map(moveMany([{ orderId, event, patch, detail }]), (rows) => rows[0])
    }
  })
}) {}
