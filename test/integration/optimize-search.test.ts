/**
 * The search on real backtests of a small synthetic tape: the same ranking whatever runs the
 * trials, halving that drops the weak, constraints, walk-forward folds checked against direct
 * backtests, and trial results stored once by key.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Either } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type JobSpec, prepare, type PreparedJob, runPrepared, SYNTHETIC_START_MS } from "../../src/backtest/Job.js"
import { metricsToJson } from "../../src/backtest/Metrics.js"
import { Decimal } from "../../src/domain/Decimal.js"
import { parse } from "../../src/domain/Json.js"
import { objectiveValue } from "../../src/optimize/Objective.js"
import { ResultsStore } from "../../src/optimize/Results.js"
import { inProcessRunner, recordedRunner, startWorkerRunner } from "../../src/optimize/Runner.js"
import { foldWindows, optimiseWindow, parseWalkForward, rungEnds, walkForward } from "../../src/optimize/Search.js"
import { candidates, parseSpace } from "../../src/optimize/Space.js"
import { type Study, studyOf, trialOf } from "../../src/optimize/Trial.js"

const HOUR = 3_600_000
const spec: JobSpec = {
  strategy: "sma-crossover",
  data: { kind: "synthetic", seed: 7, candles: 1800 },
  symbol: "BTCUSDT",
  balances: { USDT: "10000" },
  settleDelayMs: 50,
  cwd: process.cwd()
}
const base = { entry: "market", quoteQty: "1000" }
const grid = Either.getOrThrow(parseSpace(JSON.stringify({ params: { fastPeriod: [3, 5, 8], slowPeriod: [13, 30] } }), "grid.json"))
const tried = candidates(grid, base, 1)

let job: PreparedJob
let study: Study
let dir: string
beforeAll(async () => {
  job = await Effect.runPromise(prepare(spec))
  study = studyOf(job)
  dir = mkdtempSync(join(tmpdir(), "optimize-search-"))
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A direct backtest of these params on [fromMs, toMs), through the job's own preparation. */
const direct = async (params: string, fromMs: number, toMs: number) => {
  const windowJob = await Effect.runPromise(prepare({ ...spec, fromMs, toMs }))
  return metricsToJson(Either.getOrThrow(runPrepared(windowJob, parse(params))).metrics)
}

describe("the study", () => {
  it("spans the tape and keys trials by what decides their result", () => {
    expect(study).toMatchObject({ strategy: "sma-crossover", fromMs: SYNTHETIC_START_MS, toMs: SYNTHETIC_START_MS + 30 * HOUR, intervalMs: 60_000 })
    const trial = trialOf(study, tried[0]!, study.fromMs, study.toMs)
    expect(trialOf(study, tried[0]!, study.fromMs, study.toMs).key).toBe(trial.key)
    expect(trialOf(study, tried[1]!, study.fromMs, study.toMs).key).not.toBe(trial.key)
    expect(trialOf(study, tried[0]!, study.fromMs, study.toMs - HOUR).key).not.toBe(trial.key)
    expect(trialOf({ ...study, dataHash: "0".repeat(64) }, tried[0]!, study.fromMs, study.toMs).key).not.toBe(trial.key)
    expect(trialOf({ ...study, spec: { ...spec, balances: { USDT: "5000" } } }, tried[0]!, study.fromMs, study.toMs).key).not.toBe(trial.key)
  })
})

describe("the search", () => {
  it("ranks the same on this thread, one worker thread and three", async () => {
    const random = Either.getOrThrow(
      parseSpace(JSON.stringify({ params: { fastPeriod: { min: 2, max: 10, step: 1 }, slowPeriod: { min: 12, max: 40, step: 4 } }, search: "random", samples: 8, halving: { slices: 2, keep: 0.5 } }), "r.json")
    )
    const drawn = candidates(random, base, 99)
    const settings = { objective: "sharpe" as const, constraints: {}, halving: random.halving! }
    const window = { fromMs: study.fromMs, toMs: study.toMs }
    const here = await optimiseWindow(study, inProcessRunner(job), drawn, settings, window)
    for (const threads of [1, 3]) {
      const runner = await startWorkerRunner(spec, threads)
      try {
        expect(await optimiseWindow(study, runner, drawn, settings, window)).toEqual(here)
      } finally {
        await runner.close()
      }
    }
    expect(here.ranked).toHaveLength(8)
  }, 120_000)

  it("a job the worker threads cannot prepare fails their start with the job's own problem", async () => {
    await expect(startWorkerRunner({ ...spec, strategy: "no-such-strategy" }, 2)).rejects.toThrow(/^--strategy: no strategy "no-such-strategy"/)
  }, 60_000)

  it("halving runs everyone on the first slice and only the best share on the longer windows", async () => {
    const halving = { slices: 3, keep: 0.5 }
    const window = { fromMs: study.fromMs, toMs: study.toMs }
    const ends = rungEnds(window, study.intervalMs, halving)
    expect(ends).toEqual([study.fromMs + 10 * HOUR, study.fromMs + 20 * HOUR, study.toMs])
    const store = ResultsStore.open(join(dir, "halving.db"))
    try {
      const runId = store.startRun({ createdAtMs: 0, strategy: study.strategy, sourceHash: study.sourceHash, data: "synthetic:7:1800", dataHash: study.dataHash, symbol: "BTCUSDT", settings: {} })
      const outcome = await optimiseWindow(study, recordedRunner(inProcessRunner(job), store, runId), tried, { objective: "sharpe", constraints: {}, halving }, window)

      // Each rung's survivors are the best of the one before it, by direct backtests.
      const sharpeOn = async (params: string, toMs: number) => objectiveValue("sharpe", await direct(params, study.fromMs, toMs))?.toNumber() ?? -Infinity
      const best = async (pool: ReadonlyArray<string>, toMs: number, keep: number) => {
        const scored = await Promise.all(pool.map(async (p) => ({ p, v: await sharpeOn(p, toMs) })))
        return scored.sort((a, b) => b.v - a.v || (a.p < b.p ? -1 : 1)).slice(0, keep).map((s) => s.p)
      }
      const second = await best(tried, ends[0]!, 3)
      const third = await best(second, ends[1]!, 2)
      expect(new Set(outcome.ranked.filter((c) => c.rung >= 1).map((c) => c.params))).toEqual(new Set(second))
      expect(new Set(outcome.ranked.filter((c) => c.rung === 2).map((c) => c.params))).toEqual(new Set(third))
      expect(outcome.ranked.slice(0, 2).map((c) => c.rung)).toEqual([2, 2])
      expect(outcome.trials).toBe(6 + 3 + 2)

      // The dropped never ran on the longer windows.
      const rows = store.results(runId)
      expect([ends[0], ends[1], ends[2]].map((end) => rows.filter((r) => r.toMs === end).length)).toEqual([6, 3, 2])
      for (const dropped of outcome.ranked.filter((c) => c.rung === 0)) expect(rows.filter((r) => r.params === dropped.params)).toHaveLength(1)
    } finally {
      store.close()
    }
  }, 120_000)

  it("constraints put the candidates that break them after those that meet them, saying what they broke", async () => {
    const window = { fromMs: study.fromMs, toMs: study.toMs }
    const free = await optimiseWindow(study, inProcessRunner(job), tried, { objective: "profit", constraints: {} }, window)
    const trades = free.ranked.map((c) => c.metrics!.trades as number).sort((a, b) => a - b)
    const minTrades = trades[3]! // the median: some candidates meet it, some do not
    const bound = await optimiseWindow(study, inProcessRunner(job), tried, { objective: "profit", constraints: { minTrades } }, window)
    const meets = bound.ranked.filter((c) => c.feasible)
    expect(meets.length).toBeGreaterThan(0)
    expect(meets.length).toBeLessThan(tried.length)
    expect(bound.ranked.slice(0, meets.length)).toEqual(meets)
    for (const c of bound.ranked.slice(meets.length)) expect(c.violations).toEqual([`trades ${c.metrics!.trades} < minTrades ${minTrades}`])
    for (const c of meets) expect(c.metrics!.trades as number).toBeGreaterThanOrEqual(minTrades)
    // Among those meeting it, best profit first.
    const profits = meets.map((c) => new Decimal(c.objective!))
    for (let i = 1; i < profits.length; i++) expect(profits[i - 1]!.gte(profits[i]!)).toBe(true)
  }, 120_000)
})

describe("walk-forward", () => {
  it("folds train 12 h and test the 6 h after, moving by 6 h; each winner is the training window's best, scored out of sample as a direct backtest", async () => {
    const wf = Either.getOrThrow(parseWalkForward("12h:6h"))
    const folds = Either.getOrThrow(foldWindows({ fromMs: study.fromMs, toMs: study.toMs }, wf))
    const S = SYNTHETIC_START_MS
    expect(folds).toEqual([
      { train: { fromMs: S, toMs: S + 12 * HOUR }, test: { fromMs: S + 12 * HOUR, toMs: S + 18 * HOUR } },
      { train: { fromMs: S + 6 * HOUR, toMs: S + 18 * HOUR }, test: { fromMs: S + 18 * HOUR, toMs: S + 24 * HOUR } },
      { train: { fromMs: S + 12 * HOUR, toMs: S + 24 * HOUR }, test: { fromMs: S + 24 * HOUR, toMs: S + 30 * HOUR } }
    ])
    const outcome = await walkForward(study, inProcessRunner(job), tried, { objective: "sharpe", constraints: {} }, folds)
    expect(outcome.folds).toHaveLength(3)
    for (const [i, fold] of outcome.folds.entries()) {
      expect({ train: fold.train, test: fold.test }).toEqual(folds[i])
      const inSample = await Promise.all(tried.map(async (p) => objectiveValue("sharpe", await direct(p, fold.train.fromMs, fold.train.toMs))?.toNumber() ?? -Infinity))
      expect(objectiveValue("sharpe", await direct(fold.params, fold.train.fromMs, fold.train.toMs))!.toNumber()).toBe(Math.max(...inSample))
      const outOfSample = await direct(fold.params, fold.test.fromMs, fold.test.toMs)
      expect(fold.outOfSample.metrics).toEqual(outOfSample)
      expect(fold.outOfSample.objective).toBe(objectiveValue("sharpe", outOfSample)?.toFixed() ?? null)
      const is = fold.inSample.perWindow === null ? undefined : new Decimal(fold.inSample.perWindow)
      const oos = fold.outOfSample.perWindow === null ? undefined : new Decimal(fold.outOfSample.perWindow)
      expect(fold.overfit).toBe(is !== undefined && is.gt(0) && (oos === undefined || oos.lt(is.div(2))))
    }
    expect(outcome.latest.window).toEqual(folds[2]!.train)
    expect(outcome.trials).toBe(3 * (tried.length + 1))
  }, 180_000)

  it("refuses a malformed TRAIN:TEST and data too short for one fold", () => {
    expect(Either.getOrThrow(parseWalkForward("2w:3d"))).toMatchObject({ trainMs: 14 * 24 * HOUR, testMs: 3 * 24 * HOUR })
    for (const bad of ["90d", "90d:0d", "90x:30d", "1.5d:1d"]) {
      const parsed = parseWalkForward(bad)
      expect(Either.isLeft(parsed) && parsed.left.message).toBe(`--walk-forward must be TRAIN:TEST, each a positive whole number with unit h, d or w, e.g. 90d:30d or 36h:12h; got "${bad}"`)
    }
    const tooLong = foldWindows({ fromMs: 0, toMs: 30 * HOUR }, Either.getOrThrow(parseWalkForward("1d:7h")))
    expect(Either.isLeft(tooLong) && tooLong.left.message).toBe("--walk-forward 1d:7h needs data spanning at least TRAIN + TEST, but the data spans 30.0 h; use shorter windows or more data")
  })
})

describe("stored results", () => {
  it("are written once per trial key: a trial run again, or twice in a batch, leaves one row", async () => {
    const path = join(dir, "once.db")
    const store = ResultsStore.open(path)
    const runId = store.startRun({ createdAtMs: 1, strategy: study.strategy, sourceHash: study.sourceHash, data: "synthetic:7:1800", dataHash: study.dataHash, symbol: "BTCUSDT", settings: { seed: 1 } })
    const trial = trialOf(study, tried[0]!, study.fromMs, study.fromMs + 6 * HOUR)
    const runner = recordedRunner(inProcessRunner(job), store, runId)
    const [first] = await runner.run([trial, trial])
    const [again] = await runner.run([trial])
    expect(again).toEqual(first)
    // A result written under a key already stored does not replace the first.
    store.record(runId, [trial], [{ key: trial.key, error: "a second answer" }])
    store.close()

    const reopened = ResultsStore.open(path)
    try {
      const rows = reopened.results(runId)
      expect(rows).toHaveLength(1)
      expect(rows[0]).toEqual({ key: trial.key, params: trial.params, fromMs: trial.fromMs, toMs: trial.toMs, metrics: first!.metrics })
      expect(reopened.result(runId, trial.key)).toEqual(first)
      expect(reopened.run(runId)).toMatchObject({ runId, settings: { seed: 1 }, outcome: undefined })
    } finally {
      reopened.close()
    }
  })
})
