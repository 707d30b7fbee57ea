import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  canonicalString,
  hmacHex,
  keyIdProblem,
  secretProblem,
  signature,
  signRequest,
  verifySignature,
  type CanonicalRequest
} from "../../src/svc/Signer.js"

const SECRET = "svs_live_" + "Q7b2Xk9LmN4pR8sT1vW3yZ6aC0eG5hJ2kM9nP4qS7uV1xY3zA"
const KEY = "svk_live_" + "A1b2C3d4E5f6G7h8I9j0K1"

/** Expected HMAC from an independent path: the openssl command line. */
const opensslHmac = (secret: string, canonical: string): string =>
  execFileSync("openssl", ["dgst", "-sha256", "-hmac", secret], { input: Buffer.from(canonical, "utf8") })
    .toString("utf8")
    .trim()
    .split(/\s+/)
    .pop()!

/** Expected HMAC from a second independent path: WebCrypto. */
const webCryptoHmac = async (secret: string, canonical: string): Promise<string> => {
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"])
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(canonical))
  return Buffer.from(mac).toString("hex")
}

const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
const sha = (text: string) => createHash("sha256").update(Buffer.from(text, "utf8")).digest("hex")

// Each vector spells its canonical string out by hand, so the module's own
// canonical builder is checked against the spec, not against itself.
const vectors: ReadonlyArray<{ name: string; request: CanonicalRequest; canonical: string }> = [
  {
    name: "GET with no query and no body",
    request: { method: "GET", target: "/api/wallets/spot", timestamp: 1700000000000, recvWindow: 5000 },
    canonical: `SVC1\nGET\n/api/wallets/spot\n\n1700000000000\n5000\n${EMPTY_SHA256}`
  },
  {
    name: "query with unsorted params kept in order",
    request: { method: "GET", target: "/api/spot/fills?symbol=BTCUSDT&limit=50&before=abc", timestamp: 1, recvWindow: 5000 },
    canonical: `SVC1\nGET\n/api/spot/fills\nsymbol=BTCUSDT&limit=50&before=abc\n1\n5000\n${EMPTY_SHA256}`
  },
  {
    name: "%2F and + are not decoded",
    request: { method: "get", target: "/api/a%2Fb?x=1%2F2&y=a+b", timestamp: 2, recvWindow: 10 },
    canonical: `SVC1\nGET\n/api/a%2Fb\nx=1%2F2&y=a+b\n2\n10\n${EMPTY_SHA256}`
  },
  {
    name: "repeated keys stay repeated",
    request: { method: "GET", target: "/api/spot/open-orders?symbol=B&symbol=A", timestamp: 3, recvWindow: 1 },
    canonical: `SVC1\nGET\n/api/spot/open-orders\nsymbol=B&symbol=A\n3\n1\n${EMPTY_SHA256}`
  },
  {
    name: "a ? inside the query belongs to the query",
    request: { method: "GET", target: "/api/spot/order?clientOrderId=a?b", timestamp: 4, recvWindow: 5000 },
    canonical: `SVC1\nGET\n/api/spot/order\nclientOrderId=a?b\n4\n5000\n${EMPTY_SHA256}`
  },
  {
    name: "empty query after ?",
    request: { method: "GET", target: "/api/wallets/spot?", timestamp: 5, recvWindow: 5000 },
    canonical: `SVC1\nGET\n/api/wallets/spot\n\n5\n5000\n${EMPTY_SHA256}`
  },
  {
    name: "non-ASCII UTF-8 body",
    request: { method: "POST", target: "/api/spot/limit", timestamp: 6, recvWindow: 5000, body: '{"note":"größe €"}' },
    canonical: `SVC1\nPOST\n/api/spot/limit\n\n6\n5000\n${sha('{"note":"größe €"}')}`
  },
  {
    name: "empty body on POST hashes the empty string",
    request: { method: "POST", target: "/api/spot/cancel", timestamp: 7, recvWindow: 5000, body: "" },
    canonical: `SVC1\nPOST\n/api/spot/cancel\n\n7\n5000\n${EMPTY_SHA256}`
  },
  {
    name: "JSON number body hashed byte for byte",
    request: {
      method: "POST",
      target: "/api/spot/limit",
      timestamp: 1764000000000,
      recvWindow: 5000,
      body: '{"symbol":"BTCUSDT","side":"buy","baseQty":0.00001,"limitPrice":60000.01}'
    },
    canonical: `SVC1\nPOST\n/api/spot/limit\n\n1764000000000\n5000\n${sha('{"symbol":"BTCUSDT","side":"buy","baseQty":0.00001,"limitPrice":60000.01}')}`
  }
]

describe("SVC1 canonical string and signature", () => {
  for (const vector of vectors) {
    it(vector.name, async () => {
      expect(canonicalString(vector.request)).toBe(vector.canonical)
      const expected = opensslHmac(SECRET, vector.canonical)
      expect(signature(SECRET, vector.request)).toBe(expected)
      expect(await webCryptoHmac(SECRET, vector.canonical)).toBe(expected)
    })
  }

  it("bytes and their UTF-8 string sign the same", () => {
    const body = '{"q":"ü"}'
    const asString = signature(SECRET, { method: "POST", target: "/api/x", timestamp: 1, recvWindow: 1, body })
    const asBytes = signature(SECRET, { method: "POST", target: "/api/x", timestamp: 1, recvWindow: 1, body: Buffer.from(body, "utf8") })
    expect(asBytes).toBe(asString)
  })

  it("headers: the four X-SVC headers, Content-Type only with a body, never Authorization", () => {
    const get = signRequest(KEY, SECRET, { method: "GET", target: "/api/wallets/spot", timestamp: 9, recvWindow: 5000 })
    expect(Object.keys(get.headers).sort()).toEqual(["X-SVC-APIKEY", "X-SVC-RECV-WINDOW", "X-SVC-SIGNATURE", "X-SVC-TIMESTAMP"])
    expect(get.headers["X-SVC-SIGNATURE"]).toMatch(/^[0-9a-f]{64}$/)
    const post = signRequest(KEY, SECRET, { method: "POST", target: "/api/spot/limit", timestamp: 9, recvWindow: 5000, body: "{}" })
    expect(post.headers["Content-Type"]).toBe("application/json")
    expect(Object.keys(post.headers).map((h) => h.toLowerCase())).not.toContain("authorization")
  })

  it("property: changing any one of the seven fields changes the signature", () => {
    const requestArb = fc.record({
      method: fc.constantFrom("GET", "POST", "DELETE", "PUT"),
      path: fc.stringMatching(/^\/api\/[a-z%0-9/-]{0,20}$/),
      query: fc.string({ maxLength: 30 }),
      timestamp: fc.integer({ min: 0, max: 2 ** 45 }),
      recvWindow: fc.integer({ min: 1, max: 60000 }),
      body: fc.option(fc.string({ maxLength: 60 }), { nil: undefined })
    })
    const field = fc.constantFrom("tag", "method", "path", "query", "timestamp", "recvWindow", "body")
    const target = (path: string, query: string) => (query === "" ? path : `${path}?${query}`)
    fc.assert(
      fc.property(requestArb, field, (r, which) => {
        const base: CanonicalRequest = { method: r.method, target: target(r.path, r.query), timestamp: r.timestamp, recvWindow: r.recvWindow, body: r.body }
        const original = canonicalString(base)
        // The tag is a constant of the scheme, so its change is made on the text itself.
        const changed =
          which === "tag"
            ? original.replace(/^SVC1/, "SVC2")
            : canonicalString({
                ...base,
                ...(which === "method" ? { method: r.method === "GET" ? "POST" : "GET" } : {}),
                ...(which === "path" ? { target: target(`${r.path}x`, r.query) } : {}),
                ...(which === "query" ? { target: target(r.path, `${r.query}z`) } : {}),
                ...(which === "timestamp" ? { timestamp: r.timestamp + 1 } : {}),
                ...(which === "recvWindow" ? { recvWindow: r.recvWindow + 1 } : {}),
                ...(which === "body" ? { body: `${r.body ?? ""} ` } : {})
              })
        expect(changed).not.toBe(original)
        expect(hmacHex(SECRET, changed)).not.toBe(signature(SECRET, base))
      }),
      { numRuns: 500 }
    )
  })

  it("verifySignature accepts the right signature and refuses any other, including other lengths", () => {
    const request: CanonicalRequest = { method: "GET", target: "/api/wallets/spot", timestamp: 1, recvWindow: 5000 }
    const good = signature(SECRET, request)
    expect(verifySignature(SECRET, request, good)).toBe(true)
    expect(verifySignature(SECRET, request, good.toUpperCase())).toBe(false)
    expect(verifySignature(SECRET, request, good.slice(1))).toBe(false)
    expect(verifySignature(SECRET, request, "")).toBe(false)
    expect(verifySignature(SECRET.replace(/A$/, "B"), request, good)).toBe(false)
  })
})

describe("key and secret formats", () => {
  it("accepts well-formed ids and secrets", () => {
    expect(keyIdProblem(KEY)).toBeUndefined()
    expect(secretProblem(SECRET)).toBeUndefined()
  })
  it("names the problem without echoing the secret", () => {
    const short = SECRET.slice(0, -1)
    const problems = [secretProblem(short), secretProblem(`${SECRET}\n`.slice(0, 58).replace(/.$/, " ")), secretProblem(KEY), secretProblem("hunter2-hunter2")]
    for (const problem of problems) {
      expect(problem).toBeDefined()
      expect(problem).not.toContain(SECRET.slice(9, 20))
    }
    expect(secretProblem(short)).toMatch(/48 after the prefix/)
    expect(secretProblem(KEY)).toMatch(/key id/)
    expect(keyIdProblem("svk_live_short")).toMatch(/22 characters/)
    expect(keyIdProblem(SECRET)).toMatch(/svk_live_/)
  })
})
