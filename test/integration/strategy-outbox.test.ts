/**
 * The strategy outbox: a handler's state and the intents it emitted are saved in
 * one transaction, and each intent leaves the outbox in the transaction that
 * journals it. A stop between the two hands the saved intents to the engine on the
 * next start, once, before anything new reaches the strategy. Real venue over
 * loopback, real SQLite file, the daemon's own trading port.
 */
import { Effect, Either, Exit, Layer, ManagedRuntime, Schema, Scope } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { tradingPort } from "../../src/daemon/Daemon.js"
import { Decimal } from "../../src/domain/Decimal.js"
import { IntentFromJson, type Intent } from "../../src/domain/Intent.js"
import { Engine, layer as engineLayer } from "../../src/engine/Engine.js"
import * as Logger from "../../src/log/Logger.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { runInstance, type InstanceSpec, type TradingPort } from "../../src/strategy/Host.js"
import { StrategyStateStore } from "../../src/strategy/StateStore.js"
import { defineStrategy, isFinalUpdate, result } from "../../src/strategy/Strategy.js"
import { candle } from "../../src/strategy/testing.js"
import { startVenue, type TestVenue } from "../support/venue.js"
import { CapturedLog, clientLayer, eventually, tempDbPath, testOptions } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const STRATEGY_ID = "outbox"

/** Bids far below the market, one order at a time, tagged from a counter in its state. */
const bidder = defineStrategy({
  name: "outbox-bidder",
  version: "1.0.0",
  params: Schema.Struct({}),
  state: Schema.mutable(Schema.Struct({ seq: Schema.Number, waiting: Schema.NullOr(Schema.String) })),
  init: () => ({ seq: 0, waiting: null }),
  onCandle: (state) => {
    if (state.waiting !== null) return result(state)
    state.seq += 1
    state.waiting = `bid-${state.seq}`
    const intent: Intent = { type: "limit", tag: state.waiting, symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: new Decimal("30000") }
    return result(state, [intent])
  },
  onOrderUpdate: (state, update) => {
    if (update.tag === state.waiting && isFinalUpdate(update.kind)) state.waiting = null
    return result(state)
  }
})

const spec = { id: STRATEGY_ID, definition: bidder, params: {}, symbol: "BTCUSDT" }

const setup = async () => {
  const venue = await startVenue()
  cleanups.push(() => venue.close())
  const db = tempDbPath()
  cleanups.push(db.cleanup)
  const log = new CapturedLog()
  const runtime = ManagedRuntime.make(
    StrategyStateStore.Default.pipe(
      Layer.provideMerge(engineLayer(testOptions(db.path))),
      Layer.provideMerge(clientLayer(venue)),
      Layer.provide(Logger.layer({ destination: log.stream, level: "debug" }))
    )
  )
  cleanups.push(() => runtime.dispose())
  return { venue, runtime, log }
}

type Runtime = Awaited<ReturnType<typeof setup>>["runtime"]

/** Starts the instance in a scope of its own; closing the scope stops it as a process stop would. */
const start = (runtime: Runtime, port: TradingPort, definition: InstanceSpec["definition"] = bidder) =>
  runtime.runPromise(
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const instance = yield* Scope.extend(runInstance({ ...spec, definition }, port, () => new Map(), Date.now), scope)
      return { instance, stop: () => runtime.runPromise(Scope.close(scope, Exit.void)) }
    })
  )

const journaledTags = (runtime: Runtime) =>
  runtime.runPromise(Effect.map(Effect.flatMap(OrderJournal, (j) => j.intents), (all) => all.filter((i) => i.strategyId === STRATEGY_ID).map((i) => i.tag)))

const outbox = (runtime: Runtime) => runtime.runPromise(Effect.flatMap(StrategyStateStore, (store) => store.outbox(STRATEGY_ID)))

const venueOrders = async (venue: TestVenue): Promise<number> => (await venue.admin("GET", `/_venue/orders?uid=${venue.uid}`)).orders.length

describe("strategy outbox", () => {
  it("hands intents saved with the state but never journaled to the engine on the next start, exactly once", async () => {
    const { venue, runtime, log } = await setup()
    const engine = await runtime.runPromise(Engine)

    // The process stops after the handler's state and intent were saved and before the engine journaled it.
    const stalled: TradingPort = { ...tradingPort(engine), submit: () => Effect.never }
    const first = await start(runtime, stalled)
    await runtime.runPromise(first.instance.deliver([{ _tag: "Candle", event: candle("60000", 0) }]))
    const saved = await runtime.runPromise(eventually(Effect.map(Effect.flatMap(StrategyStateStore, (s) => s.outbox(STRATEGY_ID)), (rows) => (rows.length > 0 ? rows : undefined)), "the outbox row"))
    await first.stop()
    expect(saved.map((row) => row.intent.tag)).toEqual(["bid-1"])
    const state = await runtime.runPromise(Effect.flatMap(StrategyStateStore, (s) => s.load(STRATEGY_ID)))
    expect(JSON.parse(state!.state)).toEqual({ seq: 1, waiting: "bid-1" })
    expect(await journaledTags(runtime)).toEqual([])
    expect(await venueOrders(venue)).toBe(0)

    // The next start journals and sends it before the instance hears anything new.
    const second = await start(runtime, tradingPort(engine))
    expect(await journaledTags(runtime)).toEqual(["bid-1"])
    expect(await outbox(runtime)).toEqual([])
    expect(log.events("strategy.outbox")).toMatchObject([{ strategy: STRATEGY_ID, intents: 1 }])
    await runtime.runPromise(eventually(Effect.promise(async () => ((await venueOrders(venue)) === 1 ? true : undefined)), "the order at the venue"))
    await second.stop()

    // A start with nothing left over sends nothing again.
    const third = await start(runtime, tradingPort(engine))
    await third.stop()
    expect(await journaledTags(runtime)).toEqual(["bid-1"])
    expect(log.events("strategy.outbox")).toHaveLength(1)
    expect(await venueOrders(venue)).toBe(1)
  })

  it("does not place what another plugin left under the same id", async () => {
    const { venue, runtime, log } = await setup()
    const engine = await runtime.runPromise(Engine)
    const first = await start(runtime, { ...tradingPort(engine), submit: () => Effect.never })
    await runtime.runPromise(first.instance.deliver([{ _tag: "Candle", event: candle("60000", 0) }]))
    await runtime.runPromise(eventually(Effect.map(Effect.flatMap(StrategyStateStore, (s) => s.outbox(STRATEGY_ID)), (rows) => (rows.length > 0 ? true : undefined)), "the outbox row"))
    await first.stop()

    const replaced = await start(runtime, tradingPort(engine), defineStrategy({ ...bidder, name: "another-bidder" }))
    await replaced.stop()
    expect(await outbox(runtime)).toEqual([])
    expect(await journaledTags(runtime)).toEqual([])
    expect(await venueOrders(venue)).toBe(0)
    expect(log.events("strategy.outbox")).toMatchObject([{ strategy: STRATEGY_ID, intents: 1, action: expect.stringContaining("dropped") }])
  })

  it("takes each intent out of the outbox as the engine journals it, refusals included", async () => {
    const { runtime } = await setup()
    const engine = await runtime.runPromise(Engine)
    const running = await start(runtime, tradingPort(engine))
    // A bid that is journaled, then a cancel of an unknown tag that the engine refuses.
    await runtime.runPromise(running.instance.deliver([{ _tag: "Candle", event: candle("60000", 0) }]))
    await runtime.runPromise(eventually(Effect.promise(async () => ((await journaledTags(runtime)).length === 1 ? true : undefined)), "the bid journaled"))
    const [refused] = await runtime.runPromise(engine.submit(STRATEGY_ID, [{ type: "cancel", tag: "no-such-order" }], await saveIntent(runtime, { type: "cancel", tag: "no-such-order" })))
    await running.stop()
    expect(refused?._tag).toBe("Refused")
    expect(await outbox(runtime)).toEqual([])
    expect(await journaledTags(runtime)).toEqual(["bid-1", "no-such-order"])
  })

  it("stores every kind of intent exactly, amounts as decimal strings", () => {
    const intents: ReadonlyArray<Intent> = [
      { type: "limit", tag: "a", symbol: "BTCUSDT", side: "sell", baseQty: new Decimal("0.00001"), limitPrice: new Decimal("123456789.12345678") },
      { type: "stop-limit", tag: "b", symbol: "BTCUSDT", side: "sell", baseQty: new Decimal("1.5"), limitPrice: new Decimal("59000"), stopPrice: new Decimal("59100.01") },
      { type: "market", tag: "c", symbol: "BTCUSDT", side: "buy", quoteOrderQty: new Decimal("100.000000000000000001"), maxSlippageBps: 50 },
      { type: "market", tag: "d", symbol: "ETHUSDT", side: "sell", baseQty: new Decimal("0.1234"), maxSlippageBps: 1000 },
      { type: "cancel", tag: "e" }
    ]
    for (const intent of intents) {
      const stored = JSON.stringify(Schema.encodeSync(IntentFromJson)(intent))
      const back = Schema.decodeUnknownSync(IntentFromJson)(JSON.parse(stored))
      expect(back).toEqual(intent)
      for (const [field, value] of Object.entries(intent)) if (Decimal.isDecimal(value)) expect(JSON.parse(stored)[field]).toBe((value as Decimal).toFixed())
    }
    const broken = Schema.decodeUnknownEither(IntentFromJson)({ type: "limit", tag: "x", symbol: "BTCUSDT", side: "buy", baseQty: "1e", limitPrice: "1" })
    expect(Either.isLeft(broken)).toBe(true)
  })
})

/** Saves one intent in the outbox as a handler's would be, returning its row id. */
const saveIntent = (runtime: Runtime, intent: Intent) =>
  runtime.runPromise(Effect.flatMap(StrategyStateStore, (store) => store.save(STRATEGY_ID, undefined, [intent], Date.now())))
