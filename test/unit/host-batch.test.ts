/**
 * The strategy host takes everything waiting in an instance's queue in one go:
 * the handlers run one after the other and the state they leave is saved once;
 * an event that emits intents is saved with them (the strategy outbox) and they
 * are submitted before the next event, whose view shows them; a handler that
 * throws puts the instance back to the state it last saved. Real SQLite file,
 * the real state store; the trading port is a recording stand-in for the engine.
 */
import { Effect, Exit, Layer, ManagedRuntime, Schema, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import type { Intent } from "../../src/domain/Intent.js"
import * as Logger from "../../src/log/Logger.js"
import { Database } from "../../src/store/Database.js"
import { FillLedger } from "../../src/store/FillLedger.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { runInstance, type AccountView, type TradingPort } from "../../src/strategy/Host.js"
import { StrategyStateStore } from "../../src/strategy/StateStore.js"
import { defineStrategy, type OpenOrder, result, type StrategyDefinition } from "../../src/strategy/Strategy.js"
import { BTCUSDT, candle, openOrderOf } from "../../src/strategy/testing.js"
import { eventually } from "../integration/engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Counts candles; emits one bid on the candle closing at 100 and notes, per candle, whether its view showed the bid open. */
const bidder = defineStrategy({
  name: "batch-bidder",
  version: "1.0.0",
  params: Schema.Struct({}),
  state: Schema.mutable(Schema.Struct({ candles: Schema.Number, sawBid: Schema.mutable(Schema.Array(Schema.Boolean)) })),
  init: () => ({ candles: 0, sawBid: [] }),
  onCandle: (state, event, view) => {
    if (event.close.eq(666)) throw new Error("the candle of the beast")
    state.candles += 1
    state.sawBid.push(view.openOrders.has("bid"))
    if (!event.close.eq(100)) return result(state)
    const bid: Intent = { type: "limit", tag: "bid", symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: new Decimal(90) }
    return result(state, [bid])
  }
})

const setup = async () => {
  const dir = mkdtempSync(join(tmpdir(), "svcbot-host-"))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(StrategyStateStore.Default, OrderJournal.Default, FillLedger.Default).pipe(
      Layer.provideMerge(Database.Default({ path: join(dir, "svcbot.sqlite") })),
      Layer.provide(Logger.layer({ destination: { write: () => undefined } }))
    )
  )
  cleanups.push(() => runtime.dispose())
  const real = await runtime.runPromise(StrategyStateStore)
  const saves: Array<{ readonly state: unknown; readonly intents: number }> = []
  // The real store, with every save noted.
  const store = StrategyStateStore.make({
    ...real,
    save: (id, stored, intents, now, recordHanded) => {
      saves.push({ state: stored === undefined ? undefined : JSON.parse(stored.state), intents: intents.length })
      return real.save(id, stored, intents, now, recordHanded)
    }
  })
  // The engine as the host sees it: what was submitted is an open order in the next view.
  const open = new Map<string, OpenOrder>()
  const submitted: Array<{ readonly tags: ReadonlyArray<string>; readonly outbox: ReadonlyArray<string>; readonly saved: unknown }> = []
  const port: TradingPort = {
    submit: (strategyId, intents) =>
      Effect.gen(function* () {
        const outbox = yield* real.outbox(strategyId)
        const saved = yield* real.load(strategyId)
        submitted.push({ tags: intents.map((i) => i.tag), outbox: outbox.map((row) => row.intent.tag), saved: saved === undefined ? undefined : JSON.parse(saved.state) })
        for (const intent of intents) if (intent.type !== "cancel") open.set(intent.tag, openOrderOf(intent))
        return []
      }),
    accountView: (): Effect.Effect<AccountView> => Effect.succeed({ balances: new Map(), openOrders: open, pairs: new Map([["BTCUSDT", BTCUSDT]]) })
  }
  const start = async (definition: StrategyDefinition = bidder, polled: ReadonlyMap<string, Decimal> = new Map()) => {
    const scope = Effect.runSync(Scope.make())
    cleanups.push(() => Effect.runPromise(Scope.close(scope, Exit.void)))
    return runtime.runPromise(
      Scope.extend(runInstance({ id: "batch", definition, params: {}, symbol: "BTCUSDT" }, port, () => polled, Date.now), scope).pipe(
        Effect.provideService(StrategyStateStore, store)
      )
    )
  }
  return { runtime, real, saves, submitted, start }
}

const stored = (real: StrategyStateStore) => Effect.map(real.load("batch"), (row) => (row === undefined ? undefined : (JSON.parse(row.state) as { candles: number; sawBid: Array<boolean> })))

describe("strategy host batches", () => {
  it("saves the state the events waiting in its queue leave once, not once per event", async () => {
    const { runtime, real, saves, start } = await setup()
    const instance = await start()
    await runtime.runPromise(Effect.forEach(Array.from({ length: 500 }, (_, i) => candle("50", (i + 1) * 60_000)), (event) => instance.deliver([{ _tag: "Candle", event }]), { discard: true }))
    const state = await runtime.runPromise(eventually(Effect.map(stored(real), (s) => (s?.candles === 500 ? s : undefined)), "every candle handled and saved"))
    expect(state.candles).toBe(500)
    // A handful of takes from the queue at most (it holds 1024 events), each one save.
    expect(saves.length).toBeLessThan(10)
  })

  it("saves and submits an event's intents before the next event of the same batch, whose view shows the order", async () => {
    const { runtime, real, submitted, start } = await setup()
    const instance = await start()
    await runtime.runPromise(Effect.forEach([candle("50", 60_000), candle("100", 120_000), candle("50", 180_000)], (event) => instance.deliver([{ _tag: "Candle", event }]), { discard: true }))
    const state = await runtime.runPromise(eventually(Effect.map(stored(real), (s) => (s?.candles === 3 ? s : undefined)), "three candles saved"))
    expect(state.sawBid).toEqual([false, false, true])
    expect(submitted).toHaveLength(1)
    // When the engine was handed the bid, it was in the outbox with the state that emitted it.
    expect(submitted[0]).toEqual({ tags: ["bid"], outbox: ["bid"], saved: { candles: 2, sawBid: [false, false] } })
  })

  it("goes back to the state it last saved when a handler throws, pauses, and goes on from there after a resume", async () => {
    const { runtime, real, start } = await setup()
    const instance = await start()
    await runtime.runPromise(instance.deliver([{ _tag: "Candle", event: candle("50", 60_000) }]))
    await runtime.runPromise(eventually(Effect.map(stored(real), (s) => (s?.candles === 1 ? s : undefined)), "the first candle saved"))
    await runtime.runPromise(
      Effect.forEach([candle("50", 120_000), candle("50", 180_000), candle("666", 240_000), candle("50", 300_000)], (event) => instance.deliver([{ _tag: "Candle", event }]), { discard: true })
    )
    const reason = await runtime.runPromise(eventually(instance.pausedReason, "the pause"))
    expect(reason).toContain("the candle of the beast")
    expect((await runtime.runPromise(stored(real)))?.candles).toBe(1)
    await runtime.runPromise(real.resume("batch", Date.now()))
    await runtime.runPromise(eventually(Effect.map(instance.pausedReason, (r) => (r === undefined ? true : undefined)), "the resume"))
    await runtime.runPromise(instance.deliver([{ _tag: "Candle", event: candle("50", 360_000) }]))
    const state = await runtime.runPromise(eventually(Effect.map(stored(real), (s) => (s !== undefined && s.candles > 1 ? s : undefined)), "the candle after the resume"))
    // The two candles handled before the throw were never saved: the instance goes on from the first.
    expect(state.candles).toBe(2)
  })

  it("shows its own pair at the price of the candle it handles, and every other pair as polled when it handles it", async () => {
    const seen = defineStrategy({
      name: "price-reader",
      version: "1.0.0",
      params: Schema.Struct({}),
      state: Schema.mutable(Schema.Struct({ candles: Schema.Number, prices: Schema.mutable(Schema.Array(Schema.String)) })),
      init: () => ({ candles: 0, prices: [] }),
      onCandle: (state, _event, view) => {
        state.candles += 1
        const listed = [...view.lastPrices].map(([symbol, price]) => `${symbol}=${price.toString()}`).join(",")
        state.prices.push(`${view.lastPrices.get("BTCUSDT")?.toString()} ${view.lastPrices.get("ETHUSDT")?.toString()} ${view.lastPrices.size} ${listed}`)
        return result(state)
      }
    })
    // A poll that came after the candles: the instance's own pair is shown at the candle's close instead.
    const polled = new Map([
      ["BTCUSDT", new Decimal("61000")],
      ["ETHUSDT", new Decimal("2000")]
    ])
    const { runtime, real, start } = await setup()
    const instance = await start(seen, polled)
    const readState = Effect.map(real.load("batch"), (row) => (row === undefined ? undefined : (JSON.parse(row.state) as { candles: number; prices: Array<string> })))
    await runtime.runPromise(instance.deliver([{ _tag: "Candle", event: candle("50", 60_000) }]))
    await runtime.runPromise(eventually(Effect.map(readState, (s) => (s?.candles === 1 ? s : undefined)), "the first candle saved"))
    polled.set("ETHUSDT", new Decimal("2100"))
    await runtime.runPromise(instance.deliver([{ _tag: "Candle", event: candle("51", 120_000) }]))
    const state = await runtime.runPromise(eventually(Effect.map(readState, (s) => (s?.candles === 2 ? s : undefined)), "the second candle saved"))
    expect(state.prices).toEqual(["50 2000 2 BTCUSDT=50,ETHUSDT=2000", "51 2100 2 BTCUSDT=51,ETHUSDT=2100"])
  })
})
