/**
 * What the engine knows about the market and the account between requests:
 * pair rules (exchange-info, cached and refreshed), last prices, spot balances.
 * Reads go through the client at the lowest priorities its budget governor has.
 */
import { Clock, Effect, FiberSet, Ref } from "effect"
import type { Decimal } from "../domain/Decimal.js"
import { logRequestFailed, type SvcError } from "../svc/Errors.js"
import { SvcClient } from "../svc/SvcClient.js"
import type { Balance } from "../strategy/Strategy.js"
import type { ListedPair } from "./Risk.js"
import { EngineSettings } from "./Settings.js"

export interface BalanceSnapshot {
  /** Local time the wallet was read; orders accepted after it are not yet reflected in `free`. */
  readonly at: number
  readonly byAsset: ReadonlyMap<string, Balance>
}

export class Market extends Effect.Service<Market>()("svcbot/Market", {
  scoped: Effect.gen(function* () {
    const client = yield* SvcClient
    const settings = (yield* EngineSettings).market
    const pairs = yield* Ref.make<{ readonly at: number; readonly bySymbol: ReadonlyMap<string, ListedPair> }>({
      at: Number.NEGATIVE_INFINITY,
      bySymbol: new Map()
    })
    const prices = yield* Ref.make<ReadonlyMap<string, { readonly price: Decimal; readonly at: number }>>(new Map())
    const balances = yield* Ref.make<BalanceSnapshot>({ at: Number.NEGATIVE_INFINITY, byAsset: new Map() })
    // Stale values are refreshed in the background: a strategy's submit never waits on a read.
    const refreshes = yield* FiberSet.make()
    const refreshing = new Set<string>()
    const refreshInBackground = (what: string, refresh: Effect.Effect<unknown, SvcError>) =>
      refreshing.has(what)
        ? Effect.void
        : Effect.sync(() => refreshing.add(what)).pipe(
            Effect.zipRight(
              FiberSet.run(
                refreshes,
                refresh.pipe(
                  // Here and below, a refused answer was logged by the client, naming the endpoint and the field.
                  Effect.catchAll((error) => logRequestFailed(error, { what })),
                  Effect.ensuring(Effect.sync(() => refreshing.delete(what)))
                )
              )
            ),
            Effect.asVoid
          )

    const refreshPairs: Effect.Effect<ReadonlyMap<string, ListedPair>, SvcError> = Effect.gen(function* () {
      const list = yield* client.exchangeInfo()
      const now = yield* Clock.currentTimeMillis
      // A list with no pair at all, after one with pairs, is the exchange not open for business for
      // a moment (maintenance), not every pair delisted: the rules known stay, until the next
      // refresh. Taken as is, every intent would be refused as unlisted, and every read of the rules
      // would ask the exchange again.
      const known = (yield* Ref.get(pairs)).bySymbol
      const bySymbol = list.length === 0 && known.size > 0 ? known : new Map(list.map((pair) => [pair.symbol, pair as ListedPair]))
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
      /** Pair rules; older than the refresh period they are refreshed in the background. Only the first read waits. */
      pairs: Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const cached = yield* Ref.get(pairs)
        if (cached.bySymbol.size === 0) return yield* refreshPairs
        if (now - cached.at >= settings.pairsRefreshMs) yield* refreshInBackground("exchange-info", refreshPairs)
        return cached.bySymbol
      }),
      refreshPairs,
      /**
       * The last price; one older than `priceMaxAgeMs` is returned as is and refreshed in the
       * background. Only a symbol never priced waits for the service; undefined when it cannot be read.
       */
      lastPrice: (symbol: string): Effect.Effect<Decimal | undefined> =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const cached = (yield* Ref.get(prices)).get(symbol)
          if (cached !== undefined) {
            if (now - cached.at >= settings.priceMaxAgeMs) yield* refreshInBackground(`ticker ${symbol}`, fetchPrice(symbol))
            return cached.price
          }
          return yield* fetchPrice(symbol).pipe(
            Effect.catchAll((error) =>
              logRequestFailed(error, { what: "ticker", symbol }).pipe(Effect.as(undefined))
            )
          )
        }),
      /** Last prices seen so far, without asking the service. */
      knownPrices: Ref.get(prices).pipe(Effect.map((m) => new Map([...m].map(([symbol, p]) => [symbol, p.price])))),
      /** Spot balances; older than `balancesRefreshMs` they are refreshed in the background. Only the first read waits. */
      balances: Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const cached = yield* Ref.get(balances)
        if (cached.at > Number.NEGATIVE_INFINITY) {
          if (now - cached.at >= settings.balancesRefreshMs) yield* refreshInBackground("wallet", refreshBalances)
          return cached
        }
        return yield* refreshBalances.pipe(
          Effect.catchAll((error) => logRequestFailed(error, { what: "wallet" }).pipe(Effect.as(cached)))
        )
      }),
      refreshBalances
    }
  })
}) {}
