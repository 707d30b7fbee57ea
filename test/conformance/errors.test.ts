/**
 * Conformance: the Errors part — the JSON error body — and svc-venue's handling of bad
 * input: random methods, paths, headers and bodies never produce a 5xx or a crash,
 * always a JSON error with a stable code; bodies over 64 KiB answer 413.
 */
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { devAccounts, devTradeKey } from "../../src/venue/Accounts.js"
import { signRequest } from "../../src/svc/Signer.js"
import { VenueCode } from "../../src/venue/Answers.js"
import { Venue } from "../../src/venue/Venue.js"
import { startVenue, type TestVenue } from "../support/venue.js"

let v: TestVenue

beforeAll(async () => {
  v = await startVenue({ limits: { authFailuresBeforeBlock: 1_000_000, weightPerMinute: 1_000_000, ordersPer10s: 1_000_000 } })
})
afterAll(() => v.close())

const STABLE_CODES = new Set<string>([
  "API_KEY_MALFORMED",
  "API_KEY_TIMESTAMP_INVALID",
  "API_KEY_REPLAYED",
  "API_KEY_INVALID",
  "API_KEY_NOT_PERMITTED",
  "RATE_LIMITED",
  "AUTH_BLOCKED",
  "UNKNOWN_SYMBOL",
  "ORDER_NOT_FOUND",
  "ORDER_NOT_OPEN",
  ...Object.values(VenueCode)
])

const expectJsonError = (status: number, text: string) => {
  expect(status, text).toBeGreaterThanOrEqual(400)
  expect(status, text).toBeLessThan(500)
  const body = JSON.parse(text) as { ok?: boolean; code?: string; msg?: string }
  expect(STABLE_CODES.has(body.code ?? ""), text).toBe(true)
  expect(typeof body.msg).toBe("string")
  if (status !== 429) expect(body.ok).toBe(false)
}

describe("Errors", () => {
  it("a failed request answers a JSON body {ok: false, code, msg}", async () => {
    const answers = [
      await v.raw("GET", "/api/wallets/spot"),
      await v.signed("GET", "/api/account/profile"),
      await v.signed("POST", "/api/spot/limit", "{"),
      await v.raw("GET", "/nothing-here")
    ]
    for (const r of answers) {
      expect(r.headers["content-type"]).toMatch(/^application\/json/)
      expectJsonError(r.status, r.text)
    }
  })

  it("amounts that are exponents, negative, huge, strings or NaN answer 400 INVALID_PARAMETER naming the field and reason", async () => {
    const cases: Array<[string, string]> = [
      ["1e-3", "exponent"],
      ["1e900000000", "exponent"],
      ["-0.001", "negative"],
      ["0", "not-positive"],
      [`0.${"0".repeat(30)}1`, "too-many-digits"],
      ["1".repeat(60), "too-many-digits"],
      ['"0.001"', "not-a-json-number"],
      ['"NaN"', "not-a-json-number"],
      ["null", "missing"]
    ]
    for (const [baseQty, reason] of cases) {
      const r = await v.signed("POST", "/api/spot/limit", `{"symbol":"BTCUSDT","side":"buy","baseQty":${baseQty},"limitPrice":50000}`)
      expect(r.status, baseQty).toBe(400)
      expect(r.json, baseQty).toMatchObject({ ok: false, code: "INVALID_PARAMETER", field: "baseQty", reason })
    }
    // A price as hostile as a quantity: refused at once, naming it, and the venue answers on.
    const price = await v.signed("POST", "/api/spot/limit", '{"symbol":"BTCUSDT","side":"buy","baseQty":0.001,"limitPrice":1e900000000}')
    expect(price.status).toBe(400)
    expect(price.json).toMatchObject({ ok: false, code: "INVALID_PARAMETER", field: "limitPrice", reason: "exponent" })
    const tape = await v.raw("POST", "/_venue/tape", { headers: { "content-type": "application/json" }, body: '{"symbol":"BTCUSDT","price":"1e900000000"}' })
    expect(tape.status).toBe(400)
    expect(tape.json).toMatchObject({ ok: false, code: "INVALID_PARAMETER" })
    expect(tape.json.msg).toMatch(/price/)
    expect((await v.signed("GET", "/api/wallets/spot")).status).toBe(200)
    const missing = await v.signed("POST", "/api/spot/limit", '{"symbol":"BTCUSDT","side":"buy"}')
    expect(missing.json).toMatchObject({ code: "INVALID_PARAMETER", field: "baseQty", reason: "missing" })
    const symbol = await v.signed("POST", "/api/spot/limit", '{"symbol":"₿TCUSDT","side":"buy","baseQty":1,"limitPrice":1}')
    expect(symbol.json).toMatchObject({ code: "UNKNOWN_SYMBOL" })
  })

  it("a body over 64 KiB answers 413, up to 10 MB", async () => {
    for (const size of [64 * 1024 + 1, 10 * 1024 * 1024]) {
      const body = `{"pad":"${"x".repeat(size)}"}`
      const r = await v.signed("POST", "/api/spot/limit", body)
      expect(r.status).toBe(413)
      expect(r.json).toMatchObject({ ok: false, code: "PAYLOAD_TOO_LARGE" })
    }
    const justFits = await v.signed("POST", "/api/spot/limit", `{"symbol":"BTCUSDT","side":"buy","baseQty":0.001,"limitPrice":50000,"pad":"${"x".repeat(60 * 1024)}"}`)
    expect(justFits.status).toBe(202)
  })

  it("property: random methods, paths, headers and bodies over HTTP never answer 5xx; always a JSON error with a stable code", async () => {
    const method = fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD")
    const path = fc.oneof(
      fc.constantFrom("/api/spot/limit", "/api/spot/market", "/api/spot/stop-limit", "/api/spot/cancel", "/api/wallets/spot", "/api/spot/fills", "/api/spot/order", "/api/spot/candles", "/api/spot/depth", "/api/spot/ticker"),
      fc.string({ maxLength: 30 }).map((s) => `/api/${encodeURIComponent(s)}`),
      fc.webPath().map((p) => `/api${p}`)
    )
    const query = fc.option(fc.webQueryParameters(), { nil: undefined })
    const value = fc.oneof(
      fc.constantFrom("1e308", "-1", "NaN", "1e-400", "99999999999999999999999999999999999999999999", "0.0000000000000000000000001", '"NaN"', '"∞"', "true", "null", "[]", "{}"),
      fc.double().map(String).filter((s) => s !== "NaN" && !s.includes("Infinity")),
      fc.string({ maxLength: 20 }).map((s) => JSON.stringify(s))
    )
    const field = fc.constantFrom("symbol", "side", "baseQty", "quoteOrderQty", "limitPrice", "stopPrice", "maxSlippageBps", "clientOrderId", "userId")
    const jsonBody = fc.dictionary(field, value, { maxKeys: 7 }).map((o) => `{${Object.entries(o).map(([k, val]) => `"${k}":${val}`).join(",")}}`)
    const body = fc.option(fc.oneof(jsonBody, fc.string({ maxLength: 200 }), fc.constantFrom("{", "[1,2", '{"a":}', "\u0000", "{\"symbol\":\"BTCUSDT\"")), { nil: undefined })
    const signedFlag = fc.boolean()
    const extraHeaders = fc.dictionary(fc.constantFrom("content-type", "authorization", "x-svc-timestamp", "x-svc-recv-window", "x-device-id"), fc.string({ maxLength: 20 }).filter((s) => /^[\x20-\x7e]*$/.test(s)), { maxKeys: 3 })

    await fc.assert(
      fc.asyncProperty(method, path, query, body, signedFlag, extraHeaders, async (m, p, q, b, isSigned, headers) => {
        const target = q === undefined ? p : `${p}?${q}`
        const sendBody = m === "GET" || m === "HEAD" ? undefined : b
        const r = isSigned
          ? await v.signed(m, target, sendBody, { headers })
          : await v.raw(m, target, { headers, ...(sendBody === undefined ? {} : { body: sendBody }) })
        expect(r.status, `${m} ${target}`).toBeLessThan(500)
        if (r.status >= 400 && m !== "HEAD") expectJsonError(r.status, r.text)
      }),
      { numRuns: 150 }
    )
  })

  it("property: thousands of random requests straight into the handler never throw nor answer 5xx", () => {
    const venue = new Venue({ accounts: { ...devAccounts, limits: { ...devAccounts.limits, authFailuresBeforeBlock: 1_000_000, weightPerMinute: 1_000_000_000, ordersPer10s: 1_000_000_000 } } })
    const target = fc.oneof(
      fc.constantFrom("/api/spot/limit", "/api/spot/market", "/api/spot/stop-limit", "/api/spot/cancel", "/api/spot/fills?before=%%%", "/api/spot/fills?limit=-1", "/api/spot/order?clientOrderId=", "/_venue/tape", "/_venue/keys"),
      fc.string({ maxLength: 40 }).map((s) => `/api/${s}`)
    )
    const body = fc.oneof(
      fc.json().map((j) => j),
      fc.string({ maxLength: 100 }),
      fc.record({ symbol: fc.constantFrom("BTCUSDT", "ETHUSDT", "X"), side: fc.constantFrom("buy", "sell", "both"), baseQty: fc.constantFrom("0.001", "1e3", "-5", "0.1234567891234567891234"), limitPrice: fc.constantFrom("50000", "0.001", "1e9") }).map(
        (o) => `{"symbol":"${o.symbol}","side":"${o.side}","baseQty":${o.baseQty},"limitPrice":${o.limitPrice},"quoteOrderQty":${o.baseQty},"maxSlippageBps":5,"stopPrice":${o.limitPrice}}`
      )
    )
    fc.assert(
      fc.property(fc.constantFrom("GET", "POST", "DELETE"), target, body, fc.boolean(), (method, t, b, loopback) => {
        const bytes = new TextEncoder().encode(b)
        const signed = signRequest(devTradeKey.keyId, devTradeKey.secret, { method, target: t, timestamp: Date.now(), recvWindow: 5000, body: bytes })
        const headers: Record<string, string> = {}
        for (const [k, val] of Object.entries(signed.headers)) headers[k.toLowerCase()] = val
        headers["content-type"] = "application/json"
        const answer = venue.handle({ method, target: t, headers, body: bytes, remoteAddress: loopback ? "127.0.0.1" : "198.51.100.1" })
        expect(answer.status).toBeLessThan(500)
        JSON.parse(answer.body)
      }),
      { numRuns: 3000 }
    )
  })
})
