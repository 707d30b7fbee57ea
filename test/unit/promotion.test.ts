import type BetterSqlite3 from "better-sqlite3"
import { Either } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import type { Metrics } from "../../src/backtest/Metrics.js"
import { Decimal } from "../../src/domain/Decimal.js"
import { parse } from "../../src/domain/Json.js"
import { decodeGates, defaultGates, outOfSampleSource, type PromotionGates } from "../../src/promotion/Gates.js"
import { canonicalParams, paramsHash, sourceHashOfFile } from "../../src/domain/Hash.js"
import { paperWriter, startPaperRun } from "../../src/promotion/PaperStore.js"
import { identityOf, liveStatus, type PaperReplay, promote, type PromotionRefused } from "../../src/promotion/Promotion.js"
import { listPromotions, listRuns, recordRun } from "../../src/promotion/Records.js"
import type { RunParity } from "../../src/promotion/Replay.js"
import { openDatabase } from "../../src/store/Database.js"

const DAY = 86_400_000
const d = (text: string | number) => new Decimal(text)

const metrics = (m: { trades: number; maxDrawdownPct: number; sharpe: number | null; days?: number }): Metrics => ({
  candles: 1440 * (m.days ?? 30),
  fromMs: 0,
  toMs: (m.days ?? 30) * DAY,
  initialEquity: d("10000"),
  finalEquity: d("11000"),
  pnl: d("1000"),
  totalReturnPct: d("10"),
  annualisedReturnPct: 100,
  sharpe: m.sharpe,
  sortino: m.sharpe,
  maxDrawdownPct: m.maxDrawdownPct,
  maxDrawdownDurationMs: DAY,
  fills: m.trades * 2,
  trades: m.trades,
  winRatePct: 55,
  profitFactor: 1.4,
  exposurePct: 50,
  feesPaid: d("12.5"),
  turnover: d("50000"),
  turnoverRatio: 5
})

let dir: string
let db: BetterSqlite3.Database
let source: string
const params = { fastPeriod: 5, slowPeriod: 20, quoteQty: "100" }
const gates: PromotionGates = Either.getOrThrow(
  decodeGates({ backtest: { minTrades: 30, maxDrawdownPct: 20, minSharpe: 1 }, paper: { minDays: 7, maxTrackingErrorPct: 2, maxFillMismatches: 0 } })
)

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "svcbot-promotion-"))
  db = openDatabase({ path: join(dir, "svcbot.db") })
  source = join(dir, "my-strategy.ts")
  writeFileSync(source, "export default 1\n")
})

afterEach(() => {
  db.close()
  rmSync(dir, { recursive: true, force: true })
})

const backtest = (m: Metrics, extra: { params?: unknown; dataSource?: string } = {}): number => {
  const p = extra.params ?? params
  return recordRun(db, {
    ...identityOf("my-strategy", source, p),
    kind: "backtest",
    params: canonicalParams(p),
    symbol: "BTCUSDT",
    dataSource: extra.dataSource ?? "csv:btc-1m.csv",
    metrics: m,
    recordedAtMs: 1
  })
}

/**
 * A paper run as the daemon writes it (started, then one checkpoint with its summary), and
 * what its replay is to report: the gate's logic is under test here, the replay itself in
 * the paper e2e tests.
 */
const replays = new Map<number, Pick<RunParity, "fillMismatches" | "trackingErrorPct">>()
const paperRun = (days: number, outcome: { mismatches?: number; trackingErrorPct?: Decimal | undefined; params?: unknown; startedAt?: number } = {}): number => {
  const p = outcome.params ?? params
  const startedAt = outcome.startedAt ?? 2_000
  const runId = startPaperRun(db, {
    ...identityOf("my-strategy", source, p),
    params: canonicalParams(p),
    symbol: "BTCUSDT",
    dataSource: "venue:http://127.0.0.1",
    setup: {
      instanceId: "btc",
      allocation: { USDT: "10000" },
      startBalances: { USDT: "10000" },
      startPrice: "60000",
      pair: { symbol: "BTCUSDT", base: "BTC", quote: "USDT", tickSize: "0.01", stepSize: "0.0001", minBaseQty: "0.0001", minNotional: "5", depthNotional: "100000" },
      fees: { maker: "0.001", taker: "0.001" },
      settleDelayMs: 50,
      intervalMs: 60_000,
      schedule: null,
      startState: null
    },
    startedAtMs: startedAt,
    emptyMetrics: metrics({ trades: 0, maxDrawdownPct: 0, sharpe: null, days: 0 })
  })
  const writer = paperWriter(db)
  writer.checkpoint({ runId, candles: [], tickers: [], steps: [], intents: [], fills: [], heard: [], metrics: metrics({ trades: 5, maxDrawdownPct: 1, sharpe: 1, days }), nowMs: startedAt })
  writer.end(runId, startedAt)
  replays.set(runId, { fillMismatches: outcome.mismatches ?? 0, trackingErrorPct: "trackingErrorPct" in outcome ? outcome.trackingErrorPct : d("0.5") })
  return runId
}
const replay: PaperReplay = (run) => {
  const outcome = replays.get(run.runId)
  if (outcome === undefined) return Either.left(`no replay for run ${run.runId}`)
  return Either.right({ runId: run.runId, status: run.status, paperFills: 4, replayFills: 4, worst: [], ...outcome })
}

const attempt = (to: "paper" | "live", p: unknown = params, g: PromotionGates = gates) =>
  promote(db, { strategy: "my-strategy", sourcePath: source, params: p, to, gates: g, nowMs: 1_000, replay })

const refusal = (to: "paper" | "live", p: unknown = params, g: PromotionGates = gates): PromotionRefused => {
  const outcome = attempt(to, p, g)
  if (Either.isRight(outcome)) throw new Error(`expected a refusal, got promotion ${outcome.right.promotionId}`)
  return outcome.left
}

const failedGates = (to: "paper" | "live", p: unknown = params, g: PromotionGates = gates) => refusal(to, p, g).failed.map((c) => c.gate)

const good = () => metrics({ trades: 40, maxDrawdownPct: 12, sharpe: 1.6 })

describe("promotion to paper checks the newest backtest of the exact source and params", () => {
  it("refuses without any backtest, listing every gate", () => {
    expect(failedGates("paper")).toEqual(["backtest.run", "backtest.marketData", "backtest.minDays", "backtest.minTrades", "backtest.maxDrawdownPct", "backtest.minSharpe"])
  })

  it("counts market data of at least backtest.minDays; a synthetic tape only where allowSynthetic says so", () => {
    backtest(metrics({ trades: 40, maxDrawdownPct: 12, sharpe: 1.6, days: 12 }))
    expect(refusal("paper").failed).toEqual([{ gate: "backtest.minDays", required: ">= 30", actual: "12", passed: false }])
    backtest(good(), { dataSource: "synthetic:42:43200" })
    expect(refusal("paper").failed).toEqual([
      { gate: "backtest.marketData", required: "market data (a CSV or recorded tape), not a synthetic tape", actual: "synthetic:42:43200", passed: false }
    ])
    const lenient = Either.getOrThrow(decodeGates({ backtest: { allowSynthetic: true } }))
    expect(Either.isRight(attempt("paper", params, lenient))).toBe(true)
  })

  it("with outOfSample, counts only a walk-forward's out-of-sample window, which is still judged as market data or synthetic", () => {
    const strict = Either.getOrThrow(decodeGates({ backtest: { outOfSample: true } }))
    backtest(good())
    expect(refusal("paper", params, strict).failed.map((c) => [c.gate, c.actual])).toEqual([["backtest.outOfSample", "csv:btc-1m.csv"]])
    const window = { fromMs: Date.UTC(2024, 0, 1), toMs: Date.UTC(2024, 1, 1) }
    backtest(good(), { dataSource: outOfSampleSource("csv:btc-1m.csv", window) })
    expect(Either.isRight(attempt("paper", params, strict))).toBe(true)
    backtest(good(), { dataSource: outOfSampleSource("synthetic:42:43200", window) })
    expect(refusal("paper", params, strict).failed.map((c) => c.gate)).toEqual(["backtest.marketData"])
  })

  it("refuses each failed gate by name, with the required and measured values", () => {
    backtest(metrics({ trades: 12, maxDrawdownPct: 12, sharpe: 1.6 }))
    const error = refusal("paper")
    expect(error.failed).toEqual([{ gate: "backtest.minTrades", required: ">= 30", actual: "12", passed: false }])
    expect(error.message).toContain("backtest.minTrades: required >= 30, evidence 12")

    backtest(metrics({ trades: 40, maxDrawdownPct: 25.5, sharpe: 1.6 }))
    expect(failedGates("paper")).toEqual(["backtest.maxDrawdownPct"])

    backtest(metrics({ trades: 40, maxDrawdownPct: 12, sharpe: 0.4 }))
    expect(failedGates("paper")).toEqual(["backtest.minSharpe"])

    backtest(metrics({ trades: 2, maxDrawdownPct: 30, sharpe: null }))
    expect(failedGates("paper")).toEqual(["backtest.minTrades", "backtest.maxDrawdownPct", "backtest.minSharpe"])
    expect(listPromotions(db)).toEqual([])
  })

  it("grants and records the evidence when every gate passes", () => {
    const runId = backtest(good())
    const outcome = attempt("paper")
    expect(Either.isRight(outcome)).toBe(true)
    const promotion = Either.getOrThrow(outcome)
    expect(promotion.stage).toBe("paper")
    expect(promotion.sourceHash).toBe(sourceHashOfFile(source))
    expect(promotion.paramsHash).toBe(paramsHash(params))
    expect(promotion.evidence.runIds).toEqual([runId])
    expect(promotion.evidence.checks.every((c) => c.passed)).toBe(true)
    expect(listPromotions(db, "my-strategy")).toEqual([promotion])
  })

  it("judges the newest backtest: a later, worse run cannot hide behind an earlier, better one", () => {
    backtest(good())
    backtest(metrics({ trades: 40, maxDrawdownPct: 35, sharpe: 1.6 }))
    expect(failedGates("paper")).toEqual(["backtest.maxDrawdownPct"])
  })

  it("does not count a backtest of other code or other params", () => {
    backtest(good(), { params: { ...params, fastPeriod: 6 } })
    expect(failedGates("paper")).toContain("backtest.run")
    backtest(good())
    writeFileSync(source, "export default 2\n")
    expect(failedGates("paper")).toContain("backtest.run")
  })
})

describe("promotion to live needs a paper promotion and paper evidence recorded after it", () => {
  beforeEach(() => {
    replays.clear()
    backtest(good())
    Either.getOrThrow(attempt("paper"))
  })

  it("refuses without paper runs", () => {
    expect(failedGates("live")).toEqual(["paper.minDays", "paper.maxFillMismatches", "paper.maxTrackingErrorPct"])
  })

  it("refuses too few paper days, fills that differ from their replay, and too large a tracking error", () => {
    paperRun(3)
    expect(refusal("live").failed).toEqual([{ gate: "paper.minDays", required: ">= 7", actual: "3", passed: false }])
    paperRun(5, { mismatches: 2 })
    expect(refusal("live").failed).toEqual([{ gate: "paper.maxFillMismatches", required: "<= 0", actual: "2", passed: false }])
    const refused = refusal("live")
    expect(refused.parity.map((p) => p.fillMismatches)).toEqual([0, 2])
    expect(refused.message).toMatch(/run \d+ \(completed\): 2 of 4 paper fills differ/)
    paperRun(1, { trackingErrorPct: d("2.75") })
    expect(refusal("live").failed.map((c) => [c.gate, c.actual])).toEqual([
      ["paper.maxFillMismatches", "2"],
      ["paper.maxTrackingErrorPct", "2.75"]
    ])
  })

  it("refuses a run without an allocation, naming the fix", () => {
    paperRun(8, { trackingErrorPct: undefined })
    const refused = refusal("live")
    expect(refused.failed.map((c) => c.gate)).toEqual(["paper.maxTrackingErrorPct"])
    expect(refused.failed[0]!.actual).toMatch(/none \(run \d+ had no allocation: set strategies\[\]\.allocation\)/)
  })

  it("counts only runs recorded after the paper promotion of these exact hashes", () => {
    paperRun(8, { startedAt: 500 })
    expect(failedGates("live")).toEqual(["paper.minDays", "paper.maxFillMismatches", "paper.maxTrackingErrorPct"])
  })

  it("refuses params that were never promoted to paper, even with paper runs of their own", () => {
    const other = { ...params, quoteQty: "200" }
    paperRun(8, { params: other })
    expect(failedGates("live", other)).toEqual(["paper.promoted", "paper.minDays", "paper.maxFillMismatches", "paper.maxTrackingErrorPct"])
  })

  it("grants live on enough matching paper trading and keeps the replays; the daemon then sees it as live until code or params change", () => {
    const runs = [paperRun(4, { trackingErrorPct: d("1.2") }), paperRun(3.5, { trackingErrorPct: d("0.4") })]
    const promotion = Either.getOrThrow(attempt("live"))
    expect(promotion.evidence.runIds).toEqual([...runs].reverse())
    expect(promotion.evidence.checks.find((c) => c.gate === "paper.minDays")!.actual).toBe("7.5")
    expect(promotion.evidence.checks.find((c) => c.gate === "paper.maxTrackingErrorPct")!.actual).toBe("1.2")
    expect(promotion.evidence.parity!.map((p) => [p.runId, p.fillMismatches, p.trackingErrorPct])).toEqual([
      [runs[0], 0, "1.2"],
      [runs[1], 0, "0.4"]
    ])

    const live = liveStatus(db, "my-strategy", source, params)
    expect(live.live).toBe(true)

    // Same params written differently are the same params.
    expect(liveStatus(db, "my-strategy", source, parse('{"slowPeriod": 20.0, "quoteQty": "100", "fastPeriod": 5}')).live).toBe(true)

    const changedParams = liveStatus(db, "my-strategy", source, { ...params, slowPeriod: 30 })
    expect(changedParams).toMatchObject({ live: false, reason: "params-changed" })

    writeFileSync(source, "export default 1 // tweaked\n")
    const changedSource = liveStatus(db, "my-strategy", source, params)
    expect(changedSource).toMatchObject({ live: false, reason: "source-changed" })
    expect(!changedSource.live && changedSource.message).toMatch(/my-strategy is demoted: .*my-strategy\.ts changed since its live promotion/)
    // The changed file has no evidence of its own: promoting it again is refused at every stage.
    expect(failedGates("live")).toEqual(["paper.promoted", "paper.minDays", "paper.maxFillMismatches", "paper.maxTrackingErrorPct"])
    expect(failedGates("paper")).toContain("backtest.run")

    expect(liveStatus(db, "other-strategy", source, params)).toMatchObject({ live: false, reason: "never-promoted" })
  })
})

describe("gates and hashes", () => {
  it("defaults every gate and names a bad one", () => {
    expect(defaultGates).toEqual({
      backtest: { minTrades: 30, maxDrawdownPct: 20, minSharpe: 1, minDays: 30, allowSynthetic: false, outOfSample: false },
      paper: { minDays: 7, maxTrackingErrorPct: 2, maxFillMismatches: 0, latencyToleranceMs: 1000 }
    })
    expect(Either.getOrThrow(decodeGates({ backtest: { minTrades: 5 } })).backtest).toEqual({ minTrades: 5, maxDrawdownPct: 20, minSharpe: 1, minDays: 30, allowSynthetic: false, outOfSample: false })
    const bad = decodeGates({ backtest: { minTrades: -1 }, paper: { minDayz: 3 } })
    expect(Either.isLeft(bad) && bad.left).toMatch(/minTrades[\s\S]*whole number of trades[\s\S]*minDayz/)
  })

  it("hashes params canonically: key order and number spelling do not matter, values do", () => {
    expect(canonicalParams(parse('{"b": [1.50, 2e1], "a": {"y": "x", "x": 0.10}}'))).toBe('{"a":{"x":0.1,"y":"x"},"b":[1.5,20]}')
    expect(paramsHash({ a: 1, b: "2" })).toBe(paramsHash(parse('{"b":"2","a":1.0}')))
    expect(paramsHash({ a: 1, b: "2" })).not.toBe(paramsHash({ a: 1, b: 2 }))
  })

  it("records runs with their exact amounts", () => {
    backtest(good())
    const [run] = listRuns(db, "my-strategy")
    expect(run!.metrics).toEqual(good())
    expect(run!.params).toBe('{"fastPeriod":5,"quoteQty":"100","slowPeriod":20}')
  })
})
