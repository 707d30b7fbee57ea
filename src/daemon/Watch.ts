/**
 * What the daemon watches while it trades, for health, the log and the metrics:
 * the venue and the key as the client sees them, the storage of its database
 * files, and each strategy's heartbeat.
 */
import { Effect, type Scope } from "effect"
import { type Decimal, ZERO } from "../domain/Decimal.js"
import { atIncrement } from "../domain/Display.js"
import { TERMINAL_STATES } from "../domain/OrderState.js"
import type * as EngineModule from "../engine/Engine.js"
import { logEvent } from "../log/Logger.js"
import type { DaemonMetrics } from "../ops/Metrics.js"
import type { StorageHealth } from "../store/StorageHealth.js"
import type { RunningInstance } from "../strategy/Host.js"
import type { SvcClient } from "../svc/SvcClient.js"
import type { Health } from "./Health.js"

/** How often the venue's reachability is looked at for `venue.unreachable` / `venue.reachable`. */
const VENUE_WATCH_MS = 1000

/** Health reasons from the client's view of the key and the venue; each clears when the next answers are good. */
export const venueHealth = (svc: SvcClient, unreachableAfterMs: number) =>
  Effect.zipWith(svc.keyHealth, svc.refusedAnswers, (key, refused) => [
    ...(key.authInvalid ? ["API key refused (API_KEY_INVALID): create a new key on the website; it is probed again once per client.authProbeIntervalMs"] : []),
    ...(key.authBlockedForMs > 0 ? [`key traffic blocked after failed authentication for ${Math.ceil(key.authBlockedForMs / 1000)} s more`] : []),
    ...(key.unreachableForMs >= unreachableAfterMs ? [`venue unreachable for ${Math.round(key.unreachableForMs / 1000)} s (${key.lastFailure ?? "no answer"})`] : []),
    // A refused answer is never stored: what it carried (fills, an order's status) waits until the endpoint answers readably.
    ...refused.map((answer) =>
      answer._tag === "DecodeError"
        ? `answers of ${answer.endpoint} refused (${answer.field === "" ? "the answer" : answer.field}: ${answer.detail}); retried until one reads`
        : `answers of ${answer.endpoint} refused (larger than client.maxAnswerBytes, ${answer.limitBytes} bytes); retried until one fits`
    )
  ])

/** Logs the venue becoming unreachable past the threshold, and reachable again. */
export const watchVenue = (svc: SvcClient, unreachableAfterMs: number) =>
  Effect.gen(function* () {
    let unreachable = false
    for (;;) {
      yield* Effect.sleep(VENUE_WATCH_MS)
      const key = yield* svc.keyHealth
      if (!unreachable && key.unreachableForMs >= unreachableAfterMs) {
        unreachable = true
        yield* logEvent("venue.unreachable", { forMs: key.unreachableForMs, lastFailure: key.lastFailure ?? null })
      } else if (unreachable && key.unreachableForMs === 0) {
        unreachable = false
        yield* logEvent("venue.reachable", {})
      }
    }
  })

/**
 * The storage of the daemon's database files, for the lifetime of the scope: a file whose writes
 * fail is a health reason naming it and the cause, and its refused writes are counted.
 */
export const watchStorage = (health: Health, metrics: DaemonMetrics, storages: ReadonlyArray<StorageHealth>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.zipRight(
    health.check(Effect.sync(() => storages.flatMap((storage) => (storage.reason === undefined ? [] : [storage.reason])))),
    metrics.watchStorage(storages)
  )

/** One heartbeat line per strategy: position, open orders, PnL and budget use; its figures go to the metrics too. */
export const heartbeat = (engine: EngineModule.Engine, svc: SvcClient, metrics: DaemonMetrics, instances: ReadonlyArray<RunningInstance>) =>
  Effect.gen(function* () {
    const budget = yield* svc.budgetSnapshot
    for (const instance of instances) {
      const book = yield* engine.portfolio(instance.id)
      const view = yield* engine.view(instance.id)
      const position = book.positions.find((p) => p.symbol === instance.symbol)
      // PnL comes out of an average cost, a division: shown at the pair's tick. Holdings are sums
      // of the exchange's own amounts and are shown exactly.
      const pair = view.pairs.get(instance.symbol)
      const quote = (value: Decimal) => (pair === undefined ? value.toFixed() : atIncrement(value, pair.tickSize))
      const openOrders = [...view.openOrders.values()].filter((row) => !TERMINAL_STATES.has(row.state)).length
      const paused = yield* instance.pausedReason
      metrics.strategyFigures(instance.id, {
        symbol: instance.symbol,
        realizedPnl: book.realizedPnl,
        unrealizedPnl: book.unrealizedPnl,
        fees: book.feesQuote,
        netPnl: book.netPnl,
        position: position?.baseQty ?? ZERO,
        openOrders,
        paused: paused !== undefined
      })
      yield* logEvent("heartbeat", {
        strategy: instance.id,
        symbol: instance.symbol,
        position: (position?.baseQty ?? ZERO).toFixed(),
        openOrders,
        realizedPnl: quote(book.realizedPnl),
        unrealizedPnl: quote(book.unrealizedPnl),
        fees: quote(book.feesQuote),
        netPnl: quote(book.netPnl),
        ...(book.balances === undefined
          ? {}
          : { balances: Object.fromEntries([...book.balances].map(([asset, amount]) => [asset, amount.toFixed()])) }),
        paused: paused ?? null,
        usedWeight1m: budget.usedWeight1m,
        weightLimit1m: budget.weightLimit1m,
        ordersUsed10s: budget.ordersUsed10s,
        budgetWaits: budget.waits,
        rateLimited: budget.rateLimited
      })
    }
  })
