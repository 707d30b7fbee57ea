/**
 * A market order fills within its maxSlippageBps or is rejected whole; it is never
 * cancelled. Against a real svc-venue (settling slowly, so the order is still pending
 * when the cancel comes) and a real SQLite journal: a cancel intent for it is refused
 * with `market-order` and journaled, cancel-on-stop leaves it alone, and no cancel
 * request for it ever reaches the venue's matching engine.
 */
import { Effect } from "effect"
import { afterEach, describe, expect, it, vi } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import type { Intent } from "../../src/domain/Intent.js"
import { Engine } from "../../src/engine/Engine.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { query } from "../support/daemon.js"
import { startVenue } from "../support/venue.js"
import { eventually, isFinished, startEngine, tempDbPath, testOptions } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const d = (text: string) => new Decimal(text)

/** Long enough for the engine to see the market order accepted and still pending. */
const SETTLE_MS = 3000

const setup = async (options: Parameters<typeof testOptions>[1] = {}) => {
  const venue = await startVenue({ settleMs: SETTLE_MS })
  cleanups.push(() => venue.close())
  await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60000" })
  const db = tempDbPath()
  cleanups.push(db.cleanup)
  const engine = await startEngine(venue, testOptions(db.path, options))
  cleanups.push(() => engine.runtime.dispose())
  // Every cancel request that passes the venue's authentication ends here.
  const cancels = vi.spyOn(venue.venue.engine, "cancel")
  cleanups.push(() => cancels.mockRestore())
  const venueKind = async (clientOrderId: string) =>
    ((await venue.admin("GET", `/_venue/orders?uid=${venue.uid}`)).orders as Array<Record<string, unknown>>).find((o) => o.clientOrderId === clientOrderId)?.kind
  return { venue, engine, db, cancels, venueKind }
}

const marketBuy: Intent = { type: "market", tag: "entry", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("100"), maxSlippageBps: 100 }

describe("market orders are never cancelled", () => {
  it("a cancel intent for a pending market order is refused (market-order), journaled, never sent; the order fills whole", async () => {
    const { engine, db, cancels, venueKind } = await setup()
    const [placed] = await engine.run(Effect.flatMap(Engine, (e) => e.submit("s-mkt", [marketBuy])))
    expect(placed).toMatchObject({ _tag: "Approved" })
    const pending = await engine.run(
      eventually(
        Effect.map(Effect.flatMap(OrderJournal, (j) => j.latestByTag("s-mkt", "entry")), (o) => (o?.clientOrderId != null && !isFinished(o) ? o : undefined)),
        "the market order to be accepted"
      )
    )
    expect(await venueKind(pending.clientOrderId!)).toBe("pending")

    const [cancel] = await engine.run(Effect.flatMap(Engine, (e) => e.submit("s-mkt", [{ type: "cancel", tag: "entry" }])))
    expect(cancel).toMatchObject({
      _tag: "Refused",
      tag: "entry",
      reason: "market-order",
      detail: expect.stringContaining("fills or is rejected as a whole")
    })

    const row = await engine.run(
      eventually(Effect.map(Effect.flatMap(OrderJournal, (j) => j.latestByTag("s-mkt", "entry")), (o) => (isFinished(o) ? o : undefined)), "the market order to finish")
    )
    expect(row).toMatchObject({ state: "fill", cancelRequested: false })
    expect(await venueKind(row.clientOrderId!)).toBe("fill")
    expect(cancels).not.toHaveBeenCalled()
    expect(query(db.path, "SELECT type, tag, outcome, refusal FROM intents WHERE strategy_id = 's-mkt' ORDER BY seq")).toEqual([
      { type: "market", tag: "entry", outcome: "approved", refusal: null },
      { type: "cancel", tag: "entry", outcome: "refused", refusal: "market-order" }
    ])
  })

  it("cancel-on-stop cancels a resting limit order and leaves a pending market order to fill", async () => {
    const { engine, db, cancels, venueKind } = await setup({ cancelOnStop: true })
    const bid: Intent = { type: "limit", tag: "bid", symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), limitPrice: d("50000") }
    await engine.run(Effect.flatMap(Engine, (e) => e.submit("s-stop", [bid, marketBuy])))
    const live = await engine.run(
      eventually(
        Effect.map(Effect.flatMap(OrderJournal, (j) => Effect.all([j.latestByTag("s-stop", "bid"), j.latestByTag("s-stop", "entry")])), (rows) =>
          rows.every((o) => o?.clientOrderId != null && !isFinished(o)) ? rows.map((o) => o!.clientOrderId!) : undefined
        ),
        "both orders to be accepted"
      )
    )
    const [bidId, entryId] = live as [string, string]
    expect(await venueKind(entryId)).toBe("pending")

    await engine.run(Effect.flatMap(Engine, (e) => e.stop))

    expect(new Set(cancels.mock.calls.map((call) => call[1]))).toEqual(new Set([bidId]))
    expect(await venueKind(bidId)).toBe("cancelled")
    await expect.poll(() => venueKind(entryId), { timeout: 10_000 }).toBe("fill")
    expect(query(db.path, "SELECT tag, cancel_requested FROM orders WHERE strategy_id = 's-stop' ORDER BY tag")).toEqual([
      { tag: "bid", cancel_requested: 1 },
      { tag: "entry", cancel_requested: 0 }
    ])
  })
})
