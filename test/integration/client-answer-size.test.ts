/**
 * The client's bound on an answer's size, against a real HTTP server over loopback that
 * streams a gigabyte (fast, and slowly), or says it will (Content-Length): the client stops
 * reading at `maxAnswerBytes`, closes the connection, fails the request with AnswerTooLarge,
 * and the process's memory stays flat. Peak RSS is printed, never asserted against time.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { Writable } from "node:stream"
import { Effect, Either, Layer, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import * as Log from "../../src/log/Logger.js"
import { defaultDialect } from "../../src/svc/Dialect.js"
import type { SvcError } from "../../src/svc/Errors.js"
import { DEFAULT_MAX_ANSWER_BYTES, SvcClient } from "../../src/svc/SvcClient.js"
import { devTradeKey } from "../../src/venue/Accounts.js"
import { eventually } from "../support/venue.js"

const GIGABYTE = 1024 * 1024 * 1024
const MIB = 1024 * 1024

/** One fill as svc-venue writes it: what the endless page repeats. */
const FILL_ROW = JSON.stringify({
  fillId: "F1",
  clientOrderId: "svc-1",
  symbol: "BTCUSDT",
  side: "buy",
  liquidity: "maker",
  price: "60000.12",
  baseQty: "0.001",
  quoteQty: "60.00012",
  fee: "0.06",
  feeAsset: "USDT",
  time: 1_700_000_000_000
})

interface Served {
  /** Bytes of the answer written before the client closed the connection (or the gigabyte was out). */
  bytes: number
  closedByClient: boolean
}

type Pace = "fast" | "slow"

/**
 * A fills page that never ends: `{"fills":[` and then rows until a gigabyte has been written or
 * the connection closes. Fast writes as quickly as the socket drains; slow writes 16 KiB a tick.
 */
const streamPage = (res: http.ServerResponse, pace: Pace, served: Served): void => {
  res.writeHead(200, { "content-type": "application/json" })
  const block = Buffer.from(`${FILL_ROW},`.repeat(Math.ceil((pace === "fast" ? 256 * 1024 : 16 * 1024) / (FILL_ROW.length + 1))))
  res.write('{"fills":[')
  res.on("close", () => {
    served.closedByClient = served.bytes < GIGABYTE
  })
  const pump = (): void => {
    while (served.bytes < GIGABYTE && !res.destroyed) {
      served.bytes += block.length
      const more = res.write(block)
      if (pace === "slow") {
        setTimeout(pump, 2)
        return
      }
      if (!more) {
        res.once("drain", pump)
        return
      }
    }
    if (!res.destroyed) res.end('{}],"nextCursor":null}')
  }
  pump()
}

let server: http.Server
let baseUrl = ""
const served: Record<string, Served> = {}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1")
    const record: Served = { bytes: 0, closedByClient: false }
    served[url.searchParams.get("symbol") ?? url.pathname] = record
    if (url.pathname === defaultDialect.paths.fills) return streamPage(res, url.searchParams.get("symbol") === "SLOW" ? "slow" : "fast", record)
    if (url.pathname === defaultDialect.paths.ticker && url.searchParams.get("symbol") === "BTCUSDT") {
      // Says a gigabyte is coming: refused on the headers alone, before a byte of it is read.
      res.writeHead(200, { "content-type": "application/json", "content-length": String(GIGABYTE) })
      res.on("close", () => {
        record.closedByClient = true
      })
      res.write('{"symbol":"BTCUSDT","price":"')
      return
    }
    if (url.pathname === defaultDialect.paths.limitOrder) {
      req.resume()
      return streamPage(res, "fast", record)
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ symbol: "BTCUSDT", price: "60000" }))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})

afterAll(async () => {
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

/** Runs `body` against a client of the test server, sampling the process's RSS meanwhile; returns its outcome, the peak and the log lines. */
const measured = async <A>(body: (client: SvcClient) => Effect.Effect<A, unknown>) => {
  const lines: Array<Record<string, unknown>> = []
  const destination = new Writable({
    write: (chunk, _encoding, done) => {
      for (const line of String(chunk).split("\n")) if (line.trim() !== "") lines.push(JSON.parse(line) as Record<string, unknown>)
      done()
    }
  })
  const layer = SvcClient.layerWith({
    baseUrl,
    apiKey: Redacted.make(devTradeKey.keyId),
    apiSecret: Redacted.make(devTradeKey.secret),
    dialect: defaultDialect,
    requestTimeoutMs: 120_000
  }).pipe(Layer.provideMerge(Log.layer({ destination, pretty: false })))
  global.gc?.()
  const startRss = process.memoryUsage.rss()
  let peakRss = startRss
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage.rss())
  }, 5)
  try {
    const outcome = await Effect.runPromise(Effect.either(Effect.flatMap(SvcClient, body)).pipe(Effect.provide(layer)))
    peakRss = Math.max(peakRss, process.memoryUsage.rss())
    return { outcome, startRss, peakRss, lines }
  } finally {
    clearInterval(sampler)
  }
}

const mb = (bytes: number) => `${(bytes / MIB).toFixed(1)} MB`

/** Well under the gigabyte the peer offers: the answer buffer is bounded by the limit, the rest is the runtime's churn. */
const RSS_GROWTH_BOUND = 256 * MIB

describe("SvcClient answer size", () => {
  for (const pace of ["fast", "slow"] as const) {
    it(`a fills page streamed ${pace} toward a gigabyte is cut off at the limit: AnswerTooLarge, one warn line, memory flat`, async () => {
      const symbol = pace === "slow" ? "SLOW" : "FAST"
      const { outcome, startRss, peakRss, lines } = await measured((client) => client.fillsPage({ symbol }))
      expect(Either.isLeft(outcome)).toBe(true)
      const error = (outcome as Either.Left<SvcError, unknown>).left
      expect(error).toMatchObject({ _tag: "AnswerTooLarge", endpoint: defaultDialect.paths.fills, limitBytes: DEFAULT_MAX_ANSWER_BYTES })
      const record = served[symbol]!
      // The client closed the connection; the server wrote about the limit, not the gigabyte.
      // The server learns of the closed connection a moment after the client.
      await eventually(async () => (record.closedByClient ? true : undefined), 10_000, "the client to close the connection")
      expect(record.bytes).toBeLessThan(GIGABYTE / 4)
      const failed = lines.filter((line) => line.event === "request.failed")
      expect(failed).toHaveLength(1)
      expect(failed[0]).toMatchObject({ level: "warn", endpoint: defaultDialect.paths.fills, error: "AnswerTooLarge", limitBytes: DEFAULT_MAX_ANSWER_BYTES })
      console.log(
        `answer size (${pace}): server wrote ${mb(record.bytes)} of ${mb(GIGABYTE)} before the client closed; RSS ${mb(startRss)} before, peak ${mb(peakRss)} (+${mb(peakRss - startRss)}), limit ${mb(DEFAULT_MAX_ANSWER_BYTES)}`
      )
      expect(peakRss - startRss).toBeLessThan(RSS_GROWTH_BOUND)
    }, 120_000)
  }

  it("an answer that declares a gigabyte is refused on its headers; the client reads again, and the endpoint leaves the refused list", async () => {
    const { outcome, startRss, peakRss } = await measured((client) =>
      Effect.gen(function* () {
        const refused = yield* Effect.either(client.ticker("BTCUSDT"))
        const listed = yield* client.refusedAnswers
        // The server answers the same path readably once asked with another symbol.
        const readable = yield* client.ticker("ETHUSDT")
        return { refused, listed, readable, after: yield* client.refusedAnswers }
      })
    )
    const value = Either.getOrThrow(outcome)
    expect(value.refused).toMatchObject({ left: { _tag: "AnswerTooLarge", endpoint: defaultDialect.paths.ticker } })
    expect(value.listed).toEqual([expect.objectContaining({ _tag: "AnswerTooLarge", endpoint: defaultDialect.paths.ticker })])
    expect(value.readable.price.eq(new Decimal("60000"))).toBe(true)
    expect(value.after).toEqual([])
    await eventually(async () => (served.BTCUSDT?.closedByClient === true ? true : undefined), 10_000, "the client to close the connection")
    console.log(`answer size (declared 1 GB): RSS ${mb(startRss)} before, peak ${mb(peakRss)} (+${mb(peakRss - startRss)})`)
    expect(peakRss - startRss).toBeLessThan(RSS_GROWTH_BOUND)
  }, 60_000)

  it("a placement whose answer runs past the limit is an outcome unknown, never re-sent", async () => {
    const { outcome } = await measured((client) => client.placeLimit({ symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: new Decimal("60000") }))
    expect(outcome).toMatchObject({ left: { _tag: "PlacementOutcomeUnknown", reason: "unreadable-answer" } })
    expect((outcome as Either.Left<{ readonly detail: string }, unknown>).left.detail).toMatch(/larger than 4194304 bytes/)
  }, 60_000)
})

