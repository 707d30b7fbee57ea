/**
 * The order budget shared in turns: with the venue's order budget squeezed and several
 * instances waiting, the placements go out one instance after the other, not in the order
 * they were submitted. The grants are counted per window of the venue's order budget (the
 * order within a window is the order of concurrent requests on the wire, so only counts).
 */
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Engine } from "../../src/engine/Engine.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { engineOnVenue, eventually, restingBids } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Orders per 10 s the venue allows. */
const LIMIT = 6
const ORDER_WINDOW_MS = 10_000

describe("the order budget shared in turns", () => {
  it("grants placements to the waiting instances in turn while the order budget binds", async () => {
    const { venue, engine } = await engineOnVenue(cleanups, { venue: { settleMs: 0, limits: { ordersPer10s: LIMIT, weightPerMinute: 100_000 } }, price: "60000" })
    const submit = (strategyId: string, count: number) =>
      engine.run(Effect.flatMap(Engine, (e) => e.submit(strategyId, restingBids(strategyId, count))))
    const accepted = (strategyId: string) =>
      Effect.map(Effect.flatMap(OrderJournal, (j) => j.forStrategy(strategyId)), (rows) => rows.filter((o) => o.clientOrderId !== null))

    // The first instance uses the budget up: more than two windows' worth, so that one of its
    // placements still waits for the budget when the others submit, whenever a window ends.
    await submit("first", 2 * LIMIT)
    await engine.run(eventually(Effect.map(accepted("first"), (rows) => (rows.length >= LIMIT ? rows : undefined)), "a window's worth of placements"))
    // Then three more, the first with the most: in the order submitted, its placements would all go before the others'.
    const later = { a: 3, b: 3, c: 3 } as const
    for (const [id, count] of Object.entries(later)) await submit(id, count)
    await engine.run(
      eventually(
        Effect.map(Effect.all(Object.keys(later).map(accepted)), (lists) => (lists.every((rows, i) => rows.length === Object.values(later)[i]) ? lists : undefined)),
        "every placement of the later instances to be accepted",
        50_000
      )
    )

    // Who placed each order, and the venue's order window it was accepted in.
    const instanceOf = new Map<string, string>()
    for (const id of Object.keys(later)) for (const row of await engine.run(accepted(id))) instanceOf.set(row.clientOrderId!, id)
    const onVenue = (await venue.admin("GET", `/_venue/orders?uid=${venue.uid}`)).orders as Array<{ clientOrderId: string; createdAt: number }>
    const windows = new Map<number, Record<string, number>>()
    for (const order of onVenue) {
      const id = instanceOf.get(order.clientOrderId)
      if (id === undefined) continue
      const window = Math.floor(order.createdAt / ORDER_WINDOW_MS)
      const counts = windows.get(window) ?? { a: 0, b: 0, c: 0 }
      counts[id]! += 1
      windows.set(window, counts)
    }
    // At the end of every window the three have had the same number of grants, give or take one.
    const total: Record<string, number> = { a: 0, b: 0, c: 0 }
    const seen: Array<Record<string, number>> = []
    for (const window of [...windows.keys()].sort((x, y) => x - y)) {
      for (const [id, n] of Object.entries(windows.get(window)!)) total[id]! += n
      seen.push({ ...total })
    }
    for (const counts of seen) expect(Math.max(...Object.values(counts)) - Math.min(...Object.values(counts)), JSON.stringify(seen)).toBeLessThanOrEqual(1)
    // The budget bound: they took more than one window.
    expect(seen.length, JSON.stringify(seen)).toBeGreaterThan(1)
  }, 60_000)
})
