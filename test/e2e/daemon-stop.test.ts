/**
 * A stop is safe at any moment: `svcbot run` gets SIGTERM at each phase of start-up
 * and shutdown, one test per phase, and each time exits 0 within its bound with
 * nothing of the account left resting or pending on the venue (or, where the venue
 * is too slow for the bound, what is left named in `engine.stop-incomplete`).
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { events, killAll, pollUntil, svcbot, waitForEvent, type Run } from "../support/daemon.js"
import { startProxy } from "../support/proxy.js"
import { startVenue, type StartVenueOptions, type TestVenue } from "../support/venue.js"

afterAll(killAll)
const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  killAll()
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const GRID = { id: "grid", strategy: "grid", symbol: "BTCUSDT", pollMs: 500, params: { lowerPrice: "59000", upperPrice: "61000", levels: 7, orderQty: "0.002" } }

const venue = async (options: StartVenueOptions = {}) => {
  const started = await startVenue({ tape: { kind: "synthetic", seed: 7 }, tickMs: 200, ...options })
  cleanups.push(() => started.close())
  return started
}

const configFor = (baseUrl: string, grid = GRID): string => {
  const dir = mkdtempSync(join(tmpdir(), "svcbot-stop-"))
  writeFileSync(
    join(dir, "config.json"),
    JSON.stringify({ mode: "paper", venue: { embedded: false, baseUrl }, database: { path: join(dir, "svcbot.db") }, strategies: [grid] })
  )
  return join(dir, "config.json")
}

const daemon = (configPath: string, v: TestVenue): Run => svcbot(["run", "--config", configPath], { SVC_API_KEY: v.keyId, SVC_API_SECRET: v.secret })

/** Sends `signal` as soon as a log line satisfies `when` (looked at every few ms). */
const signalOn = async (run: Run, signal: NodeJS.Signals, what: string, when: (line: string) => boolean) => {
  await pollUntil(async () => (run.lines.some(when) ? true : undefined), 60_000, what, 5)
  run.child.kill(signal)
}

const openOnVenue = async (v: TestVenue) =>
  ((await v.admin("GET", `/_venue/orders?uid=${v.uid}`)).orders as Array<{ clientOrderId: string; kind: string }>).filter((o) => o.kind === "resting" || o.kind === "pending")

/** The clean stop: exit 0, and nothing left on the book. */
const expectCleanStop = async (run: Run, v: TestVenue, phase: string) => {
  const code = await run.exit
  const open = await openOnVenue(v)
  console.log(`SIGTERM ${phase}: exit ${code}, orders left open ${open.length}`)
  expect(code, `${run.stderr.join("")}\n${run.lines.slice(-15).join("\n")}`).toBe(0)
  expect(open).toEqual([])
}

/** A first run that places orders and is killed once `resting` of them rest: they stay on the venue for the next start to deal with. */
const leaveOrdersResting = async (configPath: string, v: TestVenue, resting = 1) => {
  const first = daemon(configPath, v)
  await pollUntil(async () => (first.lines.filter((l) => l.includes('"order.accepted"')).length >= Math.max(4, resting) ? true : undefined), 60_000, "accepted orders", 20)
  await pollUntil(async () => ((await openOnVenue(v)).length >= resting ? true : undefined), 60_000, `${resting} resting orders`, 20)
  first.child.kill("SIGKILL")
  await first.exit
  expect((await openOnVenue(v)).length).toBeGreaterThanOrEqual(resting)
}

describe("SIGTERM at each phase of start-up and shutdown", () => {
  it("while start-up waits for an unreachable venue", async () => {
    const v = await venue()
    const proxy = await startProxy(Number(new URL(v.url).port))
    cleanups.push(() => proxy.stop())
    await proxy.stop()
    const run = daemon(configFor(proxy.url), v)
    await signalOn(run, "SIGTERM", "a start-up wait", (l) => l.includes('"startup.waiting"'))
    await expectCleanStop(run, v, "during the venue check")
  })

  it("during the startup reconcile, with orders a killed run left resting", async () => {
    const v = await venue()
    const configPath = configFor(v.url)
    await leaveOrdersResting(configPath, v)
    const run = daemon(configPath, v)
    await signalOn(run, "SIGTERM", "the startup reconcile", (l) => l.includes('"reconcile.started"'))
    await expectCleanStop(run, v, "during the startup reconcile")
    expect(run.lines.some((l) => l.includes('"config.loaded"')), "the signal came before the strategies started").toBe(false)
  }, 120_000)

  it("during the venue check of a slow venue with a used-up budget, with 8 orders a killed run left resting (a restart loop stopped by docker compose stop)", async () => {
    const v = await venue()
    // Nine lines: the empty one at the price and eight orders around it.
    const configPath = configFor(v.url, { ...GRID, params: { ...GRID.params, levels: 9 } })
    await leaveOrdersResting(configPath, v, 8)
    await v.admin("POST", "/_venue/faults", { latencyMs: 400, limits: { weightPerMinute: 12 } })
    const run = daemon(configPath, v)
    const started = await waitForEvent(run, "app.started", 60_000)
    await new Promise((done) => setTimeout(done, 1500 - (Date.now() - Date.parse(String(started.time)))))
    expect(run.lines.some((l) => l.includes('"reconcile.started"')), "the signal came before the engine ran").toBe(false)
    const signalled = Date.now()
    run.child.kill("SIGTERM")
    const code = await run.exit
    const open = await openOnVenue(v)
    const stop = events(run).filter((e) => e.event === "engine.stopped" || e.event === "engine.stop-incomplete")
    console.log(`SIGTERM during the venue check of a slow venue: exit ${code} after ${Date.now() - signalled} ms, orders left open ${open.length}, ${JSON.stringify(stop)}`)
    expect(code, `${run.stderr.join("")}\n${run.lines.slice(-15).join("\n")}`).toBe(0)
    expect(stop, "one line about the stop").toHaveLength(1)
    // Cancelled, or named as left by the stop's warn line: never left resting without a word.
    if (open.length > 0) expect({ event: stop[0]!.event, ordersLeftOpen: stop[0]!.ordersLeftOpen }).toEqual({ event: "engine.stop-incomplete", ordersLeftOpen: open.length })
  }, 120_000)

  it("during a budget wait, with orders a killed run left resting", async () => {
    const v = await venue({ limits: { weightPerMinute: 40 } })
    const configPath = configFor(v.url)
    await leaveOrdersResting(configPath, v)
    const run = daemon(configPath, v)
    await signalOn(run, "SIGTERM", "a budget wait", (l) => l.includes('"budget.wait"'))
    await expectCleanStop(run, v, "during a budget wait")
  }, 120_000)

  it("while running", async () => {
    const v = await venue()
    const run = daemon(configFor(v.url), v)
    await waitForEvent(run, "config.loaded", 60_000)
    await signalOn(run, "SIGTERM", "resting orders", (l) => l.includes('"order.accepted"'))
    await expectCleanStop(run, v, "while running")
  }, 120_000)

  it("during the shutdown itself: a second SIGTERM neither cuts the stop short nor changes the exit code", async () => {
    const v = await venue()
    const run = daemon(configFor(v.url), v)
    await pollUntil(async () => (run.lines.filter((l) => l.includes('"order.accepted"')).length >= 4 ? true : undefined), 60_000, "resting orders", 20)
    run.child.kill("SIGTERM")
    await signalOn(run, "SIGTERM", "the stop", (l) => l.includes('"app.stopping"'))
    await expectCleanStop(run, v, "twice, the second during the stop")
  }, 120_000)
})
