/**
 * Backtest throughput: sma-crossover over the venue's synthetic one-minute tape,
 * on one core, against a bare loop that only reads the same candles, both timed
 * in this run, each the median of RUNS runs (the first pays for compiling the loop,
 * a moment of load stretches one, the median is neither; the backtest's run back to
 * back after an untimed one, see below). Goal: at least 3,000,000
 * candles per second; the figure `throughput` is the median rate over that goal, and
 * `ratioToBare` the median rate over the bare loop's.
 *
 *   npm run bench -- backtest            (1,000,000 candles)
 *   BENCH_CANDLES=200000 npm run bench -- backtest
 */
import { readFileSync } from "node:fs"
import { Either } from "effect"
import { type BacktestResult, runBacktest } from "../src/backtest/Backtest.js"
import { Decimal } from "../src/domain/Decimal.js"
import { decodeParams } from "../src/strategy/Strategy.js"
import { decodeAccounts, devAccounts, toFees, toPairSpec } from "../src/venue/Accounts.js"
import type { VenueCandle } from "../src/venue/PricePath.js"
import { syntheticCandles } from "../src/venue/Tape.js"
import smaCrossover from "../strategies/sma-crossover.js"
import { settleHeap } from "./Settle.js"

const GOAL_CANDLES_PER_SECOND = 3_000_000
/** Timed runs of each loop; the figures are their medians. */
const RUNS = 5
const count = Number(process.env.BENCH_CANDLES ?? 1_000_000)
if (!Number.isSafeInteger(count) || count < 1000) throw new Error(`BENCH_CANDLES must be a whole number of at least 1000, got ${process.env.BENCH_CANDLES}`)

const pairEntry = decodeAccounts(devAccounts).pairs[0]!
const pair = toPairSpec(pairEntry)

const seconds = (fromNs: bigint): number => Number(process.hrtime.bigint() - fromNs) / 1e9
/** CPU time of this process since `from`: on a shared machine it says what the run cost when wall time is stretched by others. */
const cpuSeconds = (from: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(from)
  return (used.user + used.system) / 1e6
}

/**
 * CPU time of the main thread alone, in seconds, where Linux tells it (undefined elsewhere): the
 * process's CPU also counts the compiler and collector threads, which run beside the loop on a
 * second core, and on a machine others load the wall time counts their work too. Read from
 * /proc in clock ticks (USER_HZ, 100 a second on Linux).
 */
const mainThreadSeconds = (): number | undefined => {
  try {
    const fields = readFileSync(`/proc/self/task/${process.pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return undefined
  }
}


settleHeap()
const heapBefore = process.memoryUsage().heapUsed
let started = process.hrtime.bigint()
const candles = syntheticCandles(count, { seed: 42, startPrice: new Decimal(pairEntry.price), tickSize: pair.tickSize, stepSize: pair.stepSize, startMs: Date.UTC(2024, 0, 1) })
const generateSeconds = seconds(started)
settleHeap()
/** What the tape holds in memory per candle (a figure, not a ratio: it does not depend on the machine's load). */
const bytesPerCandle = Math.round((process.memoryUsage().heapUsed - heapBefore) / count)

/** The baseline: touch every field of every candle and nothing else. */
const bareLoop = (all: ReadonlyArray<VenueCandle>): number => {
  let checksum = 0
  for (let i = 0; i < all.length; i++) {
    const c = all[i]!
    checksum += c.openTimeMs + c.open.e + c.high.e + c.low.e + c.close.e + c.volume.e
  }
  return checksum
}

/** The middle value (the mean of the two middle ones for an even count). */
const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

let checksum = 0
const bareSeconds: Array<number> = []
for (let run = 0; run < RUNS; run++) {
  settleHeap()
  started = process.hrtime.bigint()
  checksum = bareLoop(candles)
  bareSeconds.push(seconds(started))
}

const params = Either.getOrThrow(decodeParams(smaCrossover, "bench", { fastPeriod: 20, slowPeriod: 100, entry: "market", quoteQty: "1000" }))
const backtest = () =>
  runBacktest({
    strategy: smaCrossover,
    params,
    pair,
    fees: toFees(devAccounts.fees),
    settleDelayMs: 50,
    balances: { USDT: new Decimal(100000) },
    candles,
    intervalMs: 60_000
  })
const backtestSeconds: Array<number> = []
const backtestCpuSeconds: Array<number> = []
const backtestMainSeconds: Array<number> = []
let result: BacktestResult | undefined
/**
 * The timed runs go back to back after one untimed run, as an optimiser's trials do: each pays
 * for the garbage of the one before as the collector comes to it. Not after a forced collection
 * each: `gc()` collects as a heap that must shrink does, which drops the hidden classes that
 * only the last run's objects used and with them every function compiled for them (about 40
 * functions of the run, deoptimised at each forced collection, against 3 in all over 12 runs
 * back to back), so each run timed after one compiled the run again.
 */
settleHeap()
Either.getOrThrow(backtest())
for (let run = 0; run < RUNS; run++) {
  // The previous run's result is garbage once this one starts, as a trial's is once it is scored.
  result = undefined
  started = process.hrtime.bigint()
  const cpuStarted = process.cpuUsage()
  const mainStarted = mainThreadSeconds()
  const outcome = backtest()
  backtestSeconds.push(seconds(started))
  backtestCpuSeconds.push(cpuSeconds(cpuStarted))
  const mainEnded = mainThreadSeconds()
  if (mainStarted !== undefined && mainEnded !== undefined) backtestMainSeconds.push(mainEnded - mainStarted)
  if (Either.isLeft(outcome)) throw outcome.left
  result = outcome.right
}
if (result === undefined) throw new Error("no backtest ran")

const bareRate = median(bareSeconds.map((s) => count / s))
const backtestRate = median(backtestSeconds.map((s) => count / s))
const backtestCpuRate = median(backtestCpuSeconds.map((s) => count / s))
// A run shorter than the clock's tick (a hundredth of a second) has no main-thread rate.
const mainRates = backtestMainSeconds.filter((s) => s > 0).map((s) => count / s)
const backtestMainRate = mainRates.length === backtestMainSeconds.length && mainRates.length > 0 ? median(mainRates) : undefined
const rows: ReadonlyArray<readonly [string, string, string]> = [
  ["bare loop (reads candles)", bareRate.toFixed(0), "1.000"],
  ["sma-crossover backtest", backtestRate.toFixed(0), (backtestRate / bareRate).toFixed(6)]
]
process.stdout.write(
  [
    `backtest throughput, ${count} synthetic one-minute candles (generated in ${generateSeconds.toFixed(1)} s), one core, median of ${RUNS} runs`,
    `${"run".padEnd(28)}${"candles/s".padStart(14)}${"vs bare".padStart(12)}`,
    ...rows.map(([name, rate, ratio]) => `${name.padEnd(28)}${rate.padStart(14)}${ratio.padStart(12)}`),
    `backtest runs: ${backtestSeconds.map((s) => s.toFixed(2)).join(", ")} s wall; median ${backtestCpuRate.toFixed(0)} candles per CPU second` +
      (backtestMainRate === undefined ? "" : `, ${backtestMainRate.toFixed(0)} candles per main-thread CPU second`),
    `goal ${GOAL_CANDLES_PER_SECOND} candles/s: ${backtestRate >= GOAL_CANDLES_PER_SECOND ? "met" : `not met (${((backtestRate / GOAL_CANDLES_PER_SECOND) * 100).toFixed(1)} % of it)`}`,
    `fills ${result.fills.length}, closed trades ${result.metrics.trades}, checksum ${checksum}`,
    `tape in memory: ${bytesPerCandle} bytes per candle`,
    ""
  ].join("\n")
)
process.stdout.write(
  `${JSON.stringify({
    bench: "backtest",
    candles: count,
    bareCandlesPerSecond: Math.round(bareRate),
    backtestCandlesPerSecond: Math.round(backtestRate),
    backtestCandlesPerCpuSecond: Math.round(backtestCpuRate),
    backtestCandlesPerMainThreadCpuSecond: backtestMainRate === undefined ? null : Math.round(backtestMainRate),
    runs: RUNS,
    backtestSeconds,
    ratioToBare: backtestRate / bareRate,
    goalCandlesPerSecond: GOAL_CANDLES_PER_SECOND,
    goalMet: backtestRate >= GOAL_CANDLES_PER_SECOND,
    throughput: { candlesPerSecond: Math.round(backtestRate), goalCandlesPerSecond: GOAL_CANDLES_PER_SECOND, ratio: backtestRate / GOAL_CANDLES_PER_SECOND, goal: 1 },
    fills: result.fills.length,
    trades: result.metrics.trades,
    bytesPerCandle,
    generateSeconds
  })}\n`
)
