/**
 * What the engine tells the rest of svcbot: order updates and fills per
 * strategy (bounded PubSubs), the fill-sync trigger, and whether placements are
 * currently stopped by the account's status.
 */
import { Effect, PubSub, Queue, Ref, type Scope, Stream } from "effect"
import type { Decimal } from "../domain/Decimal.js"
import type { OrderState } from "../domain/OrderState.js"
import type { LedgerFill } from "../store/FillLedger.js"
import type { OrderRow } from "../store/OrderJournal.js"

export interface OrderUpdate {
  readonly strategyId: string | null
  readonly tag: string | null
  readonly intentId: string | null
  readonly orderId: number
  readonly clientOrderId: string | null
  readonly state: OrderState
  /** The last order kind the service reported, when any. */
  readonly kind: string | null
  /** Reject code (kind rejected) or refusal code (state refused). */
  readonly code: string | null
  readonly filledBaseQty: Decimal
  readonly at: number
}

export interface FillUpdate {
  readonly strategyId: string | null
  readonly tag: string | null
  readonly fill: LedgerFill
}

/** Why placements are stopped, with what the user has to do. */
export interface PlacementBlock {
  readonly code: string
  readonly fix: string
}

const BUS_CAPACITY = 4096

export const toUpdate = (row: OrderRow, at: number): OrderUpdate => ({
  strategyId: row.strategyId,
  tag: row.tag,
  intentId: row.intentId,
  orderId: row.orderId,
  clientOrderId: row.clientOrderId,
  state: row.state,
  kind: row.kindsSeen[row.kindsSeen.length - 1] ?? null,
  code: row.code,
  filledBaseQty: row.filledBaseQty,
  at
})

export class EngineBus extends Effect.Service<EngineBus>()("svcbot/EngineBus", {
  scoped: Effect.gen(function* () {
    const orders = yield* Effect.acquireRelease(PubSub.bounded<OrderUpdate>(BUS_CAPACITY), PubSub.shutdown)
    const fills = yield* Effect.acquireRelease(PubSub.bounded<FillUpdate>(BUS_CAPACITY), PubSub.shutdown)
    // One pending trigger is enough: a sync reads everything new since the last one.
    const fillSyncTrigger = yield* Queue.sliding<void>(1)
    const trackerWake = yield* Queue.sliding<void>(1)
    const block = yield* Ref.make<PlacementBlock | undefined>(undefined)
    return {
      publishOrder: (row: OrderRow, at: number) => PubSub.publish(orders, toUpdate(row, at)).pipe(Effect.asVoid),
      publishFill: (update: FillUpdate) => PubSub.publish(fills, update).pipe(Effect.asVoid),
      /** Subscribes now (nothing published after this call is missed); ends with the scope. */
      subscribeOrders: (): Effect.Effect<Stream.Stream<OrderUpdate>, never, Scope.Scope> =>
        PubSub.subscribe(orders).pipe(Effect.map((dequeue) => Stream.fromQueue(dequeue))),
      subscribeFills: (): Effect.Effect<Stream.Stream<FillUpdate>, never, Scope.Scope> =>
        PubSub.subscribe(fills).pipe(Effect.map((dequeue) => Stream.fromQueue(dequeue))),
      triggerFillSync: Queue.offer(fillSyncTrigger, undefined).pipe(Effect.asVoid),
      awaitFillSyncTrigger: Queue.take(fillSyncTrigger),
      wakeTracker: Queue.offer(trackerWake, undefined).pipe(Effect.asVoid),
      awaitTrackerWake: Queue.take(trackerWake),
      block,
      blocked: Ref.get(block)
    }
  })
}) {}
