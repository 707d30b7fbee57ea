/**
 * The strategy host: runs each configured instance in its own fiber, feeds it
 * market data, timers, order updates and fills one event at a time, stores its
 * state after every event together with the intents the event produced (the
 * strategy outbox), and hands those intents to the engine. A handler that throws
 * pauses its own instance only.
 */
import { schedule as scheduleCron } from "node-cron"
import { Effect, Queue, Ref, Schedule, type Scope } from "effect"
import { type BackpressureConfig, defaultBackpressure, DEFAULT_MAX_INTENTS_PER_MINUTE } from "../config/Config.js"
import { ZERO } from "../domain/Decimal.js"
import { type Admission, admit, heldUntil, initialBackpressure, refused, succeeded } from "./Backpressure.js"
import type { Decimal } from "../domain/Decimal.js"
import type { Intent } from "../domain/Intent.js"
import { logEvent } from "../log/Logger.js"
import { StrategyStateStore } from "./StateStore.js"
import {
  deserializeState,
  SCHEDULE_TIMER,
  serializeState,
  type Balance,
  type CandleEvent,
  type FillEvent,
  type HandlerResult,
  type OpenOrder,
  type OrderUpdateEvent,
  type PairRules,
  type StrategyDefinition,
  type StrategyView,
  type TickerEvent,
  type TimerEvent
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
}

export interface AccountView {
  readonly balances: ReadonlyMap<string, Balance>
  readonly openOrders: ReadonlyMap<string, OpenOrder>
  readonly pairs: ReadonlyMap<string, PairRules>
}

export type HostEvent =
  | { readonly _tag: "Candle"; readonly event: CandleEvent }
  | { readonly _tag: "Ticker"; readonly event: TickerEvent }
  | { readonly _tag: "Timer"; readonly event: TimerEvent }
  | { readonly _tag: "OrderUpdate"; readonly event: OrderUpdateEvent }
  | { readonly _tag: "Fill"; readonly event: FillEvent }

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
  /** Queues an event; order updates and fills are never dropped, so this waits when the queue is full. */
  readonly deliver: (event: HostEvent) => Effect.Effect<void>
  /** Why the instance is paused, if it is. */
  readonly pausedReason: Effect.Effect<string | undefined>
  /** Open time of the newest candle the instance has been given. */
  readonly lastCandleOpen: Effect.Effect<number | undefined>
}

/** How many events may wait for one instance; market data beyond it waits for the handler to catch up. */
const QUEUE_CAPACITY = 1024

/** How often a paused instance looks whether `svcbot resume` cleared its stored pause. */
const RESUME_POLL_MS = 1000

/** Codes of the host's own refusals: answers to intents it held back, which are not the venue's or the risk check's. */
const HELD_CODES: ReadonlySet<string> = new Set<Admission>(["backoff", "throttled"])

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
): Effect.Effect<RunningInstance, never, Scope.Scope | StrategyStateStore> =>
  Effect.gen(function* () {
    const store = yield* StrategyStateStore
    const { definition } = spec
    const queue = yield* Effect.acquireRelease(Queue.bounded<HostEvent>(QUEUE_CAPACITY), Queue.shutdown)
    const paused = yield* Ref.make<string | undefined>(undefined)
    const scope = yield* Effect.scope
    const pressureConfig = spec.backpressure ?? defaultBackpressure
    const maxIntentsPerMinute = spec.maxIntentsPerMinute ?? DEFAULT_MAX_INTENTS_PER_MINUTE
    let pressure = initialBackpressure
    /** Answers owed to the strategy for intents held back, given when placements may go out again. */
    const held: Array<OrderUpdateEvent> = []
    let flushAt: number | undefined

    /**
     * The instance's own pair at the price it was last given (a ticker, or a candle's close), as
     * a backtest shows it: never a price polled after the event being handled, which a replay of
     * the run could not know. Other pairs as last polled.
     */
    let givenPrice: Decimal | undefined
    const prices = new Map<string, Decimal>()
    const viewOf = (account: AccountView): StrategyView => {
      for (const [symbol, price] of lastPrices()) prices.set(symbol, price)
      if (givenPrice !== undefined) prices.set(spec.symbol, givenPrice)
      return {
        params: spec.params,
        symbol: spec.symbol,
        now: now(),
        balances: account.balances,
        openOrders: account.openOrders,
        lastPrices: prices,
        pairs: account.pairs
      }
    }

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
    if (state === undefined) {
      const account = yield* port.accountView(spec.id)
      try {
        state = definition.init(spec.params, viewOf(account))
      } catch (error) {
        const reason = `init threw: ${error instanceof Error ? error.message : String(error)}`
        yield* Ref.set(paused, reason)
        yield* logEvent("strategy.error", { strategy: spec.id, phase: "init", error: reason })
      }
    }

    /** Hands intents to the engine; its refusals come back to this instance as order updates. */
    const submit = (intents: ReadonlyArray<Intent>, outboxIds: ReadonlyArray<number>) =>
      Effect.flatMap(port.submit(spec.id, intents, outboxIds), (refusals) =>
        Effect.forEach(refusals, (event) => Queue.offer(queue, { _tag: "OrderUpdate", event }), { discard: true })
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
        yield* Ref.set(paused, reason)
        if (savedState === undefined && state !== undefined) {
          const encoded = serializeState(definition, state)
          yield* store.save(spec.id, { strategy: definition.name, version: definition.version, state: encoded, lastCandleOpen: lastCandle ?? null }, [], now())
          savedState = encoded
        }
        yield* store.markPaused(spec.id, reason, now())
      })

    /** Hands the strategy the answers to what was held back, once placements may go out again. */
    const flushHeld = Effect.suspend(() => {
      flushAt = undefined
      const answers = held.splice(0)
      const throttled = answers.filter((answer) => answer.code === "throttled").length
      return Effect.zipRight(
        throttled === 0 ? Effect.void : logEvent("strategy.throttled", { strategy: spec.id, refused: throttled, maxIntentsPerMinute }),
        Effect.forEach(answers, (event) => Queue.offer(queue, { _tag: "OrderUpdate", event }), { discard: true })
      )
    })

    /** Placements the back-pressure lets through now; the others are held back, and answered later. */
    const admitted = (intents: ReadonlyArray<Intent>, at: number) =>
      Effect.gen(function* () {
        const through: Array<Intent> = []
        for (const intent of intents) {
          if (intent.type === "cancel") {
            through.push(intent)
            continue
          }
          const [next, verdict] = admit(pressure, at, maxIntentsPerMinute)
          pressure = next
          if (verdict === "admit") through.push(intent)
          else held.push({ tag: intent.tag, kind: "refused", code: verdict, filledBaseQty: ZERO })
        }
        if (held.length > 0 && flushAt === undefined) {
          flushAt = heldUntil(pressure, at)
          yield* Effect.forkIn(Effect.zipRight(Effect.sleep(Math.max(0, flushAt - at)), flushHeld), scope)
        }
        return through
      })

    /** Counts what a refusal, a rejection, an acceptance or a fill says about the instance's last intents. */
    const observe = (event: HostEvent) =>
      Effect.gen(function* () {
        if (event._tag === "Fill") {
          pressure = succeeded(pressure)
          return undefined
        }
        if (event._tag !== "OrderUpdate") return undefined
        const update = event.event
        if (update.kind === "pending" || update.kind === "resting" || update.kind === "fill") {
          pressure = succeeded(pressure)
          return undefined
        }
        if ((update.kind !== "refused" && update.kind !== "rejected") || HELD_CODES.has(update.code ?? "")) return undefined
        const [next, step] = refused(pressure, `${update.kind}:${update.code ?? "no code"}`, now(), pressureConfig)
        pressure = next
        if (step._tag === "Backoff") yield* logEvent("strategy.backoff", { strategy: spec.id, reason: step.reason, untilMs: step.untilMs })
        return step._tag === "Pause" ? step.reason : undefined
      })
    /** Intents returned for warm-up candles, dropped; reported once, when the live events begin. */
    let warmupDropped = 0
    const reportWarmup = Effect.suspend(() => {
      if (warmupDropped <= 0) return Effect.void
      const dropped = warmupDropped
      warmupDropped = -1
      return logEvent("strategy.warmup", { strategy: spec.id, dropped, action: "intents emitted on warm-up candles were dropped: history feeds indicators only" })
    })
    const handle = (event: HostEvent) =>
      Effect.gen(function* () {
        if ((yield* Ref.get(paused)) !== undefined) return
        if (event._tag === "Candle" && lastCandle !== undefined && event.event.openTime <= lastCandle) return
        if (event._tag === "Ticker" && event.event.symbol === spec.symbol) givenPrice = event.event.price
        else if (event._tag === "Candle" && event.event.symbol === spec.symbol) givenPrice = event.event.close
        const pauseFor = yield* observe(event)
        const view = viewOf(yield* port.accountView(spec.id))
        let outcome: HandlerResult<unknown> | undefined
        let encoded: string | undefined
        try {
          outcome = dispatch(definition, state, event, view)
          // A state that no longer matches the strategy's own schema is as broken as a throw.
          if (outcome !== undefined) encoded = serializeState(definition, outcome.state)
        } catch (error) {
          const reason = `${event._tag} handler failed: ${error instanceof Error ? error.message : String(error)}`
          yield* pause(reason)
          yield* logEvent("strategy.error", { strategy: spec.id, trigger: event._tag, error: reason, action: "instance paused; the others go on" })
          return
        }
        if (event._tag === "Candle") lastCandle = event.event.openTime
        if (outcome === undefined || encoded === undefined) return
        let emitted = outcome.intents
        if (event._tag === "Candle" && event.event.warmup === true) {
          if (emitted.length > 0 && warmupDropped >= 0) warmupDropped += emitted.length
          emitted = []
        } else {
          yield* reportWarmup
        }
        // A pausing instance places nothing more; held-back intents never reach the outbox.
        const intents = pauseFor !== undefined ? emitted.filter((intent) => intent.type === "cancel") : yield* admitted(emitted, now())
        state = outcome.state
        // Most market data leaves the state as it was and emits nothing: that costs no write (each write is an fsync).
        const changed = encoded !== savedState || (event._tag === "Candle" && lastCandle !== savedCandle)
        if (changed || intents.length > 0) {
          // The state and the intents it expects answers to are saved together: a crash cannot keep one without the other.
          const outboxIds = yield* store.save(
            spec.id,
            changed ? { strategy: definition.name, version: definition.version, state: encoded, lastCandleOpen: lastCandle ?? null } : undefined,
            intents,
            now()
          )
          savedState = encoded
          savedCandle = lastCandle
          if (intents.length > 0) yield* submit(intents, outboxIds)
        }
        if (pauseFor !== undefined) {
          yield* pause(pauseFor)
          yield* logEvent("strategy.paused", { strategy: spec.id, reason: pauseFor, action: "paused: fix the cause, then `svcbot resume` it (or restart)" })
        }
      })

    yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(queue), handle)))
    // `svcbot resume` clears the stored pause; the running instance takes it up here.
    yield* Effect.forkScoped(
      Effect.repeat(
        Effect.gen(function* () {
          const reason = yield* Ref.get(paused)
          if (reason === undefined || state === undefined || (yield* store.pausedReason(spec.id)) !== null) return
          pressure = initialBackpressure
          yield* Ref.set(paused, undefined)
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
            Queue.unsafeOffer(queue, { _tag: "Timer", event: { name: SCHEDULE_TIMER, scheduledAt: context.date.getTime() } })
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
      deliver: (event) => Effect.asVoid(Queue.offer(queue, event)),
      pausedReason: Ref.get(paused),
      lastCandleOpen: Effect.sync(() => lastCandle)
    }
  })
