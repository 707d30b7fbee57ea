/**
 * The startup reconcile on a used-up rate budget, against a real svc-venue and a real SQLite
 * journal. A crash loop can leave the key's weight window used up; the start's reads end with
 * its wait for lost placements, so the strategies are not held until the next window. What it
 * could not read stays as it was, never decided unseen: the lost placement stays unknown, and the
 * first start with the budget back adopts it.
 */
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { Engine } from "../../src/engine/Engine.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { CapturedLog, engineOnVenue, eventually, startEngine, testOptions } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

describe("the startup reconcile on a used-up rate budget", () => {
  it("leaves what the budget holds back to the background: the start ends, the lost placement stays unknown, and a start with the budget back adopts it", async () => {
    const stop = { cancelOnStop: false, stopWithinMs: 3000 }
    // A day-long weight window: once squeezed, the budget does not come back while the test runs.
    const { venue, db, engine: first } = await engineOnVenue(cleanups, {
      venue: { settleMs: 0, limits: { weightPerMinute: 100_000, weightWindowMs: 86_400_000 } },
      price: "60000",
      engine: stop
    })
    const options = testOptions(db.path, stop)
    const onVenue = async () => (await venue.admin("GET", `/_venue/orders?uid=${venue.uid}`)).orders as Array<{ kind: string }>
    const bid = Effect.flatMap(OrderJournal, (j) => j.latestByTag("s", "bid"))

    // The venue accepts the bid and drops its answer; before the engine can look for it, the
    // budget is squeezed to nothing for the rest of the day's window.
    await venue.admin("POST", "/_venue/faults", { dropAcceptedResponses: 1 })
    await first.run(
      Effect.flatMap(Engine, (e) => e.submit("s", [{ type: "limit", tag: "bid", symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: new Decimal("50000") }]))
    )
    await expect.poll(async () => (await onVenue()).length, { timeout: 10_000 }).toBe(1)
    await venue.admin("POST", "/_venue/faults", { limits: { weightPerMinute: 1 } })
    await first.run(eventually(Effect.map(bid, (row) => (row?.state === "unknown" ? row : undefined)), "the bid's answer to be lost"))
    await first.runtime.dispose()

    // Every signed read of this start waits on the budget until tomorrow: without an end to its
    // reads the start would outlast the test.
    const log = new CapturedLog()
    const second = await startEngine(venue, options, log)
    cleanups.push(() => second.runtime.dispose())
    expect(log.events("reconcile.completed")).toEqual([expect.objectContaining({ phase: "start", adopted: 0, notPlaced: 0, stillUnknown: 1 })])
    expect(log.events("budget.wait").length).toBeGreaterThan(0)
    expect((await second.run(bid))?.state).toBe("unknown")
    await second.runtime.dispose()

    // The budget is back: the next start finds the bid resting on the book and adopts it, once.
    await venue.admin("POST", "/_venue/faults", {})
    const third = await startEngine(venue, options)
    cleanups.push(() => third.runtime.dispose())
    expect(third.log.events("reconcile.completed")).toEqual([expect.objectContaining({ phase: "start", adopted: 1, notPlaced: 0, stillUnknown: 0 })])
    expect((await third.run(bid))?.state).toMatch(/^(accepted|resting)$/)
    expect((await onVenue()).map((o) => o.kind)).toEqual(["resting"])
  }, 60_000)
})
