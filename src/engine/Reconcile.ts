/**
 * Reconciliation: the journal, the service's open orders and the fills ledger
 * made to agree. A placement whose answer was lost is looked for (open orders,
 * fills and the status of the orders they name, matched on symbol, side, type,
 * quantity, price and time) and adopted, or after a bounded wait proven absent
 * (`not_placed`) for the strategy to decide on. Nothing is ever re-sent blindly.
 */
import { Clock, Effect, Option } from "effect"
import type { Decimal } from "../domain/Decimal.js"
import { LIVE_STATES } from "../domain/OrderState.js"
import { logEvent } from "../log/Logger.js"
import { FillLedger } from "../store/FillLedger.js"
import { OrderJournal } from "../store/OrderJournal.js"
import { waitingOutStorage } from "../store/StorageHealth.js"
import type { OrderRow } from "../store/OrderRow.js"
import type { OpenOrderRow as OpenOrder, OrderStatus } from "../svc/Api.js"
import { logRequestFailed, type SvcError } from "../svc/Errors.js"
import { SvcClient } from "../svc/SvcClient.js"
import { EngineBus } from "./EngineBus.js"
import { FillSync } from "./FillSync.js"
import { Market } from "./Market.js"
import { OrderMoves } from "./OrderMoves.js"
import { Sender } from "./Sender.js"
import type { PlacementTerms } from "../domain/OrderTerms.js"
import { EngineSettings } from "./Settings.js"

/** How long past its looks the startup reconcile may still read the open orders and the balances. */
const AFTER_LOOKS_MS = 1000

/**
 * The background's pause after a look that decided nothing, doubled from the first to the longest.
 * A look reads the open orders and syncs the fills, so it spends weight (7 on svc-venue): at one
 * look per settle delay (50 ms by default), a placement the service never took was looked for over
 * a hundred times before its absence window ended, more than half of a 1,200-weight minute.
 */
const FIRST_LOOK_PAUSE_MS = 250
const LONGEST_LOOK_PAUSE_MS = 2000
const longerPause = (pauseMs: number): number => Math.min(LONGEST_LOOK_PAUSE_MS, Math.max(FIRST_LOOK_PAUSE_MS, 2 * pauseMs))

/** An order on the service that the journal does not know yet. */
export interface Candidate extends PlacementTerms {
  readonly clientOrderId: string
  /** Creation time, or the first fill's time for an order seen only through fills. */
  readonly time: number
}

export interface ReconcileReport {
  readonly adopted: number
  readonly notPlaced: number
  readonly stillUnknown: number
  readonly external: number
  readonly inDoubt: number
}

const sameOrNotShown = (ours: Decimal | null, theirs: Decimal | undefined) =>
  ours === null || theirs === undefined || ours.eq(theirs)

/** What reconciliation compares of a placement: its terms and when it was sent. */
export type Placement = Pick<OrderRow, "symbol" | "side" | "type" | "baseQty" | "quoteOrderQty" | "limitPrice" | "stopPrice" | "sentAt">
/** A placement whose answer was lost. */
export type LostPlacement = Placement & Pick<OrderRow, "orderId" | "lostAt">

/** Whether a candidate is the placement `order`: same terms, created near when it was sent. */
export const matches = (order: Placement, candidate: Candidate, windowMs: number): boolean =>
  candidate.symbol === order.symbol &&
  candidate.side === order.side &&
  candidate.type === order.type &&
  sameOrNotShown(order.baseQty, candidate.baseQty) &&
  sameOrNotShown(order.quoteOrderQty, candidate.quoteOrderQty) &&
  sameOrNotShown(order.limitPrice, candidate.limitPrice) &&
  sameOrNotShown(order.stopPrice, candidate.stopPrice) &&
  (order.sentAt === null || Math.abs(candidate.time - order.sentAt) <= windowMs)

/** When a lost placement's answer was lost (a placement a crash left half-sent: when it was sent). */
const lostAtOf = (order: LostPlacement): number => order.lostAt ?? order.sentAt ?? 0

/** What one look decided for a lost placement; a placement it decided nothing for stays `unknown`. */
export type LostDecision<P extends LostPlacement> =
  | { readonly _tag: "adopt"; readonly order: P; readonly found: Candidate }
  | { readonly _tag: "notPlaced"; readonly order: P }

/**
 * Decides lost placements past their settle delay against the strangers on the service, oldest
 * placement first, each taking the oldest stranger it matches. A stranger that a placement still
 * being sent (`sending`) also matches may be that placement's order, whose answer is on its way:
 * the lost one waits for the next look rather than take it. One with no stranger is proven absent
 * once the absence window has passed since its answer was lost.
 */
export const decideLost = <P extends LostPlacement>(
  settled: ReadonlyArray<P>,
  strangers: ReadonlyArray<Candidate>,
  sending: ReadonlyArray<Placement>,
  now: number,
  settings: { readonly matchWindowMs: number; readonly absenceWindowMs: number }
): Array<LostDecision<P>> => {
  const pool = [...strangers].sort((a, b) => a.time - b.time)
  const decisions: Array<LostDecision<P>> = []
  for (const order of [...settled].sort((a, b) => (a.sentAt ?? 0) - (b.sentAt ?? 0))) {
    const index = pool.findIndex((c) => matches(order, c, settings.matchWindowMs))
    if (index >= 0) {
      if (sending.some((s) => matches(s, pool[index]!, settings.matchWindowMs))) continue
      decisions.push({ _tag: "adopt", order, found: pool.splice(index, 1)[0]! })
    } else if (lostAtOf(order) + settings.absenceWindowMs <= now) {
      decisions.push({ _tag: "notPlaced", order })
    }
  }
  return decisions
}

export class Reconcile extends Effect.Service<Reconcile>()("svcbot/Reconcile", {
  effect: Effect.gen(function* () {
    const client = yield* SvcClient
    const journal = yield* OrderJournal
    const ledger = yield* FillLedger
    const fillSync = yield* FillSync
    const moves = yield* OrderMoves
    const sender = yield* Sender
    const market = yield* Market
    const bus = yield* EngineBus
    const settings = (yield* EngineSettings).reconcile

    /** Orders on the service the journal does not know: open ones, and ones seen only through fills. */
    const candidates = (openOrders: ReadonlyArray<Candidate>) =>
      Effect.gen(function* () {
        const found: Array<Candidate> = []
        for (const open of openOrders) {
          if ((yield* journal.byClientOrderId(open.clientOrderId)) === undefined) found.push(open)
        }
        for (const orphan of yield* ledger.orphanOrders) {
          if (found.some((c) => c.clientOrderId === orphan.clientOrderId)) continue
          const status = yield* Effect.either(client.orderStatus(orphan.clientOrderId))
          if (status._tag === "Left") continue
          found.push(statusCandidate(status.right, orphan.firstTime))
        }
        return found
      })

    /** The terms an order status answer gives, decoded (the answer carries more, unread), dated `time`. */
    const statusCandidate = (s: OrderStatus, time: number): Candidate => ({
      clientOrderId: s.clientOrderId,
      symbol: s.symbol,
      side: s.side,
      type: s.type,
      baseQty: s.baseQty,
      quoteOrderQty: s.quoteOrderQty,
      limitPrice: s.limitPrice,
      stopPrice: s.stopPrice,
      time
    })

    const asCandidate = (o: OpenOrder): Candidate => ({
      clientOrderId: o.clientOrderId,
      symbol: o.symbol,
      side: o.side,
      type: o.type,
      baseQty: o.baseQty,
      quoteOrderQty: o.quoteOrderQty,
      limitPrice: o.limitPrice,
      stopPrice: o.stopPrice,
      time: o.createdAt
    })

    // The settle loop, the periodic pass, a pass asked for and the stop all look at the service's
    // orders. Two looks at once would each decide on the journal as it was when they began: one
    // adopts an order, then the other, whose open orders no longer offer that order as a stranger,
    // proves it absent (a mismatch), or spends another order of the same terms on it and proves
    // absent the placement that order was. One look at a time, each reading the journal when it begins.
    const oneLook = yield* Effect.makeSemaphore(1)

    /** One look for every lost placement past its settle delay. */
    const resolveUnknown: Effect.Effect<{ adopted: number; notPlaced: number; stillUnknown: number }, SvcError> = oneLook.withPermits(1)(Effect.gen(
      function* () {
        const unknown = yield* journal.inStates(["unknown"])
        if (unknown.length === 0) return { adopted: 0, notPlaced: 0, stillUnknown: 0 }
        const now = yield* Clock.currentTimeMillis
        const settled = unknown.filter((o) => lostAtOf(o) + settings.settleDelayMs <= now)
        if (settled.length === 0) return { adopted: 0, notPlaced: 0, stillUnknown: unknown.length }
        const open = (yield* client.openOrders()).map(asCandidate)
        yield* fillSync.syncOnce
        const strangers = yield* candidates(open)
        // Read after the last request: a placement answered meanwhile is no longer sending, and its order no longer a stranger.
        const sending = yield* journal.inStates(["submitting"])
        let adopted = 0
        let notPlaced = 0
        for (const decision of decideLost(settled, strangers, sending, now, settings)) {
          if (decision._tag === "adopt") {
            // An answer recorded while this look was writing may have given the order to its own placement.
            if ((yield* journal.byClientOrderId(decision.found.clientOrderId)) !== undefined) continue
            // A lost placement never had a poll schedule: the tracker polls the adopted order at its next round.
            const row = yield* moves.move(
              decision.order.orderId,
              "accept",
              { clientOrderId: decision.found.clientOrderId, acceptedAt: now },
              "found on the service after the answer was lost"
            )
            if (row !== undefined) {
              adopted += 1
              yield* logEvent("order.reconciled", {
                strategy: row.strategyId,
                tag: row.tag,
                intentId: row.intentId,
                clientOrderId: row.clientOrderId,
                outcome: "adopted"
              })
              // Its fills synced before now went out without a strategy, the order being unknown then: its strategy hears of them now.
              const fills = yield* ledger.forOrder(decision.found.clientOrderId)
              yield* bus.publishFills(fills.map((fill) => ({ strategyId: row.strategyId, tag: row.tag, fill, late: true })))
            }
          } else if ((yield* moves.move(decision.order.orderId, "proveAbsent", {}, "not found on the service within the absence window")) !== undefined) {
            notPlaced += 1
          }
        }
        return { adopted, notPlaced, stillUnknown: unknown.length - adopted - notPlaced }
      }
    ))

    /** Open orders vs journal: adopt strangers as external, poll journal orders the service no longer lists. */
    const compareOpenOrders = oneLook.withPermits(1)(Effect.gen(function* () {
      const open = yield* client.openOrders()
      const now = yield* Clock.currentTimeMillis
      const listed = new Set(open.map((o) => o.clientOrderId))
      let external = 0
      // A stranger that a lost placement could be is left for resolveUnknown: adopting it as external
      // would hide it from that placement, which would then be proven absent while it rests on the book.
      const unknown = yield* journal.inStates(["unknown", "submitting"])
      for (const row of open) {
        if ((yield* journal.byClientOrderId(row.clientOrderId)) !== undefined) continue
        if (unknown.some((lost) => matches(lost, asCandidate(row), settings.matchWindowMs))) continue
        const adopted = yield* journal.adoptExternal({ ...row, now })
        if (adopted !== undefined) {
          external += 1
          yield* logEvent("order.reconciled", { clientOrderId: row.clientOrderId, symbol: row.symbol, outcome: "external" })
        }
      }
      const inDoubt = (yield* journal.inStates([...LIVE_STATES])).filter(
        (row) => row.clientOrderId !== null && !listed.has(row.clientOrderId) && (row.nextPollAt ?? 0) > now
      )
      yield* bus.pollSoon(inDoubt.map((row) => row.orderId))
      return { external, inDoubt: inDoubt.length }
    }))

    const failedLook = (error: SvcError) => logRequestFailed(error, { what: "reconcile" })

    /**
     * Looks for lost placements after each pause: the settle delay while nothing is in doubt or the
     * last look decided something, a longer pause after each look (or failure) that decided nothing.
     */
    const lookForLost = (pauseMs: number): Effect.Effect<never> =>
      Effect.sleep(pauseMs).pipe(
        Effect.zipRight(resolveUnknown),
        Effect.map((looked) => (looked.stillUnknown === 0 || looked.adopted + looked.notPlaced > 0 ? settings.settleDelayMs : longerPause(pauseMs))),
        Effect.catchAll((error) => Effect.as(failedLook(error), longerPause(pauseMs))),
        // What the storage refused is looked for again after the pause.
        (looked) => waitingOutStorage(looked, () => Effect.succeed(longerPause(pauseMs))),
        Effect.flatMap(lookForLost)
      )

    const pass = Effect.gen(function* () {
      const unknown = yield* resolveUnknown
      const compared = yield* compareOpenOrders
      yield* market.refreshBalances
      return { ...unknown, ...compared }
    })

    /**
     * Placements left `submitting` become unknown. Only before this process sent anything: then each
     * was left by a crash after the decision to send, and its request may have reached the service.
     */
    const loseHalfSent = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      for (const row of yield* journal.inStates(["submitting"])) {
        yield* moves.move(row.orderId, "lose", { lostAt: now }, "the process stopped while this placement was being sent")
      }
    })

    return {
      resolveUnknown,
      loseHalfSent,
      /**
       * The startup reconcile, run before any strategy: placements a crash left
       * half-sent become unknown and are resolved (waiting at most the absence
       * window), fills are synced, strangers adopted, and journaled intents that
       * were never sent are sent.
       *
       * Its reads end with that wait (the open orders and balances at most a second after it): a
       * crash loop can leave the key's weight window used up, and a read the rate budget holds
       * back would keep every strategy waiting for the next window (up to a minute). What was not
       * read by then, the background loops read once the budget allows: a placement no look
       * reached stays unknown, never proven absent unseen, and the first risk check reads the
       * balances itself.
       */
      atStart: Effect.gen(function* () {
        yield* logEvent("reconcile.started", { phase: "start" })
        const started = yield* Clock.currentTimeMillis
        const deadline = started + settings.settleDelayMs + settings.absenceWindowMs + 1000
        const until = (end: number) => <A, E, R>(read: Effect.Effect<A, E, R>) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.timeoutOption(read, Math.max(0, end - now)))
        const untilDeadline = until(deadline)
        yield* loseHalfSent
        yield* untilDeadline(fillSync.syncAll)
        yield* market.refreshPairs
        let adopted = 0
        let notPlaced = 0
        for (;;) {
          const looked = yield* untilDeadline(resolveUnknown)
          if (Option.isNone(looked)) break
          adopted += looked.value.adopted
          notPlaced += looked.value.notPlaced
          if (looked.value.stillUnknown === 0 || (yield* Clock.currentTimeMillis) >= deadline) break
          yield* Effect.sleep(Math.min(200, settings.settleDelayMs))
        }
        // The open orders and the balances may still be read for a moment past the looks: a read the
        // budget admits at once takes milliseconds, and one it holds back is left to the background.
        const readsEnd = Math.max(deadline, (yield* Clock.currentTimeMillis) + AFTER_LOOKS_MS)
        const [compared] = yield* Effect.all([until(readsEnd)(compareOpenOrders), until(readsEnd)(market.refreshBalances)], { concurrency: 2 })
        const stillUnknown = (yield* journal.inStates(["unknown"])).length
        const unsent = yield* journal.inStates(["intent"])
        yield* sender.enqueue(unsent)
        const summary = { adopted, notPlaced, stillUnknown, ...Option.getOrElse(compared, () => ({ external: 0, inDoubt: 0 })), sent: unsent.length }
        yield* logEvent("reconcile.completed", { phase: "start", ...summary })
        return summary
      }),
      pass,
      /**
       * Background: lost placements are looked for from a settle delay on (`lookForLost`), the full
       * pass runs every interval. A refused answer was logged by the client, naming the endpoint and the field.
       */
      loop: Effect.all(
        [
          lookForLost(settings.settleDelayMs),
          Effect.forever(
            Effect.sleep(settings.intervalMs).pipe(
              Effect.zipRight(pass),
              Effect.tap((r) =>
                r.adopted + r.notPlaced + r.external + r.inDoubt > 0 ? logEvent("reconcile.completed", { phase: "periodic", ...r }) : Effect.void
              ),
              Effect.catchAll(failedLook),
              (passed) => waitingOutStorage(passed, () => Effect.void)
            )
          )
        ],
        { concurrency: 2, discard: true }
      )
    }
  })
}) {}
