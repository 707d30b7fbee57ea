/**
 * `svcbot run` as a child process against a real svc-venue behind a proxy that rewrites its
 * fills answers: a page with a price of 1e900000000 at start, one with a negative baseQty
 * mid-run. The process stays up with its memory flat (its peak RSS is printed), health names
 * the refused answer until a readable one comes, one warn line names the endpoint and the
 * field each time, nothing malformed reaches the SQLite file, and once the proxy stops
 * rewriting the ledger equals the venue's fills. Answers refused during the start-up checks
 * (an HTML page where exchange-info and the wallet should be) are waited out the same way.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { fromString } from "../../src/domain/Decimal.js"
import { defaultDialect } from "../../src/svc/Dialect.js"
import { fundForFills, makeFills } from "../chaos/fixtures/fills.js"
import { events, freeLoopbackPort, healthz, killAll, paperConfig, peakRssMb, pollUntil, query, svcbot, waitForEvent } from "../support/daemon.js"
import { type ProxiedAnswer, startAnswerProxy } from "../support/proxy.js"
import { startVenue } from "../support/venue.js"

afterAll(killAll)
const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  killAll()
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const FILLS = defaultDialect.paths.fills
/** The row of the second page of a pass that the proxy damages. */
const ROW = 7

type Damage = "price" | "baseQty" | undefined

interface StoredFill {
  readonly fill_id: string
  readonly price: string
  readonly base_qty: string
  readonly quote_qty: string
  readonly fee: string
}

describe("svcbot run with hostile fills answers", () => {
  it("waits at start and degrades mid-run while a fills page is refused, stores nothing of it, and ends equal to the venue", async () => {
    const venue = await startVenue({ tape: { kind: "synthetic", seed: 7 }, tickMs: 200, settleMs: 0 })
    cleanups.push(() => venue.close())
    fundForFills(venue.venue, venue.uid)
    makeFills(venue.venue, venue.uid, 1100)
    let damage: Damage = "price"
    const rewrite = (answer: ProxiedAnswer): string | undefined => {
      if (damage === undefined || answer.status !== 200 || !answer.target.startsWith(FILLS) || !answer.target.includes("before=")) return undefined
      const page = JSON.parse(answer.body) as { fills: Array<Record<string, unknown>> }
      const row = page.fills[ROW]
      if (row === undefined) return undefined
      if (damage === "baseQty") {
        row.baseQty = `-${String(row.baseQty)}`
        return JSON.stringify(page)
      }
      row.price = "__price__"
      return JSON.stringify(page).replace('"__price__"', "1e900000000")
    }
    const proxy = await startAnswerProxy(venue.url, rewrite)
    cleanups.push(() => proxy.close())

    const dir = mkdtempSync(join(tmpdir(), "svcbot-hostile-"))
    const dbPath = join(dir, "svcbot.db")
    const port = await freeLoopbackPort()
    const healthUrl = `http://127.0.0.1:${port}/healthz`
    writeFileSync(
      join(dir, "config.json"),
      JSON.stringify({
        mode: "paper",
        venue: { embedded: false, baseUrl: proxy.url },
        database: { path: dbPath },
        health: { host: "127.0.0.1", port },
        engine: { fillSyncIntervalMs: 1000, reconcileIntervalMs: 2000 },
        strategies: []
      })
    )
    const run = svcbot(["run", "--config", join(dir, "config.json")], { SVC_API_KEY: venue.keyId, SVC_API_SECRET: venue.secret })
    const health = (want: (status: number, body: string) => boolean, what: string) =>
      pollUntil(async () => {
        const answer = await healthz(healthUrl)
        return answer !== undefined && want(answer.status, answer.body) ? answer : undefined
      }, 60_000, what, 100)
    const storedFills = () => query<StoredFill>(dbPath, "SELECT fill_id, price, base_qty, quote_qty, fee FROM fills")
    const expectNothingMalformed = () => {
      for (const fill of storedFills()) {
        expect(fill.fill_id).not.toBe("")
        for (const amount of [fill.price, fill.base_qty, fill.quote_qty]) expect(fromString(amount).gt(0), `${fill.fill_id} ${amount}`).toBe(true)
      }
    }
    const refusalLines = (field: string) => events(run).filter((e) => e.event === "request.failed" && e.endpoint === FILLS && e.field === field)

    // At start: the startup reconcile's fill sync meets the damaged page and waits, up and not ready.
    const waiting = await waitForEvent(run, "startup.waiting", 60_000, (e) => e.phase === "startup reconcile")
    expect(String(waiting.reason)).toContain(`fills[${ROW}].price`)
    const starting = await health((status, body) => status === 503 && body.includes(`fills[${ROW}].price`), "health naming the refused page")
    expect(JSON.parse(starting.body).status).toBe("starting")
    expect(run.child.exitCode).toBeNull()
    const [refusedAtStart] = refusalLines(`fills[${ROW}].price`)
    expect(refusedAtStart).toMatchObject({ level: "warn", error: "DecodeError" })
    expectNothingMalformed()
    const storedWhileRefused = storedFills().length
    expect(storedWhileRefused).toBeLessThanOrEqual(500)

    damage = undefined
    await health((status) => status === 200, "ready once the fills page reads")

    // Mid-run: new fills, and the page after the first one is damaged again (a negative baseQty).
    damage = "baseQty"
    makeFills(venue.venue, venue.uid, 1100)
    const degraded = await health((status, body) => status === 503 && body.includes(`answers of ${FILLS} refused (fills[${ROW}].baseQty`), "health degraded by the refused page")
    expect(JSON.parse(degraded.body).status).toBe("degraded")
    expectNothingMalformed()
    // One warn line per refused page, naming the endpoint and the field; fill sync adds none of its own.
    expect(refusalLines(`fills[${ROW}].baseQty`).length).toBeGreaterThanOrEqual(1)
    expect(events(run).filter((e) => e.event === "request.failed" && e.what === "fills")).toEqual([])

    damage = undefined
    await health((status) => status === 200, "ready again once the fills page reads")
    const venueFills = (await venue.admin("GET", `/_venue/fills?uid=${venue.uid}`)).fills as Array<Record<string, string | number | null>>
    await pollUntil(async () => (storedFills().length === venueFills.length ? true : undefined), 60_000, "the ledger to hold every venue fill")
    const stored = new Map(storedFills().map((fill) => [fill.fill_id, fill]))
    for (const want of venueFills) {
      const fill = stored.get(String(want.fillId))
      expect(fill, String(want.fillId)).toBeDefined()
      expect([fill!.price, fill!.base_qty, fill!.quote_qty, fill!.fee]).toEqual([want.price, want.baseQty, want.quoteQty, want.fee].map((amount) => fromString(String(amount)).toFixed()))
    }
    const peak = peakRssMb(run.child.pid!)
    console.log(
      `daemon with hostile fills answers: ${proxy.rewritten.length} pages rewritten, ${storedWhileRefused} fills stored while refused at start, ledger ${stored.size} = venue ${venueFills.length}; daemon peak RSS ${peak.toFixed(1)} MB`
    )
    expect(peak).toBeLessThan(1024)
    run.child.kill("SIGTERM")
    expect(await run.exit).toBe(0)
  }, 180_000)

  it("waits out refused answers during the venue and key checks, up and starting, and starts once they read", async () => {
    const venue = await startVenue({ tape: { kind: "synthetic", seed: 7 }, tickMs: 200 })
    cleanups.push(() => venue.close())
    const paths = defaultDialect.paths
    // What a misconfigured proxy in front of an exchange sends: an HTML page, with a 200.
    const refusing = new Set<string>([paths.exchangeInfo])
    const proxy = await startAnswerProxy(venue.url, (answer) => (refusing.has(answer.target.split("?")[0]!) ? "<html><body>502 Bad Gateway</body></html>" : undefined))
    cleanups.push(() => proxy.close())
    const port = await freeLoopbackPort()
    const { configPath } = paperConfig("hostile-start", proxy.url, { health: { host: "127.0.0.1", port }, strategies: [] })
    const run = svcbot(["run", "--config", configPath], { SVC_API_KEY: venue.keyId, SVC_API_SECRET: venue.secret })
    const starting = (phase: string) =>
      pollUntil(async () => {
        if (run.child.exitCode !== null) throw new Error(`svcbot exited (${run.child.exitCode}) in the ${phase}: ${run.stderr.join("")}`)
        const waited = events(run).some((e) => e.event === "startup.waiting" && e.phase === phase && e.error === "DecodeError")
        const answer = await healthz(`http://127.0.0.1:${port}/healthz`)
        return waited && answer?.status === 503 && JSON.parse(answer.body).status === "starting" ? true : undefined
      }, 60_000, `the ${phase} waiting out a refused answer`, 100)

    await starting("venue check")
    // Exchange-info reads again, so the venue check passes; the key check, which reads the wallet too, meets the refused wallet.
    refusing.add(paths.walletsSpot)
    refusing.delete(paths.exchangeInfo)
    await starting("key check")
    expect(run.child.exitCode).toBeNull()
    refusing.clear()
    await waitForEvent(run, "config.loaded", 60_000)
    run.child.kill("SIGTERM")
    expect(await run.exit).toBe(0)
  }, 120_000)
})
