/**
 * Conformance: the Limits part — request weight per fixed window, order budgets per
 * 10 s and per day, the budget headers, 429 with Retry-After and bucket, refusals not
 * charged, cancels never refused, and the block after repeated failed authentication.
 */
import { afterEach, describe, expect, it } from "vitest"
import { fromString } from "../../src/domain/Decimal.js"
import { startVenue, type Answer, type TestVenue } from "../support/venue.js"

const venues: Array<TestVenue> = []

/**
 * A venue whose clock is moved to just after a minute boundary (a clock-skew fault), so
 * that no fixed window can roll over in the middle of a test; `signed` signs with the
 * venue's clock.
 */
const venue = async (options: Parameters<typeof startVenue>[0]) => {
  const started = await startVenue(options)
  venues.push(started)
  const now = Date.now()
  const skew = Math.ceil(now / 60_000) * 60_000 + 100 - now
  await started.admin("POST", "/_venue/faults", { clockSkewMs: skew })
  const signed: TestVenue["signed"] = (method, target, body, sign = {}) =>
    started.signed(method, target, body, { timestamp: Date.now() + skew, ...sign })
  return { ...started, signed, skew }
}
afterEach(async () => {
  await Promise.all(venues.splice(0).map((v) => v.close()))
})

const order = { symbol: "BTCUSDT", side: "buy", baseQty: fromString("0.001"), limitPrice: fromString("50000") }
const used = (r: Answer) => Number(r.headers["x-svc-used-weight-1m"])

const BUDGET_HEADERS = [
  "x-svc-used-weight-1m",
  "x-svc-weight-limit-1m",
  "x-svc-orders-used-10s",
  "x-svc-orders-limit-10s",
  "x-svc-orders-used-1d",
  "x-svc-orders-limit-1d"
]

describe("Limits", () => {
  it("every answer to a key-signed request carries the integer budget headers", async () => {
    const v = await venue({ limits: { authFailuresBeforeBlock: 1000 } })
    const answers = [
      await v.signed("GET", "/api/wallets/spot"),
      await v.signed("POST", "/api/spot/limit", order),
      await v.signed("POST", "/api/spot/limit", '{"symbol":"BTCUSDT"}'),
      await v.signed("GET", "/api/wallets/spot", undefined, { headers: { "X-SVC-SIGNATURE": "0".repeat(64) } }),
      await v.signed("GET", "/api/wallets/spot", undefined, { timestamp: 1 }),
      await v.signed("GET", "/api/account/profile"),
      await v.signed("GET", "/api/wallets/spot", undefined, { headers: { Authorization: "Basic eA==" } })
    ]
    expect(answers.map((r) => r.status)).toEqual([200, 202, 400, 401, 401, 403, 400])
    for (const r of answers) {
      for (const name of BUDGET_HEADERS) expect(r.headers[name], `${name} on ${r.status}`).toMatch(/^\d+$/)
    }
    expect(answers[0]!.headers["x-svc-weight-limit-1m"]).toBe("1200")
  })

  it("each request costs weight; a history page costs more than a single read", async () => {
    const v = await venue({})
    const first = used(await v.signed("GET", "/api/wallets/spot"))
    const afterRead = used(await v.signed("GET", "/api/wallets/spot"))
    const afterFills = used(await v.signed("GET", "/api/spot/fills"))
    const read = afterRead - first
    const page = afterFills - afterRead
    expect(read).toBeGreaterThan(0)
    expect(page).toBeGreaterThan(read)
  })

  it("over the weight budget: 429 with Retry-After, body {code: RATE_LIMITED, bucket, msg} without ok, and not charged", async () => {
    const v = await venue({ limits: { weightPerMinute: 3 } })
    for (let i = 0; i < 3; i++) expect((await v.signed("GET", "/api/wallets/spot")).status).toBe(200)
    const refused = await v.signed("GET", "/api/wallets/spot")
    expect(refused.status).toBe(429)
    expect(Number(refused.headers["retry-after"])).toBeGreaterThanOrEqual(1)
    expect(Number(refused.headers["retry-after"])).toBeLessThanOrEqual(60)
    expect(refused.json).toEqual({ code: "RATE_LIMITED", bucket: "weight-1m", msg: expect.any(String) })
    expect("ok" in refused.json).toBe(false)
    const again = await v.signed("GET", "/api/wallets/spot")
    expect(used(refused)).toBe(3)
    expect(used(again)).toBe(3)
  })

  it("the weight window is fixed and its length configurable; a new window starts from zero", async () => {
    const v = await venue({ limits: { weightPerMinute: 2, weightWindowMs: 60_000 } })
    await v.signed("GET", "/api/wallets/spot")
    await v.signed("GET", "/api/wallets/spot")
    expect((await v.signed("GET", "/api/wallets/spot")).status).toBe(429)
    // Move the venue's clock one window ahead (signing with the same offset).
    await v.admin("POST", "/_venue/faults", { clockSkewMs: v.skew + 60_000 })
    const next = await v.signed("GET", "/api/wallets/spot", undefined, { timestamp: Date.now() + v.skew + 60_000 })
    expect(next.status).toBe(200)
    expect(used(next)).toBe(1)
  })

  it("order placements have a budget per 10 seconds (bucket orders-10s)", async () => {
    const v = await venue({ limits: { ordersPer10s: 2 } })
    const now = Date.now() + v.skew
    expect((await v.signed("POST", "/api/spot/limit", order, { timestamp: now })).status).toBe(202)
    expect((await v.signed("POST", "/api/spot/limit", order, { timestamp: now - 1 })).status).toBe(202)
    const refused = await v.signed("POST", "/api/spot/limit", order, { timestamp: now - 2 })
    expect(refused.status).toBe(429)
    expect(refused.json).toMatchObject({ code: "RATE_LIMITED", bucket: "orders-10s" })
    expect(Number(refused.headers["retry-after"])).toBeLessThanOrEqual(10)
    expect(refused.headers["x-svc-orders-used-10s"]).toBe("2")
  })

  it("order placements have a budget per day (bucket orders-1d)", async () => {
    const v = await venue({ limits: { ordersPerDay: 1 } })
    // Two timestamps, so the second identical order is not refused as a replay of the first.
    const sentAt = Date.now() + v.skew
    expect((await v.signed("POST", "/api/spot/limit", order, { timestamp: sentAt })).status).toBe(202)
    const refused = await v.signed("POST", "/api/spot/limit", order, { timestamp: sentAt + 1 })
    expect(refused.status).toBe(429)
    expect(refused.json).toMatchObject({ code: "RATE_LIMITED", bucket: "orders-1d" })
    expect(refused.headers["x-svc-orders-limit-1d"]).toBe("1")
  })

  it("cancelling is counted but never refused", async () => {
    const v = await venue({ limits: { weightPerMinute: 2 }, settleMs: 0 })
    const placed = await v.signed("POST", "/api/spot/limit", order)
    expect(placed.status).toBe(202)
    await v.signed("GET", "/api/wallets/spot")
    expect((await v.signed("GET", "/api/wallets/spot")).status).toBe(429)
    const cancel = await v.signed("POST", "/api/spot/cancel", { clientOrderId: placed.json.clientOrderId })
    expect(cancel.status).toBe(200)
    expect(used(cancel)).toBe(3)
  })

  it("a limit squeeze lowers the limits mid-run, and the headers report the new values", async () => {
    const v = await venue({})
    expect((await v.signed("GET", "/api/wallets/spot")).headers["x-svc-weight-limit-1m"]).toBe("1200")
    await v.admin("POST", "/_venue/faults", { clockSkewMs: v.skew, limits: { weightPerMinute: 2, ordersPer10s: 1 } })
    const squeezed = await v.signed("GET", "/api/wallets/spot")
    expect(squeezed.headers["x-svc-weight-limit-1m"]).toBe("2")
    expect(squeezed.headers["x-svc-orders-limit-10s"]).toBe("1")
    expect((await v.signed("GET", "/api/wallets/spot")).status).toBe(429)
  })

  it("repeated failed authentication blocks all key requests from the IP with 429 and Retry-After of minutes; each failed try extends it", async () => {
    const v = await venue({ limits: { authFailuresBeforeBlock: 3, authBlockSeconds: 180 } })
    const bad = (offsetMs = 0) => v.signed("GET", "/api/wallets/spot", undefined, { timestamp: Date.now() + v.skew + offsetMs, headers: { "X-SVC-SIGNATURE": "f".repeat(64) } })
    expect((await bad()).status).toBe(401)
    expect((await bad()).status).toBe(401)
    const blocked = await bad()
    expect(blocked.status).toBe(429)
    expect(Number(blocked.headers["retry-after"])).toBeGreaterThanOrEqual(120)
    expect(blocked.json.code).not.toBe("RATE_LIMITED")
    expect(blocked.json.bucket).toBeUndefined()
    // A valid request from the same address is blocked too.
    const valid = await v.signed("GET", "/api/wallets/spot")
    expect(valid.status).toBe(429)
    // 100 s later (venue clock), the block has 80 s left; a valid request does not extend it...
    await v.admin("POST", "/_venue/faults", { clockSkewMs: v.skew + 100_000 })
    const later = await v.signed("GET", "/api/wallets/spot", undefined, { timestamp: Date.now() + v.skew + 100_000 })
    expect(later.status).toBe(429)
    expect(Number(later.headers["retry-after"])).toBeLessThanOrEqual(81)
    // ...but a failing try does: the full block again from now.
    const extended = await bad(100_000)
    expect(Number(extended.headers["retry-after"])).toBeGreaterThanOrEqual(179)
    // At 200 s the original block would be over, the extended one is not.
    await v.admin("POST", "/_venue/faults", { clockSkewMs: v.skew + 200_000 })
    expect((await v.signed("GET", "/api/wallets/spot", undefined, { timestamp: Date.now() + v.skew + 200_000 })).status).toBe(429)
    // After the extended block, requests pass again.
    await v.admin("POST", "/_venue/faults", { clockSkewMs: v.skew + 300_000 })
    expect((await v.signed("GET", "/api/wallets/spot", undefined, { timestamp: Date.now() + v.skew + 300_000 })).status).toBe(200)
  })

  it("public endpoints are not blocked by failed authentication", async () => {
    const v = await venue({ limits: { authFailuresBeforeBlock: 1 } })
    await v.signed("GET", "/api/wallets/spot", undefined, { headers: { "X-SVC-SIGNATURE": "f".repeat(64) } })
    expect((await v.signed("GET", "/api/wallets/spot")).status).toBe(429)
    expect((await v.raw("GET", "/api/spot/exchange-info")).status).toBe(200)
  })
})
