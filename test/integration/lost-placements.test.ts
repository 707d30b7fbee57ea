/**
 * A placement whose answer was lost while the venue then went away for longer than
 * the absence window: when the venue is back, every reconcile that looks for it at
 * once (the settle loop, the periodic pass, one asked for) must agree. One adopts it;
 * none may then prove absent the order another just adopted, which would read as the
 * ledger and the exchange disagreeing and hold health at degraded until a restart.
 * A lost placement that filled before it was adopted: its strategy hears of the fills.
 * A lost placement seen only through its fills, whose status answer is malformed: refused, then adopted.
 * A lost placement the venue never took: proven absent after a handful of looks, each of
 * which costs weight (the open orders and a fill sync), not one look every settle delay.
 */
import { Effect, Fiber, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { Engine } from "../../src/engine/Engine.js"
import type { FillUpdate } from "../../src/engine/EngineBus.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { defaultDialect } from "../../src/svc/Dialect.js"
import { startAnswerProxy, startProxy } from "../support/proxy.js"
import { startVenue, type TestVenue } from "../support/venue.js"
import { CapturedLog, engineOnVenue, eventually, isFinished, startEngine, tempDbPath, testOptions } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/**
 * Places a buy above the price whose answer the venue drops: it fills at once, so the venue lists
 * it only among the fills. Returns its row once reconciliation has adopted it.
 */
const loseTakerPlacement = async (venue: TestVenue, engine: Awaited<ReturnType<typeof startEngine>>) => {
  await venue.admin("POST", "/_venue/faults", { dropAcceptedResponses: 1 })
  await engine.run(
    Effect.flatMap(Engine, (e) =>
      e.submit("s", [{ type: "limit", tag: "taker", symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: new Decimal("61000") }])
    )
  )
  return engine.run(
    eventually(Effect.map(Effect.flatMap(OrderJournal, (j) => j.latestByTag("s", "taker")), (row) => (row?.clientOrderId != null ? row : undefined)), "the placement adopted")
  )
}

describe("a lost placement", () => {
  it("found after an outage: adopted once by concurrent reconciles, with no mismatch and health clear", async () => {
    const venue = await startVenue()
    cleanups.push(() => venue.close())
    const proxy = await startProxy(Number(new URL(venue.url).port))
    cleanups.push(() => proxy.stop())
    const db = tempDbPath()
    cleanups.push(db.cleanup)
    const log = new CapturedLog()
    // The settle delay keeps the background look away until the venue is off the network.
    const settleDelayMs = 1000
    // The shortest the settings allow: the signature's receive window and a margin.
    const absenceWindowMs = 6000
    const engine = await startEngine(
      { url: proxy.url, keyId: venue.keyId, secret: venue.secret },
      testOptions(db.path, { reconcile: { settleDelayMs, absenceWindowMs, intervalMs: 500 } }),
      log
    )
    cleanups.push(() => engine.runtime.dispose())

    const tags = ["a", "b", "c", "d"]
    await venue.admin("POST", "/_venue/faults", { dropAcceptedResponses: tags.length })
    await engine.run(
      Effect.flatMap(Engine, (e) =>
        e.submit("s", tags.map((tag) => ({ type: "limit", tag, symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: new Decimal("50000") })))
      )
    )
    const lost = await engine.run(
      eventually(Effect.map(Effect.flatMap(OrderJournal, (j) => j.inStates(["unknown"])), (rows) => (rows.length === tags.length ? rows : undefined)), "four lost placements")
    )
    await proxy.stop()
    // Past the absence window while unreachable: each look that finds nothing may now prove it absent.
    await new Promise((resolve) => setTimeout(resolve, settleDelayMs + absenceWindowMs + 500))
    await proxy.start()
    const passes = await engine.run(Effect.flatMap(Engine, (e) => Effect.all(Array.from({ length: 6 }, () => e.reconcileNow), { concurrency: "unbounded" })))

    const rows = await engine.run(Effect.flatMap(OrderJournal, (j) => Effect.forEach(tags, (tag) => j.latestByTag("s", tag))))
    expect(rows.map((row) => row?.orderId).sort()).toEqual(lost.map((row) => row.orderId).sort())
    for (const row of rows) expect(["accepted", "resting"]).toContain(row?.state)
    expect(new Set(rows.map((row) => row?.clientOrderId)).size).toBe(tags.length)
    expect(log.events("order.reconciled").filter((e) => e.outcome === "adopted").map((e) => e.tag).sort()).toEqual(tags)
    expect(passes.reduce((n, p) => n + p.notPlaced, 0)).toBe(0)
    expect(log.events("reconcile.mismatch")).toEqual([])
    expect(await engine.run(Effect.flatMap(Engine, (e) => e.health))).toEqual([])
  }, 60_000)

  it("that the venue never took: proven absent after a few looks, however short the settle delay", async () => {
    const venue = await startVenue()
    cleanups.push(() => venue.close())
    const paths = defaultDialect.paths
    let lost = false
    let looks = 0
    // The venue refuses the placement (the account frozen); the refusal reaches the engine as a bare 503, which says nothing of whether it was placed.
    const proxy = await startAnswerProxy(venue.url, (answer) => {
      const path = answer.target.split("?")[0]
      if (path === paths.limitOrder && answer.status >= 400) {
        lost = true
        return { body: "", status: 503 }
      }
      if (path === paths.openOrders && lost) looks += 1
      return undefined
    })
    cleanups.push(() => proxy.close())
    const db = tempDbPath()
    cleanups.push(db.cleanup)
    // The daemon's settle delay (the venue's settle time, 50 ms by default); no periodic pass in the way.
    const engine = await startEngine(
      { url: proxy.url, keyId: venue.keyId, secret: venue.secret },
      testOptions(db.path, { reconcile: { settleDelayMs: 50, absenceWindowMs: 6000, intervalMs: 3_600_000 } })
    )
    cleanups.push(() => engine.runtime.dispose())
    await venue.admin("POST", "/_venue/account-status", { uid: venue.uid, status: "frozen" })

    await engine.run(
      Effect.flatMap(Engine, (e) => e.submit("s", [{ type: "limit", tag: "never", symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: new Decimal("50000") }]))
    )
    const row = await engine.run(
      eventually(Effect.map(Effect.flatMap(OrderJournal, (j) => j.latestByTag("s", "never")), (r) => (isFinished(r) ? r : undefined)), "the placement decided", 30_000)
    )
    expect(row?.state).toBe("not_placed")
    expect(engine.log.events("order.unknown")).toHaveLength(1)
    // Over the 6 s absence window: a look at 250 ms, 500 ms, 1 s and then every 2 s at most.
    expect(looks).toBeGreaterThan(0)
    expect(looks).toBeLessThanOrEqual(8)
  }, 60_000)

  it("whose order status answer names its terms malformed: the answer is refused, and a later look adopts it", async () => {
    const venue = await startVenue()
    cleanups.push(() => venue.close())
    await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60000" })
    const paths = defaultDialect.paths
    // The order is seen only through its fills, so its terms are read from its status answer, whose limit price comes as an object twice.
    let damaged = 0
    const proxy = await startAnswerProxy(venue.url, (answer) => {
      if (answer.target.split("?")[0] !== paths.orderStatus || damaged >= 2) return undefined
      damaged += 1
      return answer.body.replace(/"limitPrice":("[^"]*"|[0-9.]+)/, '"limitPrice":{}')
    })
    cleanups.push(() => proxy.close())
    const db = tempDbPath()
    cleanups.push(db.cleanup)
    const engine = await startEngine({ url: proxy.url, keyId: venue.keyId, secret: venue.secret }, testOptions(db.path))
    cleanups.push(() => engine.runtime.dispose())

    const adopted = await loseTakerPlacement(venue, engine)
    expect(damaged).toBe(2)
    expect(engine.log.events("request.failed").filter((e) => e.endpoint === paths.orderStatus && e.field === "limitPrice")).toHaveLength(2)
    expect(engine.log.events("order.reconciled")).toEqual([expect.objectContaining({ tag: "taker", outcome: "adopted", clientOrderId: adopted.clientOrderId })])
    expect(engine.log.events("engine.loop-failed")).toEqual([])
  }, 60_000)

  it("that filled before it was adopted: its fills, first published without a strategy, reach the strategy once it is adopted", async () => {
    const { venue, engine } = await engineOnVenue(cleanups, { price: "60000" })
    const published: Array<FillUpdate> = []
    const listening = engine.runtime.runFork(
      Effect.scoped(Effect.flatMap(Engine, (e) => Effect.flatMap(e.fillUpdates(), (fills) => Stream.runForEach(fills, (u) => Effect.sync(() => published.push(u))))))
    )
    cleanups.push(() => engine.runtime.runPromise(Fiber.interrupt(listening)).then(() => undefined))

    const adopted = await loseTakerPlacement(venue, engine)
    expect(engine.log.events("order.unknown")).toHaveLength(1)
    expect(engine.log.events("order.reconciled")).toEqual([expect.objectContaining({ tag: "taker", outcome: "adopted" })])
    const fillIds = ((await venue.admin("GET", `/_venue/fills?uid=${venue.uid}`)).fills as Array<{ fillId: unknown }>).map((f) => String(f.fillId))
    expect(fillIds.length).toBeGreaterThan(0)
    const ofOrder = (late: boolean) =>
      published.filter((u) => u.fill.clientOrderId === adopted.clientOrderId && (u.late === true) === late)
    await engine.run(eventually(Effect.sync(() => (ofOrder(true).length === fillIds.length ? true : undefined)), "the fills published with the strategy"))
    expect(ofOrder(true).map((u) => [u.strategyId, u.tag, String(u.fill.fillId)]).sort()).toEqual(fillIds.map((id) => ["s", "taker", id]).sort())
    // Each was first published as the sync found it, when no order of ours was known for it.
    expect(ofOrder(false).map((u) => [u.strategyId, String(u.fill.fillId)]).sort()).toEqual(fillIds.map((id) => [null, id]).sort())
  }, 60_000)
})
