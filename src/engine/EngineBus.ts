/**
 * What the engine tells the rest of svcbot: order updates and fills per strategy,
 * and whether placements are currently stopped by the account's status. Also the
 * engine's two inner channels: the fill-sync trigger, and the tracker's poll
 * requests (the one way another part of the engine has orders polled sooner than
 * their schedule).
 *
 * Updates and fills travel on one bounded PubSub, numbered in the order they are
 * published, so a subscriber sees them in that order: an order's fills before the
 * update that reports them (the tracker syncs fills before it publishes progress),
 * which is the order a backtest delivers them in. The number lets a subscriber
 * tell when it has handled everything published up to a moment (`published`).
 */
import { Effect, Option, PubSub, Queue, Ref, type Scope, Stream } from "effect"
import type { Decimal } from "../domain/Decimal.js"
import type { OrderState } from "../domain/OrderState.js"
import type { LedgerFill } from "../store/FillLedger.js"
import type { OrderRow } from "../store/OrderRow.js"

export interface OrderUpdate {
  readonly strategyId: string | null
  readonly tag: string | null
  readonly intentId: string | null
  readonly orderId: number
  readonly clientOrderId: string | null
  readonly symbol: string
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
  /**
   * Published again, now with its strategy: the fill was synced while its order was a lost
   * placement, which reconciliation adopted afterwards, so it went out first without one.
   */
  readonly late?: true
}

/** One thing the engine published, with its place in the publishing order (from 1). */
export type EngineEvent =
  | { readonly _tag: "OrderUpdate"; readonly seq: number; readonly update: OrderUpdate }
  | { readonly _tag: "Fill"; readonly seq: number; readonly update: FillUpdate }

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
  symbol: row.symbol,
  state: row.state,
  kind: row.kindsSeen[row.kindsSeen.length - 1] ?? null,
  code: row.code,
  filledBaseQty: row.filledBaseQty,
  at
})

export class EngineBus extends Effect.Service<EngineBus>()("svcbot/EngineBus", {
  scoped: Effect.gen(function* () {
    const events = yield* Effect.acquireRelease(PubSub.bounded<EngineEvent>(BUS_CAPACITY), PubSub.shutdown)
    let published = 0
    // Each event's number is taken as its publish runs, so numbers arrive in order.
    const orderUpdate = (row: OrderRow, at: number): EngineEvent => ({ _tag: "OrderUpdate", seq: ++published, update: toUpdate(row, at) })
    // One pending trigger is enough: a sync reads everything new since the last one.
    const fillSyncTrigger = yield* Queue.sliding<void>(1)
    /** Orders to poll at the tracker's next round, whatever their schedule says. */
    let pollRequested = new Set<number>()
    const pollWake = yield* Queue.sliding<void>(1)
    const requestPolls = (orderIds: Iterable<number>) =>
      Effect.sync(() => {
        for (const orderId of orderIds) pollRequested.add(orderId)
      })
    const block = yield* Ref.make<PlacementBlock | undefined>(undefined)
    /** Subscribes now (nothing published after this call is missed); ends with the scope. */
    const subscribe = (): Effect.Effect<Stream.Stream<EngineEvent>, never, Scope.Scope> =>
      PubSub.subscribe(events).pipe(Effect.map((dequeue) => Stream.fromQueue(dequeue)))
    return {
      /**
       * The changes of a batch (a submit, a marked group, the answers of a few milliseconds) in one
       * publish: a subscriber wakes once and takes them as one chunk instead of one by one.
       */
      publishOrders: (rows: ReadonlyArray<OrderRow>, at: number) =>
        rows.length === 0 ? Effect.void : Effect.suspend(() => PubSub.publishAll(events, rows.map((row) => orderUpdate(row, at)))).pipe(Effect.asVoid),
      /** The fills of a page (or of an order adopted late) in one publish, as `publishOrders`. */
      publishFills: (updates: ReadonlyArray<FillUpdate>) =>
        updates.length === 0
          ? Effect.void
          : Effect.suspend(() => PubSub.publishAll(events, updates.map((update): EngineEvent => ({ _tag: "Fill", seq: ++published, update })))).pipe(Effect.asVoid),
      subscribe,
      /** How many events have been published so far: a subscriber that has handled this many is caught up. */
      published: Effect.sync(() => published),
      subscribeOrders: (): Effect.Effect<Stream.Stream<OrderUpdate>, never, Scope.Scope> =>
        Effect.map(subscribe(), Stream.filterMap((event) => (event._tag === "OrderUpdate" ? Option.some(event.update) : Option.none()))),
      subscribeFills: (): Effect.Effect<Stream.Stream<FillUpdate>, never, Scope.Scope> =>
        Effect.map(subscribe(), Stream.filterMap((event) => (event._tag === "Fill" ? Option.some(event.update) : Option.none()))),
      triggerFillSync: Queue.offer(fillSyncTrigger, undefined).pipe(Effect.asVoid),
      awaitFillSyncTrigger: Queue.take(fillSyncTrigger),
      /**
       * Has these orders polled at the tracker's next round (within its tick): fills came for
       * them, or the open orders no longer list them. A request for an order that is no longer
       * live by then is dropped.
       */
      pollSoon: requestPolls,
      /** Has these orders polled at once: the tracker is woken (a cancel was answered). */
      pollNow: (orderIds: Iterable<number>) => Effect.zipRight(requestPolls(orderIds), Queue.offer(pollWake, undefined)),
      /** The tracker's: takes the orders requested since its last round. */
      takePollRequests: Effect.sync((): ReadonlySet<number> => {
        const taken = pollRequested
        pollRequested = new Set()
        return taken
      }),
      /** The tracker's: waits for a request to poll at once. */
      awaitPollNow: Queue.take(pollWake),
      block,
      blocked: Ref.get(block)
    }
  })
}) {}
