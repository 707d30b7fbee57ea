/**
 * What the engine knows about the market and the account between requests:
 * pair rules (exchange-info, cached and refreshed), last prices, spot balances.
 * Reads go through the client at the lowest priorities its budget governor has.
 */
import { Clock, Effect, Ref } from "effect"
import type { Decimal } from "../domain/Decimal.js"
import { logEvent } from "../log/Logger.js"
import type { SvcError } from "../svc/Errors.js"
import { SvcClient } from "../svc/SvcClient.js"
import type { PairRules } from "./Risk.js"
import { EngineSettings } from "./Settings.js"

export interface Balance {
  readonly free: Decimal
  readonly locked: Decimal
}

export interface BalanceSnapshot {
  /** Local time the wallet was read; orders accepted after it are not yet reflected in `free`. */
  readonly at: number
  readonly byAsset: ReadonlyMap<string, Balance>
}

export class Market extends Effect.Service<Market>()("svcbot/Market", {
  effect: Effect.gen(function* () {
    const client = yield* SvcClient
    const settings = (yield* EngineSettings).market
    const pairs = yield* Ref.make<{ readonly at: number; readonly bySymbol: ReadonlyMap<string, PairRules> }>({
      at: Number.NEGATIVE_INFINITY,
      bySymbol: new Map()
    })
    const prices = yield* Ref.make<ReadonlyMap<string, { readonly price: Decimal; readonly at: number }>>(new Map())
    const balances = yield* Ref.make<BalanceSnapshot>({ at: Number.NEGATIVE_INFINITY, byAsset: new Map() })

    const refreshPairs: Effect.Effect<ReadonlyMap<string, PairRules>, SvcError> = Effect.gen(function* () {
      const list = yield* client.exchangeInfo()
      const now = yield* Clock.currentTimeMillis
      const bySymbol = new Map(list.map((pair) => [pair.symbol, pair as PairRules]))
      yield* Ref.set(pairs, { at: now, bySymbol })
      return bySymbol
    })

    const refreshBalances: Effect.Effect<BalanceSnapshot, SvcError> = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const rows = yield* client.spotWallet()
      const snapshot: BalanceSnapshot = {
        at: now,
        byAsset: new Map(rows.map((row) => [row.asset, { free: row.balance, locked: row.locked }]))
      }
      yield* Ref.set(balances, snapshot)
      return snapshot
    })

    const fetchPrice = (symbol: string) =>
      Effect.gen(function* () {
        const ticker = yield* client.ticker(symbol)
        const now = yield* Clock.currentTimeMillis
        yield* Ref.update(prices, (m) => new Map(m).set(symbol, { price: ticker.price, at: now }))
        return ticker.price
      })

    return {
      /** Pair rules, refreshed when older than the refresh period; the cached rules on a failed refresh. */
      pairs: Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const cached = yield* Ref.get(pairs)
        if (now - cached.at < settings.pairsRefreshMs) return cached.bySymbol
        return yield* refreshPairs.pipe(
          Effect.catchAll((error) =>
            cached.bySymbol.size > 0
              ? logEvent("request.failed", { what: "exchange-info", error: error.message }).pipe(Effect.as(cached.bySymbol))
              : Effect.fail(error)
          )
        )
      }),
      refreshPairs,
      /** The last price, fetched again when older than `priceMaxAgeMs`; undefined when it cannot be read. */
      lastPrice: (symbol: string): Effect.Effect<Decimal | undefined> =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const cached = (yield* Ref.get(prices)).get(symbol)
          if (cached !== undefined && now - cached.at < settings.priceMaxAgeMs) return cached.price
          return yield* fetchPrice(symbol).pipe(
            Effect.catchAll((error) =>
              logEvent("request.failed", { what: "ticker", symbol, error: error.message }).pipe(Effect.as(cached?.price))
            )
          )
        }),
      /** Last prices seen so far, without asking the service. */
      knownPrices: Ref.get(prices).pipe(Effect.map((m) => new Map([...m].map(([symbol, p]) => [symbol, p.price])))),
      /** Spot balances, read again when older than `balancesRefreshMs`; the cached ones on a failed read. */
      balances: Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const cached = yield* Ref.get(balances)
        if (now - cached.at < settings.balancesRefreshMs) return cached
        return yield* refreshBalances.pipe(
          Effect.catchAll((error) => logEvent("request.failed", { what: "wallet", error: error.message }).pipe(Effect.as(cached)))
        )
      }),
      refreshBalances
    }
  })
}) {}
