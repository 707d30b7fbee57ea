/**
 * Conformance: orders — accepted first (202), settled afterwards, with the reject codes,
 * market slippage, limit and stop-limit behaviour, locks, fees and account status.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Decimal, fromString } from "../../src/domain/Decimal.js"
import { isLosslessNumber } from "../../src/domain/Json.js"
import { startVenue, eventually, type TestVenue } from "../support/venue.js"

let v: TestVenue
let uid = 5000

beforeAll(async () => {
  v = await startVenue({ settleMs: 0 })
})
afterAll(() => v.close())

/** A fresh account with its own trade key, so each test starts from known balances. */
const account = async (balances: Record<string, string>) => {
  uid += 1
  await v.admin("POST", "/_venue/accounts", { uid, balances })
  const key = await v.admin("POST", "/_venue/keys", { uid, permissions: ["read", "trade"] })
  const sign = { keyId: key.id as string, secret: key.secret as string }
  const place = async (path: string, body: Record<string, unknown>, timestamp = Date.now()) => {
    const r = await v.signed("POST", path, body, { ...sign, timestamp })
    expect(r.status, r.text).toBe(202)
    return r.json.clientOrderId as string
  }
  const status = async (id: string) => (await v.signed("GET", `/api/spot/order?clientOrderId=${id}`, undefined, sign)).json
  const settled = (id: string) => eventually(async () => {
    const s = await status(id)
    return s.kind === "pending" ? undefined : s
  })
  const wallet = async (asset: string) => {
    const rows = (await v.signed("GET", "/api/wallets/spot", undefined, sign)).json as Array<{ asset: string; balance: unknown; locked: string }>
    const row = rows.find((r) => r.asset === asset)
    const free = row === undefined ? new Decimal(0) : fromString(isLosslessNumber(row.balance) ? row.balance.value : String(row.balance))
    return { free, locked: row === undefined ? new Decimal(0) : fromString(row.locked) }
  }
  return { uid, sign, place, status, settled, wallet }
}

const d = fromString
const price = (symbol: string, value: string) => v.admin("POST", "/_venue/tape", { symbol, price: value })

describe("Orders", () => {
  it("placement answers 202 {clientOrderId, status: accepted} and settles afterwards", async () => {
    const slow = await startVenue({ settleMs: 60_000 })
    try {
      const r = await slow.signed("POST", "/api/spot/limit", { symbol: "BTCUSDT", side: "buy", baseQty: d("0.001"), limitPrice: d("50000") })
      expect(r.status).toBe(202)
      expect(r.json).toEqual({ clientOrderId: expect.any(String), status: "accepted" })
      const s = await slow.signed("GET", `/api/spot/order?clientOrderId=${r.json.clientOrderId}`)
      expect(s.json.kind).toBe("pending")
      // Nothing is locked before settlement.
      const usdt = (await slow.signed("GET", "/api/wallets/spot")).json.find((row: { asset: string }) => row.asset === "USDT")
      expect(usdt.locked).toBe("0")
    } finally {
      await slow.close()
    }
  })

  it("settlement without enough funds rejects with SPOT_INSUFFICIENT_FUNDS", async () => {
    const a = await account({ USDT: "10" })
    const id = await a.place("/api/spot/limit", { symbol: "BTCUSDT", side: "buy", baseQty: d("0.001"), limitPrice: d("50000") })
    expect(await a.settled(id)).toMatchObject({ kind: "rejected", code: "SPOT_INSUFFICIENT_FUNDS" })
    const sell = await a.place("/api/spot/market", { symbol: "BTCUSDT", side: "sell", baseQty: d("0.001"), maxSlippageBps: 100 })
    expect(await a.settled(sell)).toMatchObject({ kind: "rejected", code: "SPOT_INSUFFICIENT_FUNDS" })
  })

  it("settlement on a halted pair rejects with SPOT_HALTED", async () => {
    const a = await account({ USDT: "1000", ETH: "1" })
    await v.admin("POST", "/_venue/pair-status", { symbol: "ETHUSDT", status: "halted" })
    try {
      const id = await a.place("/api/spot/limit", { symbol: "ETHUSDT", side: "sell", baseQty: d("0.1"), limitPrice: d("3500") })
      expect(await a.settled(id)).toMatchObject({ kind: "rejected", code: "SPOT_HALTED" })
      const info = await v.raw("GET", "/api/spot/exchange-info?symbol=ETHUSDT")
      expect(info.json.pairs[0].status).toBe("halted")
    } finally {
      await v.admin("POST", "/_venue/pair-status", { symbol: "ETHUSDT", status: "trading" })
    }
  })

  it("a market buy spends quoteOrderQty within maxSlippageBps and fills completely as taker", async () => {
    await price("BTCUSDT", "60000")
    const a = await account({ USDT: "1000" })
    const id = await a.place("/api/spot/market", { symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("600"), maxSlippageBps: 10 })
    const s = await a.settled(id)
    expect(s.kind).toBe("fill")
    const spent = d(s.filledQuoteQty)
    expect(spent.lte(600)).toBe(true)
    // Less than one step of base is left unspent.
    expect(d("600").sub(spent).lt(d("0.00001").mul(61000))).toBe(true)
    expect(d(s.avgPrice).lte(d("60000").mul(1.001))).toBe(true)
    expect((await a.wallet("USDT")).free.eq(d("1000").sub(spent))).toBe(true)
    const fills = (await v.signed("GET", "/api/spot/fills", undefined, a.sign)).json.fills
    expect(fills.every((f: { liquidity: string; clientOrderId: string }) => f.liquidity === "taker" && f.clientOrderId === id)).toBe(true)
  })

  it("a market sell sells exactly baseQty", async () => {
    await price("BTCUSDT", "60000")
    const a = await account({ BTC: "1" })
    const id = await a.place("/api/spot/market", { symbol: "BTCUSDT", side: "sell", baseQty: d("0.5"), maxSlippageBps: 100 })
    expect(await a.settled(id)).toMatchObject({ kind: "fill", filledBaseQty: "0.5" })
    expect((await a.wallet("BTC")).free.eq(d("0.5"))).toBe(true)
  })

  it("a market order that cannot fill within maxSlippageBps is rejected whole with SPOT_SLIPPAGE_EXCEEDED", async () => {
    await price("BTCUSDT", "60000")
    const a = await account({ USDT: "2000000" })
    const id = await a.place("/api/spot/market", { symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("1000000"), maxSlippageBps: 2 })
    expect(await a.settled(id)).toMatchObject({ kind: "rejected", code: "SPOT_SLIPPAGE_EXCEEDED", filledBaseQty: "0" })
    expect((await a.wallet("USDT")).free.eq(d("2000000"))).toBe(true)
    expect((await v.signed("GET", "/api/spot/fills", undefined, a.sign)).json.fills).toEqual([])
  })

  it("maxSlippageBps must be an integer from 1 to 1000", async () => {
    for (const bps of ["0", "1001", "2.5", "-1"]) {
      const body = `{"symbol":"BTCUSDT","side":"buy","quoteOrderQty":100,"maxSlippageBps":${bps}}`
      const r = await v.signed("POST", "/api/spot/market", body)
      expect(r.status, bps).toBe(400)
      expect(r.json.field).toBe("maxSlippageBps")
    }
  })

  it("a limit order rests, locks its funds, and fills as maker when the tape crosses it", async () => {
    await price("BTCUSDT", "60000")
    const a = await account({ USDT: "1000" })
    const id = await a.place("/api/spot/limit", { symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), limitPrice: d("59000") })
    expect(await a.settled(id)).toMatchObject({ kind: "resting" })
    expect((await a.wallet("USDT")).locked.eq(590)).toBe(true)
    await price("BTCUSDT", "58900")
    const s = await a.status(id)
    expect(s).toMatchObject({ kind: "fill", filledBaseQty: "0.01", avgPrice: "59000" })
    const usdt = await a.wallet("USDT")
    expect(usdt.locked.isZero()).toBe(true)
    expect(usdt.free.eq(410)).toBe(true)
    // Maker fee 0.001 of the received base.
    expect((await a.wallet("BTC")).free.eq(d("0.01").mul(d("0.999")))).toBe(true)
    const fill = (await v.signed("GET", "/api/spot/fills", undefined, a.sign)).json.fills[0]
    expect(fill).toMatchObject({ liquidity: "maker", price: "59000", fee: "0.00001", feeAsset: "BTC" })
  })

  it("a limit order the tape only touches fills partly and stays resting", async () => {
    await price("BTCUSDT", "60000")
    const a = await account({ BTC: "1" })
    const id = await a.place("/api/spot/limit", { symbol: "BTCUSDT", side: "sell", baseQty: d("0.1"), limitPrice: d("61000") })
    await a.settled(id)
    await price("BTCUSDT", "61000")
    expect(await a.status(id)).toMatchObject({ kind: "resting", filledBaseQty: "0.05" })
    await price("BTCUSDT", "61000.01")
    expect(await a.status(id)).toMatchObject({ kind: "fill", filledBaseQty: "0.1" })
  })

  it("a marketable limit order fills as taker on arrival", async () => {
    await price("BTCUSDT", "60000")
    const a = await account({ USDT: "1000" })
    const id = await a.place("/api/spot/limit", { symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), limitPrice: d("60100") })
    const s = await a.settled(id)
    expect(s.kind).toBe("fill")
    expect(d(s.avgPrice).lte(60100)).toBe(true)
    const fills = (await v.signed("GET", "/api/spot/fills", undefined, a.sign)).json.fills
    expect(fills.every((f: { liquidity: string }) => f.liquidity === "taker")).toBe(true)
    // Bought below the limit: the difference of the lock came back.
    const usdt = await a.wallet("USDT")
    expect(usdt.locked.isZero()).toBe(true)
    expect(usdt.free.eq(d("1000").sub(d(s.filledQuoteQty)))).toBe(true)
  })

  it("a stop-limit order stays pending until the tape reaches stopPrice, then acts as a limit", async () => {
    await price("BTCUSDT", "60000")
    const a = await account({ BTC: "1" })
    const id = await a.place("/api/spot/stop-limit", { symbol: "BTCUSDT", side: "sell", baseQty: d("0.1"), limitPrice: d("58000"), stopPrice: d("59000") })
    await eventually(async () => ((await a.wallet("BTC")).locked.eq(d("0.1")) ? true : undefined))
    expect(await a.status(id)).toMatchObject({ kind: "pending" })
    await price("BTCUSDT", "59500")
    expect(await a.status(id)).toMatchObject({ kind: "pending" })
    await price("BTCUSDT", "59000")
    const s = await a.status(id)
    expect(s.kind).toBe("fill")
    expect(d(s.avgPrice).gte(58000)).toBe(true)
  })

  it("cancel releases the locked funds; a cancelled order is not open any more", async () => {
    await price("BTCUSDT", "60000")
    const a = await account({ USDT: "1000" })
    const id = await a.place("/api/spot/limit", { symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), limitPrice: d("50000") })
    await a.settled(id)
    expect((await a.wallet("USDT")).locked.eq(500)).toBe(true)
    const r = await v.signed("POST", "/api/spot/cancel", { clientOrderId: id }, a.sign)
    expect(r.status).toBe(200)
    expect(await a.wallet("USDT")).toEqual({ free: d("1000"), locked: d("0") })
    expect((await v.signed("GET", "/api/spot/open-orders", undefined, a.sign)).json).toEqual([])
  })

  it("a market order is never cancelled: pending or settled, a cancel answers 409 ORDER_NOT_OPEN and the order is matched whole", async () => {
    await price("BTCUSDT", "60000")
    const a = await account({ USDT: "1000" })
    const id = await a.place("/api/spot/market", { symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("100"), maxSlippageBps: 100 })
    const pending = await v.signed("POST", "/api/spot/cancel", { clientOrderId: id }, a.sign)
    expect(pending.status).toBe(409)
    expect(pending.json).toMatchObject({ ok: false, code: "ORDER_NOT_OPEN" })
    await a.settled(id)
    const status = await v.signed("GET", `/api/spot/order?clientOrderId=${id}`, undefined, a.sign)
    expect(status.json).toMatchObject({ clientOrderId: id, kind: "fill" })
    expect((await v.signed("POST", "/api/spot/cancel", { clientOrderId: id }, a.sign)).status).toBe(409)
  })

  it.each([
    ["frozen", "ACCOUNT_FROZEN"],
    ["geo-restricted", "GEO_RESTRICTED_IP"],
    ["legal-acceptance-required", "LEGAL_ACCEPTANCE_REQUIRED"]
  ])("account status %s answers 403 %s on order endpoints while reads still work", async (status, code) => {
    const a = await account({ USDT: "1000" })
    await v.admin("POST", "/_venue/account-status", { uid: a.uid, status })
    const r = await v.signed("POST", "/api/spot/limit", { symbol: "BTCUSDT", side: "buy", baseQty: d("0.001"), limitPrice: d("50000") }, a.sign)
    expect(r.status).toBe(403)
    expect(r.json).toMatchObject({ ok: false, code })
    expect((await v.signed("GET", "/api/wallets/spot", undefined, a.sign)).status).toBe(200)
    await v.admin("POST", "/_venue/account-status", { uid: a.uid, status: "active" })
    expect((await v.signed("POST", "/api/spot/limit", { symbol: "BTCUSDT", side: "buy", baseQty: d("0.001"), limitPrice: d("50000") }, a.sign)).status).toBe(202)
  })

  it("concurrent placements never spend the same funds twice", async () => {
    await price("BTCUSDT", "60000")
    const a = await account({ USDT: "500" })
    // Twenty orders of 100 USDT each against 500 USDT: exactly five can be funded.
    // Distinct timestamps: identical requests in the same millisecond would be replays.
    const now = Date.now()
    const ids = await Promise.all(
      Array.from({ length: 20 }, (_, i) => a.place("/api/spot/limit", { symbol: "BTCUSDT", side: "buy", baseQty: d("0.002"), limitPrice: d("50000") }, now - i))
    )
    const outcomes = await Promise.all(ids.map((id) => a.settled(id)))
    expect(outcomes.filter((s) => s.kind === "resting")).toHaveLength(5)
    expect(outcomes.filter((s) => s.code === "SPOT_INSUFFICIENT_FUNDS")).toHaveLength(15)
    expect(await a.wallet("USDT")).toEqual({ free: d("0"), locked: d("500") })
  })
})
