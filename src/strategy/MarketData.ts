/**
 * Market data for strategy instances: one poller per (symbol, candle interval),
 * reading the public ticker and candles endpoints through the client (lowest
 * budget priority) and handing each instance the ticker and every newly closed
 * candle. Prices seen here are the `lastPrices` of every strategy's view.
 *
 * Before an instance gets new candles, `beforeCandles` runs for it: the daemon
 * uses it to put the fills and order updates the venue already has ahead of them.
 */
import { Effect, Schedule, type Scope } from "effect"
import type { Decimal } from "../domain/Decimal.js"
import { SvcClient } from "../svc/SvcClient.js"
import type { RunningInstance } from "./Host.js"

export const INTERVAL_MS: Readonly<Record<string, number>> = {
  "1m": 60_000,
  "5m": 300_000,
  "15m": 900_000,
  "1h": 3_600_000,
  "4h": 14_400_000,
  "1d": 86_400_000
}

/** Closed candles handed to an instance that has never seen one, so its indicators start warm. */
export const WARMUP_CANDLES = 60

export interface Subscription {
  readonly instance: RunningInstance
  readonly interval: string
  readonly pollMs: number
  /** Further symbols whose prices the strategy reads (its definition's `symbols`). */
  readonly extraSymbols: ReadonlyArray<string>
}

export interface LastPrices {
  readonly get: () => ReadonlyMap<string, Decimal>
}

/**
 * Starts the pollers in the current scope and returns the live price map.
 * Failures of a poll are left to the client's own events and retried next tick.
 */
export const runMarketData = (
  subscriptions: ReadonlyArray<Subscription>,
  now: () => number,
  beforeCandles: (instance: RunningInstance) => Effect.Effect<void> = () => Effect.void
): Effect.Effect<LastPrices, never, Scope.Scope | SvcClient> =>
  Effect.gen(function* () {
    const client = yield* SvcClient
    const prices = new Map<string, Decimal>()
    const groups = new Map<string, Array<Subscription>>()
    for (const subscription of subscriptions) {
      const key = `${subscription.instance.symbol} ${subscription.interval}`
      groups.set(key, [...(groups.get(key) ?? []), subscription])
    }
    for (const group of groups.values()) {
      const { symbol } = group[0]!.instance
      const interval = group[0]!.interval
      const intervalMs = INTERVAL_MS[interval] ?? 60_000
      const pollMs = Math.min(...group.map((s) => s.pollMs))
      const poll = Effect.gen(function* () {
        const ticker = yield* client.ticker(symbol)
        prices.set(symbol, ticker.price)
        const time = ticker.time ?? now()
        for (const { instance } of group) {
          if (instance.definition.onTicker !== undefined) {
            yield* instance.deliver([{ _tag: "Ticker", event: { symbol, price: ticker.price, time } }])
          }
        }
        if (group.every(({ instance }) => instance.definition.onCandle === undefined)) return
        const candles = yield* client.candles({ symbol, interval, limit: WARMUP_CANDLES + 1 })
        const closed = [...candles].filter((c) => c.openTime + intervalMs <= now()).sort((a, b) => a.openTime - b.openTime)
        for (const { instance } of group) {
          if (instance.definition.onCandle === undefined) continue
          const seen = yield* instance.lastCandleOpen
          const fresh = seen === undefined ? closed : closed.filter((candle) => candle.openTime > seen)
          if (fresh.length === 0) continue
          yield* beforeCandles(instance)
          // An instance that never had a candle gets history first: all but the newest only warm its indicators up.
          const history = seen === undefined ? fresh.length - 1 : 0
          yield* instance.deliver(fresh.map((candle, i) => ({ _tag: "Candle", event: i < history ? { symbol, interval, ...candle, warmup: true } : { symbol, interval, ...candle } })))
        }
      })
      yield* Effect.forkScoped(
        poll.pipe(
          Effect.catchAll(() => Effect.void),
          Effect.repeat(Schedule.spaced(pollMs))
        )
      )
    }
    // Prices of symbols that strategies read but trade no candles on.
    const polled = new Set(subscriptions.map((s) => s.instance.symbol))
    const extra = new Map<string, number>()
    for (const subscription of subscriptions) {
      for (const symbol of subscription.extraSymbols) {
        if (!polled.has(symbol)) extra.set(symbol, Math.min(extra.get(symbol) ?? Infinity, subscription.pollMs))
      }
    }
    for (const [symbol, pollMs] of extra) {
      yield* Effect.forkScoped(
        client.ticker(symbol).pipe(
          Effect.tap((ticker) => Effect.sync(() => prices.set(symbol, ticker.price))),
          Effect.catchAll(() => Effect.void),
          Effect.repeat(Schedule.spaced(pollMs))
        )
      )
    }
    return { get: () => prices }
  })
