/**
 * Conformance: the Endpoints part — answer shapes of every endpoint open to keys, the
 * Dialect's market-data and order routes, and 403 for everything else under /api.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { fromString, type Decimal } from "../../src/domain/Decimal.js"
import { isLosslessNumber } from "../../src/domain/Json.js"
import { startVenue, eventually, type TestVenue } from "../support/venue.js"

let v: TestVenue

beforeAll(async () => {
  v = await startVenue({ settleMs: 0 })
})
afterAll(() => v.close())

const limit = (side: string, baseQty: string, limitPrice: string, symbol = "BTCUSDT") => ({
  symbol,
  side,
  baseQty: fromString(baseQty),
  limitPrice: fromString(limitPrice)
})

const status = async (id: string) => (await v.signed("GET", `/api/spot/order?clientOrderId=${id}`)).json

const placeSettled = async (body: Record<string, unknown>, path = "/api/spot/limit"): Promise<string> => {
  const r = await v.signed("POST", path, body)
  expect(r.status).toBe(202)
  const id = r.json.clientOrderId as string
  await eventually(async () => ((await status(id)).kind === "pending" ? undefined : true), 5000, "settlement")
  return id
}

const amount = (value: unknown): Decimal => fromString(isLosslessNumber(value) ? value.value : (value as string))

describe("Endpoints", () => {
  it("GET /api/spot/exchange-info lists the pairs and takes a symbol filter", async () => {
    const all = await v.raw("GET", "/api/spot/exchange-info")
    expect(all.json.pairs.length).toBeGreaterThanOrEqual(2)
    expect(all.json.pairs[0]).toMatchObject({ symbol: "BTCUSDT", base: "BTC", quote: "USDT", status: "trading", tickSize: "0.01", stepSize: "0.00001", minBaseQty: "0.00001", minNotional: "5" })
    const one = await v.raw("GET", "/api/spot/exchange-info?symbol=ETHUSDT")
    expect(one.json.pairs.map((p: { symbol: string }) => p.symbol)).toEqual(["ETHUSDT"])
  })

  it("the Dialect's public market data routes answer: ticker, candles, depth", async () => {
    await v.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60100" })
    const ticker = await v.raw("GET", "/api/spot/ticker?symbol=BTCUSDT")
    expect(ticker.json).toMatchObject({ symbol: "BTCUSDT", price: "60100" })
    const candles = await v.raw("GET", "/api/spot/candles?symbol=BTCUSDT&interval=1m&limit=10")
    expect(candles.status).toBe(200)
    expect(candles.json.candles.at(-1)).toMatchObject({ close: "60100" })
    const depth = await v.raw("GET", "/api/spot/depth?symbol=BTCUSDT&limit=5")
    expect(depth.json.bids).toHaveLength(5)
    expect(depth.json.asks).toHaveLength(5)
    expect(fromString(depth.json.bids[0][0]).lt(fromString(depth.json.asks[0][0]))).toBe(true)
  })

  it("GET /api/wallets/spot: balance is a JSON number (the free part), locked a string, balance + locked = total", async () => {
    const before = await v.signed("GET", "/api/wallets/spot")
    const usdt = before.json.find((row: { asset: string }) => row.asset === "USDT")
    expect(isLosslessNumber(usdt.balance)).toBe(true)
    expect(typeof usdt.locked).toBe("string")
    const total = amount(usdt.balance).add(amount(usdt.locked))
    await placeSettled(limit("buy", "0.01", "50000"))
    const after = (await v.signed("GET", "/api/wallets/spot")).json.find((row: { asset: string }) => row.asset === "USDT")
    expect(amount(after.locked).eq(amount(usdt.locked).add(500))).toBe(true)
    expect(amount(after.balance).add(amount(after.locked)).eq(total)).toBe(true)
  })

  it("GET /api/wallets/funding answers one row per asset", async () => {
    const r = await v.signed("GET", "/api/wallets/funding")
    expect(r.status).toBe(200)
    const assets = r.json.map((row: { asset: string }) => row.asset)
    expect(new Set(assets).size).toBe(assets.length)
  })

  it("GET /api/spot/open-orders lists the account's open orders, filtered by symbol", async () => {
    const btc = await placeSettled(limit("buy", "0.001", "40000"))
    const eth = await placeSettled(limit("buy", "0.01", "1000", "ETHUSDT"))
    const all = (await v.signed("GET", "/api/spot/open-orders")).json.map((o: { clientOrderId: string }) => o.clientOrderId)
    expect(all).toEqual(expect.arrayContaining([btc, eth]))
    const onlyEth = (await v.signed("GET", "/api/spot/open-orders?symbol=ETHUSDT")).json
    expect(onlyEth.map((o: { clientOrderId: string }) => o.clientOrderId)).toContain(eth)
    expect(onlyEth.every((o: { symbol: string }) => o.symbol === "ETHUSDT")).toBe(true)
    expect(onlyEth[0]).toMatchObject({ side: "buy", type: "limit", kind: "resting", baseQty: "0.01", limitPrice: "1000", filledBaseQty: "0" })
  })

  it("GET /api/spot/fills pages newest first with an opaque nextCursor, null on the last page", async () => {
    // Five maker fills: five orders, each crossed by the tape.
    await v.admin("POST", "/_venue/tape", { symbol: "ETHUSDT", price: "3000" })
    for (let i = 0; i < 5; i++) await placeSettled(limit("sell", "0.01", String(3001 + i), "ETHUSDT"))
    await v.admin("POST", "/_venue/tape", { symbol: "ETHUSDT", price: "3100" })
    const seen: Array<string> = []
    let cursor: string | null = null
    for (let page = 0; page < 10; page++) {
      const target: string = `/api/spot/fills?symbol=ETHUSDT&limit=2${cursor === null ? "" : `&before=${cursor}`}`
      const r = await v.signed("GET", target)
      expect(r.status).toBe(200)
      for (const fill of r.json.fills) {
        expect(fill).toMatchObject({ symbol: "ETHUSDT", side: "sell", liquidity: "maker" })
        for (const field of ["fillId", "clientOrderId", "price", "baseQty", "quoteQty", "fee", "feeAsset"]) expect(typeof fill[field]).toBe("string")
        seen.push(fill.fillId)
      }
      cursor = r.json.nextCursor
      if (cursor === null) break
      expect(typeof cursor).toBe("string")
    }
    expect(seen).toHaveLength(5)
    expect([...seen].sort().reverse()).toEqual(seen)
  })

  it("the order status route answers kind for a clientOrderId", async () => {
    const id = await placeSettled(limit("buy", "0.001", "30000"))
    const r = await v.signed("GET", `/api/spot/order?clientOrderId=${id}`)
    expect(r.json).toMatchObject({ clientOrderId: id, kind: "resting", symbol: "BTCUSDT", side: "buy", type: "limit", baseQty: "0.001", filledBaseQty: "0", avgPrice: null })
    const unknown = await v.signed("GET", "/api/spot/order?clientOrderId=nope")
    expect(unknown.status).toBe(404)
    expect(unknown.json.ok).toBe(false)
  })

  it("POST /api/spot/limit, market, stop-limit and cancel answer per the Dialect", async () => {
    const placed = await v.signed("POST", "/api/spot/limit", limit("buy", "0.001", "30000"))
    expect(placed.status).toBe(202)
    expect(placed.json).toEqual({ clientOrderId: expect.any(String), status: "accepted" })
    const market = await v.signed("POST", "/api/spot/market", { symbol: "BTCUSDT", side: "buy", quoteOrderQty: fromString("100"), maxSlippageBps: 50 })
    expect(market.status).toBe(202)
    const stop = await v.signed("POST", "/api/spot/stop-limit", { ...limit("sell", "0.001", "50000"), stopPrice: fromString("50010") })
    expect(stop.status).toBe(202)
    const cancel = await v.signed("POST", "/api/spot/cancel", { clientOrderId: placed.json.clientOrderId })
    expect(cancel.status).toBe(200)
    expect(cancel.json).toMatchObject({ ok: true, clientOrderId: placed.json.clientOrderId })
    expect((await status(placed.json.clientOrderId)).kind).toBe("cancelled")
  })

  const closed = [
    ["POST", "/api/wallets/withdraw"],
    ["GET", "/api/wallets/withdrawals"],
    ["POST", "/api/wallets/transfer"],
    ["GET", "/api/wallets/saved-addresses"],
    ["GET", "/api/wallets/deposit-address?asset=BTC"],
    ["GET", "/api/wallets/deposits"],
    ["GET", "/api/account/security"],
    ["POST", "/api/account/kyc"],
    ["GET", "/api/account/profile"],
    ["POST", "/api/alerts/price"],
    ["POST", "/api/support/tickets"],
    ["GET", "/api/referrals"],
    ["POST", "/api/keys"],
    ["DELETE", "/api/keys/abc"],
    ["POST", "/api/wallets/spot"],
    ["GET", "/api/spot/limit"]
  ] as const
  it.each(closed)("every other endpoint under /api answers 403 API_KEY_NOT_PERMITTED: %s %s", async (method, path) => {
    const r = await v.signed(method, path, method === "GET" || method === "DELETE" ? undefined : { asset: "BTC", amount: fromString("1") })
    expect(r.status).toBe(403)
    expect(r.json).toMatchObject({ ok: false, code: "API_KEY_NOT_PERMITTED" })
  })

  it("no answer carries CORS headers, OPTIONS included", async () => {
    const answers = [
      await v.raw("OPTIONS", "/api/wallets/spot", { headers: { Origin: "https://example.org", "Access-Control-Request-Method": "GET" } }),
      await v.raw("OPTIONS", "/api/spot/exchange-info", { headers: { Origin: "https://example.org" } }),
      await v.raw("GET", "/api/spot/exchange-info", { headers: { Origin: "https://example.org" } }),
      await v.signed("GET", "/api/wallets/spot", undefined, { headers: { Origin: "https://example.org" } })
    ]
    for (const r of answers) {
      expect(Object.keys(r.headers).filter((h) => h.startsWith("access-control-"))).toEqual([])
    }
  })
})
