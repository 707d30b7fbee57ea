/**
 * The tracker follows every accepted order until its kind is terminal. Orders
 * are polled fast right after acceptance until they settle, and slowly while they
 * rest; when many are due at once, one open-orders call answers for all of them
 * and only the orders missing from it (their state is in doubt) get a status call
 * each.
 *
 * A poll round gathers what every answer says first. When any order has filled
 * more, the fills are synced once for the round before any of its progress is
 * published, so whoever follows the engine hears the fills first. An order gone
 * from the open orders whose fills add up to its quantity has filled: it needs
 * no status call. Polls never overlap: one that starts reads the journal as the
 * last one left it.
 *
 * The tracker is the only one to poll and to schedule polls. Others have an order
 * polled sooner through the bus's poll requests (`pollSoon`, `pollNow`), served by
 * the next round; what a round saw is moved through `OrderMoves`, and cancels still
 * owed go to `Cancels`.
 */
import { Clock, Effect } from "effect"
import { type Decimal, ZERO } from "../domain/Decimal.js"
import { isOrderEvent, LIVE_STATES, type OrderEvent } from "../domain/OrderState.js"
import { logEvent } from "../log/Logger.js"
import { OrderJournal } from "../store/OrderJournal.js"
import { waitingOutStorage } from "../store/StorageHealth.js"
import type { OrderPatch, OrderRow } from "../store/OrderRow.js"
import { OrderKind } from "../svc/Dialect.js"
import { SvcClient } from "../svc/SvcClient.js"
import { EngineBus } from "./EngineBus.js"
import { Cancels } from "./Cancels.js"
import { FillSync } from "./FillSync.js"
import { OrderMoves } from "./OrderMoves.js"
import { EngineSettings } from "./Settings.js"
import { FillLedger } from "../store/FillLedger.js"
import { ErrorCode } from "../svc/ErrorCodes.js"
import { logRequestFailed } from "../svc/Errors.js"

const KNOWN_KINDS: ReadonlySet<string> = new Set(OrderKind.literals)

export interface ObservedStatus {
  readonly kind: string
  readonly filledBaseQty: Decimal
  readonly code?: string | undefined
  readonly avgPrice?: Decimal | undefined
  readonly createdAt?: number | undefined
  readonly updatedAt?: number | undefined
}

export interface PollReport {
  readonly due: number
  readonly statusCalls: number
  readonly openOrdersCalls: number
}

/** What one poll round learned, applied once every answer is in. */
interface Round {
  /** New poll times only, written for the whole round in one transaction. */
  readonly reschedule: Array<readonly [number, OrderPatch]>
  /** State changes and progress, in the order they were observed. */
  readonly moves: Array<{ readonly row: OrderRow; readonly event: OrderEvent; readonly patch: OrderPatch; readonly progressed: boolean }>
  /** Orders whose cancel is owed again: their kind did not change. */
  readonly cancels: Array<OrderRow>
  /** Kinds svcbot does not know, seen for the first time on an order: logged once each. */
  readonly unknownKinds: Array<{ readonly clientOrderId: string | null; readonly kind: string }>
  /** How many of `moves` were observed before the fills were synced in this round, when they were. */
  syncedFor: number
}

export class Tracker extends Effect.Service<Tracker>()("svcbot/Tracker", {
  effect: Effect.gen(function* () {
    const client = yield* SvcClient
    const journal = yield* OrderJournal
    const moves = yield* OrderMoves
    const cancels = yield* Cancels
    const bus = yield* EngineBus
    const fillSync = yield* FillSync
    const ledger = yield* FillLedger
    const allSettings = yield* EngineSettings
    const settings = allSettings.tracker
    const lock = yield* Effect.makeSemaphore(1)
    /** Orders whose unknown kind was logged, with the kinds; an order leaves once it is no longer live. */
    const unknownKindsLogged = new Map<number, Set<string>>()

    /** Fast until the order settles (or while its cancel is out), slow while it rests or waits for its stop. */
    const nextPoll = (row: OrderRow, kind: string, now: number): number =>
      row.cancelRequested || (kind !== "resting" && (row.acceptedAt === null || now - row.acceptedAt < settings.fastWindowMs))
        ? now + settings.fastPollMs
        : now + settings.restingPollMs

    /** Applies one observation of an order's kind and progress to the round: plain work, once per live order and round. */
    const observe = (row: OrderRow, status: ObservedStatus, round: Round, now: number): void => {
      // An answer ends a run of ORDER_NOT_FOUND probes.
      const schedule: { -readonly [K in keyof OrderPatch]: OrderPatch[K] } = { nextPollAt: nextPoll(row, status.kind, now), polls: row.polls + 1 }
      if (row.notFoundProbes > 0) schedule.notFoundProbes = 0
      if (row.venueCreatedAt === null && status.createdAt !== undefined) schedule.venueCreatedAt = status.createdAt
      if (status.kind === "cancelled" && row.venueCancelledAt === null && status.updatedAt !== undefined) schedule.venueCancelledAt = status.updatedAt
      if (!KNOWN_KINDS.has(status.kind)) {
        const logged = unknownKindsLogged.get(row.orderId) ?? new Set<string>()
        if (!logged.has(status.kind)) {
          unknownKindsLogged.set(row.orderId, logged.add(status.kind))
          round.unknownKinds.push({ clientOrderId: row.clientOrderId, kind: status.kind })
        }
        round.reschedule.push([row.orderId, schedule])
        return
      }
      const progressed = !status.filledBaseQty.eq(row.filledBaseQty)
      if (status.kind === row.state && !progressed) {
        round.reschedule.push([row.orderId, schedule])
        if (row.cancelRequested) round.cancels.push(row)
        return
      }
      if (!isOrderEvent(status.kind)) return
      const patch: OrderPatch = {
        ...schedule,
        kind: status.kind,
        filledBaseQty: status.filledBaseQty,
        ...(status.avgPrice === undefined ? {} : { avgPrice: status.avgPrice }),
        ...(status.code === undefined ? {} : { code: status.code })
      }
      round.moves.push({ row, event: status.kind, patch, progressed })
    }

    /**
     * The service answered ORDER_NOT_FOUND for an order accepted longer ago than settlement
     * takes. After `lostAfterProbes` such answers in a row, and only if its open orders and our
     * fills do not know the order either, it is lost: reported once, and polled no more.
     */
    const probeMissing = (row: OrderRow, now: number, round: Round) =>
      Effect.gen(function* () {
        const probes = row.notFoundProbes + 1
        const again: OrderPatch = { notFoundProbes: probes, nextPollAt: now + settings.restingPollMs }
        if (probes < settings.lostAfterProbes) return round.reschedule.push([row.orderId, again])
        const open = yield* Effect.either(client.openOrders(row.symbol))
        const fills = yield* ledger.forOrder(row.clientOrderId!)
        if (open._tag === "Left" || open.right.some((o) => o.clientOrderId === row.clientOrderId) || fills.length > 0) {
          return round.reschedule.push([row.orderId, again])
        }
        const lost = yield* moves.move(
          row.orderId,
          "vanish",
          { notFoundProbes: probes },
          `ORDER_NOT_FOUND on ${probes} status probes in a row; in neither the open orders nor the fills`
        )
        if (lost !== undefined) {
          yield* logEvent("reconcile.mismatch", {
            clientOrderId: row.clientOrderId,
            strategy: row.strategyId,
            tag: row.tag,
            lost: true,
            problem: "the venue no longer knows this order: marked lost, no longer polled"
          })
        }
      })

    const pollStatus = (row: OrderRow, round: Round) =>
      client.orderStatus(row.clientOrderId!).pipe(
        Effect.flatMap((status) => Effect.map(Clock.currentTimeMillis, (now) => observe(row, status, round, now))),
        Effect.catchAll((error) =>
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            // A refused answer was logged by the client, naming the endpoint, the order (its target) and the field.
            yield* logRequestFailed(error, { what: "order status", clientOrderId: row.clientOrderId })
            const settled = row.acceptedAt !== null && now - row.acceptedAt >= allSettings.reconcile.settleDelayMs
            if (error._tag === "RequestInvalid" && error.code === ErrorCode.orderNotFound && settled) return yield* probeMissing(row, now, round)
            round.reschedule.push([row.orderId, { nextPollAt: now + settings.restingPollMs }])
          })
        )
      )

    /** Syncs the fills; a failure is logged and leaves a sync triggered. True when the ledger is up to date. */
    const syncFills = fillSync.syncOnce.pipe(
      Effect.as(true),
      Effect.catchAll((error) =>
        // A refused answer was logged by the client, naming the endpoint and the field.
        Effect.as(Effect.zipRight(logRequestFailed(error, { what: "fills" }), bus.triggerFillSync), false)
      ),
      // Fills the storage refuses are read again once it takes writes (the fill sync waits for that).
      (sync) => waitingOutStorage(sync, () => Effect.as(bus.triggerFillSync, false))
    )

    /**
     * Orders missing from the open orders that were not being cancelled have most likely filled.
     * The fills are synced once for them all; one whose fills in the ledger add up to its whole
     * quantity has filled (kind fill) and needs no status call. Returns the others.
     */
    const filledByLedger = (missing: ReadonlyArray<OrderRow>, round: Round) =>
      Effect.gen(function* () {
        const candidates = missing.filter((row) => !row.cancelRequested && row.baseQty !== null)
        if (candidates.length === 0 || !(yield* syncFills)) return missing
        const filled = new Set<number>()
        for (const row of candidates) {
          const total = (yield* ledger.forOrder(row.clientOrderId!)).reduce((sum, fill) => sum.plus(fill.baseQty), ZERO)
          if (!total.eq(row.baseQty!)) continue
          filled.add(row.orderId)
          observe(row, { kind: "fill", filledBaseQty: total }, round, yield* Clock.currentTimeMillis)
        }
        round.syncedFor = round.moves.length
        return missing.filter((row) => !filled.has(row.orderId))
      })

    /** Publishes what the round learned: the fills first (one sync for the round), then the orders' progress. */
    const apply = (round: Round) =>
      Effect.gen(function* () {
        for (const { clientOrderId, kind } of round.unknownKinds) yield* logEvent("order.kind-unknown", { clientOrderId, kind })
        // The fills first: an update reporting them must not reach a strategy before they do.
        if (round.moves.slice(round.syncedFor).some((m) => m.progressed)) yield* syncFills
        // The round's changes are one transaction. The fills were synced above, or a sync is triggered: the moves need not ask for one.
        const moved = yield* moves.moveMany(
          round.moves.map(({ row, event, patch }) => ({ orderId: row.orderId, event, patch })),
          { fillsSynced: true }
        )
        for (const row of moved) if (row !== undefined && row.cancelRequested && row.terminalAt === null) round.cancels.push(row)
        yield* Effect.forEach(round.cancels, cancels.send, { discard: true })
        yield* journal.updateMany(round.reschedule, yield* Clock.currentTimeMillis)
      })

    /** Polls `due`, a part of the live orders `live`. */
    const poll = (live: ReadonlyArray<OrderRow>, due: ReadonlyArray<OrderRow>) =>
      Effect.gen(function* () {
        const round: Round = { reschedule: [], moves: [], cancels: [], unknownKinds: [], syncedFor: 0 }
        let inDoubt: ReadonlyArray<OrderRow> = due
        let openOrdersCalls = 0
        // One open-orders answer covers every live order; observing them all lines their polls up for the next batch.
        if (due.length >= settings.batchThreshold || (live.length >= settings.batchThreshold && due.length > 1)) {
          const open = yield* Effect.either(client.openOrders())
          openOrdersCalls = 1
          if (open._tag === "Right") {
            const byId = new Map(open.right.map((o) => [o.clientOrderId, o]))
            const now = yield* Clock.currentTimeMillis
            for (const row of live) {
              const seen = byId.get(row.clientOrderId!)
              if (seen !== undefined) observe(row, { kind: seen.kind, filledBaseQty: seen.filledBaseQty, createdAt: seen.createdAt }, round, now)
            }
            // Missing from the list: finished, or not listed yet; the fills or a status call tell which.
            inDoubt = yield* filledByLedger(
              due.filter((row) => !byId.has(row.clientOrderId!)),
              round
            )
          }
        }
        yield* Effect.forEach(inDoubt, (row) => pollStatus(row, round), { concurrency: settings.concurrency, discard: true })
        yield* apply(round)
        if (unknownKindsLogged.size > 0) {
          const liveIds = new Set((yield* liveOrders).map((row) => row.orderId))
          for (const orderId of unknownKindsLogged.keys()) if (!liveIds.has(orderId)) unknownKindsLogged.delete(orderId)
        }
        return { due: due.length, statusCalls: inDoubt.length, openOrdersCalls }
      })

    const liveOrders = Effect.map(journal.inStates([...LIVE_STATES]), (rows) => rows.filter((o) => o.clientOrderId !== null))
    const nothingDue: PollReport = { due: 0, statusCalls: 0, openOrdersCalls: 0 }

    /** Polls the live orders that are due, or that were asked for since the last round (a request for an order no longer live is dropped). */
    const pollOnce: Effect.Effect<PollReport> = lock.withPermits(1)(
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const requested = yield* bus.takePollRequests
        const live = yield* liveOrders
        const due = live.filter((o) => requested.has(o.orderId) || (o.nextPollAt ?? 0) <= now)
        return due.length === 0 ? nothingDue : yield* poll(live, due)
      })
    )

    /** Polls every live order of one strategy now, whenever its next poll was due; requests for other orders wait for the next round. */
    const pollStrategy = (strategyId: string): Effect.Effect<PollReport> =>
      lock.withPermits(1)(
        Effect.gen(function* () {
          const requested = yield* bus.takePollRequests
          const live = yield* liveOrders
          const mine = live.filter((o) => o.strategyId === strategyId)
          const polled = new Set(mine.map((o) => o.orderId))
          yield* bus.pollSoon([...requested].filter((orderId) => !polled.has(orderId)))
          return mine.length === 0 ? nothingDue : yield* poll(live, mine)
        })
      )

    return {
      pollOnce,
      pollStrategy,
      loop: Effect.gen(function* () {
        for (;;) {
          yield* Effect.race(bus.awaitPollNow, Effect.sleep(settings.tickMs))
          // A round the storage cut short is polled again at the next tick: what it learned stays with the venue.
          yield* waitingOutStorage(pollOnce, () => Effect.void)
        }
      })
    }
  })
}) {}
