/**
 * The daemon's Prometheus metrics, served as text on the health server's
 * `GET /metrics`. Nothing on the trading path calls into them: each figure is
 * taken where the daemon already publishes it, so an update costs a map lookup
 * and no read of the database.
 *
 * - orders: the engine's order stream (every journaled intent and every move of the
 *   state machine), counted per strategy, symbol and state;
 * - fills: the engine's fill stream, the same one the strategies are fed from;
 * - PnL, position, open orders, pauses: the figures of each strategy's heartbeat,
 *   handed over as the heartbeat is made (whatever the log level), kept as Decimal
 *   and turned into a number only when Prometheus reads it;
 * - rate budgets: read from the client's budget governor when Prometheus scrapes
 *   (what `X-SVC-USED-WEIGHT-1M` and its siblings last said, plus the local estimate);
 * - request latency: timed on the client's connection pool, per endpoint and status class;
 * - the console: its open event streams and the streams it dropped for falling behind;
 * - storage: writes each database file's storage refused, by cause, and whether it fails now;
 * - the process: prom-client's default metrics (CPU, memory, event loop, GC).
 *
 * Labels are bounded: strategy ids come from the config, symbols from the
 * exchange, states from the state machine, endpoints from the Dialect. Order ids,
 * tags and amounts never become labels; the API key appears only as the 12
 * characters the logs show, never its secret.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type { Dispatcher } from "@effect/platform-node/Undici"
import { Effect, Layer, type Scope, Stream } from "effect"
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client"
import type { Decimal } from "../domain/Decimal.js"
import type { FillUpdate, OrderUpdate } from "../engine/EngineBus.js"
import type { StorageHealth } from "../store/StorageHealth.js"
import { maskKeyId } from "../log/Redaction.js"
import type { BudgetSnapshot } from "../svc/Governor.js"

/** Latency buckets in seconds: a loopback venue answers in milliseconds, a remote exchange in tens to hundreds. */
const LATENCY_BUCKETS = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** The status label of a request that got no answer (timeout, reset, refused connection). */
export const NO_ANSWER = "none"

/** What one strategy's last heartbeat said; amounts stay exact until exposition. */
export interface StrategyFigures {
  readonly symbol: string
  readonly realizedPnl: Decimal
  readonly unrealizedPnl: Decimal
  readonly fees: Decimal
  readonly netPnl: Decimal
  readonly position: Decimal
  readonly openOrders: number
  readonly paused: boolean
}

const statusClass = (status: number): string => (status >= 100 && status < 600 ? `${Math.floor(status / 100)}xx` : NO_ANSWER)

/**
 * Forwards one request's events to the handler that sent it, and observes its
 * duration once: at the end of the answer, or at the error that ended it.
 */
class TimedExchange implements Dispatcher.DispatchHandler {
  private status = 0
  private observed = false

  constructor(
    private readonly inner: Dispatcher.DispatchHandler,
    private readonly startedNs: bigint,
    private readonly done: (status: number, startedNs: bigint) => void
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.inner.onRequestStart?.(controller, context)
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: Dispatcher.ResponseData["headers"], statusMessage?: string): void {
    this.status = statusCode
    this.inner.onResponseStart?.(controller, statusCode, headers, statusMessage)
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.inner.onResponseData?.(controller, chunk)
  }

  onResponseEnd(controller: Dispatcher.DispatchController, trailers: Dispatcher.ResponseData["headers"]): void {
    this.observe(this.status)
    this.inner.onResponseEnd?.(controller, trailers)
  }

  onResponseError(controller: Dispatcher.DispatchController, error: Error): void {
    // A body cut off after the status line is an answer the client could not read: no answer.
    this.observe(0)
    this.inner.onResponseError?.(controller, error)
  }

  private observe(status: number): void {
    if (this.observed) return
    this.observed = true
    this.done(status, this.startedNs)
  }
}

export class DaemonMetrics extends Effect.Service<DaemonMetrics>()("svcbot/DaemonMetrics", {
  effect: Effect.gen(function* () {
    const clock = yield* Effect.clock
    const registry = new Registry()
    collectDefaultMetrics({ register: registry })
    const registers = [registry]

    const orders = new Counter({
      name: "svcbot_orders_total",
      help: "Orders that moved to each state since the daemon started (intent = journaled before sending), per strategy and symbol",
      labelNames: ["strategy", "symbol", "state"] as const,
      registers
    })
    const fills = new Counter({
      name: "svcbot_fills_total",
      help: "Fills synced into the ledger since the daemon started, per strategy, symbol and side",
      labelNames: ["strategy", "symbol", "side"] as const,
      registers
    })
    const latency = new Histogram({
      name: "svcbot_request_duration_seconds",
      help: `Time from sending a request to the exchange to the end of its answer, per endpoint and status class (${NO_ANSWER}: no answer)`,
      labelNames: ["endpoint", "status"] as const,
      buckets: LATENCY_BUCKETS,
      registers
    })

    const strategies = new Map<string, StrategyFigures>()
    const strategyGauge = (name: string, help: string, read: (figures: StrategyFigures) => Decimal | number | boolean) =>
      new Gauge({
        name,
        help,
        labelNames: ["strategy", "symbol"] as const,
        registers,
        collect() {
          this.reset()
          for (const [strategy, figures] of strategies) {
            const value = read(figures)
            // Prometheus samples are doubles: the exact amount is converted here and nowhere else.
            this.set({ strategy, symbol: figures.symbol }, typeof value === "number" ? value : typeof value === "boolean" ? Number(value) : value.toNumber())
          }
        }
      })
    strategyGauge("svcbot_realized_pnl", "Realized PnL of the strategy's own fills, in the quote asset of its symbol, as of its last heartbeat", (f) => f.realizedPnl)
    strategyGauge("svcbot_unrealized_pnl", "Unrealized PnL of what the strategy holds at the last price, in the quote asset, as of its last heartbeat", (f) => f.unrealizedPnl)
    strategyGauge("svcbot_fees", "Fees the strategy's fills paid, in the quote asset, as of its last heartbeat", (f) => f.fees)
    strategyGauge("svcbot_net_pnl", "Realized plus unrealized PnL less fees, in the quote asset, as of the strategy's last heartbeat", (f) => f.netPnl)
    strategyGauge("svcbot_position", "Base asset the strategy holds in its symbol, as of its last heartbeat", (f) => f.position)
    strategyGauge("svcbot_open_orders", "The strategy's orders not yet final, as of its last heartbeat", (f) => f.openOrders)
    strategyGauge("svcbot_strategy_paused", "1 while the strategy is paused (after repeated refusals or a handler error), as of its last heartbeat", (f) => f.paused)

    const budgets = new Map<string, Effect.Effect<BudgetSnapshot>>()
    const budgetGauge = (name: string, help: string, read: (snapshot: BudgetSnapshot) => number | null) =>
      new Gauge({
        name,
        help,
        labelNames: ["key"] as const,
        registers,
        collect() {
          this.reset()
          for (const [key, snapshot] of budgets) {
            const value = read(Effect.runSync(snapshot))
            // A limit is unknown until the exchange has answered once: no sample rather than a made-up one.
            if (value !== null) this.set({ key }, value)
          }
        }
      })
    budgetGauge("svcbot_budget_used_weight_1m", "Request weight used in the current minute window (X-SVC-USED-WEIGHT-1M, plus requests not yet answered)", (s) => s.usedWeight1m)
    budgetGauge("svcbot_budget_weight_limit_1m", "Request weight limit per minute window (X-SVC-WEIGHT-LIMIT-1M)", (s) => s.weightLimit1m)
    budgetGauge("svcbot_budget_orders_used_10s", "Orders placed in the current 10 s window (X-SVC-ORDERS-USED-10S)", (s) => s.ordersUsed10s)
    budgetGauge("svcbot_budget_orders_limit_10s", "Orders allowed per 10 s window (X-SVC-ORDERS-LIMIT-10S)", (s) => s.ordersLimit10s)
    budgetGauge("svcbot_budget_orders_used_1d", "Orders placed in the current day window (X-SVC-ORDERS-USED-1D)", (s) => s.ordersUsed1d)
    budgetGauge("svcbot_budget_orders_limit_1d", "Orders allowed per day window (X-SVC-ORDERS-LIMIT-1D)", (s) => s.ordersLimit1d)
    const budgetCounter = (name: string, help: string, read: (snapshot: BudgetSnapshot) => number) =>
      new Counter({
        name,
        help,
        labelNames: ["key"] as const,
        registers,
        collect() {
          // The governor keeps the running total; the counter shows it as it is.
          this.reset()
          for (const [key, snapshot] of budgets) this.inc({ key }, read(Effect.runSync(snapshot)))
        }
      })
    budgetCounter("svcbot_budget_waits_total", "Requests that waited for the next budget window instead of earning a 429", (s) => s.waits)
    budgetCounter("svcbot_rate_limited_total", "429 RATE_LIMITED answers", (s) => s.rateLimited)

    let consoleStreams: (() => { readonly open: number; readonly dropped: number }) | undefined
    new Gauge({
      name: "svcbot_console_streams",
      help: "Console event streams open now (pages following /api/v1/events)",
      registers,
      collect() {
        this.set(consoleStreams?.().open ?? 0)
      }
    })
    new Counter({
      name: "svcbot_console_streams_dropped_total",
      help: "Console event streams closed because their client fell behind (console.client-dropped)",
      registers,
      collect() {
        this.reset()
        this.inc(consoleStreams?.().dropped ?? 0)
      }
    })

    let storages: ReadonlyArray<StorageHealth> = []
    new Counter({
      name: "svcbot_storage_refused_writes_total",
      help: "Writes to a database file its storage refused (disk full, read-only, I/O error, cannot open, permission denied, locked), by file and cause",
      labelNames: ["database", "cause"] as const,
      registers,
      collect() {
        this.reset()
        for (const storage of storages) for (const [cause, count] of storage.refused) this.inc({ database: storage.path, cause }, count)
      }
    })
    new Gauge({
      name: "svcbot_storage_failing",
      help: "1 while a database file's storage refuses writes (trading stopped), 0 once it takes them",
      labelNames: ["database"] as const,
      registers,
      collect() {
        for (const storage of storages) this.set({ database: storage.path }, storage.fault === undefined ? 0 : 1)
      }
    })

    const nowNs = () => clock.unsafeCurrentTimeNanos()
    const observeRequest = (endpoint: string) => (status: number, startedNs: bigint) =>
      latency.observe({ endpoint, status: statusClass(status) }, Number(nowNs() - startedNs) / 1e9)
    /** Wraps each request's handler; the endpoint is the method and path, never the query (it carries order ids). */
    const timing: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (options, handler) => {
      const path = options.path
      const query = path.indexOf("?")
      const endpoint = `${options.method} ${query < 0 ? path : path.slice(0, query)}`
      return dispatch(options, new TimedExchange(handler, nowNs(), observeRequest(endpoint)))
    }

    return {
      /** The text exposition of every metric, with its content type. */
      exposition: Effect.promise(() => registry.metrics()).pipe(Effect.map((body) => ({ contentType: registry.contentType, body }))),
      /** Keeps what a strategy's heartbeat says until the next one. */
      strategyFigures: (strategy: string, figures: StrategyFigures): void => void strategies.set(strategy, figures),
      /** Counts the engine's order moves for the lifetime of the scope; subscribe before trading starts so none is missed. */
      countOrders: (updates: Stream.Stream<OrderUpdate>): Effect.Effect<void, never, Scope.Scope> =>
        Effect.asVoid(
          Effect.forkScoped(
            // An order found on the exchange that no strategy placed has no strategy: an empty label.
            Stream.runForEach(updates, ({ strategyId, symbol, state }) => Effect.sync(() => orders.inc({ strategy: strategyId ?? "", symbol, state })))
          )
        ),
      /**
       * Counts the engine's fills for the lifetime of the scope; subscribe before trading starts so none is missed.
       * A fill published again once its order was adopted was counted when it was first published.
       */
      countFills: (updates: Stream.Stream<FillUpdate>): Effect.Effect<void, never, Scope.Scope> =>
        Effect.asVoid(
          Effect.forkScoped(
            Stream.runForEach(updates, ({ strategyId, fill, late }) =>
              late === true ? Effect.void : Effect.sync(() => fills.inc({ strategy: strategyId ?? "", symbol: fill.symbol, side: fill.side }))
            )
          )
        ),
      /** Shows the console's event streams for the lifetime of the scope. */
      watchConsole: (read: () => { readonly open: number; readonly dropped: number }): Effect.Effect<void, never, Scope.Scope> =>
        Effect.acquireRelease(
          Effect.sync(() => void (consoleStreams = read)),
          () => Effect.sync(() => void (consoleStreams = undefined))
        ),
      /** Shows the storage of the daemon's database files for the lifetime of the scope. */
      watchStorage: (watched: ReadonlyArray<StorageHealth>): Effect.Effect<void, never, Scope.Scope> =>
        Effect.acquireRelease(
          Effect.sync(() => void (storages = watched)),
          () => Effect.sync(() => void (storages = []))
        ),
      /** Shows the budget of the key `keyId` (masked as in the logs) for the lifetime of the scope. */
      watchBudget: (keyId: string, snapshot: Effect.Effect<BudgetSnapshot>): Effect.Effect<void, never, Scope.Scope> => {
        const key = maskKeyId(keyId)
        return Effect.acquireRelease(
          Effect.sync(() => void budgets.set(key, snapshot)),
          () => Effect.sync(() => void budgets.delete(key))
        )
      },
      /** The client's connection pool with every request timed; closed with the layer. */
      dispatcher: Layer.scoped(
        NodeHttpClient.Dispatcher,
        Effect.map(NodeHttpClient.makeDispatcher, (pool) => pool.compose(timing))
      )
    }
  })
}) {}
