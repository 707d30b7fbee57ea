/**
 * Conformance: the spec's Authentication part, rule by rule, with raw signed requests.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { fromString } from "../../src/domain/Decimal.js"
import { devReadKey } from "../../src/venue/Accounts.js"
import { canonicalString, hmacHex, signRequest } from "../../src/svc/Signer.js"
import { startVenue, type TestVenue } from "../support/venue.js"

let v: TestVenue

beforeAll(async () => {
  // Failed tries here must not trip the failed-auth block, which has its own test.
  v = await startVenue({ limits: { authFailuresBeforeBlock: 1_000_000 } })
})
afterAll(() => v.close())

const order = { symbol: "BTCUSDT", side: "buy", baseQty: fromString("0.001"), limitPrice: fromString("50000") }
const orderBody = '{"symbol":"BTCUSDT","side":"buy","baseQty":0.001,"limitPrice":50000}'

describe("Authentication", () => {
  it("public endpoints need no key and no signature", async () => {
    const r = await v.raw("GET", "/api/spot/exchange-info")
    expect(r.status).toBe(200)
    expect(r.json.pairs.map((p: { symbol: string }) => p.symbol)).toContain("BTCUSDT")
  })

  it("a request signed with the four X-SVC headers over the canonical string is accepted", async () => {
    const r = await v.signed("GET", "/api/wallets/spot")
    expect(r.status).toBe(200)
  })

  it("the canonical string covers the query exactly as sent, not sorted or re-encoded", async () => {
    const target = "/api/spot/fills?symbol=BTCUSDT&limit=5"
    const ok = await v.signed("GET", target)
    expect(ok.status).toBe(200)
    // Signed over the sorted query, sent with the original order: refused.
    const signed = signRequest(v.keyId, v.secret, { method: "GET", target: "/api/spot/fills?limit=5&symbol=BTCUSDT", timestamp: Date.now(), recvWindow: 5000 })
    const bad = await v.raw("GET", target, { headers: signed.headers })
    expect(bad.status).toBe(401)
    expect(bad.json.code).toBe("API_KEY_INVALID")
  })

  it("the HMAC key is the whole secret including its svs_live_ prefix", async () => {
    const timestamp = Date.now()
    const canonical = canonicalString({ method: "GET", target: "/api/wallets/spot", timestamp, recvWindow: 5000 })
    const headers = { "X-SVC-APIKEY": v.keyId, "X-SVC-TIMESTAMP": String(timestamp), "X-SVC-RECV-WINDOW": "5000" }
    const withoutPrefix = await v.raw("GET", "/api/wallets/spot", { headers: { ...headers, "X-SVC-SIGNATURE": hmacHex(v.secret.slice(9), canonical) } })
    expect(withoutPrefix.status).toBe(401)
    expect(withoutPrefix.json.code).toBe("API_KEY_INVALID")
    const whole = await v.raw("GET", "/api/wallets/spot", { headers: { ...headers, "X-SVC-SIGNATURE": hmacHex(v.secret, canonical) } })
    expect(whole.status).toBe(200)
  })

  it("the body hash covers the exact bytes sent", async () => {
    const timestamp = Date.now()
    const signed = signRequest(v.keyId, v.secret, { method: "POST", target: "/api/spot/limit", timestamp, recvWindow: 5000, body: orderBody })
    const r = await v.raw("POST", "/api/spot/limit", { headers: signed.headers, body: orderBody.replace("0.001", "0.0010") })
    expect(r.status).toBe(401)
    expect(r.json.code).toBe("API_KEY_INVALID")
  })

  it("a timestamp outside the receive window answers 401 API_KEY_TIMESTAMP_INVALID with server_time_ms and reason", async () => {
    const old = await v.signed("GET", "/api/wallets/spot", undefined, { timestamp: Date.now() - 10_000, recvWindow: 5000 })
    expect(old.status).toBe(401)
    expect(old.json).toMatchObject({ ok: false, code: "API_KEY_TIMESTAMP_INVALID", reason: "timestamp-too-old" })
    const serverTime = Number(old.json.server_time_ms.value)
    expect(Number.isInteger(serverTime)).toBe(true)
    expect(Math.abs(serverTime - Date.now())).toBeLessThan(60_000)
    const ahead = await v.signed("GET", "/api/wallets/spot", undefined, { timestamp: Date.now() + 10_000, recvWindow: 5000 })
    expect(ahead.json).toMatchObject({ code: "API_KEY_TIMESTAMP_INVALID", reason: "timestamp-in-future" })
    // The same offset inside a wider window is fine.
    const wide = await v.signed("GET", "/api/wallets/spot", undefined, { timestamp: Date.now() - 10_000, recvWindow: 20_000 })
    expect(wide.status).toBe(200)
  })

  it("a receive window outside 1..60000 answers API_KEY_TIMESTAMP_INVALID", async () => {
    const r = await v.signed("GET", "/api/wallets/spot", undefined, { recvWindow: 60_001 })
    expect(r.json).toMatchObject({ code: "API_KEY_TIMESTAMP_INVALID", reason: "recv-window-out-of-range" })
  })

  it("a non-GET request sent again with the same signature answers 401 API_KEY_REPLAYED", async () => {
    const timestamp = Date.now()
    const signed = signRequest(v.keyId, v.secret, { method: "POST", target: "/api/spot/limit", timestamp, recvWindow: 5000, body: orderBody })
    const first = await v.raw("POST", "/api/spot/limit", { headers: signed.headers, body: orderBody })
    expect(first.status).toBe(202)
    const again = await v.raw("POST", "/api/spot/limit", { headers: signed.headers, body: orderBody })
    expect(again.status).toBe(401)
    expect(again.json.code).toBe("API_KEY_REPLAYED")
    // A retry with a new timestamp and signature goes through (a later one, even within the same millisecond).
    const retry = await v.signed("POST", "/api/spot/limit", order, { timestamp: timestamp + 1 })
    expect(retry.status).toBe(202)
  })

  it("GET requests are never checked for replay", async () => {
    const signed = signRequest(v.keyId, v.secret, { method: "GET", target: "/api/wallets/spot", timestamp: Date.now(), recvWindow: 5000 })
    for (let i = 0; i < 3; i++) {
      const r = await v.raw("GET", "/api/wallets/spot", { headers: signed.headers })
      expect(r.status).toBe(200)
    }
  })

  it("wrong key, wrong secret, wrong signature all answer the same 401 API_KEY_INVALID", async () => {
    const unknownKey = await v.signed("GET", "/api/wallets/spot", undefined, { keyId: `svk_live_${"x".repeat(22)}` })
    const wrongSecret = await v.signed("GET", "/api/wallets/spot", undefined, { secret: `svs_live_${"y".repeat(49)}` })
    const wrongSignature = await v.signed("GET", "/api/wallets/spot", undefined, { headers: { "X-SVC-SIGNATURE": "0".repeat(64) } })
    const missingHeader = await v.raw("GET", "/api/wallets/spot", { headers: { "X-SVC-APIKEY": v.keyId } })
    const answers = [unknownKey, wrongSecret, wrongSignature, missingHeader]
    for (const r of answers) {
      expect(r.status).toBe(401)
      expect(r.json).toMatchObject({ ok: false, code: "API_KEY_INVALID" })
    }
    expect(new Set(answers.map((r) => r.text)).size).toBe(1)
  })

  it("a body that is not application/json in UTF-8 answers API_KEY_INVALID", async () => {
    const plain = await v.signed("POST", "/api/spot/limit", orderBody, { headers: { "Content-Type": "text/plain" } })
    expect(plain.json.code).toBe("API_KEY_INVALID")
    const latin1 = await v.signed("POST", "/api/spot/limit", orderBody, { headers: { "Content-Type": "application/json; charset=iso-8859-1" } })
    expect(latin1.json.code).toBe("API_KEY_INVALID")
    const bytes = new Uint8Array([...Buffer.from('{"symbol":"'), 0xff, 0xfe, ...Buffer.from('"}')])
    const signed = signRequest(v.keyId, v.secret, { method: "POST", target: "/api/spot/limit", timestamp: Date.now(), recvWindow: 5000, body: bytes })
    const invalidUtf8 = await v.raw("POST", "/api/spot/limit", { headers: signed.headers, body: bytes })
    expect(invalidUtf8.status).toBe(401)
    expect(invalidUtf8.json.code).toBe("API_KEY_INVALID")
    const utf8 = await v.signed("POST", "/api/spot/limit", orderBody, { headers: { "Content-Type": "application/json; charset=utf-8" } })
    expect(utf8.status).toBe(202)
  })

  it("Authorization together with the key header answers 400 API_KEY_MALFORMED", async () => {
    const r = await v.signed("GET", "/api/wallets/spot", undefined, { headers: { Authorization: "Bearer abc" } })
    expect(r.status).toBe(400)
    expect(r.json).toMatchObject({ ok: false, code: "API_KEY_MALFORMED" })
  })

  it("X-Device-Id is not needed, and is ignored when sent", async () => {
    const r = await v.signed("GET", "/api/wallets/spot", undefined, { headers: { "X-Device-Id": "phone-1" } })
    expect(r.status).toBe(200)
  })

  it("a userId in the body or the query is ignored: the account follows from the key", async () => {
    await v.admin("POST", "/_venue/accounts", { uid: 2002, balances: { USDT: "1000" } })
    const other = await v.admin("POST", "/_venue/keys", { uid: 2002, permissions: ["read", "trade"] })
    const theirs = await v.signed("POST", "/api/spot/limit", order, { keyId: other.id, secret: other.secret })
    expect(theirs.status).toBe(202)
    const ids = (r: { json: Array<{ clientOrderId: string }> }) => r.json.map((o) => o.clientOrderId)
    const mine = await v.signed("GET", "/api/spot/open-orders")
    const withUserId = await v.signed("GET", "/api/spot/open-orders?userId=2002")
    expect(withUserId.status).toBe(200)
    expect(ids(withUserId)).toEqual(ids(mine))
    expect(ids(withUserId)).not.toContain(theirs.json.clientOrderId)
    const placed = await v.signed("POST", "/api/spot/limit", { ...order, userId: 2002 })
    expect(placed.status).toBe(202)
    const orders = await v.admin("GET", `/_venue/orders?uid=${v.uid}`)
    expect(orders.orders.map((o: { clientOrderId: string }) => o.clientOrderId)).toContain(placed.json.clientOrderId)
  })

  it("a read-only key authenticates with its own secret", async () => {
    const r = await v.signed("GET", "/api/wallets/spot", undefined, { keyId: devReadKey.keyId, secret: devReadKey.secret })
    expect(r.status).toBe(200)
  })
})
