/**
 * A restored strategy hears what happened to its orders while it did not run. A grid rests its
 * ladder on a real svc-venue over loopback and the daemon stops: by SIGTERM, whose cancel-on-stop
 * cancels the ladder after the strategies stopped, or by kill -9, after which one of its bids
 * fills before the next start. Started again on the same database, the grid is handed those
 * final updates first, and so lays its ladder out again, or places the counter-order of the
 * fill; no line ever holds two orders. After a plain restart the engine learns of the fill a
 * poll after the grid runs again; the last case has the journal know it before (a start-up
 * stopped by SIGTERM polls the orders in its stop), so that only what the restore hands the
 * grid can tell it. The paper run's evidence keeps what the grid was handed first, for its replay.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { events, killAll, paperConfig, pollUntil, query, svcbot, waitForEvent, type Run } from "../support/daemon.js"
import { startVenue, type TestVenue } from "../support/venue.js"

afterAll(killAll)
const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  killAll()
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Seven lines 59000, 59333.33, 59666.67, 60000, 60333.33, 60666.67, 61000: at 60000, three bids and three offers. */
const GRID = {
  id: "grid",
  strategy: "grid",
  symbol: "BTCUSDT",
  pollMs: 300,
  params: { lowerPrice: "59000", upperPrice: "61000", levels: 7, orderQty: "0.002", retryAfterMs: 1000 }
}
const LADDER = 6
/** How long a restored grid may take to have its orders resting again. */
const RESTORE_BOUND_MS = 20_000

interface VenueOrder {
  readonly clientOrderId: string
  readonly kind: string
  readonly side: string
  readonly limitPrice: string
}

const venueOrders = async (v: TestVenue): Promise<ReadonlyArray<VenueOrder>> => (await v.admin("GET", `/_venue/orders?uid=${v.uid}`)).orders
const resting = async (v: TestVenue) => (await venueOrders(v)).filter((o) => o.kind === "resting" || o.kind === "pending")

/** Prices that hold more than one open order of the account. */
const doubledLines = (open: ReadonlyArray<VenueOrder>): Array<string> => {
  const counts = new Map<number, number>()
  for (const order of open) counts.set(Number(order.limitPrice), (counts.get(Number(order.limitPrice)) ?? 0) + 1)
  return [...counts].filter(([, n]) => n > 1).map(([price, n]) => `${price} x${n}`)
}

const setup = async () => {
  const v = await startVenue()
  cleanups.push(() => v.close())
  await v.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60000" })
  const { configPath, dbPath } = paperConfig("restore", v.url, { strategies: [GRID] })
  const daemon = (): Run => svcbot(["run", "--config", configPath], { SVC_API_KEY: v.keyId, SVC_API_SECRET: v.secret })
  return { v, daemon, dbPath }
}

/** What the newest paper run of the grid says its restored instance was handed first, for its replay. */
const missedInEvidence = (dbPath: string): Array<string> => {
  const [run] = query<{ setup: string }>(dbPath, "SELECT setup FROM runs WHERE kind = 'paper' AND instance_id = 'grid' ORDER BY run_id DESC LIMIT 1")
  const missed = (JSON.parse(run!.setup) as { missed?: Array<{ _tag: string; kind?: string }> }).missed ?? []
  return missed.map((outcome) => (outcome._tag === "Fill" ? "fill event" : `update ${outcome.kind}`))
}

const ladderResting = (v: TestVenue, what: string, timeoutMs = 60_000) =>
  pollUntil(async () => {
    const open = await resting(v)
    return open.length >= LADDER ? open : undefined
  }, timeoutMs, what, 50)

const expectStopped = async (run: Run) => {
  run.child.kill("SIGTERM")
  expect(await run.exit, `${run.stderr.join("")}\n${run.lines.slice(-15).join("\n")}`).toBe(0)
}

/**
 * The restored grid offers the bought quantity one line up, on the line that was empty, and holds
 * one order on every other line but the filled one: two bids below it, the counter-order and three offers.
 */
const expectCounterOrder = async (v: TestVenue, run: Run, what: string) => {
  await waitForEvent(run, "strategy.started", 60_000, (e) => e.restored === true)
  const counter = await pollUntil(
    async () => (await resting(v)).find((o) => o.side === "sell" && Number(o.limitPrice) === 60000),
    RESTORE_BOUND_MS,
    "the counter-order of the fill",
    50
  )
  const open = await ladderResting(v, "the ladder around the filled line", RESTORE_BOUND_MS)
  console.log(`${what}: counter-order ${counter.clientOrderId} rests at 60000`)
  // A few more price events: the ladder stays as it is.
  await new Promise((done) => setTimeout(done, 2000))
  expect(doubledLines(await resting(v))).toEqual([])
  expect(open.map((o) => `${o.side} ${Number(o.limitPrice)}`).sort()).toEqual(
    ["buy 59000", "buy 59333.33", "sell 60000", "sell 60333.33", "sell 60666.67", "sell 61000"].sort()
  )
  expect(await resting(v)).toHaveLength(LADDER)
  await expectStopped(run)
}

describe("a restored strategy hears what happened to its orders while it was not running", () => {
  it("a grid whose ladder cancel-on-stop cancelled lays it out again after a restart, one order per line", async () => {
    const { v, daemon, dbPath } = await setup()
    const first = daemon()
    const ladder = await ladderResting(v, "the first run's ladder")
    await expectStopped(first)
    expect(first.lines.some((l) => l.includes('"order.cancelled"')), "cancel-on-stop cancelled the ladder").toBe(true)
    expect(await resting(v)).toEqual([])

    const second = daemon()
    await waitForEvent(second, "strategy.started", 60_000, (e) => e.restored === true)
    expect(await waitForEvent(second, "strategy.missed", 10_000)).toMatchObject({ strategy: "grid", orderUpdates: LADDER, fills: 0 })
    const again = await ladderResting(v, "the ladder placed again after the restart", RESTORE_BOUND_MS)
    console.log(`restart after SIGTERM: ${ladder.length} orders rested before, ${again.length} rest again`)
    expect(new Set(again.map((o) => Number(o.limitPrice)))).toEqual(new Set(ladder.map((o) => Number(o.limitPrice))))
    expect(again.every((o) => !ladder.some((before) => before.clientOrderId === o.clientOrderId))).toBe(true)
    // A few more price events: the ladder stays as it is.
    await new Promise((done) => setTimeout(done, 2000))
    expect(doubledLines(await resting(v))).toEqual([])
    expect(await resting(v)).toHaveLength(LADDER)
    await expectStopped(second)
    expect(missedInEvidence(dbPath)).toEqual(Array.from({ length: LADDER }, () => "update cancelled"))
  }, 120_000)

  it("a grid whose bid filled while the daemon was killed places the counter-order after the restart", async () => {
    const { v, daemon } = await setup()
    const first = daemon()
    await ladderResting(v, "the first run's ladder")
    first.child.kill("SIGKILL")
    await first.exit
    expect(await resting(v)).toHaveLength(LADDER)

    // The price trades through the highest bid (59666.67) and no other line.
    await v.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "59600" })
    const filled = await pollUntil(
      async () => (await venueOrders(v)).find((o) => o.kind === "fill"),
      10_000,
      "the bid filled while the daemon is down",
      50
    )
    expect({ side: filled.side, price: Number(filled.limitPrice) }).toEqual({ side: "buy", price: 59666.67 })

    await expectCounterOrder(v, daemon(), "restart after kill -9 with a fill while down")
  }, 120_000)

  it("a grid whose bid filled while the daemon was killed places the counter-order after a restart whose own start-up was stopped", async () => {
    const { v, daemon, dbPath } = await setup()
    const first = daemon()
    await ladderResting(v, "the first run's ladder")
    first.child.kill("SIGKILL")
    await first.exit
    await v.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "59600" })
    await pollUntil(async () => (await venueOrders(v)).find((o) => o.kind === "fill"), 10_000, "the bid filled while the daemon is down", 50)

    // A stop during the next start-up (docker compose stop on a restart loop): before any strategy
    // runs, the engine's stop learns of the fill and cancel-on-stop cancels the rest of the ladder.
    const interrupted = daemon()
    await pollUntil(async () => (interrupted.lines.some((l) => l.includes('"reconcile.started"')) ? true : undefined), 60_000, "the startup reconcile", 5)
    await expectStopped(interrupted)
    expect(interrupted.lines.some((l) => l.includes('"strategy.started"')), "the stop came before the strategies started").toBe(false)
    expect(await resting(v)).toEqual([])

    const last = daemon()
    await expectCounterOrder(v, last, "restart after kill -9, a fill while down and a stopped start-up")
    expect(events(last).find((e) => e.event === "strategy.missed")).toMatchObject({ orderUpdates: LADDER, fills: 1 })
    // The filled bid and the five cancels of the stop, the bid's fill event right before its final update.
    const missed = missedInEvidence(dbPath)
    expect([...missed].sort()).toEqual(["fill event", "update fill", ...Array.from({ length: LADDER - 1 }, () => "update cancelled")].sort())
    expect(missed[missed.indexOf("fill event") + 1]).toBe("update fill")
  }, 150_000)
})
