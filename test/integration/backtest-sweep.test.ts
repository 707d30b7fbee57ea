import { Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import { type JobSpec, prepare, runPrepared } from "../../src/backtest/Job.js"
import { metricsToJson } from "../../src/backtest/Metrics.js"
import { combinations, type Grid, parseGrid, rank, rankedCsv, runSweep, type SweepResult } from "../../src/backtest/Sweep.js"
import { parse } from "../../src/domain/Json.js"

const spec: JobSpec = {
  strategy: "sma-crossover",
  data: { kind: "synthetic", seed: 11, candles: 1500 },
  symbol: "BTCUSDT",
  balances: { USDT: "10000" },
  settleDelayMs: 50,
  cwd: process.cwd()
}

const grid: Grid = Either.getOrThrow(
  parseGrid(JSON.stringify({ params: { fastPeriod: [3, 5, 8], slowPeriod: [13, 21], entry: "market", quoteQty: ["500", "1000"] }, rankBy: "pnl" }))
)

describe("sweep grids", () => {
  it("expands a grid in a fixed order, names sorted and the last varying fastest", () => {
    expect(combinations(grid)).toHaveLength(12)
    expect(combinations(grid).slice(0, 3)).toEqual([
      { entry: "market", fastPeriod: 3, quoteQty: "500", slowPeriod: 13 },
      { entry: "market", fastPeriod: 3, quoteQty: "500", slowPeriod: 21 },
      { entry: "market", fastPeriod: 3, quoteQty: "1000", slowPeriod: 13 }
    ].map((c) => Object.fromEntries(Object.entries(c).map(([k, v]) => [k, typeof v === "number" ? expect.objectContaining({ value: String(v) }) : v]))))
  })

  it("refuses a grid without params, with an unknown rank metric, or with an empty list", () => {
    expect(Either.isLeft(parseGrid(`{"fastPeriod": [1, 2]}`))).toBe(true)
    const badRank = parseGrid(`{"params": {"a": [1]}, "rankBy": "luck"}`)
    expect(Either.isLeft(badRank) && badRank.left.message).toMatch(/"rankBy" must be one of sharpe/)
    const empty = parseGrid(`{"params": {"a": []}}`)
    expect(Either.isLeft(empty) && empty.left.message).toMatch(/params.a is an empty list/)
  })

  it("ranks best first, missing values last, ties by combination order", () => {
    const r = (index: number, sharpe: number | null, maxDrawdownPct = 1): SweepResult => ({ index, params: "{}", metrics: { sharpe, maxDrawdownPct } })
    const results = [r(0, 1), r(1, null), r(2, 3), r(3, 1), { index: 4, params: "{}", error: "boom" }]
    expect(rank(results, "sharpe").map((x) => x.index)).toEqual([2, 0, 3, 1, 4])
    expect(rank([r(0, 1, 5), r(1, 1, 2)], "maxDrawdownPct").map((x) => x.index)).toEqual([1, 0])
  })
})

describe("sweeps across worker threads", () => {
  it("give the same ranked table on one thread and on three, equal to single in-process runs", async () => {
    const progress: Array<number> = []
    const one = await runSweep(spec, grid, { threads: 1, onProgress: (done) => progress.push(done) })
    const three = await runSweep(spec, grid, { threads: 3 })
    expect(progress).toEqual(Array.from({ length: 12 }, (_, i) => i + 1))
    expect(three).toEqual(one)
    expect(rankedCsv(rank(three, "pnl"))).toBe(rankedCsv(rank(one, "pnl")))
    expect(one.every((result) => result.error === undefined && result.metrics !== undefined)).toBe(true)

    // The workers run exactly what a single backtest runs.
    const job = await Effect.runPromise(prepare(spec))
    const fifth = Either.getOrThrow(runPrepared(job, parse(one[5]!.params)))
    expect(one[5]!.metrics).toEqual(metricsToJson(fifth.metrics))
  })

  it("reports invalid params of one combination as that combination's error", async () => {
    const bad: Grid = { params: { fastPeriod: [5, 30], slowPeriod: 20, entry: "market", quoteQty: "100" }, rankBy: "sharpe" }
    const results = await runSweep(spec, bad, { threads: 2 })
    expect(results[0]!.error).toBeUndefined()
    expect(results[1]!.error).toMatch(/--params.slowPeriod: 20 must be more than fastPeriod \(30\)/)
    expect(rankedCsv(rank(results, "sharpe")).split("\n")[2]).toMatch(/^2,1,/)
  })

  it("fails as a whole when the job itself is invalid", async () => {
    await expect(runSweep({ ...spec, strategy: "no-such-strategy" }, grid, { threads: 1 })).rejects.toThrow(/^--strategy: no strategy "no-such-strategy"/)
  })
})
