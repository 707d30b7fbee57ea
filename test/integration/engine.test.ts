import { Effect, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import type { Intent } from "../../src/domain/Intent.js"
import { Engine } from "../../src/engine/Engine.js"
import type { EngineEvent, OrderUpdate } from "../../src/engine/EngineBus.js"
import { FillLedger } from "../../src/store/FillLedger.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"
import { query } from "../support/daemon.js"
import { startAnswerProxy } from "../support/proxy.js"
import { startVenue, type TestVenue } from "../support/venue.js"
import { eventually, isFinished, startEngine, tempDbPath, testOptions } from "./engine-harness.js"

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const setup = async (options: Parameters<typeof testOptions>[1] = {}) => {
  const venue = await startVenue()
  cleanups.push(() => venue.close())
  const db = tempDbPath()
  cleanups.push(db.cleanup)
  const engine = await startEngine(venue, testOptions(db.path, options))
  cleanups.push(() => engine.runtime.dispose())
  return { venue, engine, db }
}

const d = (text: string) => new Decimal(text)

/** Submits intents and collects this strategy's order updates until every tag has a finished state. */
const submitAndFollow = (strategyId: string, intents: ReadonlyArray<Intent>, timeoutMs = 15_000) =>
  Effect.scoped(
    Effect.gen(function* () {
      const engine = yield* Engine
      const updates = yield* engine.orderUpdates()
      const results = yield* engine.submit(strategyId, intents)
      const tags = new Set(results.filter((r) => r._tag === "Approved").map((r) => r.tag))
      const finished = new Map<string, OrderUpdate>()
      const seen: Array<OrderUpdate> = []
      if (tags.size > 0) {
        yield* updates.pipe(
          Stream.filter((u) => u.strategyId === strategyId),
          Stream.tap((u) =>
            Effect.sync(() => {
              seen.push(u)
              if (["fill", "rejected", "cancelled", "not_placed", "refused"].includes(u.state)) finished.set(u.tag!, u)
            })
          ),
          Stream.takeUntil(() => [...tags].every((t) => finished.has(t))),
          Stream.runDrain,
          Effect.timeoutFail({ duration: timeoutMs, onTimeout: () => new Error(`orders of ${strategyId} did not finish`) })
        )
      }
      return { results, finished, seen }
    })
  )

const venueOrders = async (venue: TestVenue) => (await venue.admin("GET", `/_venue/orders?uid=${venue.uid}`)).orders as Array<Record<string, unknown>>
const venueFills = async (venue: TestVenue) => (await venue.admin("GET", `/_venue/fills?uid=${venue.uid}`)).fills as Array<Record<string, unknown>>

describe("engine against svc-venue", () => {
  it("refuses to cancel a market order, sends no cancel, and the venue matches the order whole", async () => {
    // The cancel comes in the same batch, while the market order is still being placed.
    const { venue, engine, db } = await setup()
    await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60000" })
    const market: Intent = { type: "market", tag: "m-1", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("100"), maxSlippageBps: 100 }
    const [placed, cancel] = await engine.run(Effect.flatMap(Engine, (e) => e.submit("s-market", [market, { type: "cancel", tag: "m-1" }])))
    expect(placed).toMatchObject({ _tag: "Approved" })
    expect(cancel).toMatchObject({ _tag: "Refused", reason: "market-order" })
    const row = await engine.run(eventually(Effect.map(Effect.flatMap(OrderJournal, (j) => j.latestByTag("s-market", "m-1")), (o) => (isFinished(o) ? o : undefined)), "the market order to finish"))
    expect(row.state).toBe("fill")
    expect(row.cancelRequested).toBe(false)
    const onVenue = (await venueOrders(venue)).find((o) => o.clientOrderId === row.clientOrderId)
    expect(onVenue?.kind).toBe("fill")
    const refusedCancel = query<{ outcome: string }>(db.path, "SELECT outcome FROM intents WHERE type = 'cancel'")
    expect(refusedCancel).toEqual([{ outcome: "refused" }])
  })

  it("limit, market and stop-limit orders each reach their terminal kind; fills land in the ledger", async () => {
    const { venue, engine } = await setup()
    const { finished, seen } = await engine.run(
      submitAndFollow("s1", [
        { type: "limit", tag: "lim", symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), limitPrice: d("60100") },
        { type: "market", tag: "mkt-buy", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("100"), maxSlippageBps: 50 },
        { type: "market", tag: "mkt-sell", symbol: "ETHUSDT", side: "sell", baseQty: d("0.5"), maxSlippageBps: 50 }
      ])
    )
    expect([...finished.values()].map((u) => [u.tag, u.state])).toEqual(
      expect.arrayContaining([
        ["lim", "fill"],
        ["mkt-buy", "fill"],
        ["mkt-sell", "fill"]
      ])
    )
    // Every update went intent -> submitting -> accepted ... in order.
    const lim = seen.filter((u) => u.tag === "lim").map((u) => u.state)
    expect(lim.slice(0, 3)).toEqual(["intent", "submitting", "accepted"])

    // A buy stop above the market waits as pending until the tape reaches it, then fills.
    const stop = await engine.run(
      Effect.gen(function* () {
        const e = yield* Engine
        return yield* e.submit("s1", [
          { type: "stop-limit", tag: "stop", symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), stopPrice: d("60500"), limitPrice: d("60700") }
        ])
      })
    )
    expect(stop[0]?._tag).toBe("Approved")
    await engine.run(
      eventually(
        Effect.map(OrderJournal.pipe(Effect.flatMap((j) => j.latestByTag("s1", "stop"))), (o) => (o?.state === "pending" ? o : undefined)),
        "the stop order to be pending"
      )
    )
    await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60600" })
    const stopped = await engine.run(
      eventually(Effect.map(OrderJournal.pipe(Effect.flatMap((j) => j.latestByTag("s1", "stop"))), (o) => (isFinished(o) ? o : undefined)), "the stop order to finish")
    )
    expect(stopped.state).toBe("fill")
    expect(stopped.kindsSeen).toContain("pending")

    // The ledger equals the venue's fills, and the portfolio sees the bought BTC.
    const expected = await venueFills(venue)
    const fills = await engine.run(
      eventually(
        Effect.map(Effect.flatMap(FillLedger, (l) => l.all), (all) => (all.length === expected.length ? all : undefined)),
        "the ledger to hold every venue fill"
      )
    )
    expect(fills.map((f) => f.fillId).sort()).toEqual(expected.map((f) => f.fillId as string).sort())
    const portfolio = await engine.run(Effect.flatMap(Engine, (e) => e.portfolio("s1")))
    const btc = portfolio.positions.find((p) => p.symbol === "BTCUSDT")!
    expect(btc.baseQty.gt(d("0.02"))).toBe(true)
    expect(portfolio.fees.BTC).toBeDefined()
  })

  it("partial fills keep the order resting with its progress, and a cancel by tag ends it", async () => {
    const { venue, engine } = await setup()
    const results = await engine.run(
      Effect.flatMap(Engine, (e) =>
        e.submit("s2", [{ type: "limit", tag: "ask", symbol: "BTCUSDT", side: "sell", baseQty: d("0.1"), limitPrice: d("60200") }])
      )
    )
    expect(results[0]?._tag).toBe("Approved")
    const byTag = Effect.flatMap(OrderJournal, (j) => j.latestByTag("s2", "ask"))
    await engine.run(eventually(Effect.map(byTag, (o) => (o?.state === "resting" ? o : undefined)), "the ask to rest"))
    // The tape touching the limit price fills half of the remainder.
    await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60200" })
    const partial = await engine.run(eventually(Effect.map(byTag, (o) => (o !== undefined && o.filledBaseQty.gt(0) ? o : undefined)), "a partial fill"))
    expect(partial.state).toBe("resting")
    expect(partial.filledBaseQty.toFixed()).toBe("0.05")
    const { finished } = await engine.run(submitAndFollow("s2", [{ type: "cancel", tag: "ask" }]))
    expect(finished.get("ask")?.state).toBe("cancelled")
    const cancelled = await engine.run(byTag)
    expect(cancelled?.state).toBe("cancelled")
    expect(cancelled?.filledBaseQty.toFixed()).toBe("0.05")
    const again = await engine.run(Effect.flatMap(Engine, (e) => e.submit("s2", [{ type: "cancel", tag: "ask" }])))
    expect(again[0]).toMatchObject({ _tag: "Refused", reason: "already-final" })
  })

  it("catchUp finds a maker fill the background polls have not seen, and publishes the fill before the update reporting it", async () => {
    // Background polls and syncs slowed to never: only catchUp can learn of the fill.
    const { venue, engine } = await setup({
      tracker: { fastPollMs: 50, fastWindowMs: 200, restingPollMs: 600_000 },
      fillSync: { intervalMs: 600_000 },
      reconcile: { intervalMs: 600_000 }
    })
    await engine.run(Effect.flatMap(Engine, (e) => e.submit("s5", [{ type: "limit", tag: "ask", symbol: "BTCUSDT", side: "sell", baseQty: d("0.1"), limitPrice: d("60200") }])))
    const byTag = Effect.flatMap(OrderJournal, (j) => j.latestByTag("s5", "ask"))
    await engine.run(eventually(Effect.map(byTag, (o) => (o?.state === "resting" ? o : undefined)), "the ask to rest"))
    // Once the tracker has put the ask on its slow schedule (past the fast window), the tape passes
    // it: it fills whole, as maker.
    await engine.run(eventually(Effect.map(byTag, (o) => (o !== undefined && (o.nextPollAt ?? 0) - Date.now() > 60_000 ? o : undefined)), "the ask's slow schedule"))
    await venue.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60300" })
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect((await engine.run(byTag))?.state, "nothing in the background noticed").toBe("resting")

    const events = await engine.run(
      Effect.scoped(
        Effect.gen(function* () {
          const e = yield* Engine
          const stream = yield* e.updates()
          const seen: Array<EngineEvent> = []
          yield* Effect.forkScoped(Stream.runForEach(stream, (event) => Effect.sync(() => seen.push(event))))
          const published = yield* e.catchUp("s5")
          yield* eventually(Effect.sync(() => (seen.some((event) => event.seq >= published) ? true : undefined)), "the published events")
          return seen
        })
      )
    )
    const fill = events.find((event) => event._tag === "Fill" && event.update.tag === "ask")
    const update = events.find((event) => event._tag === "OrderUpdate" && event.update.tag === "ask" && event.update.state === "fill")
    expect(fill?._tag === "Fill" && fill.update.fill.liquidity).toBe("maker")
    expect(update, "the order update reporting the fill").toBeDefined()
    expect(fill!.seq).toBeLessThan(update!.seq)
    expect((await engine.run(byTag))?.state).toBe("fill")
  })

  it("SPOT_INSUFFICIENT_FUNDS, SPOT_SLIPPAGE_EXCEEDED and SPOT_HALTED reach the strategy with their code", async () => {
    // Caches long enough that the venue, not the local risk check, is the one to refuse.
    // Reconcile passes refresh balances too, so they are slowed as well.
    const { venue, engine } = await setup({ market: { balancesRefreshMs: 600_000, pairsRefreshMs: 600_000 }, reconcile: { intervalMs: 600_000 } })
    await engine.run(Effect.flatMap(Engine, (e) => e.view("s3")))
    await venue.admin("POST", "/_venue/balances", { uid: venue.uid, balances: { USDT: "10" } })
    await venue.admin("POST", "/_venue/pair-status", { symbol: "ETHUSDT", status: "halted" })
    const { finished } = await engine.run(
      submitAndFollow("s3", [
        { type: "limit", tag: "poor", symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), limitPrice: d("59000") },
        { type: "market", tag: "slip", symbol: "BTCUSDT", side: "sell", baseQty: d("1.9"), maxSlippageBps: 1 },
        { type: "limit", tag: "halt", symbol: "ETHUSDT", side: "sell", baseQty: d("1"), limitPrice: d("3000") }
      ])
    )
    expect(finished.get("poor")).toMatchObject({ state: "rejected", code: "SPOT_INSUFFICIENT_FUNDS" })
    expect(finished.get("slip")).toMatchObject({ state: "rejected", code: "SPOT_SLIPPAGE_EXCEEDED" })
    expect(finished.get("halt")).toMatchObject({ state: "rejected", code: "SPOT_HALTED" })
    expect(engine.log.events("order.rejected").map((e) => e.code).sort()).toEqual(["SPOT_HALTED", "SPOT_INSUFFICIENT_FUNDS", "SPOT_SLIPPAGE_EXCEEDED"])
  })

  it("keeps the pair rules it knows while the exchange lists no pair at all, rather than refusing every intent as unlisted", async () => {
    const venue = await startVenue()
    cleanups.push(() => venue.close())
    let listing = true
    const proxy = await startAnswerProxy(venue.url, (answer) =>
      listing || answer.target.split("?")[0] !== "/api/spot/exchange-info" ? undefined : JSON.stringify({ ...JSON.parse(answer.body), pairs: [] })
    )
    cleanups.push(() => proxy.close())
    const db = tempDbPath()
    cleanups.push(db.cleanup)
    const engine = await startEngine({ ...venue, url: proxy.url }, testOptions(db.path, { market: { pairsRefreshMs: 50 } }))
    cleanups.push(() => engine.runtime.dispose())
    const submit = (tag: string) =>
      engine.run(Effect.flatMap(Engine, (e) => e.submit("s-pairs", [{ type: "limit", tag, symbol: "BTCUSDT", side: "buy", baseQty: d("0.001"), limitPrice: d("59000") }])))
    const results = [...(await submit("listed"))]
    listing = false
    // The rules are refreshed in the background once older than 50 ms: submits go on until two empty lists came.
    for (let i = 0; proxy.rewritten.length < 2 && i < 100; i++) {
      await new Promise((done) => setTimeout(done, 60))
      results.push(...(await submit(`unlisted-${i}`)))
    }
    expect(proxy.rewritten.length).toBeGreaterThanOrEqual(2)
    results.push(...(await submit("after")))
    expect(results.filter((r) => r._tag !== "Approved")).toEqual([])
  })

  it("a risk refusal is reported and logged and never sent", async () => {
    const { venue, engine } = await setup({ risk: { priceCollarBps: 100, maxOpenOrders: 5 } })
    const results = await engine.run(
      Effect.flatMap(Engine, (e) =>
        e.submit("s4", [{ type: "limit", tag: "far", symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), limitPrice: d("50000") }])
      )
    )
    expect(results[0]).toMatchObject({ _tag: "Refused", reason: "price-collar" })
    expect(engine.log.events("risk.refused")).toEqual([expect.objectContaining({ reason: "price-collar", tag: "far", strategy: "s4" })])
    expect(await venueOrders(venue)).toEqual([])
  })

  it("a frozen account stops placements with the fix named, while reads go on", async () => {
    const { venue, engine } = await setup()
    await venue.admin("POST", "/_venue/account-status", { uid: venue.uid, status: "frozen" })
    const { finished } = await engine.run(
      submitAndFollow("s5", [{ type: "limit", tag: "a", symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), limitPrice: d("59000") }])
    )
    expect(finished.get("a")).toMatchObject({ state: "refused", code: "ACCOUNT_FROZEN" })
    expect(engine.log.events("account.blocked").filter((e) => e.fix !== undefined)).toEqual([
      expect.objectContaining({ code: "ACCOUNT_FROZEN", fix: expect.stringContaining("website") })
    ])
    const next = await engine.run(
      Effect.flatMap(Engine, (e) => e.submit("s5", [{ type: "limit", tag: "b", symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), limitPrice: d("59000") }]))
    )
    expect(next[0]).toMatchObject({ _tag: "Refused", reason: "placements-blocked" })
    const view = await engine.run(Effect.flatMap(Engine, (e) => e.view("s5")))
    expect(view.placementsBlocked?.code).toBe("ACCOUNT_FROZEN")
    expect(view.balances.get("USDT")?.free.gt(0)).toBe(true)
    expect(await venueOrders(venue)).toEqual([])
  })

  it("the tracker follows many resting orders with one open-orders call instead of a status call each", async () => {
    const { venue, engine } = await setup({ tracker: { batchThreshold: 5, fastPollMs: 50, fastWindowMs: 200, restingPollMs: 100 } })
    const calls = { status: 0, openOrders: 0 }
    const handle = venue.venue.handle.bind(venue.venue)
    venue.venue.handle = (request) => {
      const path = request.target.split("?")[0]
      if (path === "/api/spot/order") calls.status += 1
      if (path === "/api/spot/open-orders") calls.openOrders += 1
      return handle(request)
    }
    const intents: Array<Intent> = Array.from({ length: 12 }, (_, i) => ({
      type: "limit",
      tag: `bid-${i}`,
      symbol: "BTCUSDT",
      side: "buy",
      baseQty: d("0.001"),
      limitPrice: d(String(58_000 + i))
    }))
    await engine.run(Effect.flatMap(Engine, (e) => e.submit("s7", intents)))
    const resting = Effect.map(Effect.flatMap(OrderJournal, (j) => j.inStates(["resting"])), (rows) => (rows.length === 12 ? rows : undefined))
    await engine.run(eventually(resting, "twelve resting orders"))
    calls.status = 0
    calls.openOrders = 0
    // Long enough for several slow polls of every order.
    await engine.run(eventually(Effect.sync(() => (calls.openOrders >= 5 ? true : undefined)), "five open-orders polls"))
    const polled = await engine.run(Effect.map(Effect.flatMap(OrderJournal, (j) => j.inStates(["resting"])), (rows) => rows.map((r) => r.polls)))
    expect(Math.min(...polled)).toBeGreaterThan(3)
    // Per-order polling would have cost at least 12 status calls per round.
    expect(calls.status).toBeLessThan(calls.openOrders)
  })

  it("the startup reconcile adopts open orders the journal does not know as external", async () => {
    const venue = await startVenue()
    cleanups.push(() => venue.close())
    const placed = await venue.signed("POST", "/api/spot/limit", { symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), limitPrice: d("55000") })
    expect(placed.status).toBe(202)
    const clientOrderId = placed.json.clientOrderId as string
    await eventually(Effect.promise(async () => ((await venueOrders(venue))[0]?.kind === "resting" ? true : undefined)), "the order to rest").pipe(Effect.runPromise)
    const db = tempDbPath()
    cleanups.push(db.cleanup)
    const engine = await startEngine(venue, testOptions(db.path))
    cleanups.push(() => engine.runtime.dispose())
    const adopted = await engine.run(Effect.flatMap(OrderJournal, (j) => j.byClientOrderId(clientOrderId)))
    expect(adopted).toMatchObject({ origin: "external", state: "resting", strategyId: null })
    expect(engine.log.events("reconcile.completed")[0]).toMatchObject({ phase: "start", external: 1 })
  })
})
