/**
 * The console in the running daemon: what its API reads and does (a `ConsoleBackend`
 * attached to the health server's console routes for the lifetime of the trading
 * scope), and what its event stream carries. Order and fill events come off the
 * engine's own streams; instance states, health and budget use are looked at once a
 * second, and only while a page listens, so a daemon with no page open does no
 * console work at all.
 */
import type BetterSqlite3 from "better-sqlite3"
import { Effect, Either, Runtime, Schedule, type Scope, Stream } from "effect"
import { readOrders, readRecentFills, openReadOnly } from "../cli/status.js"
import { profitReport, tradesReport } from "../cli/trades.js"
import { type Config, evidencePathOf } from "../config/Config.js"
import { TERMINAL_STATES } from "../domain/OrderState.js"
import type { Engine } from "../engine/Engine.js"
import type { FillUpdate, OrderUpdate } from "../engine/EngineBus.js"
import { logEvent } from "../log/Logger.js"
import type { OrderJournal } from "../store/OrderJournal.js"
import type { RunningInstance } from "../strategy/Host.js"
import type { BudgetSnapshot } from "../svc/Governor.js"
import type { Health } from "../daemon/Health.js"
import type { DaemonMetrics } from "../ops/Metrics.js"
import { clearEntriesStopped, entriesStopped, markEntriesStopped, type OperatorAction, type OperatorActionName, recentActions, recordAction } from "./Actions.js"
import { type Answer, type ConsoleBackend, type ConsoleRoutes, failure } from "./Api.js"
import { DEFAULT_STREAM_LIMITS, EventStream } from "./EventStream.js"
import { instancesReport, type LiveState, pnlSeries, type PromotionSubject, promotionsReport } from "./Reads.js"

export interface ConsoleWiring {
  readonly routes: ConsoleRoutes
  readonly config: Config
  /** The instances that run, as they are started (read at each request). */
  readonly running: ReadonlyMap<string, RunningInstance>
  readonly subjects: ReadonlyArray<PromotionSubject>
  readonly engine: Engine
  readonly journal: OrderJournal
  readonly health: Health
  readonly budget: Effect.Effect<BudgetSnapshot>
  readonly metrics: DaemonMetrics
  /** The daemon's own connection: operator actions are written through it. */
  readonly writer: BetterSqlite3.Database
}

/** How often instance states, health and budget use are looked at while a page listens. */
const WATCH_MS = 1000
/** Budget use moves with every request: a page is told at most this often. */
const BUDGET_EVERY_MS = 5000
const KEEP_ALIVE_MS = 15_000
/** Promotion evidence changes when a paper run is recorded or a promotion granted; its evaluation replays runs, so it is kept this long. */
const PROMOTIONS_KEPT_MS = 30_000

const iso = (ms: number): string => new Date(ms).toISOString()

const orderEvent = (u: OrderUpdate) => ({
  strategy: u.strategyId,
  tag: u.tag,
  clientOrderId: u.clientOrderId,
  symbol: u.symbol,
  state: u.state,
  code: u.code,
  filledBaseQty: u.filledBaseQty.toFixed(),
  at: iso(u.at)
})

/** A fill as `GET /api/v1/fills` shows it. */
const fillEvent = (u: FillUpdate) => ({
  time: iso(u.fill.time),
  fillId: u.fill.fillId,
  strategy: u.strategyId,
  tag: u.tag,
  clientOrderId: u.fill.clientOrderId,
  symbol: u.fill.symbol,
  side: u.fill.side,
  liquidity: u.fill.liquidity,
  price: u.fill.price.toFixed(),
  baseQty: u.fill.baseQty.toFixed(),
  quoteQty: u.fill.quoteQty.toFixed(),
  fee: u.fill.fee.toFixed(),
  feeAsset: u.fill.feeAsset
})

/** Runs the console for the lifetime of the scope; returns the flag the daemon raises when it begins to stop. */
export const runConsole = (wiring: ConsoleWiring): Effect.Effect<{ readonly markStopping: Effect.Effect<void> }, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { config, running, engine, journal, health, writer } = wiring
    const path = config.database.path
    const runtime = yield* Effect.runtime<never>()
    const run = Runtime.runPromise(runtime)
    const db = yield* Effect.acquireRelease(
      Effect.flatMap(Effect.sync(() => openReadOnly(path)), (opened) =>
        Either.isRight(opened) ? Effect.succeed(opened.right) : Effect.dieMessage(`the console cannot read ${path}: ${opened.left.message}`)
      ),
      (opened) => Effect.sync(() => opened.close())
    )
    // A start resumes every instance: stopped entries included.
    clearEntriesStopped(writer)
    let stopping = false

    const liveState = (id: string): LiveState => {
      const instance = running.get(id)
      if (stopping) return { state: "stopping", reason: null }
      if (instance === undefined) return { state: "starting", reason: null }
      const paused = Effect.runSync(instance.pausedReason)
      if (paused !== undefined) return { state: "paused", reason: paused }
      const since = entriesStopped(writer).get(id)
      if (Effect.runSync(instance.entriesStopped)) return { state: "entries-stopped", reason: `new entries stopped by an operator${since === undefined ? "" : ` since ${iso(since)}`}` }
      return { state: "running", reason: null }
    }

    const events = new EventStream(DEFAULT_STREAM_LIMITS, (bufferedBytes) => {
      Runtime.runFork(runtime)(logEvent("console.client-dropped", { bufferedBytes, maxBufferedBytes: DEFAULT_STREAM_LIMITS.maxBufferedBytes }))
    })
    yield* wiring.metrics.watchConsole(() => ({ open: events.size, dropped: events.dropped }))
    const publishInstance = (id: string) => events.publish("instance", { id, ...liveState(id), at: iso(Date.now()) })

    let promotions: { at: number; value: unknown } | undefined
    const healthDocument = Effect.zipWith(health.report, wiring.budget, (report, budget) => ({ ...report, budget }))

    const act = (action: OperatorActionName, id: string | undefined, body: Readonly<Record<string, unknown>>): Effect.Effect<Answer> =>
      Effect.gen(function* () {
        const allowed = action === "ack-lost" ? ["clientOrderId", "all"] : []
        const unknown = Object.keys(body).find((key) => !allowed.includes(key))
        if (unknown !== undefined) return failure(400, "bad-body", `${action} takes ${allowed.length === 0 ? "no body" : allowed.join(" or ")}, not "${unknown.slice(0, 40)}"`)
        const at = Date.now()
        let status = 200
        let outcome: string
        let detail: string | null = null
        if (action === "ack-lost") {
          const target = body.clientOrderId
          if (target !== undefined && (typeof target !== "string" || target.length === 0 || target.length > 200)) return failure(400, "bad-body", "clientOrderId must be the id of a lost order, as svcbot status lists it")
          if ((target === undefined) === (body.all !== true)) return failure(400, "bad-body", 'give one lost order as {"clientOrderId": "..."} or every one as {"all": true}')
          const acknowledged = yield* journal.acknowledgeLost(target, at)
          if (target !== undefined && acknowledged.length === 0) {
            status = 404
            outcome = `${target} is not an unacknowledged lost order`
          } else {
            outcome = acknowledged.length === 0 ? "no lost orders" : `${acknowledged.length} acknowledged`
            detail = acknowledged.length === 0 ? null : acknowledged.join(", ")
          }
        } else {
          const instance = running.get(id!)
          if (instance === undefined || stopping) return failure(409, "not-running", `${id} is not running (disabled in the config, or the daemon is starting or stopping)`)
          switch (action) {
            case "pause":
              outcome = yield* instance.pause("paused by an operator from the console")
              break
            case "resume":
              outcome = yield* instance.resume
              clearEntriesStopped(writer, id)
              break
            case "stop-entries":
              outcome = yield* instance.stopEntries
              markEntriesStopped(writer, id!, at)
              break
            case "cancel-all": {
              const view = yield* engine.view(id!)
              const tags = [...view.openOrders].filter(([, row]) => !TERMINAL_STATES.has(row.state)).map(([tag]) => tag)
              const results = tags.length === 0 ? [] : yield* engine.submit(id!, tags.map((tag) => ({ type: "cancel" as const, tag })))
              const sent = results.filter((r) => r._tag === "Approved").length
              const refused = results.flatMap((r) => (r._tag === "Refused" ? [`${r.tag}: ${r.reason}`] : []))
              outcome = `${sent} cancel${sent === 1 ? "" : "s"} sent${refused.length === 0 ? "" : `, ${refused.length} refused`}`
              detail = refused.length === 0 ? null : refused.join(", ")
              break
            }
          }
        }
        const record: OperatorAction = { at, action, instance: id ?? null, outcome, detail }
        recordAction(writer, record)
        yield* logEvent("operator.action", { action, instance: id ?? null, outcome, ...(detail === null ? {} : { detail }) })
        events.publish("action", { ...record, at: iso(at) })
        if (id !== undefined) publishInstance(id)
        return { status, body: status === 200 ? { ...record, at: iso(at) } : failure(status, "not-lost", outcome).body }
      })

    const backend: ConsoleBackend = {
      instanceIds: config.strategies.map((s) => s.id),
      instances: async () => instancesReport(db, path, config, liveState, Date.now()),
      orders: async (query) => ({ orders: readOrders(db, query) }),
      fills: async (query) => ({ fills: readRecentFills(db, query) }),
      trades: async (query) => tradesReport(db, query),
      profit: async (query) => profitReport(db, query),
      pnl: async (instance) => pnlSeries(db, instance),
      health: () => run(healthDocument),
      promotions: async () => {
        const now = Date.now()
        if (promotions === undefined || now - promotions.at > PROMOTIONS_KEPT_MS) {
          promotions = { at: now, value: promotionsReport(evidencePathOf(config), wiring.subjects, config) }
        }
        return promotions.value
      },
      actions: async (limit) => ({ actions: recentActions(db, limit).map((a) => ({ ...a, at: iso(a.at) })) }),
      control: (action, instance, body) => run(act(action, instance, body)),
      events
    }

    yield* Effect.forkScoped(Stream.runForEach(yield* engine.orderUpdates(), (update) => Effect.sync(() => events.publish("order", orderEvent(update)))))
    yield* Effect.forkScoped(Stream.runForEach(yield* engine.fillUpdates(), (update) => Effect.sync(() => events.publish("fill", fillEvent(update)))))

    // What changed since the last look, told only to pages that listen.
    const seen = new Map<string, string>()
    let lastHealth = ""
    let lastBudget = ""
    let budgetAt = 0
    let keptAliveAt = 0
    const look = Effect.gen(function* () {
      if (events.size === 0) {
        seen.clear()
        lastHealth = ""
        return
      }
      const now = Date.now()
      for (const id of running.keys()) {
        const current = JSON.stringify(liveState(id))
        if (seen.get(id) === current) continue
        if (seen.has(id)) publishInstance(id)
        seen.set(id, current)
      }
      const report = yield* health.report
      const key = JSON.stringify(report)
      if (key !== lastHealth) {
        if (lastHealth !== "") events.publish("health", { ...report, budget: yield* wiring.budget, at: iso(now) })
        lastHealth = key
      }
      if (now - budgetAt >= BUDGET_EVERY_MS) {
        budgetAt = now
        const budget = JSON.stringify(yield* wiring.budget)
        if (budget !== lastBudget) {
          lastBudget = budget
          events.publish("budget", JSON.parse(budget))
        }
      }
      if (now - keptAliveAt >= KEEP_ALIVE_MS) {
        keptAliveAt = now
        events.keepAlive()
      }
    })
    yield* Effect.forkScoped(Effect.repeat(look, Schedule.spaced(WATCH_MS)))
    yield* Effect.acquireRelease(Effect.sync(() => wiring.routes.attach(backend)), (detach) => Effect.sync(detach))
    yield* logEvent("console.ready", { instances: backend.instanceIds.length })
    return {
      markStopping: Effect.sync(() => {
        stopping = true
        for (const id of running.keys()) publishInstance(id)
      })
    }
  })
