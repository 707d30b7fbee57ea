/**
 * The console's parts that stand without a daemon: which placements stopped entries refuse,
 * the routes' token and host rules and the page's policy over a real HTTP server, and the
 * event stream's bounds with real sockets.
 */
import { createHash } from "node:crypto"
import { createServer, get, request as httpRequest, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Redacted } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { consoleRoutes } from "../../src/console/Api.js"
import { EventStream } from "../../src/console/EventStream.js"
import { consolePage } from "../../src/console/Page.js"
import { Decimal } from "../../src/domain/Decimal.js"
import type { PlaceIntent } from "../../src/domain/Intent.js"
import { isEntry } from "../../src/strategy/Entries.js"

const d = (value: string) => new Decimal(value)
const limit = (side: "buy" | "sell", qty: string): PlaceIntent => ({ type: "limit", tag: "t", symbol: "BTCUSDT", side, baseQty: d(qty), limitPrice: d("60000") })

describe("stopped entries", () => {
  it("refuse what opens or adds to a position and let through what reduces it", () => {
    // Flat: either side opens a position.
    expect(isEntry(limit("buy", "0.1"), d("0"), d("0"))).toBe(true)
    expect(isEntry(limit("sell", "0.1"), d("0"), d("0"))).toBe(true)
    // Long 0.3: buying adds, selling up to the position exits, beyond it would open a short.
    expect(isEntry(limit("buy", "0.1"), d("0.3"), d("0"))).toBe(true)
    expect(isEntry(limit("sell", "0.3"), d("0.3"), d("0"))).toBe(false)
    expect(isEntry(limit("sell", "0.31"), d("0.3"), d("0"))).toBe(true)
    // What already rests on the way out counts first.
    expect(isEntry(limit("sell", "0.2"), d("0.3"), d("0.2"))).toBe(true)
    // Short 0.2 (sold from an allocation): buying back exits, selling adds.
    expect(isEntry(limit("buy", "0.2"), d("-0.2"), d("0"))).toBe(false)
    expect(isEntry(limit("sell", "0.1"), d("-0.2"), d("0"))).toBe(true)
    // A market buy by quote amount has no size in base: an entry, even when short.
    expect(isEntry({ type: "market", tag: "m", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("100"), maxSlippageBps: 30 }, d("-0.2"), d("0"))).toBe(true)
    expect(isEntry({ type: "market", tag: "m", symbol: "BTCUSDT", side: "sell", baseQty: d("0.1"), maxSlippageBps: 30 }, d("0.2"), d("0"))).toBe(false)
  })
})

const servers: Array<Server> = []
afterEach(() => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    server.close()
  }
})

const listen = (handler: (request: IncomingMessage, response: import("node:http").ServerResponse) => void): Promise<number> =>
  new Promise((done) => {
    const server = createServer(handler)
    servers.push(server)
    server.listen(0, "127.0.0.1", () => done((server.address() as AddressInfo).port))
  })

const call = (port: number, path: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}) =>
  new Promise<{ status: number; headers: IncomingMessage["headers"]; body: string }>((done, fail) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, method: options.method ?? "GET", headers: options.headers ?? {} }, (res) => {
      let body = ""
      res.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
      res.on("end", () => done({ status: res.statusCode!, headers: res.headers, body }))
    })
    req.on("error", fail)
    req.end(options.body)
  })

const TOKEN = "a-console-token-of-at-least-32-characters"

const serve = (token: string | undefined) => {
  const routes = consoleRoutes(consolePage(), token === undefined ? undefined : Redacted.make(token))
  return listen((request, response) => {
    if (!routes.handle(request, response)) response.writeHead(404).end()
  })
}

describe("the console's routes", () => {
  it("serve one self-contained page whose CSP allows exactly its inline script and style", async () => {
    const port = await serve(undefined)
    const page = await call(port, "/")
    expect(page.status).toBe(200)
    const csp = String(page.headers["content-security-policy"])
    expect(csp).toMatch(/^default-src 'none'; script-src 'sha256-[^']+'; style-src 'sha256-[^']+'; connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'$/)
    const hashOf = (text: string) => `'sha256-${createHash("sha256").update(text, "utf8").digest("base64")}'`
    const scripts = [...page.body.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]!)
    const styles = [...page.body.matchAll(/<style>([\s\S]*?)<\/style>/g)].map((m) => m[1]!)
    expect(scripts).toHaveLength(1)
    expect(styles).toHaveLength(1)
    expect(csp).toContain(`script-src ${hashOf(scripts[0]!)}`)
    expect(csp).toContain(`style-src ${hashOf(styles[0]!)}`)
    // Nothing is loaded from elsewhere, and no element carries a style or handler attribute the policy would refuse.
    expect(page.body).not.toMatch(/\b(src|href)=|https?:\/\/(?!www\.w3\.org\/2000\/svg)|\sstyle=|\son[a-z]+=/)
    // The report's chart library is the page's own.
    expect(scripts[0]).toContain("var SvcChart = (function ()")
  })

  it("refuse controls with 403 naming the setting when no token is configured, and names other than an IP or localhost", async () => {
    const port = await serve(undefined)
    const control = await call(port, "/api/v1/instances/a/pause", { method: "POST" })
    expect(control.status).toBe(403)
    expect(JSON.parse(control.body)).toEqual({ error: { code: "no-token-configured", message: expect.stringContaining("set health.token (or SVC_HEALTH_TOKEN / SVC_HEALTH_TOKEN_FILE)") } })
    expect(JSON.parse((await call(port, "/api/v1/session")).body)).toEqual({ tokenConfigured: false, authorized: true })
    // Before the daemon trades, reads answer 503 in the one error shape.
    const starting = await call(port, "/api/v1/instances")
    expect(starting.status).toBe(503)
    expect(JSON.parse(starting.body).error.code).toBe("starting")
    const rebound = await call(port, "/api/v1/instances", { headers: { host: "attacker.example:8081" } })
    expect(rebound.status).toBe(403)
    expect(JSON.parse(rebound.body).error.code).toBe("host-refused")
    expect((await call(port, "/", { headers: { host: "localhost:9000" } })).status).toBe(200)
    expect((await call(port, "/api/v1/instances", { method: "DELETE" })).status).toBe(405)
    expect((await call(port, `/api/v1/fills?instance=${"x".repeat(3000)}`)).status).toBe(414)
    expect((await call(port, "/healthz")).status).toBe(404)
  })

  it("with a token, answer 401 to a missing or wrong one, in a header only", async () => {
    const port = await serve(TOKEN)
    for (const headers of [{}, { authorization: `Bearer ${TOKEN}x` }, { authorization: TOKEN }, { cookie: `token=${TOKEN}` }]) {
      const answer = await call(port, "/api/v1/instances/a/pause", { method: "POST", headers })
      expect(answer.status).toBe(401)
      expect(answer.headers["www-authenticate"]).toBe('Bearer realm="svcbot"')
      expect(JSON.parse(answer.body).error.code).toBe("unauthorized")
      expect((await call(port, "/api/v1/instances", { headers })).status).toBe(401)
    }
    // The right token passes; the daemon is not trading in this test, so it is told to wait.
    expect((await call(port, "/api/v1/instances/a/pause", { method: "POST", headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(503)
    expect(JSON.parse((await call(port, "/api/v1/session", { headers: { authorization: `Bearer ${TOKEN}` } })).body)).toEqual({ tokenConfigured: true, authorized: true })
    expect(JSON.parse((await call(port, "/api/v1/session")).body)).toEqual({ tokenConfigured: true, authorized: false })
    // With a token, the host rule gives way: the token is what protects it.
    expect((await call(port, "/", { headers: { host: "bot.internal:8081" } })).status).toBe(200)
    // No answer carries CORS headers.
    expect((await call(port, "/api/v1/session", { headers: { origin: "https://elsewhere.example" } })).headers["access-control-allow-origin"]).toBeUndefined()
  })
})

describe("the event stream", () => {
  it("serves at most its number of clients and drops one that stops reading, keeping the others", async () => {
    const drops: Array<number> = []
    const stream = new EventStream({ maxClients: 2, maxBufferedBytes: 64 * 1024 }, (bytes) => drops.push(bytes))
    const port = await listen((request, response) => {
      if (!stream.open(request, response)) response.writeHead(503).end()
    })
    const connect = () =>
      new Promise<IncomingMessage>((done) => {
        get({ host: "127.0.0.1", port, path: "/" }, done)
      })
    const reader = await connect()
    const received: Array<string> = []
    reader.on("data", (chunk: Buffer) => received.push(chunk.toString("utf8")))
    const stalled = await connect()
    stalled.pause()
    expect((await connect()).statusCode).toBe(503)
    expect(stream.size).toBe(2)

    stream.publish("fill", { price: "60000.01" })
    const big = "x".repeat(32 * 1024)
    // The stalled client's socket fills, then its bound: it is dropped, the reader is not.
    for (let i = 0; i < 2000 && stream.size === 2; i++) {
      stream.publish("order", { big })
      await new Promise((done) => setImmediate(done))
    }
    expect(stream.size).toBe(1)
    expect(stream.dropped).toBe(1)
    expect(drops[0]).toBeLessThanOrEqual(64 * 1024)
    const text = received.join("")
    expect(text.startsWith("retry: 3000\n\nid: 1\nevent: fill\ndata: {\"price\":\"60000.01\"}\n\n")).toBe(true)
    stream.closeAll()
    expect(stream.size).toBe(0)
  })
})
