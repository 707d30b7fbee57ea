/**
 * Soak: the daemon trading against svc-venue for a simulated week, in a few minutes.
 *
 * Three processes: this one only conducts. A venue process serves svc-venue on
 * loopback and steps its synthetic tape itself, one step standing for one simulated
 * second (a week is 604,800 steps), paced to finish in BENCH_SOAK_SECONDS. Between
 * steps it also trades for the rest of the market: one order per simulated second
 * from another account, placed on the matching engine in-process (alternately a
 * marketable limit order that fills at once and a far limit order cancelled 20
 * orders later) — the week's volume of orders and fills a venue has to keep in check.
 * A daemon process runs `runDaemon` (what `svcbot run` runs) in paper mode against
 * that venue, with config/default.json's strategies, quoting faster (polls every
 * 250 ms, two more market makers) and a venue whose budgets do not hold it back,
 * so its own order flow is as large as it can make it. Polls, timers, candles and the
 * order flow of the daemon run on the wall clock: what grows per candle or per timer
 * in the daemon grows here by a few minutes' worth, not a week's.
 *
 * Both processes are sampled every simulated half day after a full garbage
 * collection: RSS and used heap. The figures are end against middle (half way), for
 * the daemon and for the venue, RSS and heap (goal <= 1.1: no growth beyond noise);
 * middle and end are each the median of three neighbouring samples.
 *
 *   npx tsx bench/soak.bench.ts
 *   BENCH_SOAK_SECONDS=60 BENCH_SOAK_DAYS=2 npx tsx bench/soak.bench.ts
 */
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import BetterSqlite3 from "better-sqlite3"
import { Effect, Exit, Fiber, Scope } from "effect"
import { loadConfig } from "../src/config/Load.js"
import { Decimal } from "../src/domain/Decimal.js"
import { runDaemon } from "../src/daemon/Daemon.js"
import { Health } from "../src/daemon/Health.js"
import { daemonLogging } from "../src/cli/run.js"
import { devAccounts, devTradeKey } from "../src/venue/Accounts.js"
import { serveVenue } from "../src/venue/Server.js"
import { wholeNumber } from "./Knobs.js"

const ROOT = resolve(import.meta.dirname, "..")
const SELF = fileURLToPath(import.meta.url)

const wallSeconds = wholeNumber("BENCH_SOAK_SECONDS", 150, 10, 3600)
const simulatedDays = wholeNumber("BENCH_SOAK_DAYS", 7, 1, 28)
/** One tape step stands for one simulated second. */
const STEPS_PER_DAY = 86_400
const STEPS_PER_SAMPLE = STEPS_PER_DAY / 2
const totalSteps = simulatedDays * STEPS_PER_DAY
/** Steps run back to back before the venue's event loop serves requests again. */
const MAX_STEPS_PER_BATCH = 200
const GOAL = 1.1

/** The account trading for the rest of the market. */
const MARKET_UID = 2001
/** Far limit orders of that account left open at a time; the oldest is cancelled when one more is placed. */
const MARKET_RESTING = 20
const MARKET_QTY = new Decimal("0.002")

interface Memory {
  readonly rssKb: number
  readonly heapUsedKb: number
  /** Memory of C++ objects bound to JavaScript ones (buffers, SQLite's statements), outside the heap. */
  readonly externalKb: number
}

/** Memory after a full collection, so the heap counts what is still referenced. */
const memoryNow = (): Memory => {
  ;(globalThis as { gc?: () => void }).gc?.()
  const usage = process.memoryUsage()
  return { rssKb: Math.round(usage.rss / 1024), heapUsedKb: Math.round(usage.heapUsed / 1024), externalKb: Math.round(usage.external / 1024) }
}

type Message =
  | { readonly kind: "ready"; readonly url?: string }
  | { readonly kind: "sample"; readonly step: number; readonly memory: Memory; readonly retained?: Record<string, number> }
  | { readonly kind: "memory"; readonly memory: Memory }
  | { readonly kind: "stopped" }
  | { readonly kind: "failed"; readonly error: string }

const send = (message: Message): void => {
  process.send!(message)
}

// ---------------------------------------------------------------- the venue process

const venueProcess = async () => {
  const scope = Effect.runSync(Scope.make())
  const accounts = { ...devAccounts, limits: { ...devAccounts.limits, weightPerMinute: 1_000_000, ordersPer10s: 100_000, ordersPerDay: 10_000_000 } }
  // The tape does not step on a timer: this process steps it, at the week's pace.
  const running = await Effect.runPromise(Scope.extend(serveVenue({ accounts, tape: { kind: "synthetic", seed: 42 }, tickMs: 0 }), scope))
  const venue = running.venue
  const engine = venue.engine
  engine.openAccount(MARKET_UID)
  engine.setBalance(MARKET_UID, "USDT", new Decimal("1e12"))
  engine.setBalance(MARKET_UID, "BTC", new Decimal("1e9"))
  const resting: Array<string> = []
  let refused = 0

  const marketOrder = (step: number) => {
    const price = engine.price("BTCUSDT")!
    const now = venue.now()
    if (step % 2 === 0) {
      const side = step % 4 === 0 ? "buy" : "sell"
      const limitPrice = price.mul(side === "buy" ? "1.01" : "0.99").toDecimalPlaces(2)
      if (!engine.place(MARKET_UID, { type: "limit", symbol: "BTCUSDT", side, baseQty: MARKET_QTY, limitPrice }, now).ok) refused += 1
      return
    }
    const placed = engine.place(MARKET_UID, { type: "limit", symbol: "BTCUSDT", side: "buy", baseQty: MARKET_QTY, limitPrice: price.mul("0.5").toDecimalPlaces(2) }, now)
    if (!placed.ok) {
      refused += 1
      return
    }
    resting.push(placed.clientOrderId)
    if (resting.length > MARKET_RESTING) engine.cancel(MARKET_UID, resting.shift()!, now)
  }

  const retained = (): Record<string, number> => ({
    marketOrders: engine.allOrders(MARKET_UID).length,
    marketFills: engine.allFills(MARKET_UID).length,
    daemonOrders: engine.allOrders(devTradeKey.uid).length,
    daemonFills: engine.allFills(devTradeKey.uid).length,
    refused
  })

  const sample = (step: number) => {
    const memory = memoryNow()
    send({ kind: "sample", step, memory, retained: retained() })
  }

  const runWeek = () => {
    sample(0)
    const started = performance.now()
    const stepsPerMs = totalSteps / (wallSeconds * 1000)
    let step = 0
    const batch = () => {
      const due = Math.min(totalSteps, Math.floor((performance.now() - started) * stepsPerMs), step + MAX_STEPS_PER_BATCH)
      while (step < due) {
        venue.stepTapes()
        marketOrder(step)
        step += 1
        if (step % STEPS_PER_SAMPLE === 0) sample(step)
      }
      if (step < totalSteps) setTimeout(batch, 1)
    }
    setTimeout(batch, 1)
  }

  process.on("message", (message: { readonly kind: string }) => {
    if (message.kind === "go") runWeek()
    if (message.kind === "stop") {
      void Effect.runPromise(Scope.close(scope, Exit.void)).then(() => {
        send({ kind: "stopped" })
        process.disconnect()
      })
    }
  })
  send({ kind: "ready", url: running.url })
}

// ---------------------------------------------------------------- the daemon process

const daemonProcess = async (configPath: string) => {
  const env = { SVC_API_KEY: devTradeKey.keyId, SVC_API_SECRET: devTradeKey.secret }
  let ready = false
  // The log lines are not kept: one of them says the daemon is trading.
  const destination = {
    write: (line: string) => {
      if (!ready && line.includes('"event":"config.loaded"')) {
        ready = true
        send({ kind: "ready" })
      }
    }
  }
  const program = Effect.gen(function* () {
    const config = yield* loadConfig(configPath, env)
    const health = yield* Health
    yield* runDaemon({ config, env, acceptUnpromoted: false }).pipe(Effect.scoped, Effect.provide(daemonLogging(health, { destination, level: "info", pretty: false })))
  }).pipe(Effect.provide(Health.Default))
  const fiber = Effect.runFork(program)
  let stopping = false
  fiber.addObserver((exit) => {
    if (stopping) return
    send({ kind: "failed", error: Exit.isFailure(exit) ? String(exit.cause) : "the daemon ended by itself" })
    process.exitCode = 1
    process.disconnect()
  })
  process.on("message", (message: { readonly kind: string }) => {
    if (message.kind === "memory") send({ kind: "memory", memory: memoryNow() })
    if (message.kind === "stop") {
      stopping = true
      void Effect.runPromise(Fiber.interrupt(fiber)).then(() => {
        send({ kind: "stopped" })
        process.disconnect()
      })
    }
  })
}

// ---------------------------------------------------------------- the conductor

interface Child {
  readonly process: ChildProcess
  /** The next message of this kind (a `failed` message or an exit rejects). */
  readonly next: (kind: Message["kind"], timeoutMs: number) => Promise<Message>
  readonly on: (kind: Message["kind"], handler: (message: Message) => void) => void
}

const child = (role: string, ...args: ReadonlyArray<string>): Child => {
  const spawned = spawn(process.execPath, ["--expose-gc", "--import", "tsx", SELF, "--role", role, ...args], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit", "ipc"] })
  const handlers = new Map<string, Array<(message: Message) => void>>()
  const failures: Array<(error: Error) => void> = []
  spawned.on("message", (message: Message) => {
    if (message.kind === "failed") for (const fail of failures) fail(new Error(`the ${role} process failed: ${message.error}`))
    for (const handler of handlers.get(message.kind) ?? []) handler(message)
  })
  spawned.on("exit", (code) => {
    for (const fail of failures) fail(new Error(`the ${role} process exited with ${code}`))
  })
  const on = (kind: Message["kind"], handler: (message: Message) => void) => handlers.set(kind, [...(handlers.get(kind) ?? []), handler])
  const next = (kind: Message["kind"], timeoutMs: number) =>
    new Promise<Message>((done, fail) => {
      const timer = setTimeout(() => fail(new Error(`the ${role} process sent no ${kind} within ${timeoutMs} ms`)), timeoutMs)
      const settle = () => {
        clearTimeout(timer)
        handlers.set(kind, (handlers.get(kind) ?? []).filter((h) => h !== onMessage))
        failures.splice(failures.indexOf(onFailure), 1)
      }
      const onMessage = (message: Message) => {
        settle()
        done(message)
      }
      const onFailure = (error: Error) => {
        settle()
        fail(error)
      }
      on(kind, onMessage)
      failures.push(onFailure)
    })
  return { process: spawned, next, on }
}

interface Row {
  readonly step: number
  readonly venue: Memory
  readonly daemon: Memory
  readonly retained: Record<string, number>
  readonly wallSeconds: number
}

const conduct = async () => {
  const dir = mkdtempSync(join(tmpdir(), "svcbot-soak-"))
  const dbPath = join(dir, "daemon.db")
  const children: Array<Child> = []
  try {
    const venue = child("venue")
    children.push(venue)
    const { url } = (await venue.next("ready", 60_000)) as { url: string }
    const defaults = JSON.parse(readFileSync(join(ROOT, "config/default.json"), "utf8")) as { strategies: Array<Record<string, unknown>> } & Record<string, unknown>
    const quick = defaults.strategies.map((s) => (s.pollMs === undefined ? s : { ...s, pollMs: 250 }))
    const makers = ["BTCUSDT", "ETHUSDT"].map((symbol, i) => ({
      id: `soak-mm-${i + 1}`,
      strategy: "market-maker",
      symbol,
      pollMs: 250,
      params: { halfSpreadBps: 10, orderQty: symbol === "BTCUSDT" ? "0.002" : "0.05", maxInventory: symbol === "BTCUSDT" ? "0.05" : "0.5", skewBps: 20, requoteBps: 3 },
      allocation: symbol === "BTCUSDT" ? { USDT: "5000", BTC: "0.1" } : { USDT: "5000", ETH: "2" }
    }))
    const configPath = join(dir, "config.json")
    writeFileSync(
      configPath,
      JSON.stringify({ ...defaults, venue: { embedded: false, baseUrl: url }, database: { path: dbPath }, strategies: [...quick, ...makers] })
    )
    const daemon = child("daemon", configPath)
    children.push(daemon)
    await daemon.next("ready", 120_000)

    const rows: Array<Row> = []
    const started = performance.now()
    const pending: Array<Promise<void>> = []
    venue.on("sample", (message) => {
      const sample = message as Extract<Message, { kind: "sample" }>
      const wall = (performance.now() - started) / 1000
      pending.push(
        daemon.next("memory", 60_000).then((reply) => {
          rows.push({ step: sample.step, venue: sample.memory, daemon: (reply as Extract<Message, { kind: "memory" }>).memory, retained: sample.retained ?? {}, wallSeconds: wall })
        })
      )
      daemon.process.send({ kind: "memory" })
    })
    venue.process.send({ kind: "go" })
    const lastSamples = totalSteps / STEPS_PER_SAMPLE + 1
    const deadline = Date.now() + wallSeconds * 4 * 1000
    while (pending.length < lastSamples) {
      if (Date.now() > deadline) throw new Error(`the simulated week did not finish within ${wallSeconds * 4} s (${pending.length} of ${lastSamples} samples)`)
      await new Promise((done) => setTimeout(done, 100))
    }
    await Promise.all(pending)
    const wall = (performance.now() - started) / 1000

    const stopped = daemon.next("stopped", 60_000)
    daemon.process.send({ kind: "stop" })
    await stopped
    const venueStopped = venue.next("stopped", 30_000)
    venue.process.send({ kind: "stop" })
    await venueStopped

    const db = new BetterSqlite3(dbPath, { readonly: true })
    const count = (sql: string) => (db.prepare(sql).get() as { n: number }).n
    const activity = { intents: count("SELECT count(*) AS n FROM intents"), orders: count("SELECT count(*) AS n FROM orders"), fills: count("SELECT count(*) AS n FROM fills") }
    db.close()
    report(rows.sort((a, b) => a.step - b.step), activity, wall)
  } finally {
    for (const c of children) if (c.process.exitCode === null && c.process.signalCode === null) c.process.kill("SIGKILL")
    rmSync(dir, { recursive: true, force: true })
  }
}

const report = (rows: ReadonlyArray<Row>, activity: Record<string, number>, wall: number) => {
  const at = rows.findIndex((r) => r.step === totalSteps / 2)
  // Middle and end are each the median of three neighbouring samples: RSS alone swings by a tenth from one sample to the next.
  const middleRows = rows.slice(at - 1, at + 2)
  const endRows = rows.slice(-3)
  const mib = (kb: number) => (kb / 1024).toFixed(1)
  const days = (step: number) => (step / STEPS_PER_DAY).toFixed(1)
  process.stdout.write(
    [
      `soak: ${simulatedDays} simulated days = ${totalSteps} tape steps in ${wall.toFixed(0)} s of wall time; the rest of the market placed one order per simulated second`,
      `daemon: ${activity.intents} intents, ${activity.orders} orders, ${activity.fills} fills journaled`,
      `${"day".padStart(5)}${"wall s".padStart(8)}${"daemon RSS".padStart(12)}${"heap".padStart(8)}${"ext".padStart(7)}${"venue RSS".padStart(11)}${"heap".padStart(8)}${"ext".padStart(7)}   venue keeps (orders/fills: market, daemon)`,
      ...rows.map(
        (r) =>
          `${days(r.step).padStart(5)}${r.wallSeconds.toFixed(0).padStart(8)}${mib(r.daemon.rssKb).padStart(12)}${mib(r.daemon.heapUsedKb).padStart(8)}${mib(r.daemon.externalKb).padStart(7)}` +
          `${mib(r.venue.rssKb).padStart(11)}${mib(r.venue.heapUsedKb).padStart(8)}${mib(r.venue.externalKb).padStart(7)}   ${r.retained.marketOrders}/${r.retained.marketFills}, ${r.retained.daemonOrders}/${r.retained.daemonFills}`
      ),
      "(MiB; RSS, used heap and external memory after a full collection)",
      ""
    ].join("\n")
  )
  const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  const figure = (pick: (r: Row) => number) => {
    const middleKb = median(middleRows.map(pick))
    const endKb = median(endRows.map(pick))
    const ratio = endKb / middleKb
    return { startKb: pick(rows[0]!), middleKb, endKb, ratio: Number(ratio.toFixed(4)), goal: `<= ${GOAL}` }
  }
  const figures = {
    daemon: { rss: figure((r) => r.daemon.rssKb), heap: figure((r) => r.daemon.heapUsedKb) },
    venue: { rss: figure((r) => r.venue.rssKb), heap: figure((r) => r.venue.heapUsedKb) }
  }
  console.log("| figure | start MiB | middle MiB | end MiB | end / middle | goal |")
  console.log("| --- | ---: | ---: | ---: | ---: | --- |")
  for (const [who, pair] of Object.entries(figures)) {
    for (const [what, f] of Object.entries(pair)) {
      console.log(`| ${who} ${what} | ${mib(f.startKb)} | ${mib(f.middleKb)} | ${mib(f.endKb)} | ${f.ratio.toFixed(3)} | ${f.goal} |`)
    }
  }
  console.log(
    JSON.stringify({
      bench: "soak",
      simulatedDays,
      tapeSteps: totalSteps,
      wallSeconds: Number(wall.toFixed(1)),
      daemonActivity: activity,
      venueRetainedAtEnd: rows[rows.length - 1]!.retained,
      ...figures
    })
  )
}

const role = process.argv.indexOf("--role")
if (role === -1) await conduct()
else if (process.argv[role + 1] === "venue") await venueProcess()
else await daemonProcess(process.argv[role + 2]!)
