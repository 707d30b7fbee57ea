/**
 * The graceful stop with the rate budget used up, against a real svc-venue and a real SQLite
 * journal. The venue's limits are squeezed so that it refuses every request but a cancel for
 * the rest of its (day-long) weight window: the stop withdraws what it had not sent, cannot
 * confirm its cancels or sync the last fill, and says so in `engine.stop-incomplete`. Once the
 * budget is back, the next start and stop finish that work: nothing lost, nothing sent twice.
 * With the budget used past the reserve that fill syncs leave for trading work, but not used up,
 * the stop's last fill sync goes: no trading work follows it for the reserve to be kept for.
 * And the stop on a database that refuses writes while a placement's mark waits for it: the
 * wait ends, the placement is never sent, and the stop finishes.
 */
import { join } from "node:path"
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import type { PlaceIntent } from "../../src/domain/Intent.js"
import { Engine } from "../../src/engine/Engine.js"
import { defaultDialect } from "../../src/svc/Dialect.js"
import { STOPPING } from "../../src/engine/AccountBlock.js"
import { FillLedger } from "../../src/store/FillLedger.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { SvcClient } from "../../src/svc/SvcClient.js"
import { fillUp, mountTmpfs } from "../support/tmpfs.js"
import { startVenue, type TestVenue } from "../support/venue.js"
import { CapturedLog, eventually, startEngine, tempDbPath, testOptions } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const d = (text: string) => new Decimal(text)
const bid = (tag: string, price: string): PlaceIntent => ({ type: "limit", tag, symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), limitPrice: d(price) })

const venueOrders = async (venue: TestVenue) => (await venue.admin("GET", `/_venue/orders?uid=${venue.uid}`)).orders as Array<{ clientOrderId: string; kind: string }>
const venueFillIds = async (venue: TestVenue) =>
  ((await venue.admin("GET", `/_venue/fills?uid=${venue.uid}`)).fills as Array<{ fillId: unknown }>).map((f) => String(f.fillId)).sort()

describe("the graceful stop on a used-up rate budget", () => {
  it("withdraws what it had not sent, reports what it could not finish, and the next start and stop finish it", async () => {
    // A day-long weight window: once squeezed, the budget does not come back while the test runs.
    const venue = await startVenue({ settleMs: 0, limits: { weightPerMinute: 100_000, weightWindowMs: 86_400_000 } })
    cleanups.push(() => venue.close())
    await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60000" })
    const db = tempDbPath()
    cleanups.push(db.cleanup)
    // One sender and groups of one: placements queue up behind a send that waits on the budget.
    const options = testOptions(db.path, { cancelOnStop: true, stopWithinMs: 3000, execution: { sendConcurrency: 1, markGroupSize: 1 } })
    const first = await startEngine(venue, options)
    cleanups.push(() => first.runtime.dispose())
    const byTag = (tag: string) => Effect.flatMap(OrderJournal, (j) => j.latestByTag("s-stop", tag))

    await first.run(
      Effect.flatMap(Engine, (e) =>
        e.submit("s-stop", [{ type: "limit", tag: "ask", symbol: "BTCUSDT", side: "sell", baseQty: d("0.1"), limitPrice: d("60200") }, bid("bid", "50000")])
      )
    )
    await first.run(
      eventually(Effect.map(Effect.all([byTag("ask"), byTag("bid")]), (rows) => (rows.every((o) => o?.state === "resting") ? rows : undefined)), "both orders to rest")
    )

    // From here the venue refuses every request but a cancel, and the engine has heard it once.
    await venue.admin("POST", "/_venue/faults", { limits: { weightPerMinute: 1 } })
    await first.run(eventually(Effect.sync(() => (first.log.events("rate.limited").length > 0 ? true : undefined)), "a refusal for the budget"))
    // The ask fills on the venue, where the engine can no longer read it.
    await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60300" })
    await expect.poll(() => venueFillIds(venue), { timeout: 10_000 }).not.toEqual([])

    // The sender takes q1 and waits on the budget; q2 is marked and waits for the sender; q3 waits to be marked.
    await first.run(Effect.flatMap(Engine, (e) => e.submit("s-stop", [bid("q1", "50001"), bid("q2", "50002"), bid("q3", "50003")])))
    const queued = Effect.map(Effect.all([byTag("q1"), byTag("q2"), byTag("q3")]), (rows) => rows.map((o) => o!.state))
    await first.run(eventually(Effect.map(queued, (states) => (states.join() === "submitting,submitting,intent" ? states : undefined)), "the placements to queue up"))

    const report = await first.run(Effect.flatMap(Engine, (e) => e.stop))
    // q1 may be on its way (its sender took it): left for reconciliation. The ask and the bid had their cancel
    // sent (never held back), but no status could confirm how they ended, and the ask's fill was not read.
    expect(report).toMatchObject({ withdrawn: 2, unsentIntents: 0, placementsInDoubt: 1, ordersLeftOpen: 2, fillsSynced: false, left: true })
    expect(first.log.events("engine.stopped")).toEqual([])
    expect(first.log.events("engine.stop-incomplete")).toEqual([
      expect.objectContaining({ level: "warn", withdrawn: 2, unsentIntents: 0, placementsInDoubt: 1, ordersLeftOpen: 2, fillsSynced: false, cancelOnStop: true })
    ])
    expect(first.log.events("order.withdrawn").map((line) => line.tag).sort()).toEqual(["q2", "q3"])
    expect(await first.run(Effect.map(Effect.all([byTag("q2"), byTag("q3")]), (rows) => rows.map((o) => [o!.state, o!.code])))).toEqual([
      ["refused", STOPPING],
      ["refused", STOPPING]
    ])
    expect(await first.run(Effect.map(Effect.flatMap(FillLedger, (l) => l.all), (fills) => fills.length))).toBeLessThan((await venueFillIds(venue)).length)
    await first.runtime.dispose()

    // The budget is back: the next start syncs the fill and proves q1 was never placed, and its stop has nothing left.
    await venue.admin("POST", "/_venue/faults", {})
    const second = await startEngine(venue, { ...options, stopWithinMs: 20_000 })
    cleanups.push(() => second.runtime.dispose())
    const again = await second.run(Effect.flatMap(Engine, (e) => e.stop))
    expect(again).toMatchObject({ withdrawn: 0, unsentIntents: 0, placementsInDoubt: 0, ordersLeftOpen: 0, fillsSynced: true, left: false })
    expect(second.log.events("engine.stopped")).toEqual([expect.objectContaining({ level: "info", left: false })])
    expect(second.log.events("engine.stop-incomplete")).toEqual([])

    const states = await second.run(Effect.map(Effect.flatMap(OrderJournal, (j) => j.forStrategy("s-stop")), (rows) => Object.fromEntries(rows.map((o) => [o.tag, o.state]))))
    expect(states).toEqual({ ask: "fill", bid: "cancelled", q1: "not_placed", q2: "refused", q3: "refused" })
    // Only the ask and the bid ever reached the venue, once each, and the ledger holds every fill.
    const onVenue = await venueOrders(venue)
    expect(onVenue.map((o) => o.kind).sort()).toEqual(["cancelled", "fill"])
    const ledger = await second.run(Effect.map(Effect.flatMap(FillLedger, (l) => l.all), (fills) => fills.map((f) => f.fillId).sort()))
    expect(ledger).toEqual(await venueFillIds(venue))
  }, 60_000)

  it("syncs the last fills with the budget used past the reserve that fill syncs leave for trading work", async () => {
    // A day-long window, the governor's the same: the budget counted below stays counted while the test runs.
    const window = { weightWindowMs: 86_400_000 }
    const limit = 100
    const venue = await startVenue({ settleMs: 0, limits: { weightPerMinute: limit, ...window } })
    cleanups.push(() => venue.close())
    await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60000" })
    const db = tempDbPath()
    cleanups.push(db.cleanup)
    // Loops that wait their interval ask nothing: only the requests of this test count on the key.
    const quiet = { intervalMs: 600_000 }
    const options = testOptions(db.path, { cancelOnStop: true, stopWithinMs: 3000, reconcile: quiet, fillSync: quiet })
    const engine = await startEngine(venue, options, new CapturedLog(), 2000, window)
    cleanups.push(() => engine.runtime.dispose())
    const { paths, budgetHeaders } = defaultDialect
    const used = (answer: { readonly headers: Record<string, unknown> }) => Number(answer.headers[budgetHeaders.usedWeight1m.toLowerCase()])

    // A fill the engine has not read: someone traded on the account from the website.
    const bought = await venue.signed("POST", paths.marketOrder, { symbol: "BTCUSDT", side: "buy", quoteOrderQty: 100, maxSlippageBps: 100 })
    expect(bought.status, bought.text).toBe(202)
    await expect.poll(() => venueFillIds(venue), { timeout: 10_000 }).toHaveLength(1)
    // The key's weight spent up to where the engine's reconcile pass (open orders 2, wallet 1) leaves
    // room for exactly one fills page (5): past the reserve of 10 %, inside the limit.
    for (let answer = await venue.signed("GET", paths.walletsSpot); used(answer) < limit - 5 - 3; answer = await venue.signed("GET", paths.walletsSpot)) {
      expect(answer.status, answer.text).toBe(200)
    }
    // The engine reads the count from the pass's answers.
    await engine.run(Effect.flatMap(Engine, (e) => e.reconcileNow))
    expect((await engine.run(Effect.flatMap(SvcClient, (c) => c.budgetSnapshot))).usedWeight1m).toBe(limit - 5)

    const report = await engine.run(Effect.flatMap(Engine, (e) => e.stop))
    expect(report).toMatchObject({ fillsSynced: true, left: false })
    expect(engine.log.events("engine.stopped")).toHaveLength(1)
    const ledger = await engine.run(Effect.map(Effect.flatMap(FillLedger, (l) => l.all), (fills) => fills.map((f) => f.fillId).sort()))
    expect(ledger).toEqual(await venueFillIds(venue))
  }, 30_000)

  it("ends a mark that waits for a failing storage and finishes: the placement stays unsent, the venue never sees it", async (context) => {
    // The database on a volume of its own, filled up below: every writer of the file is refused, as on a real fault.
    const mounted = mountTmpfs("64m")
    if ("refused" in mounted) return context.skip(mounted.refused)
    cleanups.push(mounted.unmount)
    const venue = await startVenue({ settleMs: 0 })
    cleanups.push(() => venue.close())
    await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60000" })
    const db = { path: join(mounted.path, "svcbot.sqlite") }
    // A stop bound far past the test's own timeout: a stop that waited for the mark out to its bound fails the test.
    const options = testOptions(db.path, { cancelOnStop: false, stopWithinMs: 600_000, execution: { sendConcurrency: 1, markGroupSize: 1 } })
    const engine = await startEngine(venue, options, new CapturedLog(), 10_000)
    cleanups.push(() => engine.runtime.dispose())
    // From here every request waits 2 s before the venue sees it, so that placements queue behind the first.
    await venue.admin("POST", "/_venue/faults", { latencyMs: 2000 })
    const byTag = (tag: string) => Effect.flatMap(OrderJournal, (j) => j.latestByTag("s-full", tag))

    await engine.run(Effect.flatMap(Engine, (e) => e.submit("s-full", [bid("f1", "50001"), bid("f2", "50002"), bid("f3", "50003")])))
    const queued = Effect.map(Effect.all([byTag("f1"), byTag("f2"), byTag("f3")]), (rows) => rows.map((o) => o!.state))
    await engine.run(eventually(Effect.map(queued, (states) => (states.join() === "submitting,submitting,intent" ? states : undefined)), "the placements to queue up"))
    // The file refuses every write from here (the disk is full): f3's mark, due once a sender takes f2, waits for it.
    fillUp(join(mounted.path, "filler"))
    const seen = async () => ((await venue.admin("GET", `/_venue/orders?uid=${venue.uid}`)).orders as Array<unknown>).length
    await expect.poll(seen, { timeout: 15_000 }).toBe(2)

    const report = await engine.run(Effect.flatMap(Engine, (e) => e.stop))
    expect(report.storage).toMatch(/disk full/)
    expect(report.left).toBe(true)
    expect(await seen()).toBe(2)
    expect(engine.log.events("engine.stop-incomplete")).toHaveLength(1)
  }, 60_000)
})
