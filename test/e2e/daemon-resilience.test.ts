/**
 * `svcbot run` when things go wrong around it, as a child process against a svc-venue
 * of the test's own (behind a TCP proxy where the venue has to vanish and come back):
 * transients at start and mid-run are waited out with the process up and health telling
 * why; a config the venue refuses exits 2 before any order.
 */
import { existsSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { events, freeLoopbackPort, healthz, killAll, pollUntil, query, svcbot, waitForEvent, type Run } from "../support/daemon.js"
import { startAnswerProxy, startProxy } from "../support/proxy.js"
import { startVenue, type TestVenue } from "../support/venue.js"
import { expectNothingLostOrDuplicated, report, verify } from "../chaos/verify.js"

afterAll(killAll)
const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  killAll()
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const GRID = { id: "grid", strategy: "grid", symbol: "BTCUSDT", pollMs: 500, params: { lowerPrice: "59000", upperPrice: "61000", levels: 5, orderQty: "0.002" } }

interface Started {
  readonly run: Run
  readonly dbPath: string
  readonly healthUrl: string
}

const start = async (baseUrl: string, key: { keyId: string; secret: string }, config: Record<string, unknown> = {}, args: ReadonlyArray<string> = []): Promise<Started> => {
  const dir = mkdtempSync(join(tmpdir(), "svcbot-resilience-"))
  const dbPath = join(dir, "svcbot.db")
  const port = await freeLoopbackPort()
  writeFileSync(
    join(dir, "config.json"),
    JSON.stringify({
      mode: "paper",
      venue: { embedded: false, baseUrl },
      database: { path: dbPath },
      health: { host: "127.0.0.1", port, unreachableAfterMs: 2000 },
      client: { requestTimeoutMs: 1000 },
      engine: { reconcileIntervalMs: 2000, fillSyncIntervalMs: 1000 },
      strategies: [GRID],
      ...config
    })
  )
  const run = svcbot(["run", "--config", join(dir, "config.json"), ...args], { SVC_API_KEY: key.keyId, SVC_API_SECRET: key.secret })
  return { run, dbPath, healthUrl: `http://127.0.0.1:${port}/healthz` }
}

/** Polls /healthz until its status code and body satisfy `want`. */
const healthUntil = async (url: string, what: string, want: (status: number, body: string) => boolean) => {
  let last: Awaited<ReturnType<typeof healthz>>
  try {
    return await pollUntil(async () => {
      last = await healthz(url)
      return last !== undefined && want(last.status, last.body) ? last : undefined
    }, 60_000, what, 100)
  } catch (error) {
    // The reasons health last gave are what tells a failure apart.
    throw new Error(`${String(error)}; /healthz last answered ${last === undefined ? "nothing" : `${last.status} ${last.body}`}`)
  }
}

/** SIGTERM: exit 0, and nothing of the account left resting or pending on the venue. */
const stopCleanly = async (run: Run, venue: TestVenue) => {
  run.child.kill("SIGTERM")
  const code = await run.exit
  expect(code, `${run.stderr.join("")}\n${run.lines.slice(-25).join("\n")}`).toBe(0)
  const orders = (await venue.admin("GET", `/_venue/orders?uid=${venue.uid}`)).orders as Array<{ kind: string }>
  expect(orders.filter((o) => o.kind === "resting" || o.kind === "pending")).toEqual([])
}

const venueWithKey = async (permissions: ReadonlyArray<string>): Promise<{ venue: TestVenue; keyId: string; secret: string }> => {
  const venue = await startVenue({ tape: { kind: "synthetic", seed: 7 }, tickMs: 200 })
  cleanups.push(() => venue.close())
  const key = await venue.admin("POST", "/_venue/keys", { uid: venue.uid, permissions })
  return { venue, keyId: key.id as string, secret: key.secret as string }
}

describe("svcbot run waits out what passes by itself", () => {
  it("an unreachable venue at start: up and not ready with the reason, nothing written; it starts when the venue appears", async () => {
    const venue = await startVenue({ tape: { kind: "synthetic", seed: 7 }, tickMs: 200 })
    cleanups.push(() => venue.close())
    const proxy = await startProxy(Number(new URL(venue.url).port))
    cleanups.push(() => proxy.stop())
    await proxy.stop()
    const { run, dbPath, healthUrl } = await start(proxy.url, venue)
    const waiting = await waitForEvent(run, "startup.waiting", 60_000, (e) => e.phase === "venue check")
    expect(String(waiting.reason)).toContain(`cannot reach ${proxy.url}`)
    const notReady = await healthUntil(healthUrl, "health naming the wait", (status, body) => status === 503 && body.includes("cannot reach"))
    expect(JSON.parse(notReady.body).status).toBe("starting")
    expect(existsSync(dbPath)).toBe(false)
    await proxy.start()
    await waitForEvent(run, "config.loaded", 60_000)
    await healthUntil(healthUrl, "ready", (status) => status === 200)
    await waitForEvent(run, "order.accepted", 60_000)
    await stopCleanly(run, venue)
    // What the budget learned is kept for the next start on this key.
    const weights = query<{ endpoint: string; weight: number }>(dbPath, "SELECT endpoint, weight FROM budget_weights")
    expect(weights.map((w) => w.endpoint)).toContain("GET /api/wallets/spot")
  }, 120_000)

  it("a burst of server errors at start is waited out, not an exit", async () => {
    const venue = await startVenue({ tape: { kind: "synthetic", seed: 7 }, tickMs: 200, faults: { serverErrors: 12, serverErrorStatus: 503 } })
    cleanups.push(() => venue.close())
    const { run } = await start(venue.url, venue)
    await waitForEvent(run, "startup.waiting", 60_000, (e) => String(e.reason).includes("server errors"))
    await waitForEvent(run, "config.loaded", 90_000)
    await waitForEvent(run, "order.accepted", 60_000)
    await stopCleanly(run, venue)
  }, 150_000)

  it("an exchange that lists no pair at all at start is waited for, not an exit 2; it starts once it lists them", async () => {
    const venue = await startVenue({ tape: { kind: "synthetic", seed: 7 }, tickMs: 200 })
    cleanups.push(() => venue.close())
    let listing = false
    const proxy = await startAnswerProxy(venue.url, (answer) =>
      listing || answer.target.split("?")[0] !== "/api/spot/exchange-info" ? undefined : JSON.stringify({ ...JSON.parse(answer.body), pairs: [] })
    )
    cleanups.push(() => proxy.close())
    const { run, healthUrl } = await start(proxy.url, venue)
    const waiting = await waitForEvent(run, "startup.waiting", 60_000, (e) => e.phase === "key check")
    expect(waiting.reason).toBe("the exchange lists no pair at all: waiting until it lists its pairs")
    const notReady = await healthUntil(healthUrl, "health naming the wait", (status, body) => status === 503 && body.includes("lists no pair at all"))
    expect(JSON.parse(notReady.body).status).toBe("starting")
    expect(run.child.exitCode).toBeNull()
    listing = true
    await waitForEvent(run, "config.loaded", 60_000)
    await waitForEvent(run, "order.accepted", 60_000)
    await stopCleanly(run, venue)
  }, 120_000)

  it("a refused key keeps the process up, is probed at most once per probe interval, and its secret is never printed", async () => {
    const venue = await startVenue()
    cleanups.push(() => venue.close())
    const secret = "svs_live_" + "w".repeat(49)
    const probeMs = 2000
    const started = Date.now()
    const { run, dbPath, healthUrl } = await start(venue.url, { keyId: venue.keyId, secret }, { client: { requestTimeoutMs: 1000, authProbeIntervalMs: probeMs } })
    await pollUntil(async () => (events(run).filter((e) => e.event === "startup.waiting").length >= 4 ? true : undefined), 90_000, "four waits")
    const body = (await healthUntil(healthUrl, "health naming the key", (status, text) => status === 503 && text.includes("API_KEY_INVALID"))).body
    expect(body).toContain("create a new key")
    const elapsed = Date.now() - started
    const refusals = events(run).filter((e) => e.event === "auth.invalid").length
    console.log(`refused key: ${refusals} refused requests in ${elapsed} ms with a ${probeMs} ms probe interval`)
    // The first request, then one probe per interval at most: never a loop that feeds the venue's auth block.
    expect(refusals).toBeGreaterThan(0)
    expect(refusals).toBeLessThanOrEqual(1 + Math.ceil(elapsed / probeMs))
    expect(events(run).some((e) => e.event === "auth.blocked")).toBe(false)
    await stopCleanly(run, venue)
    expect(run.lines.join("\n") + run.stderr.join("")).not.toContain(secret)
    expect(existsSync(dbPath)).toBe(false)
  }, 150_000)

  it("the venue gone for 60 s mid-run: up and not ready meanwhile, ready again after, no duplicate and no missing fill", async () => {
    const venue = await startVenue({ tape: { kind: "synthetic", seed: 7 }, tickMs: 200 })
    cleanups.push(() => venue.close())
    const proxy = await startProxy(Number(new URL(venue.url).port))
    cleanups.push(() => proxy.stop())
    const { run, dbPath, healthUrl } = await start(proxy.url, venue)
    await waitForEvent(run, "config.loaded", 60_000)
    await healthUntil(healthUrl, "ready", (status) => status === 200)
    await waitForEvent(run, "order.accepted", 60_000)
    await proxy.stop()
    const outageEnds = Date.now() + 60_000
    await waitForEvent(run, "venue.unreachable", 30_000)
    const during = await healthUntil(healthUrl, "not ready", (status, body) => status === 503 && body.includes("venue unreachable"))
    expect(JSON.parse(during.body).status).toBe("degraded")
    await pollUntil(async () => (Date.now() >= outageEnds ? true : undefined), 70_000, "the end of the outage", 500)
    expect(run.child.exitCode).toBeNull()
    await proxy.start()
    await waitForEvent(run, "venue.reachable", 60_000)
    await healthUntil(healthUrl, "ready again", (status) => status === 200)
    await stopCleanly(run, venue)
    const verdict = await verify(venue, dbPath)
    console.log(report("venue gone for 60 s", verdict))
    expectNothingLostOrDuplicated(verdict)
  }, 240_000)
})

describe("svcbot run refuses a config the venue cannot trade, before any order", () => {
  it("an unknown symbol, a key that may not trade and an allocation beyond the account: exit 2, one line each, no order request", async () => {
    const { venue, keyId, secret } = await venueWithKey(["read"])
    const { run, dbPath } = await start(venue.url, { keyId, secret }, {
      strategies: [
        { ...GRID, allocation: { USDT: "90000", BTC: "1" } },
        { ...GRID, id: "doge", symbol: "DOGEUSDT", allocation: { USDT: "20000" } }
      ]
    }, ["--for", "30s"])
    expect(await run.exit).toBe(2)
    const stderr = run.stderr.join("")
    expect(stderr).toMatch(/strategies\[doge\]\.symbol: DOGEUSDT is not listed by the exchange/)
    expect(stderr).toMatch(/the API key may not trade \(it lacks spot\.trade\)/)
    expect(stderr).toMatch(/strategies\[\]\.allocation\.USDT: grid, doge are allocated 110000 USDT but the account holds 100000/)
    expect(existsSync(dbPath)).toBe(false)
    const orders = (await venue.admin("GET", `/_venue/orders?uid=${venue.uid}`)).orders as Array<unknown>
    expect(orders).toEqual([])
  }, 60_000)
})
