/**
 * What became of an instance's orders while it did not run reaches it when it is restored:
 * the final updates and fills it was never handed come first, in the order they came about
 * (an order's fills before its final update), each once, also when the engine publishes a copy
 * later. An instance that starts from init is not handed outcomes of orders its state never
 * knew. Real venue over loopback, real SQLite file, the daemon's own trading port.
 */
import { Effect, Exit, Layer, ManagedRuntime, Schema, Scope } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { tradingPort } from "../../src/daemon/Daemon.js"
import { fillEventOf } from "../../src/daemon/FillEvents.js"
import { Decimal } from "../../src/domain/Decimal.js"
import { Engine, layer as engineLayer } from "../../src/engine/Engine.js"
import * as Logger from "../../src/log/Logger.js"
import { FillLedger } from "../../src/store/FillLedger.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { runInstance, type InstanceSpec } from "../../src/strategy/Host.js"
import { StrategyStateStore } from "../../src/strategy/StateStore.js"
import { defineStrategy, isFinalUpdate, result, type StrategyDefinition } from "../../src/strategy/Strategy.js"
import { candle, update } from "../../src/strategy/testing.js"
import { startVenue } from "../support/venue.js"
import { CapturedLog, clientLayer, eventually, tempDbPath, testOptions } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const STRATEGY_ID = "restore"

/** Bids at each candle's close, and notes every final update and fill it hears. */
const recorder = defineStrategy({
  name: "restore-recorder",
  version: "1.0.0",
  params: Schema.Struct({}),
  state: Schema.mutable(Schema.Struct({ seq: Schema.Number, heard: Schema.mutable(Schema.Array(Schema.String)) })),
  init: () => ({ seq: 0, heard: [] }),
  onCandle: (state, event) => {
    state.seq += 1
    return result(state, [{ type: "limit", tag: `bid-${state.seq}`, symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: event.close }])
  },
  onOrderUpdate: (state, event) => {
    if (isFinalUpdate(event.kind)) state.heard.push(`${event.kind} ${event.tag}`)
    return result(state)
  },
  onFill: (state, event) => {
    state.heard.push(`fill-event ${event.tag}`)
    return result(state)
  }
})

const setup = async () => {
  const venue = await startVenue()
  cleanups.push(() => venue.close())
  await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60000" })
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
  const engine = await runtime.runPromise(Engine)
  const spec: InstanceSpec = { id: STRATEGY_ID, definition: recorder, params: {}, symbol: "BTCUSDT" }
  /** Starts the instance in a scope of its own; closing the scope stops it as a process stop would. */
  const start = (definition: StrategyDefinition = recorder) =>
    runtime.runPromise(
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const instance = yield* Scope.extend(runInstance({ ...spec, definition }, tradingPort(engine), () => new Map(), Date.now), scope)
        return { instance, stop: () => runtime.runPromise(Scope.close(scope, Exit.void)) }
      })
    )
  const stored = () =>
    runtime.runPromise(Effect.map(Effect.flatMap(StrategyStateStore, (s) => s.load(STRATEGY_ID)), (row) => (row === undefined ? undefined : (JSON.parse(row.state) as { seq: number; heard: Array<string> }))))
  /** Waits until the stored state satisfies `ok`. */
  const storedWhen = (what: string, ok: (state: { seq: number; heard: Array<string> }) => boolean) =>
    runtime.runPromise(eventually(Effect.promise(async () => {
      const state = await stored()
      return state !== undefined && ok(state) ? state : undefined
    }), what))
  const orderState = (tag: string) => runtime.runPromise(Effect.flatMap(OrderJournal, (j) => j.latestByTag(STRATEGY_ID, tag)))
  const orderIn = (tag: string, state: string) =>
    runtime.runPromise(eventually(Effect.promise(async () => ((await orderState(tag))?.state === state ? true : undefined)), `${tag} ${state}`))
  return { venue, runtime, log, engine, start, stored, storedWhen, orderState, orderIn }
}

describe("a restored strategy instance", () => {
  it("hears first, once and in order, the final updates and fills of its orders that came while it did not run", async () => {
    const { venue, runtime, log, engine, start, storedWhen, orderState, orderIn } = await setup()
    const first = await start()
    await runtime.runPromise(first.instance.deliver([{ _tag: "Candle", event: candle("59000", 60_000) }]))
    await runtime.runPromise(first.instance.deliver([{ _tag: "Candle", event: candle("58000", 120_000) }]))
    await orderIn("bid-1", "resting")
    await orderIn("bid-2", "resting")
    await first.stop()

    // While the instance does not run, bid-1 is cancelled, then the price trades through bid-2.
    await runtime.runPromise(engine.submit(STRATEGY_ID, [{ type: "cancel", tag: "bid-1" }]))
    await orderIn("bid-1", "cancelled")
    await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "57000" })
    await orderIn("bid-2", "fill")
    const clientOrderId = (await orderState("bid-2"))!.clientOrderId!
    const [filled] = await runtime.runPromise(
      eventually(Effect.map(Effect.flatMap(FillLedger, (l) => l.forOrder(clientOrderId)), (fills) => (fills.length > 0 ? fills : undefined)), "bid-2's fill synced")
    )

    const second = await start()
    const restored = await storedWhen("the missed outcomes handled", (s) => s.heard.length >= 3)
    expect(restored.heard).toEqual(["cancelled bid-1", "fill-event bid-2", "fill bid-2"])
    expect(log.events("strategy.missed")).toMatchObject([{ strategy: STRATEGY_ID, orderUpdates: 2, fills: 1 }])

    // A copy of what it was handed (the engine publishing it once the instance runs) is not handed again.
    await runtime.runPromise(second.instance.deliver([{ _tag: "OrderUpdate", event: { ...update("bid-1", "cancelled"), clientOrderId: (await orderState("bid-1"))!.clientOrderId! } }]))
    await runtime.runPromise(second.instance.deliver([{ _tag: "Fill", event: fillEventOf(filled!, "bid-2") }]))
    await runtime.runPromise(second.instance.deliver([{ _tag: "Candle", event: candle("56000", 180_000) }]))
    const after = await storedWhen("the candle after the copies", (s) => s.seq === 3)
    expect(after.heard).toEqual(["cancelled bid-1", "fill-event bid-2", "fill bid-2"])
    await orderIn("bid-3", "resting")
    await second.stop()

    // Nothing is owed any more: the next start hands nothing.
    const third = await start()
    await runtime.runPromise(third.instance.deliver([{ _tag: "Candle", event: candle("56000", 240_000) }]))
    expect((await storedWhen("the next start's candle", (s) => s.seq === 4)).heard).toEqual(["cancelled bid-1", "fill-event bid-2", "fill bid-2"])
    await third.stop()
    expect(log.events("strategy.missed")).toHaveLength(1)
  })

  it("does not hand an instance that starts from init the outcomes of orders its state never knew", async () => {
    const { runtime, log, engine, start, storedWhen, orderIn } = await setup()
    const first = await start()
    await runtime.runPromise(first.instance.deliver([{ _tag: "Candle", event: candle("59000", 60_000) }]))
    await orderIn("bid-1", "resting")
    await first.stop()
    await runtime.runPromise(engine.submit(STRATEGY_ID, [{ type: "cancel", tag: "bid-1" }]))
    await orderIn("bid-1", "cancelled")

    // Another plugin under the same id starts from init.
    const replaced = await start(defineStrategy({ ...recorder, name: "another-recorder" }))
    await runtime.runPromise(replaced.instance.deliver([{ _tag: "Candle", event: candle("58000", 120_000) }]))
    expect((await storedWhen("the candle handled", (s) => s.seq === 1)).heard).toEqual([])
    await replaced.stop()
    expect(log.events("strategy.missed")).toMatchObject([{ strategy: STRATEGY_ID, orderUpdates: 1, fills: 0, action: expect.stringContaining("not handed") }])
  })
})
