/**
 * Beyond the spec: the `/_venue` admin routes and fault profiles that stand in for the
 * website and for a misbehaving exchange, and the price tape.
 */
import { afterEach, describe, expect, it } from "vitest"
import { fromString } from "../../src/domain/Decimal.js"
import { devAccounts } from "../../src/venue/Accounts.js"
import { Venue } from "../../src/venue/Venue.js"
import { startVenue, type TestVenue } from "../support/venue.js"

const venues: Array<TestVenue> = []
const venue = async (options: Parameters<typeof startVenue>[0] = {}) => {
  const v = await startVenue(options)
  venues.push(v)
  return v
}
afterEach(async () => {
  await Promise.all(venues.splice(0).map((v) => v.close()))
})

const order = { symbol: "BTCUSDT", side: "buy", baseQty: fromString("0.001"), limitPrice: fromString("50000") }

describe("svc-venue admin routes and faults", () => {
  it("admin routes answer loopback addresses only and never live under /api", async () => {
    const direct = new Venue({ accounts: devAccounts })
    const remote = direct.handle({ method: "GET", target: "/_venue/health", headers: {}, body: new Uint8Array(0), remoteAddress: "203.0.113.9" })
    expect(remote.status).toBe(403)
    expect(JSON.parse(remote.body).code).toBe("ADMIN_LOOPBACK_ONLY")
    const mapped = direct.handle({ method: "GET", target: "/_venue/health", headers: {}, body: new Uint8Array(0), remoteAddress: "::ffff:127.0.0.1" })
    expect(mapped.status).toBe(200)
    const v = await venue()
    const underApi = await v.signed("GET", "/api/_venue/accounts")
    expect(underApi.status).toBe(403)
    expect(underApi.json.code).toBe("API_KEY_NOT_PERMITTED")
  })

  it("lists every order and fill of an account, for counting duplicates", async () => {
    const v = await venue({ settleMs: 0 })
    await v.signed("POST", "/api/spot/limit", order)
    await v.signed("POST", "/api/spot/limit", { ...order, limitPrice: fromString("60100") })
    const orders = await v.admin("GET", `/_venue/orders?uid=${v.uid}`)
    expect(orders.orders).toHaveLength(2)
    await v.admin("POST", "/_venue/settle")
    const fills = await v.admin("GET", `/_venue/fills?uid=${v.uid}`)
    expect(fills.fills.length).toBeGreaterThan(0)
  })

  it("drop-response-after-accept: the answer is lost but the order is accepted exactly once", async () => {
    const v = await venue()
    await v.admin("POST", "/_venue/faults", { dropAcceptedResponses: 1 })
    await expect(v.signed("POST", "/api/spot/limit", order)).rejects.toThrow()
    const orders = (await v.admin("GET", `/_venue/orders?uid=${v.uid}`)).orders
    expect(orders).toHaveLength(1)
    // The profile is used up: the next placement is answered.
    expect((await v.signed("POST", "/api/spot/limit", order)).status).toBe(202)
  })

  it("5xx bursts answer the next N requests with a JSON 5xx without processing them", async () => {
    const v = await venue()
    await v.admin("POST", "/_venue/faults", { serverErrors: 2, serverErrorStatus: 502 })
    const first = await v.signed("POST", "/api/spot/limit", order)
    const second = await v.signed("GET", "/api/wallets/spot")
    expect([first.status, second.status]).toEqual([502, 502])
    expect(first.json).toMatchObject({ ok: false, code: "SERVICE_UNAVAILABLE" })
    expect((await v.admin("GET", `/_venue/orders?uid=${v.uid}`)).orders).toHaveLength(0)
    expect((await v.signed("GET", "/api/wallets/spot")).status).toBe(200)
  })

  it("clock skew moves the venue's clock, as server_time_ms shows", async () => {
    const v = await venue()
    await v.admin("POST", "/_venue/faults", { clockSkewMs: -3_600_000 })
    const r = await v.signed("GET", "/api/wallets/spot")
    expect(r.json.code).toBe("API_KEY_TIMESTAMP_INVALID")
    const skew = Number(r.json.server_time_ms.value) - Date.now()
    expect(skew).toBeLessThan(-3_500_000)
    await v.admin("POST", "/_venue/faults", {})
    expect((await v.signed("GET", "/api/wallets/spot")).status).toBe(200)
  })

  it("added latency still answers every request", async () => {
    const v = await venue()
    await v.admin("POST", "/_venue/faults", { latencyMs: 20 })
    expect((await v.signed("GET", "/api/wallets/spot")).status).toBe(200)
    expect((await v.admin("GET", "/_venue/faults")).faults.latencyMs).toBe(20)
  })

  it("a fault profile is refused with 400 when malformed", async () => {
    const v = await venue()
    await expect(v.admin("POST", "/_venue/faults", { dropAcceptedRatio: 2 })).rejects.toThrow(/400/)
  })

  it("the synthetic tape is deterministic per seed and has candles from the start", async () => {
    const steps = async (seed: number) => {
      const v = await venue({ tape: { kind: "synthetic", seed }, tickMs: 0 })
      const prices: Array<string> = []
      for (let i = 0; i < 5; i++) prices.push((await v.admin("POST", "/_venue/tape", { steps: 1 })).prices.BTCUSDT)
      const candles = await v.raw("GET", "/api/spot/candles?symbol=BTCUSDT&interval=1m&limit=500")
      return { prices, history: candles.json.candles.length as number }
    }
    const a = await steps(7)
    const b = await steps(7)
    const c = await steps(8)
    expect(a.prices).toEqual(b.prices)
    expect(c.prices).not.toEqual(a.prices)
    expect(a.history).toBeGreaterThanOrEqual(200)
  })

  it("a replayed OHLCV tape walks each candle's path and fills resting orders on it", async () => {
    const candles = [
      { openTimeMs: 0, open: fromString("60000"), high: fromString("60100"), low: fromString("59000"), close: fromString("59500"), volume: fromString("3") },
      { openTimeMs: 60_000, open: fromString("59500"), high: fromString("59600"), low: fromString("59400"), close: fromString("59450"), volume: fromString("1") }
    ]
    const v = await venue({ tape: { kind: "csv", candles }, tickMs: 0, settleMs: 0 })
    const placed = await v.signed("POST", "/api/spot/limit", { ...order, limitPrice: fromString("59100") })
    await v.admin("POST", "/_venue/settle")
    const moved = await v.admin("POST", "/_venue/tape", { steps: 1 })
    expect(moved.prices.BTCUSDT).toBe("59500")
    const s = await v.signed("GET", `/api/spot/order?clientOrderId=${placed.json.clientOrderId}`)
    expect(s.json).toMatchObject({ kind: "fill", avgPrice: "59100" })
  })
})
