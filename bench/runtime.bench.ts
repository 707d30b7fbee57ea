/**
 * The strategy runtime, two figures, each against a baseline timed in this run:
 *
 * 1. Host throughput: sma-crossover's onCandle driven through the strategy host
 *    (`runInstance`: its queue, its views of the account, the state serialized and
 *    saved to a real SQLite file once per batch of events taken from the queue,
 *    with the intents emitted) against a bare loop calling the same handler on the
 *    same candles. The trading port only records intents, so no venue or engine
 *    time is in the figure. Both are timed warm, over repeated passes of fresh
 *    instances (the bare loop from a fresh state each pass).
 * 2. Daemon memory: `svcbot run` on config/default.json with the embedded
 *    venue's tape sped up (venue.tickMs 20). One tape step stands for one second
 *    of simulated trading (the venue's default tick), so an hour is 3600 steps,
 *    72 s of wall time. The daemon's RSS is sampled every five simulated minutes;
 *    the figure is the RSS at the end against the RSS at five minutes.
 *
 *   npx tsx bench/runtime.bench.ts
 *   BENCH_HOST_EVENTS=5000 BENCH_SIM_MINUTES=30 BENCH_TICK_MS=20 npx tsx bench/runtime.bench.ts
 */
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import BetterSqlite3 from "better-sqlite3"
import { Effect, Either, Exit, Layer, ManagedRuntime, Scope } from "effect"
import { Decimal } from "../src/domain/Decimal.js"
import type { Intent } from "../src/domain/Intent.js"
import * as Log from "../src/log/Logger.js"
import { Database } from "../src/store/Database.js"
import { FillLedger } from "../src/store/FillLedger.js"
import { OrderJournal } from "../src/store/OrderJournal.js"
import { runInstance, type AccountView, type TradingPort } from "../src/strategy/Host.js"
import { StrategyStateStore } from "../src/strategy/StateStore.js"
import { decodeParams, serializeState, type CandleEvent } from "../src/strategy/Strategy.js"
import { BTCUSDT, viewOf } from "../src/strategy/testing.js"
import { decodeAccounts, devAccounts, toPairSpec } from "../src/venue/Accounts.js"
import { syntheticCandles } from "../src/venue/Tape.js"
import smaCrossover from "../strategies/sma-crossover.js"
import { wholeNumber } from "./Knobs.js"

const ROOT = resolve(import.meta.dirname, "..")

const hostEvents = wholeNumber("BENCH_HOST_EVENTS", 2000, 100, 1_000_000)
const simMinutes = wholeNumber("BENCH_SIM_MINUTES", 60, 10, 600)
const tickMs = wholeNumber("BENCH_TICK_MS", 20, 10, 1000)
/** One tape step stands for one simulated second. */
const SIMULATED_MS_PER_STEP = 1000
const SAMPLE_EVERY_SIM_MINUTES = 5

const seconds = (fromNs: bigint): number => Number(process.hrtime.bigint() - fromNs) / 1e9
const pause = (ms: number) => new Promise<void>((done) => setTimeout(done, ms))

const dir = mkdtempSync(join(tmpdir(), "svcbot-runtime-bench-"))
process.on("exit", () => rmSync(dir, { recursive: true, force: true }))

// ---------------------------------------------------------------- 1. host throughput

const pairEntry = decodeAccounts(devAccounts).pairs[0]!
const pairSpec = toPairSpec(pairEntry)
const candles: ReadonlyArray<CandleEvent> = syntheticCandles(hostEvents, {
  seed: 7,
  startPrice: new Decimal(pairEntry.price),
  tickSize: pairSpec.tickSize,
  stepSize: pairSpec.stepSize,
  startMs: Date.UTC(2024, 0, 1)
}).map((c) => ({ symbol: "BTCUSDT", interval: "1m", openTime: c.openTimeMs, open: c.open, high: c.high, low: c.low, close: c.close, volume: c.volume }))
const lastOpen = candles[candles.length - 1]!.openTime

const params = Either.getOrThrow(decodeParams(smaCrossover, "bench", { fastPeriod: 9, slowPeriod: 21, entry: "market", quoteQty: "500", maxSlippageBps: 50 }))
const view = viewOf({ params, balances: { USDT: "100000", BTC: "2" }, pairs: [BTCUSDT] })
const account: AccountView = { balances: view.balances, openOrders: view.openOrders, pairs: view.pairs }

/** The baseline: the handler alone, over the same candles, from a fresh state each pass. */
const rawPass = (withSerialize: boolean): number => {
  let state = smaCrossover.init(params, view)
  let intents = 0
  for (const candle of candles) {
    const outcome = smaCrossover.onCandle!(state, candle, view)
    if (withSerialize) serializeState(smaCrossover, outcome.state)
    state = outcome.state
    intents += outcome.intents.length
  }
  return intents
}

/** Events per second of repeated passes, for at least a second of work (and at most 1000 passes). */
const rawRate = (withSerialize: boolean): { readonly rate: number; readonly intents: number } => {
  const intents = rawPass(withSerialize)
  const started = process.hrtime.bigint()
  let passes = 0
  while (passes < 1000 && (passes < 3 || seconds(started) < 1)) {
    rawPass(withSerialize)
    passes++
  }
  return { rate: (passes * candles.length) / seconds(started), intents }
}

/**
 * Events per second through the host, over passes of fresh instances for at least a second of work
 * (and at most 5000 passes: a pass of 2000 candles takes under a millisecond, so a cap of a few
 * hundred would time a tenth of a second, before the compiler has finished with the host).
 */
const hostRate = async (dbDir: string): Promise<{ readonly rate: number; readonly intents: number }> => {
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(StrategyStateStore.Default, OrderJournal.Default, FillLedger.Default).pipe(
      Layer.provide(Database.Default({ path: join(dbDir, "host.db") })),
      Layer.provide(Log.layer({ destination: { write: () => undefined } }))
    )
  )
  /** One instance given every candle; the time from the first delivery to the last candle handled. */
  const pass = async (id: string) => {
    const recorded: Array<Intent> = []
    const port: TradingPort = {
      submit: (_strategyId, intents) => Effect.sync(() => { recorded.push(...intents); return [] }),
      accountView: () => Effect.succeed(account)
    }
    const scope = Effect.runSync(Scope.make())
    try {
      const instance = await runtime.runPromise(Scope.extend(runInstance({ id, definition: smaCrossover, params, symbol: "BTCUSDT" }, port, () => new Map(), Date.now), scope))
      const started = process.hrtime.bigint()
      const deadline = Date.now() + 120_000
      // One fiber delivers the pass (as a market-data poll does its new candles), then looks between the host's steps (a yield, not a timer: a timer's millisecond
      // would be most of a pass) until the last candle is handled. A run of the runtime per look would cost
      // a fiber and a promise each, and that time would be counted as the host's.
      await runtime.runPromise(
        Effect.gen(function* () {
          yield* instance.deliver(candles.map((event) => ({ _tag: "Candle", event })))
          while ((yield* instance.lastCandleOpen) !== lastOpen) {
            if (Date.now() > deadline) return yield* Effect.dieMessage("the host did not process every candle within 120 s")
            yield* Effect.yieldNow()
          }
        })
      )
      return { seconds: seconds(started), intents: recorded.length }
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }
  try {
    const first = await pass("bench-sma-0")
    let timed = 0
    let passes = 0
    while (passes < 5000 && (passes < 3 || timed < 1)) {
      const { seconds: took, intents } = await pass(`bench-sma-${passes + 1}`)
      if (intents !== first.intents) throw new Error(`pass ${passes + 1} produced ${intents} intents, the first ${first.intents}`)
      timed += took
      passes++
    }
    return { rate: (passes * candles.length) / timed, intents: first.intents }
  } finally {
    await runtime.dispose()
  }
}

const raw = rawRate(false)
const serialized = rawRate(true)
const host = await hostRate(dir)
if (host.intents !== raw.intents) throw new Error(`the host produced ${host.intents} intents, the bare loop ${raw.intents}: they ran different handlers or events`)
// The same host on a RAM file system, where SQLite's fsync costs nothing: what is left is the host itself.
const shm = existsSync("/dev/shm") ? mkdtempSync("/dev/shm/svcbot-runtime-bench-") : undefined
const hostInMemory = shm === undefined ? undefined : await hostRate(shm).finally(() => rmSync(shm, { recursive: true, force: true }))

const ratioText = (value: number): string => value.toFixed(value < 0.01 ? 5 : 3)
process.stdout.write(
  [
    `strategy host throughput: sma-crossover onCandle, ${candles.length} synthetic one-minute candles, ${host.intents} intents each way`,
    `${"run".padEnd(44)}${"events/s".padStart(12)}${"vs bare".padStart(10)}`,
    ...[
      ["bare loop (handler only)", raw.rate],
      ["bare loop + state serialization", serialized.rate],
      ["host (queue, view, batched SQLite save)", host.rate],
      ...(hostInMemory === undefined ? [] : [["host, database on /dev/shm (no fsync)", hostInMemory.rate]])
    ].map(([name, rate]) => `${String(name).padEnd(44)}${(rate as number).toFixed(0).padStart(12)}${ratioText((rate as number) / raw.rate).padStart(10)}`),
    ""
  ].join("\n")
)

// ---------------------------------------------------------------- 2. daemon memory

const readRssKb = (pid: number): number | undefined => {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return match === null ? undefined : Number(match[1])
  } catch {
    return undefined
  }
}

interface Sample {
  readonly simMinutes: number
  readonly wallSeconds: number
  readonly rssKb: number
}

const memoryRun = async () => {
  const dbPath = join(dir, "daemon.db")
  const configPath = join(dir, "daemon.json")
  const config = JSON.parse(readFileSync(join(ROOT, "config/default.json"), "utf8")) as Record<string, unknown>
  writeFileSync(configPath, JSON.stringify({ ...config, venue: { ...(config.venue as object), tickMs }, database: { path: dbPath } }))
  const wallMs = simMinutes * 60 * (SIMULATED_MS_PER_STEP / 1000) * tickMs
  const spawned = process.hrtime.bigint()
  const child = spawn(process.execPath, [join(ROOT, "bin/svcbot.js"), "run", "--config", configPath, "--for", `${Math.ceil(wallMs / 1000) + 1}s`], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk: Buffer) => { stdout += chunk.toString("utf8") })
  child.stderr.on("data", (chunk: Buffer) => { stderr += chunk.toString("utf8") })
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)))
  try {
    const startDeadline = Date.now() + 60_000
    while (!stdout.includes('"config.loaded"')) {
      if (child.exitCode !== null || Date.now() > startDeadline) throw new Error(`the daemon did not become ready: ${stderr}${stdout.slice(-2000)}`)
      await pause(50)
    }
    const ready = process.hrtime.bigint()
    const startSeconds = seconds(spawned)
    const samples: Array<Sample> = []
    for (let minute = SAMPLE_EVERY_SIM_MINUTES; minute <= simMinutes; minute += SAMPLE_EVERY_SIM_MINUTES) {
      const dueSeconds = (minute * 60 * tickMs) / 1000
      while (seconds(ready) < dueSeconds && child.exitCode === null) await pause(20)
      const rssKb = readRssKb(child.pid!)
      if (rssKb === undefined) throw new Error(`the daemon exited before ${minute} simulated minutes: ${stderr}${stdout.slice(-2000)}`)
      samples.push({ simMinutes: minute, wallSeconds: seconds(ready), rssKb })
    }
    const stopping = process.hrtime.bigint()
    let overdue: NodeJS.Timeout | undefined
    const code = await Promise.race([exited, new Promise<string>((done) => { overdue = setTimeout(() => done("no exit within 60 s"), 60_000) })])
    clearTimeout(overdue)
    const stopSeconds = seconds(stopping)
    if (code !== 0) throw new Error(`the daemon ended with ${code}: ${stderr}${stdout.slice(-2000)}`)
    const db = new BetterSqlite3(dbPath, { readonly: true })
    const count = (sql: string) => (db.prepare(sql).get() as { n: number }).n
    const activity = { intents: count("SELECT count(*) AS n FROM intents"), orders: count("SELECT count(*) AS n FROM orders"), fills: count("SELECT count(*) AS n FROM fills") }
    db.close()
    return { samples, activity, nominalSteps: Math.floor((simMinutes * 60 * 1000) / SIMULATED_MS_PER_STEP), wallSeconds: samples[samples.length - 1]!.wallSeconds, startSeconds, stopSeconds }
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL")
  }
}

const memory = await memoryRun()
const first = memory.samples[0]!
const last = memory.samples[memory.samples.length - 1]!
const middle = memory.samples[Math.floor((memory.samples.length - 1) / 2)]!
const peak = Math.max(...memory.samples.map((s) => s.rssKb))
const mib = (kb: number) => (kb / 1024).toFixed(1)
process.stdout.write(
  [
    `daemon memory: svcbot run, config/default.json (4 strategies, embedded venue), venue.tickMs ${tickMs}`,
    `${simMinutes} simulated minutes = ${memory.nominalSteps} tape steps at most (the tape steps ${tickMs} ms after the previous step ends)` +
      ` in ${memory.wallSeconds.toFixed(1)} s of wall time; polls, timers and the order flow run on the wall clock`,
    `(start-up to ready ${memory.startSeconds.toFixed(1)} s, last sample to exit ${memory.stopSeconds.toFixed(1)} s)`,
    `${"simulated min".padStart(14)}${"wall s".padStart(9)}${"RSS MiB".padStart(10)}${"vs 5 min".padStart(10)}`,
    ...memory.samples.map((s) => `${String(s.simMinutes).padStart(14)}${s.wallSeconds.toFixed(1).padStart(9)}${mib(s.rssKb).padStart(10)}${(s.rssKb / first.rssKb).toFixed(3).padStart(10)}`),
    `end vs ${first.simMinutes} min: ${(last.rssKb / first.rssKb).toFixed(3)}, end vs ${middle.simMinutes} min: ${(last.rssKb / middle.rssKb).toFixed(3)},` +
      ` peak vs ${first.simMinutes} min: ${(peak / first.rssKb).toFixed(3)}`,
    `the run journaled ${memory.activity.intents} intents, ${memory.activity.orders} orders, ${memory.activity.fills} fills`,
    ""
  ].join("\n")
)

process.stdout.write(
  `${JSON.stringify({
    bench: "runtime",
    host: {
      events: candles.length,
      intents: host.intents,
      bareEventsPerSecond: Math.round(raw.rate),
      serializeEventsPerSecond: Math.round(serialized.rate),
      hostEventsPerSecond: Math.round(host.rate),
      hostRatioToBare: host.rate / raw.rate,
      hostGoal: 0.2,
      hostOnShmEventsPerSecond: hostInMemory === undefined ? null : Math.round(hostInMemory.rate),
      hostOnShmRatioToBare: hostInMemory === undefined ? null : hostInMemory.rate / raw.rate
    },
    memory: {
      tickMs,
      simulatedMinutes: simMinutes,
      nominalTapeSteps: memory.nominalSteps,
      wallSeconds: memory.wallSeconds,
      startSeconds: memory.startSeconds,
      stopSeconds: memory.stopSeconds,
      rssKbAt5Min: first.rssKb,
      rssKbAtEnd: last.rssKb,
      endRatioTo5Min: last.rssKb / first.rssKb,
      endRatioToMiddle: last.rssKb / middle.rssKb,
      middleSimMinutes: middle.simMinutes,
      peakRatioTo5Min: peak / first.rssKb,
      samples: memory.samples,
      activity: memory.activity
    }
  })}\n`
)
