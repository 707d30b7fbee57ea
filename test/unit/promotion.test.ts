import type BetterSqlite3 from "better-sqlite3"
import { Either } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import type { Metrics } from "../../src/backtest/Metrics.js"
import { Decimal } from "../../src/domain/Decimal.js"
import { parse } from "../../src/domain/Json.js"
import { decodeGates, defaultGates, type PromotionGates } from "../../src/promotion/Gates.js"
import { canonicalParams, paramsHash, sourceHashOfFile } from "../../src/promotion/Hash.js"
import { identityOf, liveStatus, promote, type PromotionRefused } from "../../src/promotion/Promotion.js"
import { listPromotions, listRuns, recordRun, type RunKind } from "../../src/promotion/Records.js"
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
  decodeGates({ backtest: { minTrades: 30, maxDrawdownPct: 20, minSharpe: 1 }, paper: { minDays: 7, maxTrackingErrorPct: 2 } })
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

const record = (kind: RunKind, m: Metrics, extra: { trackingErrorPct?: Decimal; params?: unknown } = {}): number => {
  const p = extra.params ?? params
  return recordRun(db, {
    ...identityOf("my-strategy", source, p),
    kind,
    params: canonicalParams(p),
    symbol: "BTCUSDT",
    dataSource: kind === "backtest" ? "synthetic:42:43200" : "venue:http://127.0.0.1",
    metrics: m,
    ...(extra.trackingErrorPct === undefined ? {} : { trackingErrorPct: extra.trackingErrorPct }),
    recordedAtMs: 1
  })
}

const attempt = (to: "paper" | "live", p: unknown = params) =>
  promote(db, { strategy: "my-strategy", sourcePath: source, params: p, to, gates, nowMs: 1_000 })

const refusal = (to: "paper" | "live", p: unknown = params): PromotionRefused => {
  const outcome = attempt(to, p)
  if (Either.isRight(outcome)) throw new Error(`expected a refusal, got promotion ${outcome.right.promotionId}`)
  return outcome.left
}

const failedGates = (to: "paper" | "live", p: unknown = params) => refusal(to, p).failed.map((c) => c.gate)

const good = () => metrics({ trades: 40, maxDrawdownPct: 12, sharpe: 1.6 })

describe("promotion to paper checks the newest backtest of the exact source and params", () => {
  it("refuses without any backtest, listing every gate", () => {
    expect(failedGates("paper")).toEqual(["backtest.run", "backtest.minTrades", "backtest.maxDrawdownPct", "backtest.minSharpe"])
  })

  it("refuses each failed gate by name, with the required and measured values", () => {
    record("backtest", metrics({ trades: 12, maxDrawdownPct: 12, sharpe: 1.6 }))
    const error = refusal("paper")
    expect(error.failed).toEqual([{ gate: "backtest.minTrades", required: ">= 30", actual: "12", passed: false }])
    expect(error.message).toContain("backtest.minTrades: required >= 30, evidence 12")

    record("backtest", metrics({ trades: 40, maxDrawdownPct: 25.5, sharpe: 1.6 }))
    expect(failedGates("paper")).toEqual(["backtest.maxDrawdownPct"])

    record("backtest", metrics({ trades: 40, maxDrawdownPct: 12, sharpe: 0.4 }))
    expect(failedGates("paper")).toEqual(["backtest.minSharpe"])

    record("backtest", metrics({ trades: 2, maxDrawdownPct: 30, sharpe: null }))
    expect(failedGates("paper")).toEqual(["backtest.minTrades", "backtest.maxDrawdownPct", "backtest.minSharpe"])
    expect(listPromotions(db)).toEqual([])
  })

  it("grants and records the evidence when every gate passes", () => {
    const runId = record("backtest", good())
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
    record("backtest", good())
    record("backtest", metrics({ trades: 40, maxDrawdownPct: 35, sharpe: 1.6 }))
    expect(failedGates("paper")).toEqual(["backtest.maxDrawdownPct"])
  })

  it("does not count a backtest of other code or other params", () => {
    record("backtest", good(), { params: { ...params, fastPeriod: 6 } })
    expect(failedGates("paper")).toContain("backtest.run")
    record("backtest", good())
    writeFileSync(source, "export default 2\n")
    expect(failedGates("paper")).toContain("backtest.run")
  })
})

describe("promotion to live needs a paper promotion and paper evidence", () => {
  beforeEach(() => {
    record("backtest", good())
    Either.getOrThrow(attempt("paper"))
  })

  it("refuses without paper runs", () => {
    expect(failedGates("live")).toEqual(["paper.minDays", "paper.maxTrackingErrorPct"])
  })

  it("refuses too few paper days and too large a tracking error", () => {
    record("paper", metrics({ trades: 5, maxDrawdownPct: 1, sharpe: 1, days: 3 }), { trackingErrorPct: d("0.5") })
    expect(refusal("live").failed).toEqual([{ gate: "paper.minDays", required: ">= 7", actual: "3", passed: false }])
    record("paper", metrics({ trades: 5, maxDrawdownPct: 1, sharpe: 1, days: 5 }), { trackingErrorPct: d("2.75") })
    expect(refusal("live").failed).toEqual([{ gate: "paper.maxTrackingErrorPct", required: "<= 2", actual: "2.75", passed: false }])
  })

  it("refuses a paper run that did not measure its tracking error", () => {
    record("paper", metrics({ trades: 5, maxDrawdownPct: 1, sharpe: 1, days: 8 }))
    expect(failedGates("live")).toEqual(["paper.maxTrackingErrorPct"])
  })

  it("refuses params that were never promoted to paper, even with paper runs of their own", () => {
    const other = { ...params, quoteQty: "200" }
    record("paper", metrics({ trades: 5, maxDrawdownPct: 1, sharpe: 1, days: 8 }), { trackingErrorPct: d("1"), params: other })
    expect(failedGates("live", other)).toEqual(["paper.promoted"])
  })

  it("grants live on enough close-tracking paper trading; the daemon then sees it as live until code or params change", () => {
    const runs = [
      record("paper", metrics({ trades: 5, maxDrawdownPct: 1, sharpe: 1, days: 4 }), { trackingErrorPct: d("1.2") }),
      record("paper", metrics({ trades: 5, maxDrawdownPct: 1, sharpe: 1, days: 3.5 }), { trackingErrorPct: d("0.4") })
    ]
    const promotion = Either.getOrThrow(attempt("live"))
    expect(promotion.evidence.runIds).toEqual([...runs].reverse())
    expect(promotion.evidence.checks.find((c) => c.gate === "paper.minDays")!.actual).toBe("7.5")

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
    expect(failedGates("live")).toEqual(["paper.promoted", "paper.minDays", "paper.maxTrackingErrorPct"])
    expect(failedGates("paper")).toContain("backtest.run")

    expect(liveStatus(db, "other-strategy", source, params)).toMatchObject({ live: false, reason: "never-promoted" })
  })
})

describe("gates and hashes", () => {
  it("defaults every gate and names a bad one", () => {
    expect(defaultGates).toEqual({ backtest: { minTrades: 30, maxDrawdownPct: 20, minSharpe: 1 }, paper: { minDays: 7, maxTrackingErrorPct: 2 } })
    expect(Either.getOrThrow(decodeGates({ backtest: { minTrades: 5 } })).backtest).toEqual({ minTrades: 5, maxDrawdownPct: 20, minSharpe: 1 })
    const bad = decodeGates({ backtest: { minTrades: -1 }, paper: { minDayz: 3 } })
    expect(Either.isLeft(bad) && bad.left).toMatch(/minTrades[\s\S]*whole number of trades[\s\S]*minDayz/)
  })

  it("hashes params canonically: key order and number spelling do not matter, values do", () => {
    expect(canonicalParams(parse('{"b": [1.50, 2e1], "a": {"y": "x", "x": 0.10}}'))).toBe('{"a":{"x":0.1,"y":"x"},"b":[1.5,20]}')
    expect(paramsHash({ a: 1, b: "2" })).toBe(paramsHash(parse('{"b":"2","a":1.0}')))
    expect(paramsHash({ a: 1, b: "2" })).not.toBe(paramsHash({ a: 1, b: 2 }))
  })

  it("records runs with their exact amounts", () => {
    record("backtest", good())
    const [run] = listRuns(db, "my-strategy")
    expect(run!.metrics).toEqual(good())
    expect(run!.params).toBe('{"fastPeriod":5,"quoteQty":"100","slowPeriod":20}')
  })
})
