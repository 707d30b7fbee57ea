/**
 * Conformance: API keys — scopes of Read and Trade, expiry, whitelist, revocation and
 * the password/email/2FA change, each taking effect on the very next request.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { fromString } from "../../src/domain/Decimal.js"
import { devReadKey } from "../../src/venue/Accounts.js"
import { startVenue, type TestVenue } from "../support/venue.js"

let v: TestVenue

beforeAll(async () => {
  v = await startVenue({ limits: { authFailuresBeforeBlock: 1_000_000 } })
})
afterAll(() => v.close())

const DAY_MS = 86_400_000
const order = { symbol: "BTCUSDT", side: "buy", baseQty: fromString("0.001"), limitPrice: fromString("50000") }
const readKey = { keyId: devReadKey.keyId, secret: devReadKey.secret }

const newKey = async (body: Record<string, unknown>): Promise<{ keyId: string; secret: string }> => {
  const key = await v.admin("POST", "/_venue/keys", { uid: v.uid, ...body })
  return { keyId: key.id, secret: key.secret }
}

describe("Keys", () => {
  it("a Read key holds spot.read, wallet.read and account.read: every read endpoint answers", async () => {
    for (const target of ["/api/wallets/spot", "/api/wallets/funding", "/api/spot/open-orders", "/api/spot/fills"]) {
      const r = await v.signed("GET", target, undefined, readKey)
      expect(r.status, target).toBe(200)
    }
  })

  it("a key without the needed scope answers 403 API_KEY_NOT_PERMITTED naming requiredScope", async () => {
    for (const path of ["/api/spot/limit", "/api/spot/market", "/api/spot/stop-limit", "/api/spot/cancel"]) {
      const r = await v.signed("POST", path, order, readKey)
      expect(r.status, path).toBe(403)
      expect(r.json).toMatchObject({ ok: false, code: "API_KEY_NOT_PERMITTED", requiredScope: "spot.trade" })
    }
  })

  it("a Trade key holds spot.trade plus everything in Read", async () => {
    const trade = await newKey({ permissions: ["trade"] })
    expect((await v.signed("POST", "/api/spot/limit", order, trade)).status).toBe(202)
    expect((await v.signed("GET", "/api/wallets/spot", undefined, trade)).status).toBe(200)
  })

  it("a Trade key without whitelist expires 90 days after creation", async () => {
    const fresh = await newKey({ permissions: ["read", "trade"], createdAt: new Date(Date.now() - 89 * DAY_MS).toISOString() })
    expect((await v.signed("GET", "/api/wallets/spot", undefined, fresh)).status).toBe(200)
    const expired = await newKey({ permissions: ["read", "trade"], createdAt: new Date(Date.now() - 91 * DAY_MS).toISOString() })
    const r = await v.signed("GET", "/api/wallets/spot", undefined, expired)
    expect(r.status).toBe(401)
    expect(r.json.code).toBe("API_KEY_INVALID")
  })

  it("read-only keys and whitelisted keys never expire", async () => {
    const longAgo = new Date(Date.now() - 1000 * DAY_MS).toISOString()
    const readOnly = await newKey({ permissions: ["read"], createdAt: longAgo })
    expect((await v.signed("GET", "/api/wallets/spot", undefined, readOnly)).status).toBe(200)
    const whitelisted = await newKey({ permissions: ["read", "trade"], whitelist: ["127.0.0.1"], createdAt: longAgo })
    expect((await v.signed("GET", "/api/wallets/spot", undefined, whitelisted)).status).toBe(200)
  })

  it("a request from an address outside the key's whitelist answers API_KEY_INVALID", async () => {
    const elsewhere = await newKey({ permissions: ["read"], whitelist: ["203.0.113.7"] })
    const r = await v.signed("GET", "/api/wallets/spot", undefined, elsewhere)
    expect(r.status).toBe(401)
    expect(r.json.code).toBe("API_KEY_INVALID")
  })

  it("a whitelist holds at most 20 addresses", async () => {
    const twenty = Array.from({ length: 20 }, (_, i) => `198.51.100.${i + 1}`)
    await expect(newKey({ permissions: ["read"], whitelist: twenty })).resolves.toBeDefined()
    await expect(newKey({ permissions: ["read"], whitelist: [...twenty, "198.51.100.99"] })).rejects.toThrow(/400/)
  })

  it("a revoked key fails on the very next request with API_KEY_INVALID", async () => {
    const key = await newKey({ permissions: ["read", "trade"] })
    expect((await v.signed("GET", "/api/wallets/spot", undefined, key)).status).toBe(200)
    await v.admin("POST", "/_venue/keys/revoke", { keyId: key.keyId })
    const r = await v.signed("GET", "/api/wallets/spot", undefined, key)
    expect(r.status).toBe(401)
    expect(r.json.code).toBe("API_KEY_INVALID")
  })

  it("a password, email or 2FA change revokes every key of the account on the next request", async () => {
    const account = await v.admin("POST", "/_venue/accounts", { balances: { USDT: "100" } })
    const keys = await Promise.all([1, 2].map(() => v.admin("POST", "/_venue/keys", { uid: account.uid, permissions: ["read"] })))
    for (const key of keys) expect((await v.signed("GET", "/api/wallets/spot", undefined, { keyId: key.id, secret: key.secret })).status).toBe(200)
    const change = await v.admin("POST", "/_venue/password-change", { uid: account.uid, change: "2fa" })
    expect(change.revokedKeys).toBe(2)
    for (const key of keys) {
      const r = await v.signed("GET", "/api/wallets/spot", undefined, { keyId: key.id, secret: key.secret })
      expect(r.json.code).toBe("API_KEY_INVALID")
    }
    // Keys of other accounts are untouched.
    expect((await v.signed("GET", "/api/wallets/spot")).status).toBe(200)
  })
})
