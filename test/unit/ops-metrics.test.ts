import { Writable } from "node:stream"
import { Effect, Exit, FiberRef, HashSet, Scope } from "effect"
import { describe, expect, it } from "vitest"
import * as Log from "../../src/log/Logger.js"
import { DaemonMetrics } from "../../src/ops/Metrics.js"
import type { BudgetSnapshot } from "../../src/svc/Budget.js"

const discard = new Writable({ write: (_chunk, _encoding, done) => done() })

/** Runs `body` with the daemon's logger and the metrics' log hook in place, then returns the exposition. */
const exposed = (body: (metrics: DaemonMetrics) => Effect.Effect<void, never, Scope.Scope>) =>
  Effect.gen(function* () {
    const metrics = yield* DaemonMetrics
    yield* Effect.scoped(
      Effect.zipRight(Effect.locallyScopedWith(FiberRef.currentLoggers, HashSet.add(metrics.logger)), body(metrics))
    )
    return (yield* metrics.exposition).body
  }).pipe(Effect.provide(DaemonMetrics.Default), Effect.provide(Log.layer({ destination: discard, pretty: false })), Effect.runPromise)

const heartbeat = (fields: Record<string, unknown>) =>
  Log.logEvent("heartbeat", { strategy: "grid-btc", symbol: "BTCUSDT", position: "0.5", openOrders: 3, realizedPnl: "12.5", unrealizedPnl: "-3.25", fees: "0.75", netPnl: "8.5", paused: null, ...fields })

describe("daemon metrics from the log events", () => {
  it("counts order transitions per strategy, symbol and state, and nothing else of an order", async () => {
    const text = await exposed(() =>
      Effect.gen(function* () {
        const order = { strategy: "grid-btc", tag: "grid-7", intentId: "i-1", clientOrderId: "svc-123456", symbol: "BTCUSDT", side: "buy", type: "limit" }
        yield* Log.logEvent("order.intent", { ...order, notional: "100" })
        yield* Log.logEvent("order.accepted", { ...order, state: "accepted" })
        yield* Log.logEvent("order.filled", { ...order, state: "fill" })
        // Reconciliation's own line carries no state; an unheard-of state is no label value.
        yield* Log.logEvent("order.reconciled", { clientOrderId: "svc-999", symbol: "BTCUSDT", outcome: "external" })
        yield* Log.logEvent("order.rejected", { ...order, state: "exploded" })
        yield* Log.logEvent("order.cancelled", { strategy: null, clientOrderId: "svc-5", symbol: "ETHUSDT", state: "cancelled" })
      })
    )
    expect(text).toContain('svcbot_orders_total{strategy="grid-btc",symbol="BTCUSDT",state="intent"} 1')
    expect(text).toContain('svcbot_orders_total{strategy="grid-btc",symbol="BTCUSDT",state="accepted"} 1')
    expect(text).toContain('svcbot_orders_total{strategy="grid-btc",symbol="BTCUSDT",state="fill"} 1')
    expect(text).toContain('svcbot_orders_total{strategy="",symbol="ETHUSDT",state="cancelled"} 1')
    expect(text.match(/^svcbot_orders_total\{/gm)).toHaveLength(4)
    for (const unbounded of ["svc-123456", "svc-999", "grid-7", "i-1", "exploded"]) expect(text).not.toContain(unbounded)
  })

  it("shows each strategy's last heartbeat, exact decimals turned into numbers only here", async () => {
    const text = await exposed(() =>
      Effect.gen(function* () {
        yield* heartbeat({ realizedPnl: "1" })
        yield* heartbeat({ realizedPnl: "12345678.123456789", paused: "3 rejections of INSUFFICIENT_BALANCE" })
        yield* heartbeat({ strategy: "dca-btc", realizedPnl: "not a number" })
      })
    )
    // A Prometheus sample is a double: the last of the seventeen significant digits is where it rounds.
    expect(text).toContain('svcbot_realized_pnl{strategy="grid-btc",symbol="BTCUSDT"} 12345678.12345679')
    expect(text).toContain('svcbot_unrealized_pnl{strategy="grid-btc",symbol="BTCUSDT"} -3.25')
    expect(text).toContain('svcbot_net_pnl{strategy="grid-btc",symbol="BTCUSDT"} 8.5')
    expect(text).toContain('svcbot_position{strategy="grid-btc",symbol="BTCUSDT"} 0.5')
    expect(text).toContain('svcbot_open_orders{strategy="grid-btc",symbol="BTCUSDT"} 3')
    expect(text).toContain('svcbot_strategy_paused{strategy="grid-btc",symbol="BTCUSDT"} 1')
    // A heartbeat whose amounts cannot be read leaves no made-up figure.
    expect(text).not.toContain('strategy="dca-btc"')
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
