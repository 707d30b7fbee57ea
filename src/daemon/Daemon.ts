/**
 * `svcbot run`: the trading daemon. Start-up order: validate the config and the
 * strategies, check the venue and the key, open and migrate the database,
 * reconcile, then start the strategies. Everything it starts lives in one scope,
 * so a signal or the end of `--for` tears it down in reverse: strategies stop,
 * open orders are cancelled (per config), fills are synced, the database closes.
 */
import { Clock, Context, Data, Duration, Effect, Either, Layer, Option, Redacted, Schedule, type Scope } from "effect"
import { type Config, evidencePathOf } from "../config/Config.js"
import { type Credentials, loadCredentials } from "../config/Load.js"
import { type Decimal, ZERO } from "../domain/Decimal.js"
import { TERMINAL_STATES } from "../domain/OrderState.js"
import { logEvent } from "../log/Logger.js"
import * as EngineModule from "../engine/Engine.js"
import { Market } from "../engine/Market.js"
import type { EngineOptions } from "../engine/Settings.js"
import type { OrderRow } from "../store/OrderJournal.js"
import { defaultDialect, type Dialect } from "../svc/Dialect.js"
import { isRefusedAnswer, type SvcError } from "../svc/Errors.js"
import { SvcClient } from "../svc/SvcClient.js"
import { loadBudgetWeights, saveBudgetWeights } from "../store/BudgetWeights.js"
import { Database, openDatabase, storageHealthOf } from "../store/Database.js"
import { waitingOutStorage } from "../store/StorageHealth.js"
import { savePairRules } from "../store/PairRules.js"
import { waitOutTransients, waitUntil } from "../svc/Transients.js"
import { isSvcVenue, VENUE_IMPLEMENTATION_HEADER } from "../svc/VenueIdentity.js"
import { devTradeKey } from "../venue/Accounts.js"
import { parseTapeFlag } from "../venue/cli.js"
import { serveVenue } from "../venue/Server.js"
import type { TapeSource } from "../venue/Tape.js"
import { runInstance, type AccountView, type RunningInstance, type TradingPort } from "../strategy/Host.js"
import { loadStrategy } from "../strategy/Loader.js"
import { INTERVAL_MS, runMarketData } from "../strategy/MarketData.js"
import { recordPaperRuns } from "../promotion/Evidence.js"
import { StrategyStateStore } from "../strategy/StateStore.js"
import { decodeParams, type OpenOrder, type OrderUpdateEvent, type StrategyDefinition } from "../strategy/Strategy.js"
import { routeUpdates, withEventsRecorded } from "./Routing.js"
import { heartbeat, venueHealth, watchStorage, watchVenue } from "./Watch.js"
import { DaemonMetrics } from "../ops/Metrics.js"
import { Health, serveHealth } from "./Health.js"
import { consoleRoutes } from "../console/Api.js"
import { runConsole } from "../console/Console.js"
import { consolePage } from "../console/Page.js"
import { OrderJournal } from "../store/OrderJournal.js"

/** A start-up failure: what is wrong, how to fix it, and the exit code. */
export class StartupError extends Data.TaggedError("StartupError")<{ readonly message: string; readonly exitCode: number }> {}

/** Why the health server could not listen: a port in use, or one this user may not take, is the config's to fix. */
const cannotServeHealth = (error: Error, host: string, port: number): StartupError => {
  switch ((error as NodeJS.ErrnoException).code) {
    case "EADDRINUSE":
      return new StartupError({ message: `health.port ${port} is in use on ${host}: stop what holds it, or set health.port (or SVC_HEALTH_PORT) to a free port`, exitCode: 2 })
    case "EACCES":
      return new StartupError({ message: `health.port ${port} on ${host} may not be taken by this user (ports below 1024 need privileges): set health.port to 1024 or above`, exitCode: 2 })
    case "EADDRNOTAVAIL":
    case "ENOTFOUND":
      return new StartupError({ message: `health.host ${host} is not an address of this machine: set health.host to one of its addresses (127.0.0.1, or 0.0.0.0 for all)`, exitCode: 2 })
    default:
      return new StartupError({ message: `the health server cannot listen on ${host}:${port}: ${error.message}`, exitCode: 1 })
  }
}

export interface RunOptions {
  readonly config: Config
  readonly env: Readonly<Record<string, string | undefined>>
  /** Stop by itself after this long (`--for`); run until a signal otherwise. */
  readonly runFor?: Duration.Duration | undefined
  readonly acceptUnpromoted: boolean
  /** Checks live promotion records; returns the reason a strategy may not run live, or undefined. */
  readonly liveGate?: (instance: ResolvedInstance) => Effect.Effect<string | undefined>
}

export interface ResolvedInstance {
  readonly id: string
  readonly definition: StrategyDefinition
  readonly sourcePath: string
  readonly params: unknown
  readonly rawParams: unknown
  readonly symbol: string
  readonly schedule: string | undefined
  readonly candleInterval: string
  readonly pollMs: number
  readonly maxIntentsPerMinute: number
  readonly allocation: Readonly<Record<string, Decimal>> | undefined
}

/** Loads every enabled strategy and validates its params; all problems are reported together. */
export const resolveStrategies = (config: Config): Effect.Effect<ReadonlyArray<ResolvedInstance>, StartupError> =>
  Effect.gen(function* () {
    const problems: Array<string> = []
    const resolved: Array<ResolvedInstance> = []
    for (const instance of config.strategies.filter((s) => s.enabled)) {
      const loaded = yield* Effect.either(loadStrategy(instance.id, instance.strategy))
      if (Either.isLeft(loaded)) {
        problems.push(loaded.left.message)
        continue
      }
      const params = decodeParams(loaded.right.definition, instance.id, instance.params)
      if (Either.isLeft(params)) {
        problems.push(...params.left.problems)
        continue
      }
      if (instance.schedule !== undefined && loaded.right.definition.onTimer === undefined) {
        problems.push(`strategies[${instance.id}].schedule: ${loaded.right.definition.name} has no timer handler (remove schedule)`)
      }
      resolved.push({
        id: instance.id,
        definition: loaded.right.definition,
        sourcePath: loaded.right.sourcePath,
        params: params.right,
        rawParams: instance.params,
        symbol: instance.symbol,
        schedule: instance.schedule,
        candleInterval: instance.candleInterval,
        pollMs: instance.pollMs,
        maxIntentsPerMinute: instance.maxIntentsPerMinute,
        allocation: instance.allocation
      })
    }
    if (problems.length > 0) {
      // One line per problem, each naming its field: the command line prints them as they are.
      return yield* new StartupError({ message: problems.join("\n"), exitCode: 2 })
    }
    return resolved
  })

const dialectOf = (config: Config): Dialect => ({
  paths: { ...defaultDialect.paths, ...config.dialect.paths },
  budgetHeaders: { ...defaultDialect.budgetHeaders, ...config.dialect.budgetHeaders },
  recvWindowMs: config.dialect.recvWindowMs ?? defaultDialect.recvWindowMs
})

export const engineOptionsOf = (config: Config): EngineOptions => ({
  dbPath: config.database.path,
  cancelOnStop: config.engine.cancelOnStop,
  // The rest of the shutdown bound is for the strategies, the health server and the database.
  stopWithinMs: Math.floor(config.engine.shutdownTimeoutMs * 0.8),
  risk: config.engine.risk,
  allocations: new Map(config.strategies.flatMap((s) => (s.allocation === undefined ? [] : [[s.id, s.allocation] as const]))),
  reconcile: { intervalMs: config.engine.reconcileIntervalMs },
  fillSync: { intervalMs: config.engine.fillSyncIntervalMs }
})

/** Where the bot trades and with which key: the embedded venue and its dev key, or the configured exchange. */
const connect = (options: RunOptions): Effect.Effect<{ readonly baseUrl: string; readonly credentials: Credentials }, StartupError, Scope.Scope> =>
  Effect.gen(function* () {
    const { config } = options
    const fromEnv = loadCredentials(options.env)
    if (Either.isLeft(fromEnv)) return yield* new StartupError({ message: fromEnv.left.message, exitCode: 2 })
    if (config.venue.embedded) {
      const follow = config.venue.follow
      // Paper on real prices: the embedded venue moves with another venue's public market data.
      const tape: TapeSource =
        follow === undefined
          ? yield* parseTapeFlag(config.venue.tape).pipe(Effect.mapError((e) => new StartupError({ message: `venue.tape: ${e.message}`, exitCode: 2 })))
          : { kind: "follow", baseUrl: follow.baseUrl, pollMs: follow.pollMs }
      const running = yield* serveVenue({ port: 0, tape, tickMs: config.venue.tickMs, settleMs: config.venue.settleMs }).pipe(
        Effect.mapError((e) => new StartupError({ message: `the embedded venue did not start: ${e.message}`, exitCode: 1 }))
      )
      yield* logEvent("venue.listening", { url: running.url, embedded: true, ...(follow === undefined ? {} : { follow: follow.baseUrl }) })
      // The embedded venue only knows its development keys.
      return { baseUrl: running.url, credentials: { apiKey: Redacted.make(devTradeKey.keyId), apiSecret: Redacted.make(devTradeKey.secret) } }
    }
    if (Option.isNone(fromEnv.right)) {
      return yield* new StartupError({
        message: "no API key: set SVC_API_KEY and SVC_API_SECRET (or SVC_API_KEY_FILE and SVC_API_SECRET_FILE), or use venue.embedded for paper trading",
        exitCode: 2
      })
    }
    return { baseUrl: config.venue.baseUrl!, credentials: fromEnv.right.value }
  })

/** What a failed request at start-up means for the user, and what to do. */
export const explainKeyFailure = (error: SvcError, baseUrl: string): string => {
  const fix: Partial<Record<SvcError["_tag"], string>> = {
    ApiKeyInvalid: "the exchange refused the key (API_KEY_INVALID): it is wrong, revoked, or expired (Trade keys without an IP whitelist expire after 90 days). Check it with `svcbot sign`, or create a new key on the website",
    ApiKeyNotPermitted: "the key lacks Read permission: create a key with Read and Trade on the website",
    AuthBlocked: "key requests are blocked after repeated failed authentication: wait for the block to pass and check the key and secret",
    NetworkError: `cannot reach ${baseUrl}: check venue.baseUrl and the network`,
    ServerUnavailable: `${baseUrl} answers with server errors: waiting for it to recover`,
    CircuitOpen: "the exchange refused the key (API_KEY_INVALID): create a new key on the website; it is probed again once per client.authProbeIntervalMs"
  }
  return fix[error._tag] ?? `the key check failed: ${error.message}`
}

/** Why the mode may not trade on the venue at `baseUrl`, or undefined when it may. */
export const venueRefusal = (config: Config, baseUrl: string, implementation: string | undefined): string | undefined => {
  if (config.mode === "paper" && !isSvcVenue(implementation)) {
    return `paper mode trades only on svc-venue, and ${baseUrl} does not identify as svc-venue (no ${VENUE_IMPLEMENTATION_HEADER} header): point venue.baseUrl at a svc-venue, or set venue.embedded to true`
  }
  if (config.mode === "live" && isSvcVenue(implementation) && !config.venue.staging) {
    return `live mode refuses ${baseUrl}: it is ${implementation}, a paper venue; set venue.staging to true if this is a staging run against it`
  }
  return undefined
}

/** A non-transient failure at start-up: a key without the needed scope is a configuration problem. */
const startupFailure = (error: SvcError, baseUrl: string): StartupError =>
  new StartupError({ message: explainKeyFailure(error, baseUrl), exitCode: error._tag === "ApiKeyNotPermitted" ? 2 : 1 })

/** A clientOrderId no order has: cancelling it tells whether the key may trade without touching anything. */
const SCOPE_PROBE_ORDER_ID = "svcbot-scope-check"

/**
 * What the venue says about the config before any order: every symbol exists and trades, the
 * key may trade (both modes place orders), and the allocations fit in the account. One problem
 * per line; an empty list means the config may start.
 */
export const checkAgainstVenue = (config: Config, instances: ReadonlyArray<ResolvedInstance>) =>
  Effect.gen(function* () {
    const svc = yield* SvcClient
    const problems: Array<string> = []
    // An exchange that lists no pair at all is not open for business yet (maintenance, a venue
    // still loading its pairs): no config fixes that, so the start waits for a list, not exits 2.
    const listed = yield* svc.exchangeInfo().pipe(waitUntil("key check", (pairs) => pairs.length > 0, "the exchange lists no pair at all: waiting until it lists its pairs"))
    const pairs = new Map(listed.map((pair) => [pair.symbol, pair]))
    for (const instance of instances) {
      for (const symbol of [instance.symbol, ...(instance.definition.symbols?.(instance.params) ?? [])]) {
        const pair = pairs.get(symbol)
        if (pair === undefined) {
          problems.push(`strategies[${instance.id}].symbol: ${symbol} is not listed by the exchange (listed: ${[...pairs.keys()].sort().join(", ")})`)
        } else if (pair.status !== "trading") {
          problems.push(`strategies[${instance.id}].symbol: ${symbol} is ${pair.status} on the exchange, not trading; disable the instance until it trades again`)
        } else if (!pair.tickSize.gt(0) || !pair.stepSize.gt(0)) {
          problems.push(`strategies[${instance.id}].symbol: the exchange lists ${symbol} without a usable tick size or step size; it cannot be traded`)
        }
      }
    }
    const wallet = yield* svc.spotWallet()
    const missingScope = yield* svc.missingTradeScope(SCOPE_PROBE_ORDER_ID)
    if (missingScope !== undefined) {
      problems.push(`the API key may not trade (it lacks ${missingScope}) and ${config.mode} mode places orders: create a key with Read and Trade permission on the website`)
    }
    const owned = new Map(wallet.map((row) => [row.asset, row.balance.plus(row.locked)]))
    const allocated = new Map<string, { total: Decimal; by: Array<string> }>()
    for (const instance of config.strategies.filter((s) => s.enabled)) {
      for (const [asset, amount] of Object.entries(instance.allocation ?? {})) {
        const entry = allocated.get(asset) ?? { total: ZERO, by: [] }
        allocated.set(asset, { total: entry.total.plus(amount), by: [...entry.by, instance.id] })
      }
    }
    for (const [asset, { total, by }] of allocated) {
      const available = owned.get(asset) ?? ZERO
      if (total.gt(available)) {
        problems.push(`strategies[].allocation.${asset}: ${by.join(", ")} ${by.length === 1 ? "is" : "are"} allocated ${total.toFixed()} ${asset} but the account holds ${available.toFixed()}; lower the allocations or fund the account`)
      }
    }
    return problems
  })

/** How often the learned endpoint weights are stored. */
const WEIGHTS_SAVE_MS = 30_000

const ACTIVE_KINDS: Readonly<Record<string, OpenOrder["kind"]>> = { resting: "resting", pending: "pending" }

const openOrderOf = (row: OrderRow): OpenOrder => ({
  tag: row.tag ?? "",
  ...(row.clientOrderId === null ? {} : { clientOrderId: row.clientOrderId }),
  symbol: row.symbol,
  side: row.side,
  type: row.type,
  baseQty: row.baseQty ?? ZERO,
  filledBaseQty: row.filledBaseQty,
  ...(row.limitPrice === null ? {} : { limitPrice: row.limitPrice }),
  ...(row.stopPrice === null ? {} : { stopPrice: row.stopPrice }),
  kind: ACTIVE_KINDS[row.state] ?? "pending"
})

/**
 * The engine as the strategy host sees it; refused placements go back to the strategy as order
 * updates. A refused cancel does not: its tag names an order that is still what it was (the
 * backtest answers nothing either).
 */
export const tradingPort = (engine: EngineModule.Engine): TradingPort => ({
  submit: (strategyId, intents, outboxIds) =>
    Effect.map(engine.submit(strategyId, intents, outboxIds), (results) =>
      results.flatMap((outcome, i): Array<OrderUpdateEvent> =>
        outcome._tag === "Refused" && intents[i]?.type !== "cancel" ? [{ tag: outcome.tag, kind: "refused", code: outcome.reason, filledBaseQty: ZERO }] : []
      )
    ),
  position: (strategyId, symbol) => Effect.map(engine.portfolio(strategyId), (book) => book.positions.find((p) => p.symbol === symbol)?.baseQty ?? ZERO),
  accountView: (strategyId): Effect.Effect<AccountView> =>
    Effect.map(engine.view(strategyId), (view) => ({
      balances: view.balances,
      openOrders: new Map([...view.openOrders].filter(([, row]) => !TERMINAL_STATES.has(row.state)).map(([tag, row]) => [tag, openOrderOf(row)])),
      pairs: new Map([...view.pairs].map(([symbol, rules]) => [symbol, { ...rules, status: rules.status === "halted" ? "halted" : "trading" }]))
    }))
})

/**
 * The evidence store and the health of its writes: the daemon's own database, or a store of its
 * own (shared with a live daemon), closed with the scope.
 */
const evidenceStore = (config: Config) =>
  Effect.gen(function* () {
    const path = evidencePathOf(config)
    const database = yield* Database
    if (path === config.database.path) return { store: database.sqlite, storage: database.storage }
    const store = yield* Effect.acquireRelease(
      Effect.try({
        try: () => openDatabase({ path }),
        catch: (error) => new StartupError({ message: `the evidence store ${path} cannot be opened: ${error instanceof Error ? error.message : String(error)}`, exitCode: 1 })
      }),
      (db) => Effect.sync(() => db.close())
    )
    const storage = storageHealthOf(path, store)
    yield* storage.watch
    return { store, storage }
  })

/** Runs the daemon until interrupted or until `runFor` has passed. */
export const runDaemon = (options: RunOptions): Effect.Effect<void, StartupError, Scope.Scope | Health> =>
  Effect.gen(function* () {
    const { config } = options
    yield* logEvent("app.started", { command: "run", mode: config.mode, embeddedVenue: config.venue.embedded, strategies: config.strategies.length })
    const instances = yield* resolveStrategies(config)
    if (config.mode === "live") {
      for (const instance of instances) {
        const refusal = options.liveGate === undefined ? "no live promotion record" : yield* options.liveGate(instance)
        if (refusal === undefined) continue
        yield* logEvent("strategy.demoted", { strategy: instance.id, reason: refusal, accepted: options.acceptUnpromoted })
        if (!options.acceptUnpromoted) {
          return yield* new StartupError({ message: `strategy ${instance.id} may not trade live: ${refusal} (promote it with \`svcbot promote ${instance.id} --to live --config FILE\`)`, exitCode: 2 })
        }
      }
    }

    const health = yield* Health
    const metrics = Context.get(yield* Layer.build(DaemonMetrics.Default), DaemonMetrics)
    const routes = consoleRoutes(consolePage(), config.health.token)
    if (config.health.port !== undefined) {
      const { host, port } = config.health
      yield* serveHealth(health, metrics.exposition, host, port, config.health.token, routes).pipe(Effect.mapError((error) => cannotServeHealth(error, host, port)))
    }

    const { baseUrl, credentials } = yield* connect(options)
    const keyId = Redacted.value(credentials.apiKey)
    const clientLayer = SvcClient.layerWith({
      baseUrl,
      apiKey: credentials.apiKey,
      apiSecret: credentials.apiSecret,
      dialect: dialectOf(config),
      requestTimeoutMs: config.client.requestTimeoutMs,
      maxAnswerBytes: config.client.maxAnswerBytes,
      budget: {
        reservePct: config.client.reservePct,
        authProbeIntervalMs: config.client.authProbeIntervalMs,
        learnedWeights: loadBudgetWeights(config.database.path, keyId)
      }
    }, metrics.dispatcher)

    const trade = Effect.gen(function* () {
      const engine = yield* EngineModule.Engine
      const svc = yield* SvcClient
      yield* metrics.countOrders(yield* engine.orderUpdates())
      yield* metrics.countFills(yield* engine.fillUpdates())
      yield* metrics.watchBudget(keyId, svc.budgetSnapshot)
      const byId = new Map<string, RunningInstance>()
      const router = yield* routeUpdates(engine, byId)
      const database = yield* Database
      const evidenceStores = config.mode === "paper" ? yield* evidenceStore(config) : undefined
      yield* watchStorage(health, metrics, [database.storage, ...(evidenceStores === undefined || evidenceStores.storage === database.storage ? [] : [evidenceStores.storage])])
      const evidence =
        evidenceStores !== undefined
          ? yield* recordPaperRuns(instances, {
              dataSource: `venue:${baseUrl}`,
              settleDelayMs: config.venue.settleMs,
              intervalMs: (interval) => INTERVAL_MS[interval] ?? 60_000,
              ...evidenceStores
            })
          : undefined
      // Registered before the engine's stop, the console answers until the engine has stopped.
      const console = yield* runConsole({
        routes,
        config,
        running: byId,
        subjects: instances,
        engine,
        journal: yield* OrderJournal,
        health,
        budget: svc.budgetSnapshot,
        metrics,
        writer: (yield* Database).sqlite
      })
      // Runs right after the strategies stop, before the paper evidence is recorded: nothing the
      // evidence needs (a final read may wait on the budget) may hold back cancel-on-stop.
      yield* Effect.addFinalizer(() => engine.stop)
      const port = tradingPort(engine)
      // The pollers' own map, read at each event: a strategy's view shows the price of the ticker it was just given.
      let prices: () => ReadonlyMap<string, Decimal> = () => new Map()
      for (const instance of instances) {
        const running = yield* runInstance({ ...instance, backpressure: config.engine.backpressure }, port, () => prices(), Date.now)
        byId.set(instance.id, evidence === undefined ? running : withEventsRecorded(running, evidence))
      }
      const market = yield* runMarketData(
        instances.map((instance) => ({
          instance: byId.get(instance.id)!,
          interval: instance.candleInterval,
          pollMs: instance.pollMs,
          extraSymbols: instance.definition.symbols?.(instance.params) ?? []
        })),
        Date.now,
        router.catchUp
      )
      prices = market.get
      // The first thing a stop does: the console says so while the strategies stop and orders are cancelled.
      yield* Effect.addFinalizer(() => console.markStopping)
      yield* Effect.forkScoped(
        heartbeat(engine, svc, metrics, [...byId.values()]).pipe(Effect.repeat(Schedule.spaced(Duration.millis(config.heartbeatMs))), Effect.delay(Duration.millis(Math.min(config.heartbeatMs, 5000))))
      )
      // What the budget learned goes to the next run on this key, now and then and at the stop; what the storage refuses is learned again.
      const saveWeights = waitingOutStorage(
        Effect.flatMap(svc.learnedWeights, (weights) => Effect.flatMap(Clock.currentTimeMillis, (now) => saveBudgetWeights(database, keyId, weights, now))),
        () => Effect.void
      )
      yield* Effect.addFinalizer(() => saveWeights)
      // `svcbot status` shows amounts at the exchange's precision without asking the exchange.
      const pairs = yield* (yield* Market).pairs.pipe(Effect.orElseSucceed(() => new Map()))
      yield* waitingOutStorage(savePairRules(database, pairs.values(), yield* Clock.currentTimeMillis).pipe(Effect.ignore), () => Effect.void)
      yield* Effect.forkScoped(Effect.repeat(saveWeights, Schedule.spaced(Duration.millis(WEIGHTS_SAVE_MS))))
      yield* health.check(engine.health)
      yield* health.check(
        Effect.map(
          Effect.forEach([...byId.values()], (instance) => Effect.map(instance.pausedReason, (reason) => (reason === undefined ? [] : [`${instance.id} is paused: ${reason}`]))),
          (reasons) => reasons.flat()
        )
      )
      yield* health.markReady
      yield* logEvent("config.loaded", { ready: true, baseUrl, strategies: instances.map((i) => i.id) })
      yield* options.runFor === undefined ? Effect.never : Effect.sleep(options.runFor)
      yield* logEvent("app.stopping", { reason: "run duration elapsed" })
    })

    const engineOptions = engineOptionsOf(config)
    const engineLayer = StrategyStateStore.Default.pipe(Layer.provideMerge(EngineModule.layer(engineOptions)))
    const checks = Effect.gen(function* () {
      const svc = yield* SvcClient
      // Paper trades only on svc-venue and live never does, unless staging: decided from a public
      // read, before one signed request reaches the server.
      // A refused answer is waited out as in the startup reconcile: the next one may read.
      const implementation = yield* svc.venueImplementation().pipe(
        waitOutTransients("venue check", (error) => explainKeyFailure(error, baseUrl), isRefusedAnswer),
        Effect.mapError((error) => startupFailure(error, baseUrl))
      )
      const wrongVenue = venueRefusal(config, baseUrl, implementation)
      if (wrongVenue !== undefined) return yield* new StartupError({ message: wrongVenue, exitCode: 2 })
      // Reachability, clock, permissions and the config against the venue, before anything is written.
      const problems = yield* checkAgainstVenue(config, instances).pipe(
        waitOutTransients("key check", (error) => explainKeyFailure(error, baseUrl), isRefusedAnswer),
        Effect.mapError((error) => startupFailure(error, baseUrl))
      )
      if (problems.length > 0) {
        return yield* new StartupError({ message: problems.map((p) => `the exchange refuses this config: ${p}`).join("\n"), exitCode: 2 })
      }
    })
    const start = Effect.gen(function* () {
      const svc = yield* SvcClient
      yield* health.check(venueHealth(svc, config.health.unreachableAfterMs))
      yield* Effect.forkScoped(watchVenue(svc, config.health.unreachableAfterMs))
      // The checks can take long (a slow or unreachable venue, a used-up budget), and a stop may come
      // meanwhile with orders of a killed run resting: the engine's stop runs on the journal it left.
      // From the engine's build on, the engine's own stop is registered before its first request.
      yield* checks.pipe(Effect.onInterrupt(() => EngineModule.stopBeforeStart(engineOptions)))
      yield* Effect.scoped(trade).pipe(
        Effect.provide(engineLayer),
        Effect.mapError((error) =>
          error instanceof StartupError
            ? error
            : error._tag === "DatabaseRefused"
              ? new StartupError({ message: error.message, exitCode: 2 })
              : error._tag === "DatabaseFromNewerVersion" || error._tag === "MigrationFailed"
                ? new StartupError({ message: error.message, exitCode: 1 })
                : startupFailure(error, baseUrl)
        )
      )
    })
    yield* health.watch
    yield* start.pipe(Effect.provide(clientLayer))
  })
