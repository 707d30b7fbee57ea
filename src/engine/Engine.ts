/**
 * The engine as the daemon sees it: submit a strategy's intents, follow its
 * orders and fills, read its view and portfolio. Building the layer runs the
 * startup reconcile before returning, so no strategy can act on a journal that
 * disagrees with the service; the tracker, fill sync and periodic reconcile run
 * as scoped fibers, and closing the scope shuts down gracefully.
 */
import { Clock, Effect, Fiber, FiberSet, Layer, Option, type Scope, type Stream } from "effect"
import { existsSync } from "node:fs"
import type { Decimal } from "../domain/Decimal.js"
import type { Intent } from "../domain/Intent.js"
import { LIVE_STATES } from "../domain/OrderState.js"
import { logEvent } from "../log/Logger.js"
import { Database } from "../store/Database.js"
import { FillLedger } from "../store/FillLedger.js"
import { OrderJournal } from "../store/OrderJournal.js"
import type { OrderRow } from "../store/OrderRow.js"
import { waitingOutStorage } from "../store/StorageHealth.js"
import { AccountBlock, STOPPING } from "./AccountBlock.js"
import { Books } from "./Books.js"
import { Cancels } from "./Cancels.js"
import { EngineBus, type EngineEvent, type FillUpdate, type OrderUpdate, type PlacementBlock } from "./EngineBus.js"
import { Execution, type SubmitResult } from "./Execution.js"
import { FillSync } from "./FillSync.js"
import { Market } from "./Market.js"
import { OrderMoves } from "./OrderMoves.js"
import { ownBalances, type PortfolioSnapshot } from "./Portfolio.js"
import { Reconcile } from "./Reconcile.js"
import type { ListedPair } from "./Risk.js"
import { Sender } from "./Sender.js"
import { supervised } from "./Supervised.js"
import { type EngineOptions, EngineSettings, resolveSettings } from "./Settings.js"
import { Tracker } from "./Tracker.js"
import { isRefusedAnswer, logRequestFailed } from "../svc/Errors.js"
import { SvcClient } from "../svc/SvcClient.js"
import type { Balance } from "../strategy/Strategy.js"
import { waitOutTransients } from "../svc/Transients.js"

/**
 * What the engine knows for one strategy instance, from which the host builds the strategy's
 * `StrategyView`: its balances (its own book when it has an allocation, else the account's),
 * its own unfinished orders by tag, prices and the listed pairs.
 */
export interface InstanceView {
  readonly balances: ReadonlyMap<string, Balance>
  readonly openOrders: ReadonlyMap<string, OrderRow>
  readonly lastPrices: ReadonlyMap<string, Decimal>
  readonly pairs: ReadonlyMap<string, ListedPair>
  readonly placementsBlocked: PlacementBlock | undefined
}

/** What the graceful stop did and what it left for the next start (`left` true when anything was). */
export interface StopReport {
  /** Placements journaled but not yet sent when the stop began: ended `refused` (STOPPING), never sent. */
  readonly withdrawn: number
  /** Placements still `intent`: none, unless their withdrawal could not be written. */
  readonly unsentIntents: number
  /** Placements that may have reached the venue without their answer being heard (`submitting`, `unknown`). */
  readonly placementsInDoubt: number
  /** Strategy orders still live: cancels not confirmed with cancelOnStop, left resting by choice without. */
  readonly ordersLeftOpen: number
  /** The final fill sync read up to the newest fill. */
  readonly fillsSynced: boolean
  /** Orders whose last changes the storage refused (kept in memory only): the next start reconciles them with the venue. */
  readonly notRecorded: number
  /** Why the database took no writes at the end of the stop, if it did not. */
  readonly storage?: string
  readonly left: boolean
  readonly tookMs: number
}


/**
 * Runs `work` from a finalizer so that its own timeouts work. A finalizer runs
 * uninterruptibly, where no timeout could cut a phase short, and often on a fiber
 * that is being interrupted, where an interruptible region would end at once: so
 * the work runs on a fiber of its own, interruptibly, and the finalizer waits for it.
 */
export const finalizerWork = <A, E, R>(work: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.forkDaemon(Effect.interruptible(work)), Fiber.join)

/**
 * The graceful stop, apart from the engine's start: it needs the journal and the services that
 * send, poll and sync, not a startup reconcile, so it also stops an engine that never ran
 * (`stopBeforeStart`). Building it registers the stop to run when its scope closes.
 */
export class EngineStop extends Effect.Service<EngineStop>()("svcbot/EngineStop", {
  scoped: Effect.gen(function* () {
    const journal = yield* OrderJournal
    const execution = yield* Execution
    const sender = yield* Sender
    const cancels = yield* Cancels
    const tracker = yield* Tracker
    const reconcile = yield* Reconcile
    const fillSync = yield* FillSync
    const client = yield* SvcClient
    const settings = yield* EngineSettings
    const { storage } = yield* Database

    const strategyOrders = Effect.map(journal.unfinished, (rows) => rows.filter((o) => o.strategyId !== null))
    /** A step of the stop the storage cut short: what it would have written stays in memory or with the venue. */
    const despiteStorage = <A, E, R>(step: Effect.Effect<A, E, R>, otherwise: A) => waitingOutStorage(step, () => Effect.succeed(otherwise))

    /** The tracker, fill sync and reconcile loops: the stop ends them and does what it still needs of their work itself. */
    const background = yield* FiberSet.make()

    /**
     * The graceful stop, within `stopWithinMs` whatever the venue does. Placements not sent yet
     * are withdrawn and the background loops end, so that the stop's own requests have the rate
     * budget to themselves, the reserve that fill syncs leave for trading work included. Lost
     * placements are looked for until 40 % of it has passed (so that cancel-on-stop reaches one
     * that rests on the book), cancels are sent (never held back by the budget) and followed
     * until 80 %, and the final fill sync has the rest. What could not
     * be done in time is said in one line, `engine.stop-incomplete`, and left to the next start.
     * On a storage that refuses writes the stop works from memory: cancels go out for the orders
     * the engine knows, and what could not be written is counted (`notRecorded`).
     */
    const stop = Effect.gen(function* () {
      const started = yield* Clock.currentTimeMillis
      const by = (share: number) => started + Math.floor(settings.stopWithinMs * share)
      const until = (deadline: number) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.timeoutOption(effect, Math.max(0, deadline - now)))
      const before = (deadline: number) => Effect.map(Clock.currentTimeMillis, (now) => now < deadline)
      yield* logEvent("app.stopping", { component: "engine", cancelOnStop: settings.cancelOnStop, stopWithinMs: settings.stopWithinMs })
      yield* journal.endWaits
      yield* execution.stopPlacements("the engine is stopping")
      yield* FiberSet.clear(background)
      // No placement, poll or reconcile but the stop's own comes now: a fill sync held back for them would be held for no one.
      yield* client.releaseReserve
      yield* execution.awaitSends.pipe(until(by(0.4)))
      // A placement whose answer was lost may rest on the book: find it (within the absence window)
      // so that the journal knows it and cancel-on-stop reaches it.
      const lostUntil = Math.min(by(0.4), started + settings.reconcile.settleDelayMs + settings.reconcile.absenceWindowMs)
      while ((yield* journal.inStates(["unknown"])).length > 0 && (yield* before(lostUntil))) {
        yield* reconcile.resolveUnknown.pipe(
          Effect.catchAll((error) => logRequestFailed(error, { what: "reconcile" })),
          (looked) => despiteStorage(looked, undefined),
          until(lostUntil)
        )
        yield* Effect.sleep(Math.min(200, settings.reconcile.settleDelayMs))
      }
      if (settings.cancelOnStop) {
        const cancelsBy = by(0.8)
        // Every order is marked before any cancel goes out, so a stop cut short still leaves them marked
        // for the next start. Market orders are not marked: they are waited for below, filled or rejected whole.
        const marked = (yield* Effect.forEach(yield* strategyOrders, cancels.mark)).filter((row) => row !== undefined)
        yield* Effect.forEach(marked, cancels.send, { concurrency: 4, discard: true }).pipe(until(cancelsBy))
        while ((yield* strategyOrders).some((o) => o.clientOrderId !== null) && (yield* before(cancelsBy))) {
          yield* despiteStorage(tracker.pollOnce, undefined).pipe(until(cancelsBy))
          yield* Effect.sleep(100)
        }
      }
      const fillsSynced = yield* fillSync.syncOnce.pipe(
        Effect.map((report) => !report.interrupted),
        // A refused answer was logged by the client, naming the endpoint and the field.
        Effect.catchAll((error) => Effect.as(logRequestFailed(error, { what: "fills" }), false)),
        (synced) => despiteStorage(synced, false),
        until(by(1)),
        Effect.map(Option.getOrElse(() => false))
      )
      yield* sender.endSends
      const report = yield* leftByStop(yield* sender.withdrawn, fillsSynced, started)
      yield* logEvent(report.left ? "engine.stop-incomplete" : "engine.stopped", { ...report, cancelOnStop: settings.cancelOnStop })
      return report
    })

    /** The journal's account of what the stop leaves for the next start's reconcile. */
    const leftByStop = (withdrawn: number, fillsSynced: boolean, started: number): Effect.Effect<StopReport> =>
      Effect.gen(function* () {
        const unsentIntents = (yield* journal.inStates(["intent"])).length
        const placementsInDoubt = (yield* journal.inStates(["submitting", "unknown"])).length
        const ordersLeftOpen = (yield* strategyOrders).filter((o) => LIVE_STATES.has(o.state)).length
        const notRecorded = yield* journal.notRecorded
        const left = unsentIntents > 0 || placementsInDoubt > 0 || !fillsSynced || (settings.cancelOnStop && ordersLeftOpen > 0) || notRecorded > 0
        const tookMs = (yield* Clock.currentTimeMillis) - started
        return { withdrawn, unsentIntents, placementsInDoubt, ordersLeftOpen, fillsSynced, notRecorded, ...(storage.reason === undefined ? {} : { storage: storage.reason }), left, tookMs }
      })

    // Once: the daemon may run it earlier, right after its strategies stopped.
    const stopOnce = yield* Effect.cached(finalizerWork(stop))
    yield* Effect.addFinalizer(() => stopOnce)
    return { stop: stopOnce, background }
  })
}) {}

export class Engine extends Effect.Service<Engine>()("svcbot/Engine", {
  scoped: Effect.gen(function* () {
    const journal = yield* OrderJournal
    const books = yield* Books
    const bus = yield* EngineBus
    const execution = yield* Execution
    const tracker = yield* Tracker
    const reconcile = yield* Reconcile
    const fillSync = yield* FillSync
    const market = yield* Market
    const settings = yield* EngineSettings
    // Built before the startup reconcile, its stop registered: a stop that comes while the reconcile
    // runs (or waits on the budget) still cancels what the journal knows and syncs the fills.
    const { stop, background } = yield* EngineStop

    const strategyOrders = (strategyId: string) =>
      Effect.map(journal.unfinished, (rows) => rows.filter((o) => o.strategyId === strategyId))

    // A venue that is down or refusing at start is waited out: the stop above still works meanwhile.
    // A refused answer (malformed or too large) is the exchange's to put right, as a transient is: the
    // start waits for a readable one, storing none of it, rather than exit into a restart loop.
    const startup = yield* reconcile.atStart.pipe(waitOutTransients("startup reconcile", (error) => error.message, isRefusedAnswer))
    yield* FiberSet.run(background, supervised("tracker", tracker.loop))
    yield* FiberSet.run(background, supervised("fill sync", fillSync.loop))
    yield* FiberSet.run(background, supervised("reconcile", reconcile.loop))

    return {
      /** The startup reconcile's counts. */
      startup,
      /** The graceful stop (cancel on stop, final fill sync), once, and what it left; closing the engine's scope runs it too. */
      stop,
      /** Journals and sends intents in order; each is Approved (journaled, being sent) or Refused with its reason. */
      submit: (strategyId: string, intents: ReadonlyArray<Intent>, outboxIds?: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<SubmitResult>> =>
        execution.submit(strategyId, intents, outboxIds),
      /** Order updates and fills of every strategy, in the order they were published, from the moment of subscription. */
      updates: (): Effect.Effect<Stream.Stream<EngineEvent>, never, Scope.Scope> => bus.subscribe(),
      /** How many updates and fills have been published so far (the `seq` of the last one). */
      published: bus.published,
      /**
       * Polls the strategy's live orders now; fills are synced before any progress is
       * published. Once this returns, everything the venue had for those orders is
       * published, and a subscriber that reaches `published` has handled it.
       */
      catchUp: (strategyId: string): Effect.Effect<number> => Effect.zipRight(tracker.pollStrategy(strategyId), bus.published),
      /** Order updates of every strategy from the moment of subscription; filter on `strategyId`. */
      orderUpdates: (): Effect.Effect<Stream.Stream<OrderUpdate>, never, Scope.Scope> => bus.subscribeOrders(),
      /** New fills as they are synced, with the strategy and tag of their order when the journal knows it. */
      fillUpdates: (): Effect.Effect<Stream.Stream<FillUpdate>, never, Scope.Scope> => bus.subscribeFills(),
      view: (strategyId: string): Effect.Effect<InstanceView> =>
        Effect.gen(function* () {
          const orders = yield* strategyOrders(strategyId)
          const pairs = yield* market.pairs.pipe(Effect.orElseSucceed(() => new Map<string, ListedPair>()))
          const allocation = settings.allocations.get(strategyId)
          // An instance with an allocation trades its own book, as its risk checks and its paper replay count it.
          const balances =
            allocation === undefined
              ? (yield* market.balances).byAsset
              : ownBalances((yield* books.figures(strategyId, pairs, yield* Clock.currentTimeMillis)).balances(allocation), orders)
          return {
            balances,
            openOrders: new Map(orders.filter((o) => o.tag !== null).map((o) => [o.tag!, o])),
            lastPrices: yield* market.knownPrices,
            pairs,
            placementsBlocked: yield* bus.blocked
          }
        }),
      /** Positions, average cost, realized and unrealized PnL and fees of a strategy's fills; its own balances when it has an allocation. */
      portfolio: (strategyId: string): Effect.Effect<PortfolioSnapshot & { readonly balances?: ReadonlyMap<string, Decimal> }> =>
        Effect.gen(function* () {
          const pairs = yield* market.pairs.pipe(Effect.orElseSucceed(() => new Map<string, ListedPair>()))
          // Only the fills stored since the last read are read: the book keeps the rest.
          const figures = yield* books.figures(strategyId, pairs, yield* Clock.currentTimeMillis)
          for (const symbol of figures.symbols) yield* market.lastPrice(symbol)
          const snapshot = figures.portfolio(yield* market.knownPrices)
          const allocation = settings.allocations.get(strategyId)
          return allocation === undefined ? snapshot : { ...snapshot, balances: figures.balances(allocation) }
        }),
      /** The order the strategy last tagged `tag`, finished or not. */
      orderByTag: (strategyId: string, tag: string) => journal.latestByTag(strategyId, tag),
      /** True when the strategy ever journaled an intent with this tag. */
      tagJournaled: (strategyId: string, tag: string) => journal.tagJournaled(strategyId, tag),
      /**
       * Why the engine cannot trade as it should right now: placements blocked by the account,
       * kill switches on today, lost orders not yet acknowledged. Each reason clears when its
       * cause does.
       */
      health: Effect.gen(function* () {
        const reasons: Array<string> = []
        const block = yield* bus.blocked
        if (block !== undefined && block.code !== STOPPING) reasons.push(`placements blocked (${block.code}): ${block.fix}`)
        for (const strategyId of yield* execution.killSwitchesToday) {
          reasons.push(`${strategyId}: daily loss limit reached, new placements stopped until 00:00 UTC`)
        }
        const lost = yield* journal.lostUnacknowledged
        if (lost.length > 0) {
          const named = lost.slice(0, 5).map((o) => o.clientOrderId).join(", ")
          reasons.push(
            `${lost.length} order${lost.length === 1 ? "" : "s"} lost: the venue no longer knows ${named}${lost.length > 5 ? ", …" : ""}; ` +
              "check them on the website, then acknowledge with `svcbot ack-lost`"
          )
        }
        return reasons
      }),
      /** Runs a full reconcile pass now (the periodic one runs on its own). */
      reconcileNow: reconcile.pass,
      syncFills: fillSync.syncAll
    }
  })
}) {}

/** The store, the services that send, poll and sync, and the stop over them: everything but the engine's start. */
const stoppableLayer = (options: EngineOptions) => {
  const settings = Layer.succeed(EngineSettings, resolveSettings(options))
  const store = Books.Default.pipe(
    Layer.provideMerge(Layer.mergeAll(OrderJournal.Default, FillLedger.Default)),
    Layer.provideMerge(Database.Default({ path: options.dbPath }))
  )
  const base = Layer.mergeAll(settings, store, EngineBus.Default)
  const reads = Layer.mergeAll(Market.Default, FillSync.Default).pipe(Layer.provideMerge(base))
  const moves = Layer.mergeAll(OrderMoves.Default, AccountBlock.Default).pipe(Layer.provideMerge(Cancels.Default), Layer.provideMerge(reads))
  const execution = Execution.Default.pipe(Layer.provideMerge(Sender.Default), Layer.provideMerge(moves))
  const loops = Layer.mergeAll(Tracker.Default, Reconcile.Default).pipe(Layer.provideMerge(execution))
  return EngineStop.Default.pipe(Layer.provideMerge(loops))
}

/**
 * The engine and its store, given a `SvcClient`. Building it opens and migrates
 * the database and runs the startup reconcile; closing it stops placements,
 * cancels open orders when `cancelOnStop`, syncs fills and closes the database.
 */
export const layer = (options: EngineOptions) => Engine.Default.pipe(Layer.provideMerge(stoppableLayer(options)))

/**
 * The stop of an engine that never ran, for a stop during the daemon's start-up checks: the
 * journal a previous run left, if there is one, is opened and stopped as a running engine's
 * would be, without a startup reconcile first. Placements a crash left half-sent are lost
 * ones for the stop to look for, never-sent intents are withdrawn, open orders cancelled
 * (`cancelOnStop`) and fills synced within `stopWithinMs`, and the same one line says what
 * was left. Undefined when there is no journal, so nothing to stop. Meant for an interrupt
 * handler: it runs as `finalizerWork`, so that the fibers its services fork can be ended.
 */
export const stopBeforeStart = (options: EngineOptions): Effect.Effect<StopReport | undefined, never, SvcClient> =>
  finalizerWork(
    Effect.suspend(() => {
      // Opening would create an empty journal: no run placed anything through it.
      if (!existsSync(options.dbPath)) return Effect.succeed(undefined)
      return Effect.gen(function* () {
        yield* (yield* Reconcile).loseHalfSent
        return yield* (yield* EngineStop).stop
      }).pipe(
        Effect.provide(stoppableLayer(options)),
        // A journal this svcbot cannot open (from a newer one) can neither be stopped nor counted.
        Effect.catchAll((error) => Effect.as(logEvent("engine.stop-incomplete", { journal: options.dbPath, error: error.message, left: true }), undefined))
      )
    })
  )
