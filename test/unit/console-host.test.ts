/**
 * The console's instance controls in the strategy host: an operator's pause stops the
 * instance before its next events, stopped entries let exits and cancels through and
 * answer entries as refused (later, so a strategy cannot spin on them), and a resume lifts
 * both. Real SQLite file and state store; the trading port records what it is handed.
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
import { ENTRIES_STOPPED } from "../../src/strategy/Entries.js"
import { runInstance, type TradingPort } from "../../src/strategy/Host.js"
import { StrategyStateStore } from "../../src/strategy/StateStore.js"
import { defineStrategy, result } from "../../src/strategy/Strategy.js"
import { BTCUSDT, candle } from "../../src/strategy/testing.js"
import { eventually } from "../integration/engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Quotes both sides on every candle, a new tag each time; notes the refusal codes it hears. */
const quoter = defineStrategy({
  name: "console-quoter",
  version: "1.0.0",
  params: Schema.Struct({}),
  state: Schema.mutable(Schema.Struct({ candles: Schema.Number, refused: Schema.mutable(Schema.Array(Schema.String)) })),
  init: () => ({ candles: 0, refused: [] }),
  onCandle: (state, event) => {
    state.candles += 1
    const order = (side: "buy" | "sell"): Intent => ({ type: "limit", tag: `${side}-${state.candles}`, symbol: "BTCUSDT", side, baseQty: new Decimal("0.001"), limitPrice: event.close })
    return result(state, [order("buy"), order("sell"), { type: "cancel", tag: `buy-${state.candles - 1}` }])
  },
  onOrderUpdate: (state, update) => {
    if (update.kind === "refused") state.refused.push(`${update.tag}:${update.code ?? ""}`)
    return result(state)
  }
})

const setup = async () => {
  const dir = mkdtempSync(join(tmpdir(), "svcbot-console-host-"))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(StrategyStateStore.Default, OrderJournal.Default, FillLedger.Default).pipe(
      Layer.provideMerge(Database.Default({ path: join(dir, "svcbot.sqlite") })),
      Layer.provide(Logger.layer({ destination: { write: () => undefined } }))
    )
  )
  cleanups.push(() => runtime.dispose())
  const submitted: Array<string> = []
  const port: TradingPort = {
    submit: (_, intents) =>
      Effect.sync(() => {
        for (const intent of intents) submitted.push(intent.type === "cancel" ? `cancel ${intent.tag}` : intent.tag)
        return []
      }),
    accountView: () => Effect.succeed({ balances: new Map(), openOrders: new Map(), pairs: new Map([["BTCUSDT", BTCUSDT]]) }),
    // Long 0.0015 BTC: one 0.001 sell is an exit, a second would open a short.
    position: () => Effect.succeed(new Decimal("0.0015"))
  }
  const scope = Effect.runSync(Scope.make())
  cleanups.push(() => Effect.runPromise(Scope.close(scope, Exit.void)))
  const instance = await runtime.runPromise(Scope.extend(runInstance({ id: "q", definition: quoter, params: {}, symbol: "BTCUSDT" }, port, () => new Map(), Date.now), scope))
  const stored = Effect.map(Effect.flatMap(StrategyStateStore, (store) => store.load("q")), (row) => (row === undefined ? undefined : (JSON.parse(row.state) as { candles: number; refused: Array<string> })))
  const handled = (n: number) => runtime.runPromise(eventually(Effect.map(stored, (s) => (s !== undefined && s.candles >= n ? s : undefined)), `candle ${n} handled`))
  const give = (n: number) => runtime.runPromise(instance.deliver([{ _tag: "Candle", event: candle("60000", n * 60_000) }]))
  return { runtime, instance, submitted, handled, give, stored }
}

describe("operator controls of a strategy instance", () => {
  it("stopped entries send exits and cancels, refuse entries with a later answer, and a resume lets entries out again", async () => {
    const { runtime, instance, submitted, handled, give, stored } = await setup()
    await give(1)
    await handled(1)
    expect(submitted).toEqual(["buy-1", "sell-1", "cancel buy-0"])
    expect(await runtime.runPromise(instance.stopEntries)).toBe("entries stopped")
    expect(await runtime.runPromise(instance.stopEntries)).toBe("entries already stopped")
    submitted.length = 0
    await give(2)
    await handled(2)
    // The buy adds to the long position: refused. The sell reduces it: out, with the cancel.
    expect(submitted).toEqual(["sell-2", "cancel buy-1"])
    expect((await runtime.runPromise(stored))!.refused).toEqual([])
    const answered = await runtime.runPromise(eventually(Effect.map(stored, (s) => (s !== undefined && s.refused.length > 0 ? s.refused : undefined)), "the refused entry's answer", 15_000))
    expect(answered).toEqual([`buy-2:${ENTRIES_STOPPED}`])
    // Refused entries never count towards a pause: the instance runs on.
    expect(await runtime.runPromise(instance.pausedReason)).toBeUndefined()
    expect(await runtime.runPromise(instance.resume)).toBe("resumed")
    submitted.length = 0
    await give(3)
    await handled(3)
    expect(submitted).toEqual(["buy-3", "sell-3", "cancel buy-2"])
  }, 30_000)

  it("an operator's pause stops the instance before its next event and is stored for svcbot status; a resume lifts it", async () => {
    const { runtime, instance, submitted, handled, give, stored } = await setup()
    await give(1)
    await handled(1)
    expect(await runtime.runPromise(instance.pause("paused by an operator from the console"))).toBe("paused")
    expect(await runtime.runPromise(instance.pause("again"))).toBe("already paused")
    const reason = await runtime.runPromise(Effect.flatMap(StrategyStateStore, (store) => store.pausedReason("q")))
    expect(reason).toBe("paused by an operator from the console")
    submitted.length = 0
    // Dropped as it is given: the candle never reaches the handler, before or after the resume.
    await give(2)
    expect(submitted).toEqual([])
    expect((await runtime.runPromise(stored))!.candles).toBe(1)
    expect(await runtime.runPromise(instance.resume)).toBe("resumed")
    expect(await runtime.runPromise(instance.resume)).toBe("not paused")
    expect(await runtime.runPromise(Effect.flatMap(StrategyStateStore, (store) => store.pausedReason("q")))).toBeNull()
    await give(3)
    await handled(2)
    expect(submitted).toEqual(["buy-2", "sell-2", "cancel buy-1"])
  }, 30_000)
})
