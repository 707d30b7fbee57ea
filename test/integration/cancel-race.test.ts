/**
 * A maker's cancel racing its order's fill: the order fills on the venue before the
 * engine's cancel reaches it, and the venue answers 409 ORDER_NOT_OPEN. The outcome is
 * settled, so it is one info line (`order.cancel-too-late`), not a failure logged by the
 * client and again by the engine; the cancel is not sent again and the order is seen to
 * fill at once. Against a real svc-venue over loopback and a real SQLite journal.
 */
import { Effect } from "effect"
import { afterEach, describe, expect, it, vi } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { Engine } from "../../src/engine/Engine.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { engineOnVenue, eventually, isFinished } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Longer than the test: the engine learns of the fill only from what the cancel's answer makes it do. */
const NEVER_MS = 120_000

describe("a cancel that reaches the venue after its order filled", () => {
  it("is one info line order.cancel-too-late, no request.failed, sent once; the order is seen filled at once", async () => {
    const { venue, engine } = await engineOnVenue(cleanups, {
      price: "60000",
      engine: { tracker: { restingPollMs: NEVER_MS }, fillSync: { intervalMs: NEVER_MS }, reconcile: { intervalMs: NEVER_MS } }
    })
    const latest = Effect.flatMap(OrderJournal, (j) => j.latestByTag("mm", "bid"))

    await engine.run(
      Effect.flatMap(Engine, (e) =>
        e.submit("mm", [{ type: "limit", tag: "bid", symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.01"), limitPrice: new Decimal("59900") }])
      )
    )
    const resting = await engine.run(eventually(Effect.map(latest, (o) => (o?.state === "resting" ? o : undefined)), "the bid to rest"))
    const clientOrderId = resting.clientOrderId!

    // The price comes down through the bid: the venue fills it as maker, and the engine, which
    // polls a resting order only every NEVER_MS, still takes it for resting when it cancels.
    await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "59800" })
    const onVenue = (await venue.admin("GET", `/_venue/orders?uid=${venue.uid}`)).orders as Array<Record<string, unknown>>
    expect(onVenue.find((o) => o.clientOrderId === clientOrderId)?.kind).toBe("fill")

    const cancels = vi.spyOn(venue.venue.engine, "cancel")
    cleanups.push(() => cancels.mockRestore())
    const [cancel] = await engine.run(Effect.flatMap(Engine, (e) => e.submit("mm", [{ type: "cancel", tag: "bid" }])))
    expect(cancel).toMatchObject({ _tag: "Approved", tag: "bid" })

    const filled = await engine.run(eventually(Effect.map(latest, (o) => (isFinished(o) ? o : undefined)), "the bid to be seen filled", 10_000))
    expect(filled).toMatchObject({ state: "fill", cancelRequested: true, filledBaseQty: new Decimal("0.01") })

    // The race really happened: one cancel reached the venue, and it answered ORDER_NOT_OPEN.
    expect(cancels.mock.results.map((r) => r.value)).toEqual([expect.objectContaining({ ok: false, status: 409, code: "ORDER_NOT_OPEN" })])
    const aboutIt = engine.log.lines.filter((l) => l.clientOrderId === clientOrderId || String(l.detail ?? "").includes("ORDER_NOT_OPEN"))
    expect(engine.log.events("order.cancel-too-late")).toEqual([
      expect.objectContaining({ level: "info", strategy: "mm", tag: "bid", clientOrderId, symbol: "BTCUSDT", side: "buy" })
    ])
    expect(engine.log.events("request.failed")).toEqual([])
    expect(aboutIt.filter((l) => l.level !== "info" && l.level !== "debug")).toEqual([])
    expect(engine.log.events("order.filled")).toEqual([expect.objectContaining({ clientOrderId, level: "info" })])
  })
})
