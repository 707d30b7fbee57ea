/**
 * Paper is paper: svc-venue names itself on every answer, `svcbot run` in paper mode
 * refuses any server that does not (before one signed request reaches it), and live
 * mode refuses svc-venue unless the config declares a staging run.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit, Scope } from "effect"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { VENUE_IMPLEMENTATION, VENUE_IMPLEMENTATION_HEADER } from "../../src/svc/VenueIdentity.js"
import { devTradeKey } from "../../src/venue/Accounts.js"
import { serveVenue } from "../../src/venue/Server.js"
import { killAll, svcbot, waitForEvent } from "../support/daemon.js"
import { selfSigned } from "../support/tls.js"
import { startVenue } from "../support/venue.js"

afterAll(killAll)
const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  killAll()
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const GRID = { id: "grid", strategy: "grid", symbol: "BTCUSDT", params: { lowerPrice: "59000", upperPrice: "61000", levels: 5, orderQty: "0.002" } }
const KEY_ENV = { SVC_API_KEY: devTradeKey.keyId, SVC_API_SECRET: devTradeKey.secret }

const writeConfig = (config: Record<string, unknown>): string => {
  const dir = mkdtempSync(join(tmpdir(), "svcbot-identity-"))
  writeFileSync(join(dir, "config.json"), JSON.stringify({ database: { path: join(dir, "svcbot.db") }, strategies: [GRID], ...config }))
  return join(dir, "config.json")
}

describe("svc-venue names itself", () => {
  it("on every answer: public, signed and refused", async () => {
    const venue = await startVenue()
    cleanups.push(() => venue.close())
    const answers = [
      await venue.raw("GET", "/api/spot/exchange-info"),
      await venue.signed("GET", "/api/wallets/spot"),
      await venue.signed("GET", "/api/wallets/spot", undefined, { secret: "svs_live_" + "x".repeat(49) }),
      await venue.raw("GET", "/api/spot/no-such-route")
    ]
    expect(answers.map((a) => a.status)).toEqual([200, 200, 401, 403])
    for (const answer of answers) expect(answer.headers[VENUE_IMPLEMENTATION_HEADER]).toBe(VENUE_IMPLEMENTATION)
  })
})

describe("svcbot run trades where its mode says", () => {
  it("paper mode refuses a server that is not svc-venue, naming the URL, and sends it nothing signed", async () => {
    const seen: Array<string> = []
    const pairs = JSON.parse((await (async () => {
      const venue = await startVenue()
      try {
        return (await venue.raw("GET", "/api/spot/exchange-info")).text
      } finally {
        await venue.close()
      }
    })())) as unknown
    // A stand-in exchange: answers like one, but is not svc-venue.
    const standIn: Server = createServer((request, response) => {
      seen.push(`${request.method} ${request.url} ${request.headers["x-svc-signature"] === undefined ? "unsigned" : "signed"}`)
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(pairs))
    })
    await new Promise<void>((done) => standIn.listen(0, "127.0.0.1", done))
    cleanups.push(() => new Promise<void>((done) => standIn.close(() => done())))
    const address = standIn.address()
    const url = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`
    const run = svcbot(["run", "--config", writeConfig({ mode: "paper", venue: { embedded: false, baseUrl: url } })], KEY_ENV)
    expect(await run.exit).toBe(2)
    expect(run.stderr.join("")).toContain(`paper mode trades only on svc-venue, and ${url} does not identify as svc-venue`)
    console.log(`stand-in saw: ${seen.join("; ")}`)
    expect(seen.every((line) => line.startsWith("GET /api/spot/exchange-info") && line.endsWith("unsigned"))).toBe(true)
  })

  it("live mode refuses svc-venue unless the config says it is a staging run", async () => {
    const tls = selfSigned("svcbot-staging")
    const scope = Effect.runSync(Scope.make())
    cleanups.push(() => Effect.runPromise(Scope.close(scope, Exit.void)))
    const running = await Effect.runPromise(Scope.extend(serveVenue({ port: 0, tls }), scope))
    const env = { ...KEY_ENV, NODE_EXTRA_CA_CERTS: tls.certPath }
    const live = (staging: boolean, extra: ReadonlyArray<string> = []) =>
      svcbot(["run", "--mode", "live", "--i-accept-unpromoted", ...extra, "--config", writeConfig({ mode: "live", venue: { embedded: false, baseUrl: running.url, staging } })], env)

    const refused = live(false)
    expect(await refused.exit).toBe(2)
    expect(refused.stderr.join("")).toContain(`live mode refuses ${running.url}: it is ${VENUE_IMPLEMENTATION}, a paper venue; set venue.staging to true`)

    const staging = live(true)
    await waitForEvent(staging, "config.loaded", 60_000)
    staging.child.kill("SIGTERM")
    expect(await staging.exit, staging.stderr.join("")).toBe(0)
  }, 120_000)
})
