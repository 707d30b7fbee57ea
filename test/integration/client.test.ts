/**
 * SvcClient against a real svc-venue over loopback. A counting proxy between the
 * two records every request on the wire (method, target, signature, status, budget
 * headers), so that tests can assert what was and was not sent.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { Writable } from "node:stream"
import { Chunk, Effect, Either, Redacted, Stream } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { parse } from "../../src/domain/Json.js"
import * as Log from "../../src/log/Logger.js"
import { defaultDialect, type Dialect } from "../../src/svc/Dialect.js"
import { fromFailedAnswer, type SvcError } from "../../src/svc/Errors.js"
import { SvcClient, type SvcClientOptions } from "../../src/svc/SvcClient.js"
import { devReadKey } from "../../src/venue/Accounts.js"
import { eventually, type StartVenueOptions, startVenue, type TestVenue } from "../support/venue.js"

interface Seen {
  readonly method: string
  readonly target: string
  readonly signature: string | undefined
  readonly sentAtMs: number
  status?: number
  answeredAtMs?: number
  usedWeight?: number
  retryAfter?: number
}

/** A loopback HTTP proxy that forwards to the venue and records every request. */
const startProxy = async (venueUrl: string) => {
  const upstream = new URL(venueUrl)
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 })
  const seen: Array<Seen> = []
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const signature = req.headers["x-svc-signature"]
      const entry: Seen = { method: req.method ?? "", target: req.url ?? "", signature: typeof signature === "string" ? signature : undefined, sentAtMs: Date.now() }
      seen.push(entry)
      const forward = http.request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers, agent },
        (answer) => {
          entry.status = answer.statusCode ?? 0
          entry.answeredAtMs = Date.now()
          const used = answer.headers[defaultDialect.budgetHeaders.usedWeight1m.toLowerCase()]
          if (typeof used === "string") entry.usedWeight = Number(used)
          const retryAfter = answer.headers["retry-after"]
          if (typeof retryAfter === "string") entry.retryAfter = Number(retryAfter)
          res.writeHead(answer.statusCode ?? 502, answer.headers)
          answer.pipe(res)
        }
      )
      // The venue dropped the connection (lost answer): drop ours too.
      forward.on("error", () => res.socket?.destroy())
      forward.end(Buffer.concat(chunks))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        agent.destroy()
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

/** Every log line written by every client in this file, for the secrets scan. */
const logLines: Array<string> = []
const logLayer = Log.layer({
  destination: new Writable({
    write: (chunk, _encoding, done) => {
      logLines.push(...String(chunk).split("\n").filter((line) => line !== ""))
      done()
    }
  }),
  pretty: false,
  level: "debug"
})
const events = (name: string) => logLines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.event === name)

interface Setup {
  readonly venue: TestVenue
  readonly proxy: Awaited<ReturnType<typeof startProxy>>
  readonly run: <A, E>(effect: Effect.Effect<A, E, SvcClient>, options?: Partial<SvcClientOptions>) => Promise<A>
  readonly close: () => Promise<void>
}

const setup = async (venueOptions: StartVenueOptions = {}): Promise<Setup> => {
  const venue = await startVenue(venueOptions)
  const proxy = await startProxy(venue.url)
  const run = <A, E>(effect: Effect.Effect<A, E, SvcClient>, options: Partial<SvcClientOptions> = {}) =>
    Effect.runPromise(
      effect.pipe(
        Effect.provide(
          SvcClient.layerWith({
            baseUrl: proxy.url,
            apiKey: Redacted.make(venue.keyId),
            apiSecret: Redacted.make(venue.secret),
            dialect: defaultDialect,
            requestTimeoutMs: 3000,
            ...options
          })
        ),
        Effect.provide(logLayer),
        Effect.scoped
      )
    )
  return { venue, proxy, run, close: async () => (await proxy.close(), await venue.close()) }
}

const failureOf = <A>(effect: Effect.Effect<A, SvcError | { readonly _tag: string }, SvcClient>) => Effect.flip(effect)

const client = SvcClient

describe("SvcClient: decoding", () => {
  let s: Setup
  beforeAll(async () => {
    s = await setup()
  })
  afterAll(() => s.close())

  it("reads balances exactly, whether the server wrote a JSON number or a string", async () => {
    await s.venue.admin("POST", "/_venue/balances", {
      uid: s.venue.uid,
      balances: { BTC: "0.1000000000000000055511151231257827", ETH: "123456789012345678.123456789", USDT: "1000" }
    })
    const raw = await s.venue.signed("GET", "/api/wallets/spot")
    expect(raw.text).toContain("0.1000000000000000055511151231257827")
    const accepted = await s.run(client.pipe(Effect.flatMap((c) => c.placeLimit({ symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: new Decimal("12345.67") }))))
    // The lock is taken when the order settles, after the venue's settle delay.
    await eventually(async () => {
      await s.venue.admin("POST", "/_venue/settle")
      const status = await s.run(client.pipe(Effect.flatMap((c) => c.orderStatus(accepted.clientOrderId))))
      return status.kind === "resting" ? true : undefined
    }, 5000, "the order to rest")
    const rows = await s.run(client.pipe(Effect.flatMap((c) => c.spotWallet())))
    const row = (asset: string) => rows.find((r) => r.asset === asset)!
    expect(row("BTC").balance.toFixed()).toBe("0.1000000000000000055511151231257827")
    expect(row("ETH").balance.toFixed()).toBe("123456789012345678.123456789")
    expect(row("USDT").locked.toFixed()).toBe("12.34567")
    expect(row("USDT").balance.plus(row("USDT").locked).toFixed()).toBe("1000")
  })

  it("finds whether a key may trade without trading, and logs no failure for the probe", async () => {
    const before = events("request.failed").length
    const ordersBefore = (await s.venue.admin("GET", `/_venue/orders?uid=${s.venue.uid}`)).orders.length
    expect(await s.run(Effect.flatMap(client, (c) => c.missingTradeScope("svcbot-scope-check")))).toBeUndefined()
    const readOnly = { apiKey: Redacted.make(devReadKey.keyId), apiSecret: Redacted.make(devReadKey.secret) }
    expect(await s.run(Effect.flatMap(client, (c) => c.missingTradeScope("svcbot-scope-check")), readOnly)).toBe("spot.trade")
    expect(events("request.failed").length).toBe(before)
    expect((await s.venue.admin("GET", `/_venue/orders?uid=${s.venue.uid}`)).orders.length).toBe(ordersBefore)
  })

  it("decodes every read endpoint, keeping fields the Dialect does not name", async () => {
    const result = await s.run(
      Effect.gen(function* () {
        const c = yield* client
        const pairs = yield* c.exchangeInfo()
        const one = yield* c.exchangeInfo("ETHUSDT")
        const ticker = yield* c.ticker("BTCUSDT")
        const depth = yield* c.depth({ symbol: "BTCUSDT", limit: 3 })
        const candles = yield* c.candles({ symbol: "BTCUSDT", interval: "1m", limit: 5 })
        const funding = yield* c.fundingWallet()
        const accepted = yield* c.placeLimit({ symbol: "ETHUSDT", side: "buy", baseQty: new Decimal("0.01"), limitPrice: new Decimal("1000") })
        const open = yield* c.openOrders("ETHUSDT")
        const status = yield* c.orderStatus(accepted.clientOrderId)
        const cancelled = yield* c.cancel(accepted.clientOrderId)
        return { pairs, one, ticker, depth, candles, funding, accepted, open, status, cancelled }
      })
    )
    expect(result.pairs.map((p) => p.symbol)).toEqual(["BTCUSDT", "ETHUSDT"])
    expect(result.one).toHaveLength(1)
    expect(result.pairs[0]!.tickSize.toFixed()).toBe("0.01")
    expect(result.ticker.price.gt(0)).toBe(true)
    expect(result.depth.bids).toHaveLength(3)
    expect(result.depth.asks[0]![0].gt(result.depth.bids[0]![0])).toBe(true)
    expect(Array.isArray(result.candles)).toBe(true)
    expect(result.funding.map((r) => r.asset)).toContain("USDT")
    expect(result.accepted.status).toBe("accepted")
    expect(result.accepted.sentAtMs).toBeGreaterThan(0)
    const open = result.open.find((o) => o.clientOrderId === result.accepted.clientOrderId)
    expect(open?.limitPrice?.toFixed()).toBe("1000")
    expect(["pending", "resting"]).toContain(open?.kind)
    // A field outside the Dialect table (updatedAt) is kept on the decoded row.
    expect((open as unknown as Record<string, unknown>).updatedAt).toBeDefined()
    expect(result.status.baseQty?.toFixed()).toBe("0.01")
    expect(result.cancelled.clientOrderId).toBe(result.accepted.clientOrderId)
  })

  it("follows nextCursor through fill pages and stops at a known fill", async () => {
    await s.run(
      Effect.gen(function* () {
        const c = yield* client
        for (let i = 0; i < 5; i++) yield* c.placeMarket({ symbol: "BTCUSDT", side: "buy", quoteOrderQty: new Decimal("50"), maxSlippageBps: 500 })
      })
    )
    const all = await eventually(async () => {
      const fills = (await s.venue.admin("GET", `/_venue/fills?uid=${s.venue.uid}`)).fills as Array<{ fillId: string }>
      return fills.length >= 5 ? fills : undefined
    }, 5000, "five fills")
    const pages = await s.run(client.pipe(Effect.flatMap((c) => Stream.runCollect(c.fills({ limit: 2 })))))
    const fills = Chunk.toReadonlyArray(pages).flatMap((page) => page.fills)
    expect(fills.map((f) => f.fillId).sort()).toEqual(all.map((f) => f.fillId).sort())
    expect(Chunk.toReadonlyArray(pages).at(-1)!.nextCursor).toBeNull()
    // Newest first, and `raw` is the row's exact JSON.
    for (let i = 1; i < fills.length; i++) expect(fills[i - 1]!.time).toBeGreaterThanOrEqual(fills[i]!.time)
    const first = fills[0]!
    expect(first.price.eq(new Decimal((parse(first.raw) as { price: string }).price))).toBe(true)
    const known = fills[3]!.fillId
    const stopped = await s.run(client.pipe(Effect.flatMap((c) => Stream.runCollect(c.fills({ limit: 2, stopWhen: (fill) => fill.fillId === known })))))
    expect(Chunk.size(stopped)).toBe(2)
  })

  it("reports a missing field as a DecodeError naming the endpoint and the field", async () => {
    // Pointed at the funding wallet, the spot decoder misses `locked` in the first row.
    const dialect: Dialect = { ...defaultDialect, paths: { ...defaultDialect.paths, walletsSpot: defaultDialect.paths.walletsFunding } }
    const error = await s.run(failureOf(client.pipe(Effect.flatMap((c) => c.spotWallet()))), { dialect })
    expect(error).toMatchObject({ _tag: "DecodeError", endpoint: "/api/wallets/funding", field: "[0].locked" })
  })
})

describe("SvcClient: errors", () => {
  let s: Setup
  beforeAll(async () => {
    s = await setup({ limits: { authFailuresBeforeBlock: 1000 } })
  })
  afterAll(() => s.close())

  const decodeAnswer = (answer: { status: number; json: unknown; headers: http.IncomingHttpHeaders }, endpoint: string) =>
    fromFailedAnswer({ endpoint, status: answer.status, body: answer.json, retryAfter: answer.headers["retry-after"] === undefined ? undefined : Number(answer.headers["retry-after"]) })

  it("decodes the answers the client itself never provokes: API_KEY_MALFORMED and API_KEY_REPLAYED", async () => {
    const malformed = await s.venue.signed("GET", "/api/wallets/spot", undefined, { headers: { authorization: "Bearer x" } })
    expect(decodeAnswer(malformed, "/api/wallets/spot")).toMatchObject({ _tag: "ApiKeyMalformed" })
    const timestamp = Date.now()
    const body = { clientOrderId: "nope" }
    await s.venue.signed("POST", "/api/spot/cancel", body, { timestamp })
    const replayed = await s.venue.signed("POST", "/api/spot/cancel", body, { timestamp })
    expect(decodeAnswer(replayed, "/api/spot/cancel")).toMatchObject({ _tag: "ApiKeyReplayed" })
  })

  it("maps scope, account status and unknown codes to their tagged errors", async () => {
    const limit = (c: SvcClient) => c.placeLimit({ symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: new Decimal("100") })
    const readOnly = { apiKey: Redacted.make(devReadKey.keyId), apiSecret: Redacted.make(devReadKey.secret) }
    expect(await s.run(failureOf(client.pipe(Effect.flatMap(limit))), readOnly)).toMatchObject({ _tag: "ApiKeyNotPermitted", requiredScope: "spot.trade" })
    for (const [status, tag] of [
      ["frozen", "AccountFrozen"],
      ["geo-restricted", "GeoRestrictedIp"],
      ["legal-acceptance-required", "LegalAcceptanceRequired"]
    ] as const) {
      await s.venue.admin("POST", "/_venue/account-status", { uid: s.venue.uid, status })
      expect(await s.run(failureOf(client.pipe(Effect.flatMap(limit))))).toMatchObject({ _tag: tag, endpoint: "/api/spot/limit" })
    }
    await s.venue.admin("POST", "/_venue/account-status", { uid: s.venue.uid, status: "active" })
    expect(await s.run(failureOf(client.pipe(Effect.flatMap((c) => c.orderStatus("no-such-order")))))).toMatchObject({
      _tag: "RequestInvalid",
      status: 404,
      code: "ORDER_NOT_FOUND"
    })
    // An amount the venue refuses (too many decimals) is a request to fix, and it is not an order.
    const before = s.proxy.seen.length
    const refused = await s.run(failureOf(client.pipe(Effect.flatMap((c) => c.placeLimit({ symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.0000000000000000001"), limitPrice: new Decimal("100") })))))
    expect(refused).toMatchObject({ _tag: "RequestInvalid", status: 400, code: "INVALID_PARAMETER" })
    expect(s.proxy.seen.length - before).toBe(1)
  })

  it("retries a GET through a 5xx burst, and gives up with ServerUnavailable after a longer one", async () => {
    await s.venue.admin("POST", "/_venue/faults", { serverErrors: 2 })
    const rows = await s.run(client.pipe(Effect.flatMap((c) => c.spotWallet())))
    expect(rows.length).toBeGreaterThan(0)
    await s.venue.admin("POST", "/_venue/faults", { serverErrors: 50, serverErrorStatus: 502 })
    const before = s.proxy.seen.length
    const error = await s.run(failureOf(client.pipe(Effect.flatMap((c) => c.openOrders()))), { retry: { maxRetries: 2, baseDelayMs: 5 } })
    expect(error).toMatchObject({ _tag: "ServerUnavailable", status: 502 })
    expect(s.proxy.seen.length - before).toBe(3)
    await s.venue.admin("POST", "/_venue/faults", {})
    expect(events("request.retry").length).toBeGreaterThanOrEqual(4)
  })

  it("reports a connection that never opened as a NetworkError, for placements too", async () => {
    const closed = http.createServer()
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve))
    const { port } = closed.address() as AddressInfo
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    const options = { baseUrl: `http://127.0.0.1:${port}`, retry: { maxRetries: 1, baseDelayMs: 1 } }
    expect(await s.run(failureOf(client.pipe(Effect.flatMap((c) => c.spotWallet()))), options)).toMatchObject({ _tag: "NetworkError", reason: "connection" })
    const placement = await s.run(
      failureOf(client.pipe(Effect.flatMap((c) => c.placeLimit({ symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: new Decimal("100") })))),
      options
    )
    expect(placement).toMatchObject({ _tag: "NetworkError" })
  })

  it("a caller that gives up does not leave its request counted in flight", async () => {
    await s.venue.admin("POST", "/_venue/faults", { latencyMs: 300 })
    const outcome = await s.run(
      Effect.gen(function* () {
        const c = yield* client
        // Before the first answer requests go one at a time: a leaked first request would block the second.
        const first = yield* Effect.either(Effect.timeout(c.spotWallet(), 50))
        yield* Effect.promise(() => s.venue.admin("POST", "/_venue/faults", {}))
        const second = yield* Effect.timeout(c.spotWallet(), 2000)
        return { first, second }
      })
    )
    expect(Either.isLeft(outcome.first) && outcome.first.left._tag).toBe("TimeoutException")
    expect(outcome.second.length).toBeGreaterThan(0)
  })

  it("surfaces API_KEY_TIMESTAMP_INVALID when even the corrected timestamp is refused", async () => {
    // A 1 ms receive window cannot survive 500 ms of latency, whatever the offset: the corrected
    // offset takes the midpoint of the first round trip, so the retry is still some 250 ms old,
    // far beyond what a loaded machine's uneven legs could make up.
    await s.venue.admin("POST", "/_venue/faults", { latencyMs: 500 })
    const before = s.proxy.seen.length
    const error = await s.run(failureOf(client.pipe(Effect.flatMap((c) => c.spotWallet()))), { dialect: { ...defaultDialect, recvWindowMs: 1 } })
    await s.venue.admin("POST", "/_venue/faults", {})
    expect(error).toMatchObject({ _tag: "ApiKeyTimestampInvalid", reason: "timestamp-too-old" })
    expect(typeof (error as { serverTimeMs: unknown }).serverTimeMs).toBe("number")
    expect(s.proxy.seen.length - before).toBe(2)
  })
})

describe("SvcClient: clock correction", () => {
  // Ahead: the refused request is a GET; behind: it is a placement, re-signed after the correction.
  for (const skewMs of [600_000, -600_000]) {
    it(`corrects a server clock ${skewMs > 0 ? "ahead" : "behind"} by 10 minutes after one refused request`, async () => {
      const s = await setup({ faults: { clockSkewMs: skewMs } })
      try {
        const corrections = events("clock.corrected").length
        const result = await s.run(
          Effect.gen(function* () {
            const c = yield* client
            const place = c.placeLimit({ symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.1"), limitPrice: new Decimal("100") })
            if (skewMs > 0) yield* c.spotWallet()
            const accepted = yield* place
            yield* c.cancel(accepted.clientOrderId)
            yield* c.openOrders()
            if (skewMs < 0) yield* c.spotWallet()
            return { offset: yield* c.clockOffsetMs, accepted }
          })
        )
        expect(Math.abs(result.offset - skewMs)).toBeLessThan(1000)
        // Later requests carry the server's time: the placement was sent at server time.
        expect(Math.abs(result.accepted.sentAtMs - (Date.now() + skewMs))).toBeLessThan(5000)
        const statuses = s.proxy.seen.map((seen) => seen.status)
        expect(statuses).toEqual(skewMs > 0 ? [401, 200, 202, 200, 200] : [401, 202, 200, 200, 200])
        const orders = (await s.venue.admin("GET", `/_venue/orders?uid=${s.venue.uid}`)).orders as Array<unknown>
        expect(orders).toHaveLength(1)
        expect(events("clock.corrected").length).toBe(corrections + 1)
        const signatures = s.proxy.seen.map((seen) => seen.signature)
        expect(new Set(signatures).size).toBe(signatures.length)
      } finally {
        await s.close()
      }
    })
  }

  it("corrects again when the server's clock steps while the corrected retry is in flight, and only then", async () => {
    // Each request waits a second at the venue before it is checked, so the clock can be
    // stepped from +9 s to -7 s after the first refusal came back and before the retry is read.
    const s = await setup({ faults: { clockSkewMs: 9_000, latencyMs: 1_000 } })
    try {
      const corrections = events("clock.corrected").length
      const stepped = (async () => {
        // The proxy records a request as it arrives: the second is the corrected retry, now waiting at the venue.
        while (s.proxy.seen.length < 2) await new Promise((resolve) => setTimeout(resolve, 5))
        await s.venue.admin("POST", "/_venue/faults", { clockSkewMs: -7_000, latencyMs: 1_000 })
      })()
      const offset = await s.run(
        Effect.gen(function* () {
          const c = yield* client
          yield* c.spotWallet()
          return yield* c.clockOffsetMs
        })
      )
      await stepped
      expect(s.proxy.seen.map((seen) => seen.status)).toEqual([401, 401, 200])
      expect(Math.abs(offset + 7_000)).toBeLessThan(1_500)
      expect(events("clock.corrected").length).toBe(corrections + 2)
    } finally {
      await s.close()
    }
  })
})

describe("SvcClient: placements", () => {
  let s: Setup
  beforeAll(async () => {
    s = await setup()
  })
  afterAll(() => s.close())

  const orderCount = async () => ((await s.venue.admin("GET", `/_venue/orders?uid=${s.venue.uid}`)).orders as Array<unknown>).length
  const place = (c: SvcClient) => c.placeLimit({ symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.1"), limitPrice: new Decimal("100.5") })

  it("a lost answer after acceptance is PlacementOutcomeUnknown, sent once, and the venue holds exactly one order", async () => {
    const before = await orderCount()
    const sent = s.proxy.seen.length
    await s.venue.admin("POST", "/_venue/faults", { dropAcceptedResponses: 1 })
    const error = await s.run(failureOf(client.pipe(Effect.flatMap(place))))
    expect(error).toMatchObject({ _tag: "PlacementOutcomeUnknown", reason: "connection", request: { type: "limit", symbol: "BTCUSDT", side: "buy" } })
    const unknown = error as unknown as { request: { baseQty: Decimal; limitPrice: Decimal }; sentAtMs: number }
    expect(unknown.request.baseQty.toFixed()).toBe("0.1")
    expect(unknown.request.limitPrice.toFixed()).toBe("100.5")
    expect(Math.abs(unknown.sentAtMs - Date.now())).toBeLessThan(5000)
    expect(s.proxy.seen.length - sent).toBe(1)
    expect(await orderCount()).toBe(before + 1)
  })

  it("a timeout is PlacementOutcomeUnknown and the order, accepted late, exists once", async () => {
    const before = await orderCount()
    // The timeout leaves room for the request to reach the venue on a loaded machine; the latency outlasts it.
    await s.venue.admin("POST", "/_venue/faults", { latencyMs: 2000 })
    const error = await s.run(failureOf(client.pipe(Effect.flatMap(place))), { requestTimeoutMs: 500 })
    expect(error).toMatchObject({ _tag: "PlacementOutcomeUnknown", reason: "timeout" })
    await eventually(async () => ((await orderCount()) === before + 1 ? true : undefined), 5000, "the late order")
    await s.venue.admin("POST", "/_venue/faults", {})
    expect(await orderCount()).toBe(before + 1)
  })

  it("a 5xx on a placement is PlacementOutcomeUnknown, never retried", async () => {
    const sent = s.proxy.seen.length
    await s.venue.admin("POST", "/_venue/faults", { serverErrors: 1 })
    const error = await s.run(failureOf(client.pipe(Effect.flatMap(place))))
    expect(error).toMatchObject({ _tag: "PlacementOutcomeUnknown", reason: "server-error" })
    expect(s.proxy.seen.length - sent).toBe(1)
  })

  it("retries a cancel through a 5xx with a new signature each time", async () => {
    const accepted = await s.run(client.pipe(Effect.flatMap(place)))
    await s.venue.admin("POST", "/_venue/faults", { serverErrors: 2 })
    const sent = s.proxy.seen.length
    const answer = await s.run(client.pipe(Effect.flatMap((c) => c.cancel(accepted.clientOrderId))), { retry: { baseDelayMs: 1 } })
    expect(answer.clientOrderId).toBe(accepted.clientOrderId)
    const attempts = s.proxy.seen.slice(sent)
    expect(attempts.map((a) => a.status)).toEqual([503, 503, 200])
    expect(new Set(attempts.map((a) => a.signature)).size).toBe(3)
  })

  it("places market and stop-limit orders with exact amounts", async () => {
    const result = await s.run(
      Effect.gen(function* () {
        const c = yield* client
        const market = yield* c.placeMarket({ symbol: "BTCUSDT", side: "sell", baseQty: new Decimal("0.00012"), maxSlippageBps: 1000 })
        const stop = yield* c.placeStopLimit({ symbol: "BTCUSDT", side: "sell", baseQty: new Decimal("0.1"), limitPrice: new Decimal("100.01"), stopPrice: new Decimal("100.02") })
        return { market, stop, stopStatus: yield* c.orderStatus(stop.clientOrderId) }
      })
    )
    expect(result.market.status).toBe("accepted")
    expect(result.stopStatus).toMatchObject({ type: "stop-limit", side: "sell" })
    expect(result.stopStatus.baseQty?.toFixed()).toBe("0.1")
  })
})

describe("SvcClient: budget", () => {
  it("many concurrent readers over several windows get no 429 and use most of the weight limit", async () => {
    const windowMs = 1000
    const limit = 60
    const s = await setup({ limits: { weightPerMinute: limit, weightWindowMs: windowMs } })
    try {
      const deadline = Date.now() + 4.5 * windowMs
      const reader = (i: number) =>
        Effect.gen(function* () {
          const c = yield* client
          for (let n = 0; n < 10_000 && Date.now() < deadline; n++) yield* i % 2 === 0 ? c.spotWallet() : c.openOrders()
        })
      const snapshot = await s.run(
        Effect.gen(function* () {
          yield* Effect.all(Array.from({ length: 8 }, (_, i) => reader(i)), { concurrency: "unbounded" })
          return yield* (yield* client).budgetSnapshot
        }),
        { budget: { weightWindowMs: windowMs, windowGuardMs: 20 } }
      )
      expect(s.proxy.seen.filter((seen) => seen.status === 429)).toEqual([])
      expect(snapshot.rateLimited).toBe(0)
      // Per full window, the highest total the venue reported.
      const byWindow = new Map<number, number>()
      for (const seen of s.proxy.seen) {
        if (seen.usedWeight === undefined) continue
        const window = Math.floor(seen.sentAtMs / windowMs)
        byWindow.set(window, Math.max(byWindow.get(window) ?? 0, seen.usedWeight))
      }
      const windows = [...byWindow.keys()].sort((a, b) => a - b).slice(1, -1)
      expect(windows.length).toBeGreaterThanOrEqual(2)
      for (const window of windows) expect(byWindow.get(window)).toBeGreaterThanOrEqual(limit * 0.85)
    } finally {
      await s.close()
    }
  })

  it("follows a limit squeezed mid-run", async () => {
    const windowMs = 1000
    const s = await setup({ limits: { weightPerMinute: 80, weightWindowMs: windowMs } })
    try {
      const deadline = Date.now() + 4.5 * windowMs
      let squeezedAt = Number.POSITIVE_INFINITY
      const reader = Effect.gen(function* () {
        const c = yield* client
        for (let n = 0; n < 10_000 && Date.now() < deadline; n++) yield* Effect.either(c.spotWallet())
      })
      const squeeze = Effect.promise(async () => {
        await new Promise((resolve) => setTimeout(resolve, 1.5 * windowMs))
        await s.venue.admin("POST", "/_venue/faults", { limits: { weightPerMinute: 20 } })
        // Taken once the venue has the new limit: windows that began before it may still count the old one.
        squeezedAt = Date.now()
      })
      await s.run(Effect.all([...Array.from({ length: 6 }, () => reader), squeeze], { concurrency: "unbounded" }), {
        budget: { weightWindowMs: windowMs, windowGuardMs: 20 }
      })
      const after = s.proxy.seen.filter((seen) => seen.sentAtMs >= (Math.floor(squeezedAt / windowMs) + 1) * windowMs)
      expect(after.length).toBeGreaterThan(20)
      expect(after.filter((seen) => seen.status === 429)).toEqual([])
      expect(Math.max(...after.map((seen) => seen.usedWeight ?? 0))).toBeLessThanOrEqual(20)
      expect(s.proxy.seen.filter((seen) => seen.status === 429).length).toBeLessThanOrEqual(6)
    } finally {
      await s.close()
    }
  })

  it("obeys a 429: nothing is sent inside Retry-After", async () => {
    const s = await setup({ limits: { weightPerMinute: 10, weightWindowMs: 3000 } })
    try {
      // Someone else spends the key's whole budget first, early in a window (the venue's windows
      // start on multiples of their length), so the client's first request lands in the same one.
      await new Promise((resolve) => setTimeout(resolve, 3000 - (Date.now() % 3000) + 50))
      for (let i = 0; i < 10; i++) await s.venue.signed("GET", "/api/wallets/spot")
      const deadline = Date.now() + 3500
      const reader = Effect.gen(function* () {
        const c = yield* client
        for (let n = 0; n < 1000 && Date.now() < deadline; n++) {
          const result = yield* Effect.either(c.spotWallet())
          if (Either.isLeft(result) && result.left._tag !== "RateLimited") return yield* Effect.fail(result.left)
        }
      })
      await s.run(Effect.all(Array.from({ length: 5 }, () => reader), { concurrency: "unbounded" }), { budget: { weightWindowMs: 3000 } })
      const refused = s.proxy.seen.filter((seen) => seen.status === 429)
      expect(refused.length).toBeGreaterThanOrEqual(1)
      expect(refused.length).toBeLessThanOrEqual(5)
      const first = refused[0]!
      const holdEnd = first.answeredAtMs! + first.retryAfter! * 1000
      const inside = s.proxy.seen.filter((seen) => seen.sentAtMs > first.answeredAtMs! + 50 && seen.sentAtMs < holdEnd - 50)
      expect(inside).toEqual([])
      expect(s.proxy.seen.some((seen) => seen.sentAtMs >= holdEnd - 50 && seen.status === 200)).toBe(true)
      expect(events("rate.limited").length).toBeGreaterThanOrEqual(1)
    } finally {
      await s.close()
    }
  })

  it("a failed-auth block pauses all key traffic for Retry-After", async () => {
    const s = await setup({ limits: { authFailuresBeforeBlock: 2, authBlockSeconds: 2 } })
    try {
      for (let i = 0; i < 2; i++) await s.venue.signed("GET", "/api/wallets/spot", undefined, { secret: `svs_live_${"x".repeat(49)}` })
      const sent = s.proxy.seen.length
      const errors = await s.run(
        Effect.gen(function* () {
          const c = yield* client
          const first = yield* Effect.flip(c.spotWallet())
          const second = yield* Effect.flip(c.cancel("anything"))
          return [first, second]
        })
      )
      expect(errors[0]).toMatchObject({ _tag: "AuthBlocked", retryAfter: 2 })
      expect(errors[1]).toMatchObject({ _tag: "AuthBlocked" })
      expect(s.proxy.seen.length - sent).toBe(1)
      expect(events("auth.blocked").length).toBeGreaterThanOrEqual(1)
    } finally {
      await s.close()
    }
  })

  it("a revoked key makes at most one failed request per probe interval", async () => {
    const s = await setup({ limits: { authFailuresBeforeBlock: 1000 } })
    try {
      const invalidBefore = events("auth.invalid").length
      await s.venue.admin("POST", "/_venue/keys/revoke", { keyId: s.venue.keyId })
      const probeIntervalMs = 500
      const started = Date.now()
      const outcomes = await s.run(
        Effect.gen(function* () {
          const c = yield* client
          const tags: Array<string> = []
          while (Date.now() - started < 1800) {
            const results = yield* Effect.all(Array.from({ length: 4 }, () => Effect.flip(c.spotWallet())), { concurrency: "unbounded" })
            tags.push(...results.map((e) => e._tag))
            yield* Effect.sleep(20)
          }
          return tags
        }),
        { budget: { authProbeIntervalMs: probeIntervalMs } }
      )
      const failed = s.proxy.seen.filter((seen) => seen.status === 401)
      expect(failed.length).toBeGreaterThanOrEqual(2)
      expect(failed.length).toBeLessThanOrEqual(Math.ceil(1800 / probeIntervalMs) + 1)
      for (let i = 1; i < failed.length; i++) expect(failed[i]!.sentAtMs - failed[i - 1]!.sentAtMs).toBeGreaterThanOrEqual(probeIntervalMs - 20)
      expect(outcomes.filter((tag) => tag === "CircuitOpen").length).toBeGreaterThan(outcomes.filter((tag) => tag === "ApiKeyInvalid").length)
      expect(events("auth.invalid").length - invalidBefore).toBe(failed.length)
    } finally {
      await s.close()
    }
  })
})

describe("SvcClient: logs", () => {
  it("never writes the secret or a signature", () => {
    const output = logLines.join("\n")
    expect(logLines.length).toBeGreaterThan(10)
    expect(output).not.toContain("svs_live_")
    expect(output).not.toMatch(/[0-9a-f]{64}/)
    expect(output).not.toContain("svk_live_devtrade0000000000000")
  })
})
