import type BetterSqlite3 from "better-sqlite3"
import { Either } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { runBacktest } from "../../src/backtest/Backtest.js"
import { compareFills, describeMismatches } from "../../src/backtest/Parity.js"
import { Decimal } from "../../src/domain/Decimal.js"
import { decodeGates } from "../../src/promotion/Gates.js"
import { canonicalParams } from "../../src/promotion/Hash.js"
import { identityOf, liveStatus, promote } from "../../src/promotion/Promotion.js"
import { recordPaperRun } from "../../src/promotion/PaperRun.js"
import { recordRun, runsOf } from "../../src/promotion/Records.js"
import { openDatabase } from "../../src/store/Database.js"
import { STRATEGIES_DIR } from "../../src/strategy/Loader.js"
import { decodeParams } from "../../src/strategy/Strategy.js"
import { decodeAccounts, devAccounts, toFees, toPairSpec } from "../../src/venue/Accounts.js"
import { syntheticCandles } from "../../src/venue/Tape.js"
import smaCrossover from "../../strategies/sma-crossover.js"

const rawParams = { fastPeriod: 5, slowPeriod: 30, entry: "market", quoteQty: "1000" }
const params = Either.getOrThrow(decodeParams(smaCrossover, "paper", rawParams))
const pair = toPairSpec(decodeAccounts(devAccounts).pairs[0]!)
const sourcePath = join(STRATEGIES_DIR, "sma-crossover.ts")
// Eight days of one-minute candles: enough paper days for the default minDays of 7.
const candles = syntheticCandles(8 * 1440, { seed: 5, startPrice: new Decimal(60000), tickSize: pair.tickSize, stepSize: pair.stepSize, startMs: Date.UTC(2024, 0, 1) })
const setup = {
  strategy: smaCrossover,
  params,
  pair,
  fees: toFees(devAccounts.fees),
  settleDelayMs: 50,
  balances: { USDT: new Decimal(10000) },
  candles,
  intervalMs: 60_000
}
const backtest = Either.getOrThrow(runBacktest(setup))

let dir: string
let db: BetterSqlite3.Database
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "svcbot-paper-"))
  db = openDatabase({ path: join(dir, "svcbot.db") })
})
afterEach(() => {
  db.close()
  rmSync(dir, { recursive: true, force: true })
})

const paperInput = (equity = backtest.equity, fills = backtest.fills) => ({
  strategy: smaCrossover,
  params,
  rawParams,
  sourcePath,
  pair,
  fees: setup.fees,
  settleDelayMs: 50,
  startBalances: setup.balances,
  candles,
  intervalMs: 60_000,
  equity,
  fills,
  inMarketCandles: 0,
  dataSource: "venue:http://127.0.0.1:1"
})

describe("paper runs as promotion evidence", () => {
  it("measures no tracking error and no fill mismatch for paper trading that did what the backtest did", () => {
    const recorded = Either.getOrThrow(recordPaperRun(db, paperInput(), 1))
    expect(recorded.trackingErrorPct.toFixed()).toBe("0")
    expect(recorded.fillMismatches).toBe(0)
    expect(recorded.metrics.pnl.toFixed()).toBe(backtest.metrics.pnl.toFixed())
    const [run] = runsOf(db, identityOf("sma-crossover", sourcePath, rawParams), "paper")
    expect(run!.runId).toBe(recorded.runId)
    expect(run!.trackingErrorPct!.toFixed()).toBe("0")
  })

  it("measures the largest equity gap and counts fills that differ", () => {
    const equity = backtest.equity.map((e, i) => (i === 500 ? e.minus(250) : e))
    const fills = backtest.fills.slice(1)
    const recorded = Either.getOrThrow(recordPaperRun(db, paperInput(equity, fills), 1))
    // 250 below the backtest at one close, on a 10000 start.
    expect(recorded.trackingErrorPct.toFixed()).toBe("2.5")
    expect(recorded.fillMismatches).toBe(compareFills(backtest.fills, fills).length)
    expect(recorded.fillMismatches).toBeGreaterThan(0)
  })

  it("lets backtest, paper and live promotion run end to end on recorded evidence", () => {
    recordRun(db, {
      ...identityOf("sma-crossover", sourcePath, rawParams),
      kind: "backtest",
      params: canonicalParams(rawParams),
      symbol: pair.symbol,
      dataSource: "synthetic:5:11520",
      metrics: backtest.metrics,
      recordedAtMs: 1
    })
    const gates = Either.getOrThrow(decodeGates({ backtest: { minTrades: 1, maxDrawdownPct: 100, minSharpe: -1e9 } }))
    Either.getOrThrow(promote(db, { strategy: "sma-crossover", sourcePath, params: rawParams, to: "paper", gates, nowMs: 2 }))
    Either.getOrThrow(recordPaperRun(db, paperInput(), 3))
    const live = promote(db, { strategy: "sma-crossover", sourcePath, params: rawParams, to: "live", gates, nowMs: 4 })
    expect(Either.isRight(live)).toBe(true)
    expect(liveStatus(db, "sma-crossover", sourcePath, rawParams).live).toBe(true)
  })
})

describe("fill comparison", () => {
  it("compares price, quantity, side and liquidity in order and describes each difference", () => {
    const a = { price: new Decimal("100.5"), baseQty: new Decimal("1"), side: "buy" as const, liquidity: "taker" as const }
    const b = { ...a, price: new Decimal("100.50") }
    const c = { ...a, liquidity: "maker" as const }
    expect(compareFills([a, a], [b, a])).toEqual([])
    const mismatches = compareFills([a, a], [b, c, a])
    expect(mismatches.map((m) => m.index)).toEqual([1, 2])
    expect(describeMismatches(mismatches)).toBe("fill 1: expected buy 1 @ 100.5 taker, got buy 1 @ 100.5 maker\nfill 2: expected nothing, got buy 1 @ 100.5 taker")
  })
})
