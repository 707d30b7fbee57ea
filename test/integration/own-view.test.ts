/**
 * What a strategy with an allocation reads as its balances: its own book (its allocation
 * moved by its own fills), of which its unfinished orders hold the unfilled part, never the
 * account's. An instance without an allocation reads the account's balances.
 */
import { Effect } from "effect"
import { afterEach, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { Engine } from "../../src/engine/Engine.js"
import { startVenue } from "../support/venue.js"
import { eventually, startEngine, tempDbPath, testOptions } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const shown = (balances: ReadonlyMap<string, { readonly free: Decimal; readonly locked: Decimal }>, asset: string) => {
  const b = balances.get(asset)
  return b === undefined ? undefined : `${b.free.toFixed()} free, ${b.locked.toFixed()} locked`
}

it("an allocated instance reads its own book and what its resting order holds of it; another reads the account", async () => {
  const venue = await startVenue()
  cleanups.push(() => venue.close())
  const db = tempDbPath()
  cleanups.push(db.cleanup)
  const allocations = new Map([["own", { USDT: new Decimal("1000"), BTC: new Decimal("0.01") }]])
  const engine = await startEngine(venue, testOptions(db.path, { allocations }))
  cleanups.push(() => engine.runtime.dispose())

  const before = await engine.run(Effect.flatMap(Engine, (e) => e.view("own")))
  expect(shown(before.balances, "USDT")).toBe("1000 free, 0 locked")
  expect(shown(before.balances, "BTC")).toBe("0.01 free, 0 locked")

  // A bid far below the price rests: it holds 0.002 × 30000 = 60 USDT of the instance's own 1000.
  await engine.run(
    Effect.flatMap(Engine, (e) => e.submit("own", [{ type: "limit", tag: "bid", symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.002"), limitPrice: new Decimal("30000") }]))
  )
  const resting = await engine.run(
    eventually(
      Effect.map(Effect.flatMap(Engine, (e) => e.view("own")), (view) => (view.openOrders.get("bid")?.state === "resting" ? view : undefined)),
      "the bid resting"
    )
  )
  expect(shown(resting.balances, "USDT")).toBe("940 free, 60 locked")

  const other = await engine.run(Effect.flatMap(Engine, (e) => e.view("other")))
  // The test venue's account holds far more than the allocation.
  expect(other.balances.get("USDT")?.free.gt(1000), "the account's USDT").toBe(true)
})
