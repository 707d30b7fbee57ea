/**
 * FillSync: keeps the fills ledger equal to the service's fills. A pass reads
 * pages newest first, following `nextCursor`, until it meets the stored
 * high-water mark (or the oldest page, on the first pass: the backfill). Each
 * page is stored with the cursor it leads to in one transaction, so a crash
 * resumes the pass where it stopped; fill ids are stored once.
 */
import { Clock, Effect, Either } from "effect"
import { logEvent } from "../log/Logger.js"
import { FillLedger, type LedgerFill, type PageProgress } from "../store/FillLedger.js"
import { OrderJournal } from "../store/OrderJournal.js"
import { waitingOutStorage } from "../store/StorageHealth.js"
import type { OrderRow } from "../store/OrderRow.js"
import { logRequestFailed, type SvcError } from "../svc/Errors.js"
import { SvcClient } from "../svc/SvcClient.js"
import { EngineBus } from "./EngineBus.js"
import { EngineSettings } from "./Settings.js"

export interface SyncReport {
  readonly pages: number
  readonly newFills: number
  /** True when the pass stopped at `maxPagesPerPass` and resumes from the stored cursor next time. */
  readonly interrupted: boolean
}

export class FillSync extends Effect.Service<FillSync>()("svcbot/FillSync", {
  effect: Effect.gen(function* () {
    const client = yield* SvcClient
    const ledger = yield* FillLedger
    const journal = yield* OrderJournal
    const bus = yield* EngineBus
    const settings = (yield* EngineSettings).fillSync
    // One pass at a time: the trigger, the timer and reconciliation may all ask at once.
    const lock = yield* Effect.makeSemaphore(1)

    /**
     * Tells the bus about new fills, and has their orders polled at the tracker's next round
     * rather than at their slow interval (a fill means the order's kind moved). A page holds
     * many fills of few orders: each order is looked up once.
     */
    const announce = (fresh: ReadonlyArray<LedgerFill>) =>
      Effect.gen(function* () {
        if (fresh.length === 0) return
        const orders = new Map<string, OrderRow | undefined>()
        for (const fill of fresh) {
          if (fill.clientOrderId !== null && !orders.has(fill.clientOrderId)) orders.set(fill.clientOrderId, yield* journal.byClientOrderId(fill.clientOrderId))
        }
        const polled: Array<number> = []
        for (const order of orders.values()) if (order !== undefined && order.nextPollAt !== null) polled.push(order.orderId)
        yield* bus.pollSoon(polled)
        yield* bus.publishFills(
          fresh.map((fill) => {
            const order = fill.clientOrderId === null ? undefined : orders.get(fill.clientOrderId)
            return { strategyId: order?.strategyId ?? null, tag: order?.tag ?? null, fill }
          })
        )
      })

    /**
     * Reads pages from `before` until the high-water mark; stores each with its progress. A page
     * is stored (on the ledger's writer thread) while the next is read, one page at a time: the
     * sync state moves page by page in order, and a pass that fails waits for the page in hand.
     */
    const pass = (before: string | undefined, budget: number) =>
      Effect.gen(function* () {
        const state = yield* ledger.syncState
        let cursor = before
        let pages = 0
        let newFills = 0
        let storing: Effect.Effect<ReadonlyArray<LedgerFill>> | undefined
        const stored = Effect.suspend(() => {
          if (storing === undefined) return Effect.void
          const page = storing
          storing = undefined
          return Effect.flatMap(page, (fresh) => {
            newFills += fresh.length
            return announce(fresh)
          })
        })
        while (pages < budget) {
          const read = yield* Effect.either(
            client.fillsPage(cursor === undefined ? { limit: settings.pageLimit } : { limit: settings.pageLimit, before: cursor })
          )
          yield* stored
          if (Either.isLeft(read)) return yield* Effect.fail(read.left)
          const page = read.right
          pages += 1
          const first = page.fills[0]
          const top = cursor === undefined && first !== undefined ? { fillId: first.fillId, time: first.time } : undefined
          const metMark =
            state.highWaterFillId !== null &&
            page.fills.some(
              (f) => f.fillId === state.highWaterFillId || (state.highWaterTime !== null && f.time < state.highWaterTime)
            )
          const done = metMark || page.nextCursor === null
          const progress: PageProgress = done
            ? top === undefined ? { _tag: "Complete" } : { _tag: "Complete", top }
            : top === undefined
              ? { _tag: "Continue", cursor: page.nextCursor! }
              : { _tag: "Continue", cursor: page.nextCursor!, top }
          storing = yield* ledger.startPage(page.fills, progress, yield* Clock.currentTimeMillis)
          if (done) {
            yield* stored
            return { pages, newFills, interrupted: false }
          }
          cursor = page.nextCursor!
        }
        yield* stored
        return { pages, newFills, interrupted: true }
      })

    const syncOnce: Effect.Effect<SyncReport, SvcError> = lock.withPermits(1)(
      Effect.gen(function* () {
        const state = yield* ledger.syncState
        let pages = 0
        let newFills = 0
        if (state.backfillCursor !== null) {
          // Finish the interrupted pass first; the fresh pass below then stops at its top.
          const resumed = yield* pass(state.backfillCursor, settings.maxPagesPerPass)
          pages += resumed.pages
          newFills += resumed.newFills
          if (resumed.interrupted) return { pages, newFills, interrupted: true }
        }
        const fresh = yield* pass(undefined, settings.maxPagesPerPass - pages)
        const report = { pages: pages + fresh.pages, newFills: newFills + fresh.newFills, interrupted: fresh.interrupted }
        if (report.newFills > 0 || report.interrupted) yield* logEvent("fill.synced", { ...report })
        return report
      })
    )

    return {
      syncOnce,
      /** Passes until the ledger holds everything (a long backfill spans several bounded passes). */
      syncAll: Effect.gen(function* () {
        let total = { pages: 0, newFills: 0, interrupted: true }
        for (let i = 0; total.interrupted && i < 1000; i++) {
          const report = yield* syncOnce
          total = { pages: total.pages + report.pages, newFills: total.newFills + report.newFills, interrupted: report.interrupted }
        }
        return total
      }),
      /**
       * Background loop: a pass on every trigger (a fill was detected) and on the timer. A failed
       * pass stored nothing past its last good page, so the next one resumes from its cursor.
       */
      loop: Effect.gen(function* () {
        for (;;) {
          yield* Effect.race(bus.awaitFillSyncTrigger, Effect.sleep(settings.intervalMs))
          // A page the storage refuses is read again later: no pass reads while it fails.
          yield* ledger.storage.awaitWritable
          yield* syncOnce.pipe(
            // A refused answer was logged by the client, naming the endpoint and the field.
            Effect.catchAll((error) => logRequestFailed(error, { what: "fills" })),
            (sync) => waitingOutStorage(sync, () => Effect.void)
          )
        }
      })
    }
  })
}) {}
