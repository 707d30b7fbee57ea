/**
 * `svcbot optimize` end to end through the built entry (bin/svcbot.js): a run ranked the same
 * on worker threads and on the main thread, walk-forward folds, `--show` with its HTML page, a
 * winner written into a config that `svcbot backtest` then runs to the same figures, and a
 * space file refused with its problems.
 */
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SYNTHETIC_START_MS } from "../../src/backtest/Job.js"
import { killAll, svcbot } from "../support/daemon.js"

const HOUR = 3_600_000

let dir: string
let space: string
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "optimize-cli-"))
  space = join(dir, "space.json")
  writeFileSync(
    space,
    JSON.stringify({ params: { fastPeriod: { min: 3, max: 9, step: 3 }, slowPeriod: [13, 30], entry: "market" }, rankBy: "profit", halving: { slices: 2, keep: 0.5 } })
  )
})
afterAll(async () => {
  await killAll()
  rmSync(dir, { recursive: true, force: true })
})

const run = async (args: ReadonlyArray<string>) => {
  const child = svcbot(args)
  const code = await child.exit
  return { code, stdout: child.lines, stderr: child.stderr.join("") }
}

const json = (stdout: ReadonlyArray<string>): Record<string, any> => JSON.parse(stdout.find((line) => line.startsWith("{"))!)

const common = ["--strategy", "sma-crossover", "--synthetic", "7:1800", "--params", '{"quoteQty": "1000"}']

describe("svcbot optimize", () => {
  it("ranks every candidate with its params and metrics, the same on two worker threads as on the main thread", async () => {
    const db = join(dir, "runs.db")
    const threaded = await run(["optimize", ...common, "--space", space, "--threads", "2", "--db", db, "--json"])
    expect(threaded.stderr).not.toMatch(/svcbot:/)
    expect(threaded.code).toBe(0)
    const here = await run(["optimize", ...common, "--space", space, "--threads", "0", "--db", db, "--json"])
    expect(here.code).toBe(0)
    const a = json(threaded.stdout)
    const b = json(here.stdout)
    expect([a.runId, b.runId]).toEqual([1, 2])
    expect(b.ranked).toEqual(a.ranked)
    expect(a).toMatchObject({ strategy: "sma-crossover", symbol: "BTCUSDT", objective: "profit", candidates: 6, trials: 6 + 3 })
    expect(a.ranked).toHaveLength(6)
    expect(a.ranked[0]).toMatchObject({ rank: 1, rung: 1, params: { entry: "market", quoteQty: "1000" }, feasible: true })
    expect(a.ranked[0].objective).toBe(a.ranked[0].metrics.pnl)
    expect(Object.keys(a.ranked[0].params).sort()).toEqual(["entry", "fastPeriod", "quoteQty", "slowPeriod"])

    const shown = await run(["optimize", "--show", "1", "--db", db, "--html", join(dir, "run1.html")])
    expect(shown.code).toBe(0)
    expect(shown.stdout[0]).toBe("sma-crossover on BTCUSDT, synthetic:7:1800 2024-01-01 00:00 .. 2024-01-02 06:00 (optimisation run #1)")
    expect(shown.stdout[1]).toBe("6 candidates, 9 trials, grid search, halving over 2 slices keeping 0.5, ranked by profit")
    expect(shown.stdout[2]).toMatch(/^rank +profit +trades +maxDD% +return% +window +note +params$/)
    expect(shown.stdout.slice(3, 9).map((line) => line.split(/\s+/)[0])).toEqual(["1", "2", "3", "4", "5", "6"])
    expect(shown.stdout.at(-1)).toBe(`page: ${join(dir, "run1.html")}`)
    const page = readFileSync(join(dir, "run1.html"), "utf8")
    expect(page).toContain("Content-Security-Policy")
    expect(page).not.toMatch(/<script|src=|href=/)
    expect(page).toContain("profit over fastPeriod (across) and slowPeriod (up)")
    expect(page.match(/<rect [^>]*><title>fastPeriod \d, slowPeriod \d+: profit /g)).toHaveLength(6)

    const missing = await run(["optimize", "--show", "9", "--db", db])
    expect(missing.code).toBe(2)
    expect(missing.stderr.trim()).toBe(`svcbot: no optimisation run #9 in ${db}; its runs: 2, 1 (give the results database with --db)`)
  }, 240_000)

  it("walk-forward prints each fold's windows, winner and figures in and out of sample", async () => {
    const db = join(dir, "walk.db")
    const walked = await run(["optimize", ...common, "--space", space, "--walk-forward", "12h:6h", "--threads", "2", "--db", db, "--json"])
    expect(walked.code).toBe(0)
    const outcome = json(walked.stdout)
    expect(outcome.walkForward).toBe("12h:6h")
    expect(outcome.folds.map((f: any) => [f.train, f.test])).toEqual(
      [0, 6, 12].map((h) => [
        { fromMs: SYNTHETIC_START_MS + h * HOUR, toMs: SYNTHETIC_START_MS + (h + 12) * HOUR },
        { fromMs: SYNTHETIC_START_MS + (h + 12) * HOUR, toMs: SYNTHETIC_START_MS + (h + 18) * HOUR }
      ])
    )
    for (const fold of outcome.folds) {
      expect(fold.params).toMatchObject({ entry: "market", quoteQty: "1000" })
      expect(fold.inSample.objective).toBe(fold.inSample.metrics.pnl)
      expect(fold.outOfSample.objective).toBe(fold.outOfSample.metrics.pnl)
      expect(fold.outOfSample.metrics).toMatchObject({ fromMs: fold.test.fromMs, toMs: fold.test.toMs })
      expect(typeof fold.overfit).toBe("boolean")
    }
    expect(outcome.overfitFolds).toBe(outcome.folds.filter((f: any) => f.overfit).length)

    const text = await run(["optimize", "--show", String(outcome.runId), "--db", db])
    expect(text.code).toBe(0)
    expect(text.stdout[2]).toBe(`walk-forward 12h:6h: 3 folds, ${outcome.overfitFolds} flagged as overfit (out-of-sample profit per day below 50 % of in-sample)`)
    expect(text.stdout[4]).toMatch(/^1 +2024-01-01 00:00 \.\. 2024-01-01 12:00 +2024-01-01 12:00 \.\. 2024-01-01 18:00 /)
    expect(existsSync(join(dir, `optimize-run-${outcome.runId}.html`))).toBe(true)
    expect(readFileSync(join(dir, `optimize-run-${outcome.runId}.html`), "utf8")).toContain("Walk-forward 12h:6h")
  }, 240_000)

  it("writes the winner into the config as a new instance that svcbot backtest runs to the same figures", async () => {
    const config = join(dir, "config.json")
    copyFileSync("config/default.json", config)
    const before = readFileSync(config, "utf8")
    const db = join(dir, "deploy.db")
    const optimised = await run(["optimize", "--config", config, "--instance", "btc-sma", "--synthetic", "7:1800", "--space", space, "--threads", "0", "--db", db, "--write-instance", "btc-sma-opt", "--json"])
    expect(optimised.code).toBe(0)
    const best = json(optimised.stdout).ranked[0]
    expect(optimised.stderr).toContain("wrote instance btc-sma-opt (disabled) into")
    const after = readFileSync(config, "utf8")
    expect(after.length).toBeGreaterThan(before.length)
    expect(after.replace(/,\n {4}\{"id":"btc-sma-opt"[^\n]*/, "")).toBe(before)

    const backtest = await run(["backtest", "--config", config, "--instance", "btc-sma-opt", "--synthetic", "7:1800", "--json", "--db", join(dir, "evidence.db")])
    expect(backtest.code).toBe(0)
    const metrics = json(backtest.stdout).metrics
    expect({ pnl: metrics.pnl, trades: metrics.trades, fills: metrics.fills }).toEqual({ pnl: best.metrics.pnl, trades: best.metrics.trades, fills: best.metrics.fills })

    // The id is now taken: refused before anything runs, and the file stays as it is.
    const again = await run(["optimize", "--config", config, "--instance", "btc-sma", "--synthetic", "7:1800", "--space", space, "--db", db, "--write-instance", "btc-sma-opt"])
    expect(again.code).toBe(2)
    expect(again.stderr.trim()).toBe(`svcbot: ${config} already has a strategy instance "btc-sma-opt"; choose a new id for --write-instance`)
    expect(readFileSync(config, "utf8")).toBe(after)
  }, 240_000)

  it("records the walk-forward winner's out-of-sample figures as evidence, which the outOfSample gate accepts and a later whole-data backtest does not", async () => {
    const config = join(dir, "oos-config.json")
    const raw = JSON.parse(readFileSync("config/default.json", "utf8")) as { strategies: Array<Record<string, unknown>> }
    const gates = { backtest: { outOfSample: true, allowSynthetic: true, minTrades: 0, minSharpe: -1000, minDays: 0, maxDrawdownPct: 100 } }
    raw.strategies = raw.strategies.map((s) => (s.id === "btc-sma" ? { ...s, promotion: gates } : s))
    writeFileSync(config, JSON.stringify(raw, null, 2))
    const evidence = join(dir, "oos-evidence.db")
    const db = join(dir, "oos.db")

    const refused = await run(["optimize", "--config", config, "--instance", "btc-sma", "--synthetic", "7:1800", "--space", space, "--db", db, "--evidence", evidence])
    expect(refused.code).toBe(2)
    expect(refused.stderr.trim()).toBe("svcbot: --evidence records a walk-forward's out-of-sample figures: give --walk-forward TRAIN:TEST too")

    const walked = await run(["optimize", "--config", config, "--instance", "btc-sma", "--synthetic", "7:1800", "--space", space, "--walk-forward", "12h:6h", "--threads", "0", "--db", db, "--evidence", evidence, "--write-instance", "btc-sma-oos", "--json"])
    expect(walked.code).toBe(0)
    const last = json(walked.stdout).folds.at(-1)
    expect(walked.stderr).toMatch(/recorded fold 3's out-of-sample figures for .* as backtest run #1 in /)

    const promoted = await run(["promote", "btc-sma-oos", "--to", "paper", "--config", config, "--db", evidence, "--json"])
    expect(promoted.code).toBe(0)
    const record = json(promoted.stdout)
    const oosCheck = record.evidence.checks.find((c: any) => c.gate === "backtest.outOfSample")
    expect(oosCheck).toMatchObject({ passed: true, actual: `out-of-sample:synthetic:7:1800@${new Date(last.test.fromMs).toISOString()}/${new Date(last.test.toMs).toISOString()}` })
    // The figures judged are the test window's, not the whole data's.
    expect(record.evidence.checks.find((c: any) => c.gate === "backtest.minTrades").actual).toBe(String(last.outOfSample.metrics.trades))

    // A newer backtest on all the data (the params' own training data included) is not out-of-sample evidence.
    expect((await run(["backtest", "--config", config, "--instance", "btc-sma-oos", "--synthetic", "7:1800", "--db", evidence])).code).toBe(0)
    const later = await run(["promote", "btc-sma-oos", "--to", "paper", "--config", config, "--db", evidence])
    expect(later.code).toBe(1)
    expect(later.stderr).toContain("backtest.outOfSample: required the out-of-sample window of a walk-forward optimisation (svcbot optimize --walk-forward ... --evidence), evidence synthetic:7:1800")
  }, 240_000)

  it("refuses a space file with every problem, its path and its fix", async () => {
    const bad = join(dir, "bad.json")
    writeFileSync(bad, JSON.stringify({ params: { fastPeriod: { min: 3, max: 9 } }, rankBy: "luck" }))
    const refused = await run(["optimize", ...common, "--space", bad, "--db", join(dir, "bad.db")])
    expect(refused.code).toBe(2)
    expect(refused.stderr.trim()).toBe(
      [
        `svcbot: the search space ${bad} is invalid:`,
        `svcbot:   - params.fastPeriod: a range needs exactly min, max and step (missing step); write e.g. {"min": 5, "max": 20, "step": 5}`,
        `svcbot:   - rankBy: "luck" is not an objective; use one of sharpe, sortino, calmar, profit`
      ].join("\n")
    )
  }, 60_000)
})
