/**
 * The strategy host: runs each configured instance in its own fiber, feeds it
 * market data, timers, order updates and fills one event at a time, stores its
 * state together with the intents its handlers produced (the strategy outbox),
 * and hands those intents to the engine. The events waiting in an instance's
 * queue are taken in one go and share one commit: their handlers run one after
 * the other, and the state they leave is saved once, at the end, or as soon as a
 * handler emits intents (saved with them, then submitted, so that the next event
 * sees those orders in its view). A handler that throws pauses its own instance only.
 *
 * Each final order update and each fill is handed to an instance once, and what it was handed
 * is recorded in the transaction that saves the state it left. A restored instance is first
 * handed what it was owed and never heard: what became of its orders while it did not run.
 */
import { schedule as scheduleCron } from "node-cron"
import { Effect, Schedule, type Scope } from "effect"
import { type BackpressureConfig, defaultBackpressure, DEFAULT_MAX_INTENTS_PER_MINUTE } from "../config/Config.js"
import { type Admission, instancePressure } from "./Backpressure.js"
import type { Decimal } from "../domain/Decimal.js"
import type { Intent } from "../domain/Intent.js"
import { logEvent } from "../log/Logger.js"
import { FillLedger } from "../store/FillLedger.js"
import { OrderJournal } from "../store/OrderJournal.js"
import { waitingOutStorage } from "../store/StorageHealth.js"
import { ENTRIES_STOPPED, entryGate } from "./Entries.js"
import { GivenPrices } from "./GivenPrices.js"
import { type HostEvent, Inbox, isMomentary, missedEvents, type OutcomeEvent } from "./Inbox.js"
import { StrategyStateStore } from "./StateStore.js"
import {
  deserializeState,
  isFinalUpdate,
  SCHEDULE_TIMER,
  serializeState,
  type Balance,
  type HandlerResult,
  type OpenOrder,
  type OrderUpdateEvent,
  type PairRules,
  type StrategyDefinition,
  type StrategyView
} from "./Strategy.js"

/** What the host needs from the engine. */
export interface TradingPort {
  /**
   * Journals, risk-checks and submits a strategy's intents, taking each out of the
   * strategy outbox as it is journaled; answers the refusals as order updates.
   */
  readonly submit: (strategyId: string, intents: ReadonlyArray<Intent>, outboxIds: ReadonlyArray<number>) => Effect.Effect<ReadonlyArray<OrderUpdateEvent>>
  /** The account as one strategy may see it. */
  readonly accountView: (strategyId: string) => Effect.Effect<AccountView>
  /** The strategy's own position in a pair, from its fills; without it an instance counts as flat. */
  readonly position?: (strategyId: string, symbol: string) => Effect.Effect<Decimal>
}

export interface AccountView {
  readonly balances: ReadonlyMap<string, Balance>
  readonly openOrders: ReadonlyMap<string, OpenOrder>
  readonly pairs: ReadonlyMap<string, PairRules>
}

export interface InstanceSpec {
  readonly id: string
  readonly definition: StrategyDefinition
  readonly params: unknown
  readonly symbol: string
  readonly schedule?: string | undefined
  /** Placements beyond this many in a minute are refused before any risk check (default 120). */
  readonly maxIntentsPerMinute?: number | undefined
  /** Backoff, then pause, on refusals of one kind in a row. */
  readonly backpressure?: BackpressureConfig | undefined
}

export interface RunningInstance {
  readonly id: string
  readonly symbol: string
  readonly definition: StrategyDefinition
  /**
   * Queues events in order: a poll's new candles in one step, an update or a fill alone. Order
   * updates and fills are never dropped, so this waits whenever the queue is full.
   */
  readonly deliver: (events: ReadonlyArray<HostEvent>) => Effect.Effect<void>
  /** Why the instance is paused, if it is. */
  readonly pausedReason: Effect.Effect<string | undefined>
  /** Open time of the newest candle the instance has been given. */
  readonly lastCandleOpen: Effect.Effect<number | undefined>
  /** An operator's pause: the instance hears no more events and emits nothing until resumed. */
  readonly pause: (reason: string) => Effect.Effect<"paused" | "already paused">
  /** Lifts a pause and stopped entries, whoever set them. */
  readonly resume: Effect.Effect<"resumed" | "not paused">
  /** From now on placements that open or add to a position are refused; exits and cancels still go out. */
  readonly stopEntries: Effect.Effect<"entries stopped" | "entries already stopped">
  readonly entriesStopped: Effect.Effect<boolean>
}

/** How often a paused instance looks whether `svcbot resume` cleared its stored pause. */
const RESUME_POLL_MS = 1000

/** Codes of the host's own refusals: answers to intents it held back, which are not the venue's or the risk check's. */
const HELD_CODES: ReadonlySet<string> = new Set<Admission | typeof ENTRIES_STOPPED>(["backoff", "throttled", ENTRIES_STOPPED])

const dispatch = (definition: StrategyDefinition, state: unknown, event: HostEvent, view: StrategyView): HandlerResult<unknown> | undefined => {
  switch (event._tag) {
    case "Candle":
      return definition.onCandle?.(state, event.event, view)
    case "Ticker":
      return definition.onTicker?.(state, event.event, view)
    case "Timer":
      return definition.onTimer?.(state, event.event, view)
    case "OrderUpdate":
      return definition.onOrderUpdate?.(state, event.event, view)
    case "Fill":
      return definition.onFill?.(state, event.event, view)
  }
}

/**
 * Starts one strategy instance in the current scope: restores or initialises its
 * state, starts its cron timer, and processes its events in a fiber of its own.
 */
export const runInstance = (
  spec: InstanceSpec,
  port: TradingPort,
  lastPrices: () => ReadonlyMap<string, Decimal>,
  now: () => number
): Effect.Effect<RunningInstance, never, Scope.Scope | StrategyStateStore | OrderJournal | FillLedger> =>
  Effect.gen(function* () {
    const store = yield* StrategyStateStore
    const journal = yield* OrderJournal
    const ledger = yield* FillLedger
    const { definition } = spec
    const { storage } = store
    // A paused instance, or one whose database refuses writes, is given no market data and no timers.
    const inbox = new Inbox(() => pausedFor !== undefined || storage.fault !== undefined)
    // Whoever waits for room is let go; what comes after the stop is not handled.
    yield* Effect.addFinalizer(() => Effect.sync(() => inbox.stop()))
    const push = (event: HostEvent): void => inbox.push(event)
    /** Why the instance is paused; read by the event loop, `pausedReason` and the resume poll, all on one thread. */
    let pausedFor: string | undefined
    const scope = yield* Effect.scope
    const pressure = instancePressure({
      strategyId: spec.id,
      config: spec.backpressure ?? defaultBackpressure,
      maxIntentsPerMinute: spec.maxIntentsPerMinute ?? DEFAULT_MAX_INTENTS_PER_MINUTE,
      heldCodes: HELD_CODES,
      now,
      answer: (event) => push({ _tag: "OrderUpdate", event }),
      scope
    })

    /**
     * The instance's own pair at the price it was last given (a ticker, or a candle's close), as
     * a backtest shows it: never a price polled after the event being handled, which a replay of
     * the run could not know. Other pairs as last polled.
     */
    const prices = new GivenPrices(spec.symbol, undefined, lastPrices)
    const viewOf = (account: AccountView, nowMs: number): StrategyView => ({
      params: spec.params,
      symbol: spec.symbol,
      now: nowMs,
      balances: account.balances,
      openOrders: account.openOrders,
      lastPrices: prices,
      pairs: account.pairs
    })

    const stored = yield* store.load(spec.id)
    // A start resumes the instance: a pause holds until `svcbot resume` or a restart.
    yield* store.resume(spec.id, now())
    let lastCandle: number | undefined = stored?.lastCandleOpen ?? undefined
    let state: unknown
    if (stored !== undefined && stored.strategy === definition.name) {
      const restored = deserializeState(definition, stored.state)
      if (restored._tag === "Right") {
        state = restored.right
      } else {
        yield* logEvent("strategy.error", { strategy: spec.id, phase: "restore", error: restored.left.message, action: "started from init" })
      }
    }
    const restoredState = state !== undefined
    if (state === undefined) {
      const account = yield* port.accountView(spec.id)
      try {
        state = definition.init(spec.params, viewOf(account, now()))
      } catch (error) {
        const reason = `init threw: ${error instanceof Error ? error.message : String(error)}`
        pausedFor = reason
        yield* logEvent("strategy.error", { strategy: spec.id, phase: "init", error: reason })
      }
    }

    /** Intents saved in the outbox that the engine could not journal, the storage refusing it: submitted again once it takes writes. */
    const unsubmitted: Array<{ readonly intents: ReadonlyArray<Intent>; readonly outboxIds: ReadonlyArray<number> }> = []
    /** Hands intents to the engine; its refusals come back to this instance as order updates. False when the storage refused their journal. */
    const submit = (intents: ReadonlyArray<Intent>, outboxIds: ReadonlyArray<number>): Effect.Effect<boolean> =>
      waitingOutStorage(
        Effect.map(port.submit(spec.id, intents, outboxIds), (refusals) => {
          for (const event of refusals) push({ _tag: "OrderUpdate", event })
          return true
        }),
        () => Effect.sync(() => unsubmitted.push({ intents, outboxIds }) === 0)
      )

    // Intents saved with the state but not journaled before the process stopped: they
    // come before anything the instance hears now. Those of another plugin that ran under
    // this id are not placed: the strategy that wanted them no longer runs here.
    const leftover = yield* store.outbox(spec.id)
    if (leftover.length > 0 && stored !== undefined && stored.strategy !== definition.name) {
      yield* store.dropOutbox(spec.id)
      yield* logEvent("strategy.outbox", {
        strategy: spec.id,
        intents: leftover.length,
        action: `dropped: they were emitted by ${stored.strategy}, and this instance now runs ${definition.name}`
      })
    } else if (leftover.length > 0) {
      yield* logEvent("strategy.outbox", { strategy: spec.id, intents: leftover.length, action: "handed to the engine after a restart" })
      yield* submit(
        leftover.map((entry) => entry.intent),
        leftover.map((entry) => entry.outboxId)
      )
    }

    let savedState = stored?.state
    let savedCandle = lastCandle

    /** Pauses the instance where `svcbot resume` can find it: its state row exists before the pause is stored. */
    const pause = (reason: string) =>
      Effect.gen(function* () {
        pausedFor = reason
        if (savedState === undefined && state !== undefined) {
          const encoded = encodeState()
          if (encoded !== undefined) {
            yield* store.save(spec.id, { strategy: definition.name, version: definition.version, state: encoded, lastCandleOpen: lastCandle ?? null }, [], now())
            savedState = encoded
          }
        }
        // On a storage that refuses writes the pause holds in memory; a restart resumes every instance anyway.
        yield* waitingOutStorage(store.markPaused(spec.id, reason, now()), () => Effect.void)
      })

    /** The state as stored, or undefined when it no longer matches the strategy's own schema. */
    const encodeState = (): string | undefined => {
      try {
        return serializeState(definition, state)
      } catch {
        return undefined
      }
    }

    const entries = entryGate({ strategyId: spec.id, position: port.position, answer: (event) => push({ _tag: "OrderUpdate", event }), scope })

    /** Intents returned for warm-up candles, dropped; reported once, when the live events begin. */
    let warmupDropped = 0
    const reportWarmup = Effect.suspend(() => {
      if (warmupDropped <= 0) return Effect.void
      const dropped = warmupDropped
      warmupDropped = -1
      return logEvent("strategy.warmup", { strategy: spec.id, dropped, action: "intents emitted on warm-up candles were dropped: history feeds indicators only" })
    })

    /** Admitted intents of the events handled since the last save. */
    let unsaved: Array<Intent> = []
    /** What the events handled since the last save handed the instance: final updates, by the intent each answers, and fills. */
    let answered: Array<string> = []
    let heard: Array<string> = []

    /** Records, inside the transaction that saves the state, that the instance was handed these. */
    const recordHanded = (intentIds: ReadonlyArray<string>, fillIds: ReadonlyArray<string>, at: number) => () => {
      journal.markAnswered(intentIds, at)
      ledger.markHeard(fillIds, at)
    }

    /**
     * Whether the instance is owed a final order update or a fill, noting it among the handed when
     * it is. An update answers one journaled intent and a fill is heard once: a copy of one handed
     * already (the restore handed it, and the engine published it as well) is not owed. The host's
     * own refusals of intents it held back were never journaled, and are always owed.
     */
    const owes = (event: OutcomeEvent): Effect.Effect<boolean> => {
      if (event._tag === "Fill") {
        const { fillId } = event.event
        if (heard.includes(fillId)) return Effect.succeed(false)
        return Effect.map(ledger.isUnheard(fillId), (unheard) => {
          if (unheard) heard.push(fillId)
          return unheard
        })
      }
      const update = event.event
      if (!isFinalUpdate(update.kind) || HELD_CODES.has(update.code ?? "")) return Effect.succeed(true)
      return Effect.map(journal.owedFor(spec.id, update.tag, update.kind, update.clientOrderId), (intentIds) => {
        const intentId = intentIds.find((id) => !answered.includes(id))
        if (intentId !== undefined) answered.push(intentId)
        return intentId !== undefined
      })
    }
    /** The event handled last, named when the state it left cannot be saved. */
    let lastTrigger: HostEvent["_tag"] | undefined

    /**
     * Saves the state the handlers left and the intents they emitted in one transaction (the
     * state and the intents it expects answers to: a crash cannot keep one without the other),
     * then hands the intents to the engine. Most market data leaves the state as it was and
     * emits nothing: that costs no write. False when the storage refused the save or the journal:
     * what it held is kept (in memory, or in the outbox) for when the storage takes writes again.
     */
    const save: Effect.Effect<boolean> = Effect.gen(function* () {
      const intents = unsaved
      unsaved = []
      const encoded = encodeState()
      if (encoded === undefined) {
        // A state that no longer matches the strategy's own schema is as broken as a throw.
        yield* fail(lastTrigger ?? "Timer", `${lastTrigger ?? "event"} handler left a state that does not match its schema`)
        return true
      }
      const changed = encoded !== savedState || lastCandle !== savedCandle
      if (!changed && intents.length === 0 && answered.length === 0 && heard.length === 0) return true
      const at = now()
      const [handedAnswers, handedFills] = [answered, heard]
      answered = []
      heard = []
      const outboxIds = yield* waitingOutStorage(
        store.save(
          spec.id,
          changed ? { strategy: definition.name, version: definition.version, state: encoded, lastCandleOpen: lastCandle ?? null } : undefined,
          intents,
          at,
          recordHanded(handedAnswers, handedFills, at)
        ),
        () => Effect.succeed(undefined)
      )
      if (outboxIds === undefined) {
        unsaved = [...intents, ...unsaved]
        answered = [...handedAnswers, ...answered]
        heard = [...handedFills, ...heard]
        return false
      }
      savedState = encoded
      savedCandle = lastCandle
      return intents.length === 0 || (yield* submit(intents, outboxIds))
    })

    /**
     * The storage refuses writes: the order updates and fills not handled yet wait ahead of what
     * comes (market data and timers are dropped: they would be stale by then) until it takes writes again. Then what could not be
     * journaled is submitted and what could not be saved is saved, in the order it came.
     */
    const waitForStorage = (rest: ReadonlyArray<HostEvent>) =>
      Effect.gen(function* () {
        inbox.pushFirst(rest.filter((event) => !isMomentary(event)))
        for (;;) {
          yield* storage.awaitWritable
          const pending = unsubmitted.splice(0)
          let journaled = true
          for (const [i, { intents, outboxIds }] of pending.entries()) {
            if (yield* submit(intents, outboxIds)) continue
            unsubmitted.push(...pending.slice(i + 1))
            journaled = false
            break
          }
          if (journaled && (yield* save)) return
        }
      })

    /**
     * A handler failed: the instance goes back to the state it last saved (a handler that threw
     * may have changed its state halfway), drops what it emitted since, and pauses. What it was
     * handed since stays owed to that state: the next start hands it again.
     */
    const fail = (trigger: HostEvent["_tag"], reason: string) =>
      Effect.gen(function* () {
        unsaved = []
        answered = []
        heard = []
        if (savedState !== undefined) {
          const restored = deserializeState(definition, savedState)
          if (restored._tag === "Right") state = restored.right
          lastCandle = savedCandle
        }
        yield* pause(reason)
        yield* logEvent("strategy.error", { strategy: spec.id, trigger, error: reason, action: "instance paused; the others go on" })
      })

    /** Handles the events taken from the queue in one go, in order. */
    const handleAll = (events: ReadonlyArray<HostEvent>) =>
      Effect.gen(function* () {
        let account: AccountView | undefined
        // The clock, read once for the events handled back to back and again after any step that may
        // wait (a read, a write): a clock read per event cost a sixth of the host's time per candle.
        let clock: number | undefined
        let view: StrategyView | undefined
        let handled = false
        for (let i = 0; i < events.length; i++) {
          const event = events[i]!
          if (pausedFor !== undefined) break
          if (storage.fault !== undefined) return yield* waitForStorage(events.slice(i))
          if (event._tag === "Candle" && lastCandle !== undefined && event.event.openTime <= lastCandle) continue
          if (event._tag === "OrderUpdate" || event._tag === "Fill") {
            clock = undefined
            if (!(yield* owes(event))) continue
          }
          if (event._tag === "Ticker" && event.event.symbol === spec.symbol) prices.given = event.event.price
          else if (event._tag === "Candle" && event.event.symbol === spec.symbol) prices.given = event.event.close
          const step = pressure.observe(event)
          if (step?._tag === "Backoff") yield* logEvent("strategy.backoff", { strategy: spec.id, reason: step.reason, untilMs: step.untilMs })
          const pauseFor = step?._tag === "Pause" ? step.reason : undefined
          if (account === undefined) {
            account = yield* port.accountView(spec.id)
            clock = undefined
          }
          // Every new account view comes with a new clock reading: the view is made again only then.
          // The events handled in between see the same fields, and a view each would only be garbage.
          if (clock === undefined) {
            clock = now()
            view = undefined
          }
          view ??= viewOf(account, clock)
          let outcome: HandlerResult<unknown> | undefined
          try {
            outcome = dispatch(definition, state, event, view)
          } catch (error) {
            return yield* fail(event._tag, `${event._tag} handler failed: ${error instanceof Error ? error.message : String(error)}`)
          }
          if (event._tag === "Candle") lastCandle = event.event.openTime
          if (outcome === undefined) continue
          handled = true
          lastTrigger = event._tag
          let emitted = outcome.intents
          if (event._tag === "Candle" && event.event.warmup === true) {
            if (emitted.length > 0 && warmupDropped >= 0) warmupDropped += emitted.length
            emitted = []
          } else if (warmupDropped > 0) {
            yield* reportWarmup
          }
          state = outcome.state
          if (emitted.length > 0) {
            // A pausing instance places nothing more; held-back intents never reach the outbox.
            const intents = pauseFor !== undefined ? emitted.filter((intent) => intent.type === "cancel") : yield* pressure.admitted(yield* entries.withoutEntries(emitted, account), now())
            unsaved.push(...intents)
          }
          if (unsaved.length > 0 || pauseFor !== undefined) {
            const saved = yield* save
            handled = false
            // The orders just submitted are in the view of the next event.
            account = undefined
            clock = undefined
            if (pauseFor !== undefined) {
              yield* pause(pauseFor)
              yield* logEvent("strategy.paused", { strategy: spec.id, reason: pauseFor, action: "paused: fix the cause, then `svcbot resume` it (or restart)" })
            }
            if (!saved) return yield* waitForStorage(events.slice(i + 1))
          }
        }
        if ((handled || lastCandle !== savedCandle || answered.length > 0 || heard.length > 0) && !(yield* save)) yield* waitForStorage([])
      })

    // What became of the instance's orders while it did not run (cancel-on-stop runs after the
    // strategies stopped, a fill may come while the process is down, the start-up reconcile
    // decides lost placements) comes before anything it hears now. Read as late as possible: the
    // engine's updates reach the instance once it is running, and what was written before this
    // read is here, whenever it is published (a copy heard later is not owed twice). A state that
    // did not come back never knew those orders: they are recorded as handed, unheard.
    const answers = yield* journal.owedAnswers(spec.id)
    const fills = yield* ledger.unheardFor(spec.id)
    if (answers.length + fills.length > 0) {
      if (restoredState) {
        inbox.pushFirst(missedEvents(answers, fills))
      } else {
        const at = now()
        yield* store.save(spec.id, undefined, [], at, recordHanded(answers.map((answer) => answer.intentId), fills.map((entry) => entry.fill.fillId), at))
      }
      yield* logEvent("strategy.missed", {
        strategy: spec.id,
        orderUpdates: answers.length,
        fills: fills.length,
        action: restoredState ? "handed to the restored instance before anything new" : "not handed: the instance started from init, and its state never knew those orders"
      })
    }

    yield* Effect.forkScoped(Effect.forever(Effect.flatMap(inbox.takeAll, handleAll)))
    // `svcbot resume` clears the stored pause; the running instance takes it up here.
    yield* Effect.forkScoped(
      Effect.repeat(
        Effect.gen(function* () {
          const reason = pausedFor
          if (reason === undefined || state === undefined || (yield* store.pausedReason(spec.id)) !== null) return
          pressure.reset()
          pausedFor = undefined
          yield* logEvent("strategy.resumed", { strategy: spec.id, reason })
        }),
        Schedule.spaced(RESUME_POLL_MS)
      )
    )

    if (spec.schedule !== undefined && definition.onTimer !== undefined) {
      const expression = spec.schedule
      yield* Effect.acquireRelease(
        Effect.sync(() =>
          scheduleCron(expression, (context) => {
            inbox.offer({ _tag: "Timer", event: { name: SCHEDULE_TIMER, scheduledAt: context.date.getTime() } })
          }, { name: `strategy:${spec.id}`, timezone: "UTC" })
        ),
        (task) => Effect.promise(async () => { await task.destroy() })
      )
    }

    yield* logEvent("strategy.started", { strategy: spec.id, plugin: definition.name, version: definition.version, symbol: spec.symbol, restored: stored !== undefined })
    yield* Effect.addFinalizer(() => logEvent("strategy.stopped", { strategy: spec.id }))

    return {
      id: spec.id,
      symbol: spec.symbol,
      definition,
      deliver: inbox.deliver,
      pausedReason: Effect.sync(() => pausedFor ?? storage.reason),
      lastCandleOpen: Effect.sync(() => lastCandle),
      pause: (reason) =>
        Effect.suspend(() => (pausedFor !== undefined ? Effect.succeed("already paused" as const) : Effect.as(pause(reason), "paused" as const))),
      resume: Effect.gen(function* () {
        const reason = pausedFor
        if (reason === undefined && !entries.stopped()) return "not paused" as const
        entries.start()
        if (reason !== undefined) {
          yield* store.resume(spec.id, now())
          pressure.reset()
          pausedFor = undefined
          yield* logEvent("strategy.resumed", { strategy: spec.id, reason })
        }
        return "resumed" as const
      }),
      stopEntries: Effect.sync(() => (entries.stop() ? ("entries stopped" as const) : ("entries already stopped" as const))),
      entriesStopped: Effect.sync(entries.stopped)
    }
  })
