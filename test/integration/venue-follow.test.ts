/**
 * Paper trading on real prices: a svc-venue that follows another svc-venue's public
 * market data. The followed venue ("leader") is a real svc-venue on loopback whose
 * price the admin route moves; the follower is started with a follow tape and read
 * and traded over HTTP like any venue.
 *
 * svc-venue charges public requests no weight (the spec shows a weight budget per key
 * only), while an exchange may count them per address. Where a test needs that, a
 * small front on loopback stands in for the exchange's public budget: it forwards to
 * the leader, charges each request a weight per fixed window, reports
 * X-SVC-USED-WEIGHT-1M / X-SVC-WEIGHT-LIMIT-1M and answers 429 with Retry-After past
 * the limit, as the spec's limits section describes for key requests.
 */
import { Cause, Effect, Exit, Logger, Scope } from "effect"
import { spawn } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { parse as parseJson, stringify } from "../../src/domain/Json.js"
import { lineOf } from "../../src/log/Logger.js"
import { defaultDialect } from "../../src/svc/Dialect.js"
import { signRequest } from "../../src/svc/Signer.js"
import { devAccounts, devTradeKey, type AccountsFile } from "../../src/venue/Accounts.js"
import { serveVenue } from "../../src/venue/Server.js"
import type { FollowSource } from "../../src/venue/Tape.js"
import { eventually, startVenue, type TestVenue } from "../support/venue.js"

interface LoggedEvent {
  readonly event: string
  readonly level: string
  readonly fields: Readonly<Record<string, unknown>>
}

interface Follower {
  readonly url: string
  readonly events: ReadonlyArray<LoggedEvent>
  close(): Promise<void>
}

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A follower in this process, its log lines captured; the start's failure message when it is refused. */
const startFollower = async (source: Omit<FollowSource, "kind">, accounts: AccountsFile = devAccounts): Promise<Follower | { readonly refused: string }> => {
  const events: Array<LoggedEvent> = []
  const capture = Logger.make(({ logLevel, message, annotations }) => {
    events.push({ ...lineOf(message, annotations), level: logLevel.label })
  })
  const scope = Effect.runSync(Scope.make())
  const exit = await Effect.runPromiseExit(
    Scope.extend(serveVenue({ accounts, tape: { kind: "follow", ...source } }), scope).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
  )
  const close = () => Effect.runPromise(Scope.close(scope, Exit.void))
  if (Exit.isFailure(exit)) {
    await close()
    const failure = Cause.failureOption(exit.cause)
    if (failure._tag === "Some") return { refused: failure.value.message }
    throw new Error(Cause.pretty(exit.cause))
  }
  cleanups.push(close)
  return { url: exit.value.url, events, close }
}

const follow = async (source: Omit<FollowSource, "kind">, accounts?: AccountsFile): Promise<Follower> => {
  const started = await startFollower(source, accounts)
  if ("refused" in started) throw new Error(`the follower was refused: ${started.refused}`)
  return started
}

const leaderVenue = async (options: Parameters<typeof startVenue>[0] = {}): Promise<TestVenue> => {
  const venue = await startVenue(options)
  cleanups.push(() => venue.close())
  return venue
}

const getJson = async (url: string): Promise<any> => {
  const response = await fetch(url)
  return parseJson(await response.text())
}

const priceOf = async (venueUrl: string, symbol: string): Promise<string> => String((await getJson(`${venueUrl}/api/spot/ticker?symbol=${symbol}`)).price)

/** Waits until the venue's ticker shows `price`. */
const tickerReaches = (venueUrl: string, symbol: string, price: string, what: string) =>
  eventually(async () => ((await priceOf(venueUrl, symbol)) === price ? true : undefined), 15_000, what)

/** A request to the follower signed with the dev trade key (the follower serves the dev accounts). */
const signed = async (venueUrl: string, method: "GET" | "POST", target: string, body?: unknown): Promise<{ readonly status: number; readonly json: any }> => {
  const text = body === undefined ? undefined : stringify(body)
  const request = signRequest(devTradeKey.keyId, devTradeKey.secret, {
    method,
    target,
    timestamp: Date.now(),
    recvWindow: defaultDialect.recvWindowMs,
    ...(text === undefined ? {} : { body: text })
  })
  const response = await fetch(`${venueUrl}${target}`, { method, headers: request.headers, ...(text === undefined ? {} : { body: text }) })
  return { status: response.status, json: parseJson(await response.text()) }
}

const count = (follower: Follower, event: string): number => follower.events.filter((e) => e.event === event).length

// ---- the front: an exchange's public weight budget, and its outages --------------------

const PUBLIC_WEIGHTS: Readonly<Record<string, number>> = { "/api/spot/candles": 5 }

interface Front {
  readonly url: string
  /** Weight charged per window index. */
  readonly usedByWindow: Map<number, number>
  readonly limit: number
  /** 429 answers the budget gave. */
  refused: number
  /** Requests that arrived while a Retry-After the front gave was still running. */
  duringRetryAfter: number
  /** Connections cut while down. */
  cutWhileDown: number
  down: boolean
  /** The next request is answered 429 with this Retry-After (seconds). */
  refuseNextFor: number | undefined
  close(): Promise<void>
}

const startFront = async (leaderUrl: string, budget: { readonly limit: number; readonly windowMs: number } = { limit: 1_000_000, windowMs: 60_000 }): Promise<Front> => {
  let blockedUntilMs = 0
  const tooMany = (res: http.ServerResponse, retryAfterSeconds: number, used: number) => {
    res.writeHead(429, {
      "content-type": "application/json",
      "retry-after": String(retryAfterSeconds),
      "x-svc-used-weight-1m": String(used),
      "x-svc-weight-limit-1m": String(budget.limit)
    })
    res.end(JSON.stringify({ code: "RATE_LIMITED", bucket: "weight-1m", msg: "the weight-1m budget is used up" }))
  }
  const server = http.createServer((req, res) => {
    if (front.down) {
      front.cutWhileDown += 1
      req.socket.destroy()
      return
    }
    const now = Date.now()
    const window = Math.floor(now / budget.windowMs)
    const used = front.usedByWindow.get(window) ?? 0
    if (now < blockedUntilMs) {
      front.duringRetryAfter += 1
      return tooMany(res, Math.ceil((blockedUntilMs - now) / 1000), used)
    }
    if (front.refuseNextFor !== undefined) {
      const seconds = front.refuseNextFor
      front.refuseNextFor = undefined
      blockedUntilMs = Date.now() + seconds * 1000
      return tooMany(res, seconds, used)
    }
    const weight = PUBLIC_WEIGHTS[(req.url ?? "/").split("?")[0]!] ?? 1
    if (used + weight > budget.limit) {
      front.refused += 1
      return tooMany(res, Math.ceil(((window + 1) * budget.windowMs - now) / 1000), used)
    }
    front.usedByWindow.set(window, used + weight)
    http
      .get(`${leaderUrl}${req.url ?? "/"}`, (upstream) => {
        const chunks: Array<Buffer> = []
        upstream.on("data", (c: Buffer) => chunks.push(c))
        upstream.on("end", () => {
          res.writeHead(upstream.statusCode ?? 502, {
            "content-type": upstream.headers["content-type"] ?? "application/json",
            "x-svc-used-weight-1m": String(used + weight),
            "x-svc-weight-limit-1m": String(budget.limit)
          })
          res.end(Buffer.concat(chunks))
        })
      })
      .on("error", () => res.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address() as { port: number }
  const front: Front = {
    url: `http://127.0.0.1:${address.port}`,
    usedByWindow: new Map(),
    limit: budget.limit,
    refused: 0,
    duringRetryAfter: 0,
    cutWhileDown: 0,
    down: false,
    refuseNextFor: undefined,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
  cleanups.push(() => front.close())
  return front
}

// ---- the tests -----------------------------------------------------------------------

describe("svc-venue following another venue", () => {
  it("starts at the leader's prices and follows the leader's ticker within a few polls", async () => {
    const leader = await leaderVenue()
    await leader.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "61234.5" })
    const follower = await follow({ baseUrl: leader.url, pollMs: 100 })
    expect(await priceOf(follower.url, "BTCUSDT")).toBe("61234.5")
    expect(await priceOf(follower.url, "ETHUSDT")).toBe("3000")

    await leader.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60500.25" })
    await leader.admin("POST", "/_venue/tape", { symbol: "ETHUSDT", price: "3100" })
    await tickerReaches(follower.url, "BTCUSDT", "60500.25", "the follower's BTCUSDT at the leader's new price")
    await tickerReaches(follower.url, "ETHUSDT", "3100", "the follower's ETHUSDT at the leader's new price")
    expect(count(follower, "venue.follow-lost")).toBe(0)
  })

  it("fills a resting limit order on the follower when the leader's price crosses it", async () => {
    const leader = await leaderVenue()
    const follower = await follow({ baseUrl: leader.url, pollMs: 100 })
    const placed = await signed(follower.url, "POST", "/api/spot/limit", { symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.01"), limitPrice: new Decimal("59000") })
    expect(placed.status).toBe(202)
    const orderTarget = `/api/spot/order?clientOrderId=${encodeURIComponent(String(placed.json.clientOrderId))}`
    const kindOf = async () => String((await signed(follower.url, "GET", orderTarget)).json.kind)
    await eventually(async () => ((await kindOf()) === "resting" ? true : undefined), 10_000, "the buy order resting on the follower")

    await leader.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "59200" })
    await tickerReaches(follower.url, "BTCUSDT", "59200", "the follower at 59200")
    expect(await kindOf()).toBe("resting")

    await leader.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "58900" })
    await eventually(async () => ((await kindOf()) === "fill" ? true : undefined), 15_000, "the buy order filled once the leader crossed 59000")
    const fills = (await signed(follower.url, "GET", "/api/spot/fills?symbol=BTCUSDT")).json.fills
    expect(fills).toHaveLength(1)
    expect(fills[0]).toMatchObject({ clientOrderId: placed.json.clientOrderId, side: "buy", liquidity: "maker", price: "59000", baseQty: "0.01" })
  })

  it("takes its candle history from the leader", async () => {
    const leader = await leaderVenue({ tape: { kind: "synthetic", seed: 7 }, tickMs: 0 })
    const follower = await follow({ baseUrl: leader.url, pollMs: 100 })
    const candles = async (url: string, interval: string) =>
      (await getJson(`${url}/api/spot/candles?symbol=BTCUSDT&interval=${interval}&limit=1000`)).candles.map((c: Record<string, unknown>) =>
        Object.fromEntries(Object.entries(c).map(([k, v]) => [k, String(v)]))
      )
    const leaderCandles = await candles(leader.url, "1m")
    expect(leaderCandles.length).toBeGreaterThanOrEqual(200)
    const followerCandles = await candles(follower.url, "1m")
    // The follower's own minute, still open, may come last; everything before it is the leader's.
    expect(followerCandles.slice(0, leaderCandles.length)).toEqual(leaderCandles)
    const leaderFiveMinutes = (await candles(leader.url, "5m")).slice(0, -1)
    expect((await candles(follower.url, "5m")).slice(0, leaderFiveMinutes.length)).toEqual(leaderFiveMinutes)
    expect(await priceOf(follower.url, "BTCUSDT")).toBe(await priceOf(leader.url, "BTCUSDT"))
  })

  it("keeps its last price while the leader is down, logs the outage once, and follows again when the leader returns", async () => {
    const leader = await leaderVenue()
    const front = await startFront(leader.url)
    const follower = await follow({ baseUrl: front.url, pollMs: 100 })
    await leader.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60100" })
    await tickerReaches(follower.url, "BTCUSDT", "60100", "the follower at 60100")

    front.down = true
    await leader.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60700" })
    await eventually(async () => (front.cutWhileDown >= 8 ? true : undefined), 20_000, "several polls of the follower cut off")
    expect(await priceOf(follower.url, "BTCUSDT")).toBe("60100")
    const lost = follower.events.filter((e) => e.event === "venue.follow-lost")
    expect(lost).toHaveLength(1)
    expect(lost[0]).toMatchObject({ level: "WARN", fields: { followed: front.url } })

    front.down = false
    await tickerReaches(follower.url, "BTCUSDT", "60700", "the follower at the leader's price after it returned")
    await eventually(async () => (count(follower, "venue.follow-resumed") === 1 ? true : undefined), 10_000, "venue.follow-resumed")
    expect(count(follower, "venue.follow-lost")).toBe(1)
  })

  it("keeps its last price while the leader answers server errors, logging one line per outage", async () => {
    const leader = await leaderVenue()
    const follower = await follow({ baseUrl: leader.url, pollMs: 100 })
    await leader.admin("POST", "/_venue/tape", { symbol: "ETHUSDT", price: "3050" })
    await tickerReaches(follower.url, "ETHUSDT", "3050", "the follower at 3050")

    for (const outage of [1, 2]) {
      await leader.admin("POST", "/_venue/faults", { serverErrors: 4, serverErrorStatus: 503 })
      await eventually(async () => ((await leader.admin("GET", "/_venue/faults")).faults.serverErrors === 0 ? true : undefined), 20_000, "the 5xx burst used up")
      expect(await priceOf(follower.url, "ETHUSDT")).toBe("3050")
      await eventually(async () => (count(follower, "venue.follow-resumed") === outage ? true : undefined), 20_000, "the follower resumed")
      expect(count(follower, "venue.follow-lost")).toBe(outage)
    }
    await leader.admin("POST", "/_venue/tape", { symbol: "ETHUSDT", price: "2990" })
    await tickerReaches(follower.url, "ETHUSDT", "2990", "the follower at 2990 after the outages")
  })

  it("refuses at start a pair the leader does not list, naming it and the fix", async () => {
    const leader = await leaderVenue()
    const accounts: AccountsFile = {
      ...devAccounts,
      pairs: [...devAccounts.pairs, { ...devAccounts.pairs[0]!, symbol: "SOLUSDT", base: "SOL", price: "150" }]
    }
    const started = await startFollower({ baseUrl: leader.url, pollMs: 100 }, accounts)
    expect("refused" in started).toBe(true)
    const message = (started as { refused: string }).refused
    expect(message).toContain("SOLUSDT is not a pair")
    expect(message).toContain(leader.url)
    expect(message).toContain("BTCUSDT, ETHUSDT")
    expect(message).toContain("remove it from the venue's pairs (the pairs of its accounts file, --accounts)")
  })

  it("refuses at start a leader it cannot reach, naming the URL", async () => {
    const leader = await leaderVenue()
    const front = await startFront(leader.url)
    front.down = true
    const started = await startFollower({ baseUrl: front.url, pollMs: 100 })
    expect((started as { refused: string }).refused).toMatch(new RegExp(`^cannot follow ${front.url}: GET /api/spot/exchange-info: .*check the followed venue's URL`))
  })

  it("stays within the leader's public weight budget, slowing down as the used weight nears the limit", async () => {
    const leader = await leaderVenue()
    const windowMs = 2000
    // Polls every 100 ms of two pairs want 40 weight a window; the budget is 30.
    const front = await startFront(leader.url, { limit: 30, windowMs })
    const follower = await follow({ baseUrl: front.url, pollMs: 100, weightWindowMs: windowMs })
    const firstWindow = Math.floor(Date.now() / windowMs)
    await eventually(async () => (front.usedByWindow.has(firstWindow + 2) ? true : undefined), 20_000, "polls in two more weight windows")
    await leader.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60321" })
    await tickerReaches(follower.url, "BTCUSDT", "60321", "the follower at 60321 while slowed")
    await eventually(async () => (front.usedByWindow.has(firstWindow + 4) ? true : undefined), 20_000, "polls in two more weight windows")

    expect(front.refused).toBe(0)
    const used = [...front.usedByWindow.values()]
    for (const weight of used) expect(weight).toBeLessThanOrEqual(front.limit)
    // The follower went near the limit (so it did have to slow down) and no further.
    expect(Math.max(...used)).toBeGreaterThanOrEqual(front.limit / 2)
    const slowed = follower.events.filter((e) => e.event === "venue.follow-slowed")
    expect(slowed.length).toBeGreaterThan(0)
    expect(slowed[0]!.fields).toMatchObject({ reason: "weight-near-limit", weightLimit1m: 30 })
    expect(count(follower, "venue.follow-lost")).toBe(0)
  })

  it("waits out a 429's Retry-After before polling again", async () => {
    const leader = await leaderVenue()
    const front = await startFront(leader.url)
    const follower = await follow({ baseUrl: front.url, pollMs: 100 })
    front.refuseNextFor = 1
    await eventually(async () => (count(follower, "venue.follow-slowed") > 0 ? true : undefined), 10_000, "the follower noting the 429")
    await leader.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60999" })
    await tickerReaches(follower.url, "BTCUSDT", "60999", "the follower polling again after Retry-After")
    expect(front.duringRetryAfter).toBe(0)
    expect(follower.events.find((e) => e.event === "venue.follow-slowed")?.fields).toMatchObject({ reason: "rate-limited", retryAfterSeconds: 1, bucket: "weight-1m" })
    expect(count(follower, "venue.follow-lost")).toBe(0)
  })
})

// ---- the command line ---------------------------------------------------------------

const BIN = join(import.meta.dirname, "..", "..", "bin", "svc-venue.js")

const runVenue = (args: ReadonlyArray<string>) => {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ["ignore", "pipe", "pipe"] })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")))
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  cleanups.push(async () => {
    if (child.exitCode === null) {
      child.kill("SIGTERM")
      await exited
    }
  })
  const listening = () =>
    eventually(
      async () => {
        if (child.exitCode !== null) throw new Error(`svc-venue exited: ${stdout}`)
        return stdout
          .split("\n")
          .filter((line) => line.startsWith("{"))
          .map((line) => JSON.parse(line) as Record<string, unknown>)
          .find((line) => line.event === "venue.listening")
      },
      45_000,
      "venue.listening"
    )
  return { exited, listening, stdout: () => stdout, stderr: () => stderr }
}

describe("svc-venue --follow", () => {
  it("follows the venue at the URL, polling every --follow-poll-ms", async () => {
    const leader = await leaderVenue()
    await leader.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60010" })
    const program = runVenue(["--port", "0", "--follow", leader.url, "--follow-poll-ms", "100"])
    const listening = await program.listening()
    expect(listening.follow).toBe(leader.url)
    const url = String(listening.url)
    expect(await priceOf(url, "BTCUSDT")).toBe("60010")
    await leader.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "60020" })
    await tickerReaches(url, "BTCUSDT", "60020", "svc-venue --follow at the leader's new price")
  })

  it("exits at start when the leader lacks a pair of --accounts, naming the pair", async () => {
    const leader = await leaderVenue()
    const file = join(mkdtempSync(join(tmpdir(), "svc-venue-follow-")), "accounts.json")
    writeFileSync(file, JSON.stringify({ ...devAccounts, pairs: [{ ...devAccounts.pairs[0]!, symbol: "BTCEUR", quote: "EUR" }] }))
    const program = runVenue(["--port", "0", "--accounts", file, "--follow", leader.url])
    expect(await program.exited).toBe(1)
    // A failure to start is one line on stderr; stdout carries only the venue's log lines.
    expect(program.stderr()).toMatch(/^svc-venue: .*BTCEUR is not a pair/m)
    expect(program.stdout()).not.toContain('"event":"venue.listening"')
  })
})
