import { Effect, Exit, Scope, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import type { FillUpdate, OrderUpdate } from "../../src/engine/EngineBus.js"
import { DaemonMetrics, type StrategyFigures } from "../../src/ops/Metrics.js"
import type { BudgetSnapshot } from "../../src/svc/Governor.js"

/** Runs `body` with the metrics in place, then returns the exposition. */
const exposed = (body: (metrics: DaemonMetrics) => Effect.Effect<void, never, Scope.Scope>) =>
  Effect.gen(function* () {
    const metrics = yield* DaemonMetrics
    yield* Effect.scoped(body(metrics))
    return (yield* metrics.exposition).body
  }).pipe(Effect.provide(DaemonMetrics.Default), Effect.runPromise)

const d = (value: string) => new Decimal(value)

const figures = (fields: Partial<StrategyFigures>): StrategyFigures => ({
  symbol: "BTCUSDT",
  position: d("0.5"),
  openOrders: 3,
  realizedPnl: d("12.5"),
  unrealizedPnl: d("-3.25"),
  fees: d("0.75"),
  netPnl: d("8.5"),
  paused: false,
  ...fields
})

const update = (fields: Pick<OrderUpdate, "strategyId" | "symbol" | "state"> & Partial<OrderUpdate>): OrderUpdate => ({
  tag: "grid-7",
  intentId: "i-1",
  orderId: 1,
  clientOrderId: "svc-123456",
  kind: null,
  code: null,
  filledBaseQty: d("0"),
  at: 0,
  ...fields
})

describe("daemon metrics", () => {
  it("counts the engine's order moves per strategy, symbol and state, and nothing else of an order", async () => {
    const text = await exposed((metrics) =>
      Effect.gen(function* () {
        const moves = ["intent", "submitting", "accepted", "fill"] as const
        const updates = [
          ...moves.map((state) => update({ strategyId: "grid-btc", symbol: "BTCUSDT", state })),
          // An order found on the exchange that no strategy placed.
          update({ strategyId: null, symbol: "ETHUSDT", state: "cancelled", clientOrderId: "svc-5", tag: null })
        ]
        yield* metrics.countOrders(Stream.fromIterable(updates))
        // The count runs on its own fiber: let it take the stream.
        yield* Effect.yieldNow()
        yield* Effect.sleep(10)
      })
    )
    expect(text).toContain('svcbot_orders_total{strategy="grid-btc",symbol="BTCUSDT",state="intent"} 1')
    expect(text).toContain('svcbot_orders_total{strategy="grid-btc",symbol="BTCUSDT",state="accepted"} 1')
    expect(text).toContain('svcbot_orders_total{strategy="grid-btc",symbol="BTCUSDT",state="fill"} 1')
    expect(text).toContain('svcbot_orders_total{strategy="",symbol="ETHUSDT",state="cancelled"} 1')
    expect(text.match(/^svcbot_orders_total\{/gm)).toHaveLength(5)
    for (const unbounded of ["svc-123456", "svc-5", "grid-7", "i-1"]) expect(text).not.toContain(unbounded)
  })

  it("counts each fill once: not again when it is published again with its strategy after its order was adopted", async () => {
    const fill = (fillId: string): FillUpdate["fill"] => ({
      fillId,
      clientOrderId: "svc-9",
      symbol: "BTCUSDT",
      side: "buy",
      liquidity: "taker",
      price: d("60000"),
      baseQty: d("0.001"),
      quoteQty: d("60"),
      fee: d("0.06"),
      feeAsset: "USDT",
      time: 0,
      raw: "{}"
    })
    const text = await exposed((metrics) =>
      Effect.gen(function* () {
        yield* metrics.countFills(
          Stream.fromIterable<FillUpdate>([
            // Synced while its order was a lost placement: no strategy yet.
            { strategyId: null, tag: null, fill: fill("1") },
            { strategyId: "dca", tag: "buy-1", fill: fill("1"), late: true },
            { strategyId: "dca", tag: "buy-1", fill: fill("2") }
          ])
        )
        yield* Effect.yieldNow()
        yield* Effect.sleep(10)
      })
    )
    expect(text).toContain('svcbot_fills_total{strategy="",symbol="BTCUSDT",side="buy"} 1')
    expect(text).toContain('svcbot_fills_total{strategy="dca",symbol="BTCUSDT",side="buy"} 1')
  })

  it("shows each strategy's last heartbeat figures, exact decimals turned into numbers only here", async () => {
    const text = await exposed((metrics) =>
      Effect.sync(() => {
        metrics.strategyFigures("grid-btc", figures({ realizedPnl: d("1") }))
        metrics.strategyFigures("grid-btc", figures({ realizedPnl: d("12345678.123456789"), paused: true }))
      })
    )
    // A Prometheus sample is a double: the last of the seventeen significant digits is where it rounds.
    expect(text).toContain('svcbot_realized_pnl{strategy="grid-btc",symbol="BTCUSDT"} 12345678.12345679')
    expect(text).toContain('svcbot_unrealized_pnl{strategy="grid-btc",symbol="BTCUSDT"} -3.25')
    expect(text).toContain('svcbot_net_pnl{strategy="grid-btc",symbol="BTCUSDT"} 8.5')
    expect(text).toContain('svcbot_position{strategy="grid-btc",symbol="BTCUSDT"} 0.5')
    expect(text).toContain('svcbot_open_orders{strategy="grid-btc",symbol="BTCUSDT"} 3')
    expect(text).toContain('svcbot_strategy_paused{strategy="grid-btc",symbol="BTCUSDT"} 1')
  })

  it("shows a key's budget under its masked id while the client lives, and forgets it after", async () => {
    const keyId = "svk_live_abcdefghijklmnopqrstuvwxyz"
    const snapshot: BudgetSnapshot = { usedWeight1m: 120, weightLimit1m: 1200, ordersUsed10s: 2, ordersLimit10s: null, ordersUsed1d: 40, ordersLimit1d: 100000, waits: 5, rateLimited: 1 }
    let during = ""
    const after = await exposed((metrics) =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        yield* Scope.extend(metrics.watchBudget(keyId, Effect.succeed(snapshot)), scope)
        during = (yield* metrics.exposition).body
        yield* Scope.close(scope, Exit.void)
      })
    )
    expect(during).toContain('svcbot_budget_used_weight_1m{key="svk_live_abc…"} 120')
    expect(during).toContain('svcbot_budget_weight_limit_1m{key="svk_live_abc…"} 1200')
    expect(during).toContain('svcbot_budget_waits_total{key="svk_live_abc…"} 5')
    expect(during).toContain('svcbot_rate_limited_total{key="svk_live_abc…"} 1')
    // A limit the exchange has not reported yet has no sample.
    expect(during).not.toMatch(/^svcbot_budget_orders_limit_10s\{/m)
    expect(during).not.toContain(keyId)
    expect(after).not.toMatch(/^svcbot_budget_used_weight_1m\{/m)
  })
})
