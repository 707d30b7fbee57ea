/**
 * Two figures for SvcClient, each a ratio measured in the same run:
 *
 * 1. Client overhead: signed `GET /api/wallets/spot` per second through SvcClient
 *    (fresh timestamp and signature per request, budget governor, lossless decoding)
 *    against raw undici requests with precomputed headers, to the same svc-venue
 *    running in a child process. Goal >= 0.7. @effect/platform's HttpClient alone is
 *    measured too, as a reference: SvcClient dispatches on undici itself because
 *    that layer alone costs more per request than the rest of a signed read.
 * 2. Budget saturation: share of the weight limit used over 5 windows by many
 *    concurrent readers, with zero 429s (the venue's window shortened). Goal >= 0.95.
 *
 * The overhead ratio is the median over five alternating rounds. The CPU time this
 * process spends per request on each side is printed as a reference: unlike the
 * rates, it does not move with what else the machine runs.
 *
 *   npx tsx bench/client.bench.ts [--seconds 5] [--concurrency 32]
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { Effect, Exit, Layer, Logger, Redacted, Scope } from "effect"
import { Agent, request } from "undici"
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { defaultDialect } from "../src/svc/Dialect.js"
import { signRequest } from "../src/svc/Signer.js"
import { SvcClient, type SvcClientOptions } from "../src/svc/SvcClient.js"
import { devAccounts, devTradeKey } from "../src/venue/Accounts.js"
import { serveVenue } from "../src/venue/Server.js"

const arg = (name: string, fallback: number): number => {
  const at = process.argv.indexOf(`--${name}`)
  const value = at === -1 ? undefined : Number(process.argv[at + 1])
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback
}
const seconds = arg("seconds", 5)
const concurrency = arg("concurrency", 32)
const target = "/api/wallets/spot"
const ROUNDS = 5

const clientOptions = (baseUrl: string): SvcClientOptions => ({
  baseUrl,
  apiKey: Redacted.make(devTradeKey.keyId),
  apiSecret: Redacted.make(devTradeKey.secret),
  dialect: defaultDialect,
  requestTimeoutMs: 10_000
})

/** Benchmarks measure the request path, not log output. */
const quiet = Logger.replace(Logger.defaultLogger, Logger.none)

const runWithClient = <A, E>(options: SvcClientOptions, effect: Effect.Effect<A, E, SvcClient>) =>
  Effect.runPromise(effect.pipe(Effect.provide(SvcClient.layerWith(options).pipe(Layer.provide(quiet))), Effect.scoped))

/** Raw undici: the same signed GET with headers computed once (a 60 s receive window keeps them valid). */
const rawLoad = async (baseUrl: string): Promise<number> => {
  const dispatcher = new Agent({ connections: concurrency })
  const { headers } = signRequest(devTradeKey.keyId, devTradeKey.secret, { method: "GET", target, timestamp: Date.now(), recvWindow: 60_000 })
  const url = baseUrl + target
  const deadline = Date.now() + seconds * 1000
  let done = 0
  const loop = async () => {
    while (Date.now() < deadline) {
      const answer = await request(url, { method: "GET", headers, dispatcher })
      await answer.body.text()
      if (answer.statusCode !== 200) throw new Error(`raw request answered ${answer.statusCode}`)
      done += 1
    }
  }
  const started = performance.now()
  await Promise.all(Array.from({ length: concurrency }, loop))
  const elapsed = (performance.now() - started) / 1000
  await dispatcher.close()
  return done / elapsed
}

/** @effect/platform's HttpClient alone, same precomputed headers: the most SvcClient could reach sending through it. */
const platformLoad = (baseUrl: string): Promise<number> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const http = yield* HttpClient.HttpClient
      const { headers } = signRequest(devTradeKey.keyId, devTradeKey.secret, { method: "GET", target, timestamp: Date.now(), recvWindow: 60_000 })
      const deadline = Date.now() + seconds * 1000
      let done = 0
      const loop = Effect.gen(function* () {
        while (Date.now() < deadline) {
          const answer = yield* http.execute(HttpClientRequest.get(baseUrl + target).pipe(HttpClientRequest.setHeaders(headers)))
          yield* answer.text
          done += 1
        }
      })
      const started = performance.now()
      yield* Effect.all(Array.from({ length: concurrency }, () => loop), { concurrency: "unbounded" })
      return done / ((performance.now() - started) / 1000)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici), Effect.scoped)
  )

const clientLoad = (baseUrl: string): Promise<number> =>
  runWithClient(
    clientOptions(baseUrl),
    Effect.gen(function* () {
      const client = yield* SvcClient
      const deadline = Date.now() + seconds * 1000
      let done = 0
      const loop = Effect.gen(function* () {
        while (Date.now() < deadline) {
          yield* client.spotWallet()
          done += 1
        }
      })
      const started = performance.now()
      yield* Effect.all(Array.from({ length: concurrency }, () => loop), { concurrency: "unbounded" })
      return done / ((performance.now() - started) / 1000)
    })
  )

/** A load's rate, and the CPU time (user and system) this process spent per request on it. */
const withCpu = async (load: () => Promise<number>): Promise<{ readonly perSecond: number; readonly cpuUsPerRequest: number }> => {
  const cpuBefore = process.cpuUsage()
  const started = performance.now()
  const perSecond = await load()
  const cpu = process.cpuUsage(cpuBefore)
  const requests = perSecond * ((performance.now() - started) / 1000)
  return { perSecond, cpuUsPerRequest: (cpu.user + cpu.system) / requests }
}

/** The venue for the overhead figure runs in a child process, so the load generators' work does not slow it. */
const serve = async () => {
  const scope = Effect.runSync(Scope.make())
  const accounts = { ...devAccounts, limits: { ...devAccounts.limits, weightPerMinute: 1_000_000_000 } }
  const running = await Effect.runPromise(Scope.extend(serveVenue({ accounts }), scope))
  process.stdout.write(`${JSON.stringify({ venueUrl: running.url })}\n`)
  process.stdin.resume()
  await new Promise((resolve) => process.stdin.once("end", resolve))
  await Effect.runPromise(Scope.close(scope, Exit.void))
}

const overhead = async () => {
  const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--serve"], { stdio: ["pipe", "pipe", "inherit"] })
  const venueUrl = await new Promise<string>((resolve, reject) => {
    let text = ""
    child.stdout.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8")
      const line = text.split("\n").find((l) => l.startsWith("{\"venueUrl\""))
      if (line !== undefined) resolve((JSON.parse(line) as { venueUrl: string }).venueUrl)
    })
    child.once("exit", (code) => reject(new Error(`the venue process exited with ${code}`)))
  })
  try {
    // Warm both paths up so the JIT has compiled what is measured.
    await rawLoad(venueUrl)
    await clientLoad(venueUrl)
    // Alternating rounds and the median ratio resist a noisy, shared machine.
    const rounds: Array<{ readonly raw: number; readonly client: number; readonly rawCpuUs: number; readonly clientCpuUs: number }> = []
    for (let round = 0; round < ROUNDS; round++) {
      const raw = await withCpu(() => rawLoad(venueUrl))
      const client = await withCpu(() => clientLoad(venueUrl))
      rounds.push({ raw: raw.perSecond, client: client.perSecond, rawCpuUs: raw.cpuUsPerRequest, clientCpuUs: client.cpuUsPerRequest })
    }
    const platform = await platformLoad(venueUrl)
    const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
    return {
      raw: median(rounds.map((r) => r.raw)),
      platform,
      client: median(rounds.map((r) => r.client)),
      ratio: median(rounds.map((r) => r.client / r.raw)),
      rawCpuUs: median(rounds.map((r) => r.rawCpuUs)),
      clientCpuUs: median(rounds.map((r) => r.clientCpuUs)),
      rounds
    }
  } finally {
    child.stdin.end()
    await new Promise((resolve) => child.once("exit", resolve))
  }
}

/** Readers against a venue with a short weight window; the venue's own books count what was charged and refused. */
const saturation = async () => {
  const windowMs = 2000
  // Low enough that the readers are held by the budget, not by how fast one process can send.
  const limit = 120
  const windows = 5
  const scope = Effect.runSync(Scope.make())
  const accounts = { ...devAccounts, limits: { ...devAccounts.limits, weightPerMinute: limit, weightWindowMs: windowMs } }
  const running = await Effect.runPromise(Scope.extend(serveVenue({ accounts }), scope))
  const charged = new Map<number, number>()
  let refused = 0
  const limits = running.venue.limits
  const charge = limits.charge.bind(limits)
  limits.charge = (keyId, weight, placement, neverRefused, nowMs) => {
    const refusal = charge(keyId, weight, placement, neverRefused, nowMs)
    if (refusal !== undefined) refused += 1
    else {
      const window = Math.floor(nowMs / windowMs)
      charged.set(window, (charged.get(window) ?? 0) + weight)
    }
    return refusal
  }
  try {
    // One window to learn the limit and the weights, then `windows` full windows measured.
    const firstFull = Math.floor(Date.now() / windowMs) + 2
    const end = (firstFull + windows) * windowMs
    await runWithClient(
      { ...clientOptions(running.url), budget: { weightWindowMs: windowMs } },
      Effect.gen(function* () {
        const client = yield* SvcClient
        const reader = (i: number) =>
          Effect.gen(function* () {
            for (let n = 0; n < 1_000_000 && Date.now() < end; n++) yield* i % 3 === 0 ? client.openOrders() : client.spotWallet()
          })
        yield* Effect.all(Array.from({ length: 16 }, (_, i) => reader(i)), { concurrency: "unbounded" })
      })
    )
    let used = 0
    for (let window = firstFull; window < firstFull + windows; window++) used += charged.get(window) ?? 0
    return { share: used / (limit * windows), refused, limit, windowMs, windows }
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

const main = async () => {
  const cost = await overhead()
  const budget = await saturation()
  console.log("| figure | SvcClient | baseline | ratio | goal |")
  console.log("| --- | ---: | ---: | ---: | ---: |")
  console.log(`| signed GET ${target} per second | ${cost.client.toFixed(0)} | ${cost.raw.toFixed(0)} (raw undici) | ${cost.ratio.toFixed(2)} | >= 0.7 |`)
  console.log(`| (reference) @effect/platform HttpClient, precomputed headers | ${cost.platform.toFixed(0)} | ${cost.raw.toFixed(0)} (raw undici) | ${(cost.platform / cost.raw).toFixed(2)} | |`)
  console.log(`| (reference) CPU µs of this process per signed GET | ${cost.clientCpuUs.toFixed(1)} | ${cost.rawCpuUs.toFixed(1)} (raw undici) | | |`)
  console.log(`| weight limit used over ${budget.windows} windows, 429s: ${budget.refused} | ${(budget.share * 100).toFixed(1)} % | ${budget.limit} per ${budget.windowMs} ms | ${budget.share.toFixed(3)} | >= 0.95 |`)
  console.log(
    JSON.stringify({
      bench: "client",
      seconds,
      concurrency,
      clientRps: Math.round(cost.client),
      rawUndiciRps: Math.round(cost.raw),
      platformRps: Math.round(cost.platform),
      rounds: cost.rounds.map((r) => ({ rawUndiciRps: Math.round(r.raw), clientRps: Math.round(r.client) })),
      clientCpuUsPerRequest: Number(cost.clientCpuUs.toFixed(1)),
      rawUndiciCpuUsPerRequest: Number(cost.rawCpuUs.toFixed(1)),
      overheadRatio: Number(cost.ratio.toFixed(3)),
      overheadGoal: 0.7,
      budgetShare: Number(budget.share.toFixed(3)),
      budget429s: budget.refused,
      budgetGoal: 0.95,
      met: cost.ratio >= 0.7 && budget.share >= 0.95 && budget.refused === 0
    })
  )
}

if (process.argv.includes("--serve")) await serve()
else await main()
