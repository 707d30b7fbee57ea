/**
 * Two figures, each the median ratio over alternating rounds against a baseline in
 * the same run; prints a table and a JSON line. Takes about 13 x --seconds.
 * - Signed `GET /api/wallets/spot` per second against svc-venue on loopback, and the
 *   same load against a bare node:http server answering the same JSON (goal >= 0.5).
 * - The latency of `GET /api/spot/open-orders`, one request at a time, from an account
 *   with 100,000 terminal orders behind its few open ones, against the same open
 *   orders on a venue with no history (goal <= 1.5: open orders are looked up, not
 *   found by going through the history).
 *
 *   npx tsx bench/venue.bench.ts [--seconds 4] [--concurrency 32]
 */
import { Effect, Exit, Scope } from "effect"
import * as http from "node:http"
import { spawn } from "node:child_process"
import type { AddressInfo } from "node:net"
import { fileURLToPath } from "node:url"
import { Decimal } from "../src/domain/Decimal.js"
import { devAccounts, devTradeKey } from "../src/venue/Accounts.js"
import { serveVenue } from "../src/venue/Server.js"
import type { Venue } from "../src/venue/Venue.js"
import { signRequest } from "../src/svc/Signer.js"

const arg = (name: string, fallback: number): number => {
  const at = process.argv.indexOf(`--${name}`)
  const value = at === -1 ? undefined : Number(process.argv[at + 1])
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback
}
const seconds = arg("seconds", 4)
const ROUNDS = 3
const concurrency = arg("concurrency", 32)
const target = "/api/wallets/spot"
const openOrdersTarget = "/api/spot/open-orders"
const TERMINAL_ORDERS = 100_000
const OPEN_ORDERS = 5
const OPEN_ORDERS_GOAL = 1.5

/** Runs `concurrency` keep-alive request loops for `seconds`; returns completed requests per second. */
const load = async (port: number, label: string): Promise<{ readonly rps: number; readonly errors: number }> => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency })
  const deadline = Date.now() + seconds * 1000
  let done = 0
  let errors = 0
  // GET is never replay-checked, so a signature serves until its timestamp ages; re-signing
  // every second keeps the load generator light and the server the thing being measured.
  let signedAt = 0
  let headers: Readonly<Record<string, string>> = {}
  const one = () =>
    new Promise<void>((resolve) => {
      const now = Date.now()
      if (now - signedAt > 1000) {
        headers = signRequest(devTradeKey.keyId, devTradeKey.secret, { method: "GET", target, timestamp: now, recvWindow: 5000 }).headers
        signedAt = now
      }
      const req = http.request({ host: "127.0.0.1", port, path: target, method: "GET", headers, agent }, (res) => {
        res.resume()
        res.on("end", () => {
          if (res.statusCode === 200) done += 1
          else errors += 1
          resolve()
        })
      })
      req.on("error", () => {
        errors += 1
        resolve()
      })
      req.end()
    })
  const loop = async () => {
    while (Date.now() < deadline) await one()
  }
  const started = performance.now()
  await Promise.all(Array.from({ length: concurrency }, loop))
  const elapsed = (performance.now() - started) / 1000
  agent.destroy()
  if (errors > 0) console.error(`${label}: ${errors} requests did not answer 200`)
  return { rps: done / elapsed, errors }
}

/** Median milliseconds of a signed GET `path`, sent one at a time for `seconds` (half that: it is two of the rounds). */
const latency = async (port: number, path: string, label: string): Promise<number> => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const deadline = Date.now() + (seconds * 1000) / 2
  const times: Array<number> = []
  while (Date.now() < deadline) {
    const { headers } = signRequest(devTradeKey.keyId, devTradeKey.secret, { method: "GET", target: path, timestamp: Date.now(), recvWindow: 5000 })
    const started = performance.now()
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request({ host: "127.0.0.1", port, path, method: "GET", headers, agent }, (res) => {
        res.resume()
        res.on("end", () => resolve(res.statusCode ?? 0))
      })
      req.on("error", reject)
      req.end()
    })
    if (status !== 200) throw new Error(`${label}: GET ${path} answered ${status}`)
    times.push(performance.now() - started)
  }
  agent.destroy()
  return median(times)
}

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/** Far buy orders that never fill: `terminal` of them placed and cancelled, then `open` left resting. */
const orderHistory = (venue: Venue, terminal: number, open: number) => {
  const engine = venue.engine
  const uid = devTradeKey.uid
  engine.setBalance(uid, "USDT", new Decimal("1e12"))
  const order = { type: "limit", symbol: "BTCUSDT", side: "buy", baseQty: new Decimal("0.001"), limitPrice: new Decimal("30000") } as const
  for (let i = 0; i < terminal; i++) {
    const placed = engine.place(uid, order, venue.now())
    if (!placed.ok) throw new Error(`bench order refused: ${placed.msg}`)
    engine.cancel(uid, placed.clientOrderId, venue.now())
  }
  for (let i = 0; i < open; i++) engine.place(uid, order, venue.now())
  engine.settleDue(venue.now() + engine.settleDelayMs)
}

/** A bare node:http server answering a fixed response: the venue's own body and headers, byte for byte. */
const baseline = async (body: string, headers: Readonly<Record<string, string>>): Promise<{ readonly port: number; readonly close: () => Promise<void> }> => {
  const server = http.createServer((req, res) => {
    req.resume()
    res.writeHead(200, headers)
    res.end(body)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { port: (server.address() as AddressInfo).port, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

/** The servers run in a child process, so the load generator's own work does not count against them. */
const serve = async () => {
  const scope = Effect.runSync(Scope.make())
  const accounts = { ...devAccounts, limits: { ...devAccounts.limits, weightPerMinute: 1_000_000_000, authFailuresBeforeBlock: 1_000_000 } }
  const running = await Effect.runPromise(Scope.extend(serveVenue({ accounts }), scope))
  const venuePort = Number(new URL(running.url).port)
  // Two more venues with the same open orders; one also has the history, and keeps all of it.
  const empty = await Effect.runPromise(Scope.extend(serveVenue({ accounts, settleMs: 0 }), scope))
  const loaded = await Effect.runPromise(Scope.extend(serveVenue({ accounts, settleMs: 0, retention: { terminalCount: TERMINAL_ORDERS } }), scope))
  orderHistory(empty.venue, 0, OPEN_ORDERS)
  orderHistory(loaded.venue, TERMINAL_ORDERS, OPEN_ORDERS)
  // The bare server answers exactly what the venue answers: same body, same headers.
  const sample = signRequest(devTradeKey.keyId, devTradeKey.secret, { method: "GET", target, timestamp: Date.now(), recvWindow: 5000 })
  const { body, headers } = await new Promise<{ body: string; headers: Record<string, string> }>((resolve) => {
    http.get({ host: "127.0.0.1", port: venuePort, path: target, headers: sample.headers }, (res) => {
      let text = ""
      res.on("data", (c) => (text += c))
      res.on("end", () => {
        const sent: Record<string, string> = {}
        for (const [name, value] of Object.entries(res.headers)) {
          if (typeof value === "string" && !["date", "connection", "keep-alive"].includes(name)) sent[name] = value
        }
        resolve({ body: text, headers: sent })
      })
    })
  })
  const bare = await baseline(body, headers)
  process.stdout.write(`${JSON.stringify({ venuePort, barePort: bare.port, emptyPort: empty.port, loadedPort: loaded.port })}\n`)
  // Serve until the parent closes our stdin.
  process.stdin.resume()
  await new Promise((resolve) => process.stdin.once("end", resolve))
  await bare.close()
  await Effect.runPromise(Scope.close(scope, Exit.void))
}

const main = async () => {
  const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--serve"], { stdio: ["pipe", "pipe", "inherit"] })
  const ports = await new Promise<{ readonly venuePort: number; readonly barePort: number; readonly emptyPort: number; readonly loadedPort: number }>((resolve, reject) => {
    let text = ""
    child.stdout.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8")
      const line = text.split("\n").find((l) => l.startsWith("{\"venuePort\""))
      if (line !== undefined) resolve(JSON.parse(line))
    })
    child.once("exit", (code) => reject(new Error(`the server process exited with ${code}`)))
  })
  // Warm both up so the JIT has compiled the paths being measured.
  await load(ports.barePort, "warm-up bare")
  await load(ports.venuePort, "warm-up venue")
  // Alternate the two servers over several rounds; the median ratio resists a noisy, shared machine.
  const rounds: Array<{ readonly bare: number; readonly venue: number }> = []
  for (let round = 0; round < ROUNDS; round++) {
    const bare = await load(ports.barePort, "bare node:http")
    const venue = await load(ports.venuePort, "svc-venue")
    rounds.push({ bare: bare.rps, venue: venue.rps })
  }
  await latency(ports.emptyPort, openOrdersTarget, "warm-up empty")
  await latency(ports.loadedPort, openOrdersTarget, "warm-up loaded")
  const openRounds: Array<{ readonly empty: number; readonly loaded: number }> = []
  for (let round = 0; round < ROUNDS; round++) {
    const empty = await latency(ports.emptyPort, openOrdersTarget, "empty venue")
    const loaded = await latency(ports.loadedPort, openOrdersTarget, "venue with history")
    openRounds.push({ empty, loaded })
  }
  child.stdin.end()
  await new Promise((resolve) => child.once("exit", resolve))
  const bareResult = { rps: median(rounds.map((r) => r.bare)) }
  const venueResult = { rps: median(rounds.map((r) => r.venue)) }
  const ratio = median(rounds.map((r) => r.venue / r.bare))
  const openRatio = median(openRounds.map((r) => r.loaded / r.empty))
  console.log("| figure | svc-venue | baseline | ratio | goal |")
  console.log("| --- | ---: | ---: | ---: | --- |")
  console.log(`| signed GET ${target} per second | ${venueResult.rps.toFixed(0)} | ${bareResult.rps.toFixed(0)} (bare node:http) | ${ratio.toFixed(2)} | >= 0.5 |`)
  console.log(
    `| GET ${openOrdersTarget} ms, ${OPEN_ORDERS} open and ${TERMINAL_ORDERS} terminal orders | ${median(openRounds.map((r) => r.loaded)).toFixed(3)} | ` +
      `${median(openRounds.map((r) => r.empty)).toFixed(3)} (no terminal orders) | ${openRatio.toFixed(2)} | <= ${OPEN_ORDERS_GOAL} |`
  )
  console.log(
    JSON.stringify({
      bench: "venue",
      seconds,
      concurrency,
      wallets: {
        bareRps: Math.round(bareResult.rps),
        venueRps: Math.round(venueResult.rps),
        rounds: rounds.map((r) => ({ bareRps: Math.round(r.bare), venueRps: Math.round(r.venue) })),
        ratio: Number(ratio.toFixed(3)),
        goal: 0.5
      },
      openOrders: {
        open: OPEN_ORDERS,
        terminal: TERMINAL_ORDERS,
        rounds: openRounds.map((r) => ({ emptyMs: Number(r.empty.toFixed(4)), loadedMs: Number(r.loaded.toFixed(4)) })),
        ratio: Number(openRatio.toFixed(3)),
        goal: `<= ${OPEN_ORDERS_GOAL}`
      }
    })
  )
}

if (process.argv.includes("--serve")) await serve()
else await main()
