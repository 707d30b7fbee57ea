import { Command } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { Console, Effect, Exit } from "effect"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { backtestCommand, promoteCommand, promotionsCommand } from "../../src/cli/backtest.js"
import { parseTime } from "../../src/cli/Times.js"
import { CliError } from "../../src/cli/errors.js"
import * as Logger from "../../src/log/Logger.js"
import { listRuns } from "../../src/promotion/Records.js"
import { openDatabase } from "../../src/store/Database.js"

const root = Command.make("svcbot").pipe(Command.withSubcommands([backtestCommand, promoteCommand, promotionsCommand]))
const cli = Command.run(root, { name: "svcbot", version: "test" })

interface CliRun {
  readonly stdout: string
  readonly events: ReadonlyArray<Record<string, unknown>>
  readonly error?: CliError
}

/** Runs svcbot in-process with its console and log lines captured. */
const svcbot = async (...args: ReadonlyArray<string>): Promise<CliRun> => {
  const out: Array<string> = []
  const events: Array<Record<string, unknown>> = []
  const stream = { write: (line: string) => void events.push(JSON.parse(line) as Record<string, unknown>) }
  const exit = await Effect.runPromiseExit(
    Console.consoleWith((console) =>
      cli(["node", "svcbot", ...args]).pipe(
        Effect.withConsole({ ...console, log: (...parts: ReadonlyArray<unknown>) => Effect.sync(() => void out.push(parts.join(" "))) })
      )
    ).pipe(Effect.provide(NodeContext.layer), Effect.provide(Logger.layer({ destination: stream })))
  )
  if (Exit.isSuccess(exit)) return { stdout: out.join("\n"), events }
  const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
  if (failure instanceof CliError) return { stdout: out.join("\n"), events, error: failure }
  throw new Error(`svcbot ${args.join(" ")} failed unexpectedly: ${String(exit.cause)}`)
}

let dir: string
let db: string
const params = JSON.stringify({ fastPeriod: 5, slowPeriod: 20, entry: "market", quoteQty: "1000" })

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "svcbot-backtest-cli-"))
  db = join(dir, "svcbot.db")
})

afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("svcbot backtest", () => {
  it("--json prints metrics and every fill with exact amounts, records the run and writes the report", async () => {
    const report = join(dir, "report.html")
    const run = await svcbot("backtest", "--strategy", "sma-crossover", "--params", params, "--synthetic", "9:2000", "--db", db, "--report", report, "--json")
    expect(run.error).toBeUndefined()
    const out = JSON.parse(run.stdout) as {
      runId: number
      sourceHash: string
      metrics: Record<string, unknown>
      fills: Array<Record<string, unknown>>
    }
    expect(out.metrics.candles).toBe(2000)
    expect(out.fills.length).toBe(out.metrics.fills)
    expect(out.fills[0]).toMatchObject({ tag: expect.stringMatching(/^sma-entry-/), side: "buy", liquidity: "taker", feeAsset: "BTC" })
    expect(out.fills[0]!.price).toMatch(/^\d+(\.\d+)?$/)
    const html = readFileSync(report, "utf8")
    expect(html).toContain('<svg id="equity-chart"')
    // The CLI hands the report the strategy's plots and the pair its round-trip table needs.
    const data = JSON.parse(html.slice(html.indexOf('id="report-data">') + 'id="report-data">'.length, html.indexOf("</script>", html.indexOf('id="report-data">')))) as {
      plots: Array<{ name: string }>
      trades: Array<unknown>
    }
    expect(data.plots.map((p) => p.name)).toEqual(["fast SMA", "slow SMA"])
    expect(out.metrics.trades).toBeGreaterThan(0)
    expect(data.trades.length).toBeGreaterThan(0)
    expect(html).toContain('<table id="trades">')

    const handle = openDatabase({ path: db })
    const [recorded] = listRuns(handle, "sma-crossover").filter((r) => r.runId === out.runId)
    handle.close()
    expect(recorded!.sourceHash).toBe(out.sourceHash)
    expect(recorded!.dataSource).toBe("synthetic:9:2000")
    expect(recorded!.metrics.pnl.toFixed()).toBe(out.metrics.pnl)
    // Ratios and percentages at 4 decimals at most; money exact.
    for (const [name, value] of Object.entries(out.metrics)) {
      if (typeof value === "number") expect(String(value), name).toMatch(/^-?\d+(\.\d{1,4})?(e[+-]\d+)?$/)
    }
    expect(String(out.metrics.totalReturnPct)).toMatch(/^-?\d+(\.\d{1,4})?$/)
  })

  it("prints a metrics table and logs backtest.completed without --json", async () => {
    const run = await svcbot("backtest", "--strategy", "sma-crossover", "--params", params, "--synthetic", "9:600", "--db", db)
    expect(run.stdout).toMatch(/Sharpe\s+-?\d/)
    expect(run.stdout).toMatch(/Max drawdown duration/)
    expect(run.events.map((e) => e.event)).toContain("backtest.completed")
  })

  it("refuses a CSV with problems, naming each row, before anything runs", async () => {
    const csv = join(dir, "bad.csv")
    writeFileSync(csv, ["open_time_ms,open,high,low,close,volume", "1704067200000,100,101,99,100,1", "1704067260000,100,98,99,100,1", "1704067380000,100,101,99,100,1"].join("\n"))
    const run = await svcbot("backtest", "--strategy", "sma-crossover", "--params", params, "--data", csv, "--db", db)
    expect(run.error?.exitCode).toBe(2)
    expect(run.error?.message).toMatch(/row 3: high 98 is below low 99/)
    expect(run.error?.message).toMatch(/row 4: gap: 1 candle\(s\) missing/)
  })

  it("runs a CSV in a --from/--to window", async () => {
    const csv = join(dir, "ok.csv")
    const start = Date.UTC(2024, 0, 1)
    const rows = Array.from({ length: 120 }, (_, i) => `${start + i * 60_000},${60000 + (i % 7)},${60010 + (i % 7)},${59990 + (i % 7)},${60001 + (i % 7)},1.5`)
    writeFileSync(csv, rows.join("\n"))
    const run = await svcbot("backtest", "--strategy", "sma-crossover", "--params", params, "--data", csv, "--from", "2024-01-01T00:30:00Z", "--to", String(start + 90 * 60_000), "--db", db, "--json")
    const out = JSON.parse(run.stdout) as { metrics: { candles: number; fromMs: number } }
    expect(out.metrics.candles).toBe(60)
    expect(out.metrics.fromMs).toBe(start + 30 * 60_000)
  })

  it("names the flag of a bad option", async () => {
    const both = await svcbot("backtest", "--strategy", "sma-crossover", "--params", params, "--synthetic", "1:10", "--data", "x.csv", "--db", db)
    expect(both.error?.message).toMatch(/exactly one of --data FILE.csv or --synthetic/)
    // slowPeriod left out takes its default, 21, which must be more than fastPeriod.
    const badParams = await svcbot("backtest", "--strategy", "sma-crossover", "--params", '{"fastPeriod": 30}', "--synthetic", "1:10", "--db", db)
    expect(badParams.error?.message).toMatch(/--params.slowPeriod: 21 must be more than fastPeriod \(30\)/)
    const badFees = await svcbot("backtest", "--strategy", "sma-crossover", "--params", params, "--synthetic", "1:10", "--fees", "2", "--db", db)
    expect(badFees.error?.message).toMatch(/--fees: "2" is not a fee rate/)
    expect(parseTime("2024-02-30x", "--from")._tag).toBe("Left")
  })

  it("--config FILE --instance NAME runs that instance: its strategy, symbol, params, schedule and allocation", async () => {
    const config = join(dir, "config.json")
    const instance = { id: "eth-trend", strategy: "sma-crossover", symbol: "ETHUSDT", params: JSON.parse(params), allocation: { USDT: "2500" } }
    writeFileSync(config, JSON.stringify({ mode: "paper", strategies: [instance, { ...instance, id: "other" }] }))
    const run = await svcbot("backtest", "--config", config, "--instance", "eth-trend", "--synthetic", "9:600", "--db", db, "--json")
    expect(run.error).toBeUndefined()
    const out = JSON.parse(run.stdout) as { runId: number; metrics: { initialEquity: string } }
    expect(out.metrics.initialEquity).toBe("2500")
    const handle = openDatabase({ path: db })
    const recorded = listRuns(handle, "sma-crossover").find((r) => r.runId === out.runId)
    handle.close()
    expect(recorded!.symbol).toBe("ETHUSDT")

    const unknown = await svcbot("backtest", "--config", config, "--instance", "nope", "--synthetic", "9:600", "--db", db)
    expect(unknown.error?.exitCode).toBe(2)
    expect(unknown.error?.message).toBe(`no strategy instance nope in ${config}; its instances: eth-trend, other`)
    const noInstance = await svcbot("backtest", "--config", config, "--synthetic", "9:600", "--db", db)
    expect(noInstance.error?.message).toMatch(/--config needs --instance NAME/)
    const nothing = await svcbot("backtest", "--synthetic", "9:600", "--db", db)
    expect(nothing.error?.message).toMatch(/give --strategy NAME .* or --config FILE --instance NAME/)
  })

  it("--sweep writes a ranked table and records every combination", async () => {
    const grid = join(dir, "grid.json")
    writeFileSync(grid, JSON.stringify({ params: { fastPeriod: [3, 5], slowPeriod: [13, 21], entry: "market", quoteQty: "1000" }, rankBy: "pnl" }))
    const before = countRuns()
    const run = await svcbot("backtest", "--strategy", "sma-crossover", "--synthetic", "9:800", "--sweep", grid, "--threads", "2", "--db", db)
    expect(run.error).toBeUndefined()
    const table = readFileSync(join(dir, "grid.ranked.csv"), "utf8").trimEnd().split("\n")
    expect(table[0]).toBe("rank,combination,params,sharpe,sortino,totalReturnPct,maxDrawdownPct,trades,winRatePct,profitFactor,feesPaid,pnl,error")
    expect(table).toHaveLength(5)
    const pnls = table.slice(1).map((line) => Number(line.split(",").at(-2)))
    expect([...pnls].sort((a, b) => b - a)).toEqual(pnls)
    expect(run.stdout).toContain("4 combinations ranked by pnl")
    expect(countRuns() - before).toBe(4)
  })
})

describe("svcbot promote and promotions", () => {
  it("refuses with every failed gate, then grants paper once the evidence passes, and lists the record", async () => {
    const config = join(dir, "config.json")
    const instance = { id: "btc-sma", strategy: "sma-crossover", symbol: "BTCUSDT", params: JSON.parse(params) as unknown }
    writeFileSync(config, JSON.stringify({ strategies: [{ ...instance, promotion: { backtest: { minTrades: 100000 } } }] }))
    const refused = await svcbot("promote", "btc-sma", "--to", "paper", "--config", config, "--db", db)
    expect(refused.error?.exitCode).toBe(1)
    expect(refused.error?.message).toMatch(/backtest.minTrades: required >= 100000/)
    expect(refused.events.find((e) => e.event === "promotion.refused")).toBeDefined()

    // Fresh evidence, judged by gates that any run with trades passes (a synthetic tape allowed).
    expect((await svcbot("backtest", "--strategy", "sma-crossover", "--params", params, "--synthetic", "9:2000", "--db", db)).error).toBeUndefined()
    writeFileSync(config, JSON.stringify({ strategies: [{ ...instance, promotion: { backtest: { minTrades: 0, maxDrawdownPct: 100, minSharpe: -1e9, minDays: 0, allowSynthetic: true } } }] }))
    const granted = await svcbot("promote", "btc-sma", "--to", "paper", "--config", config, "--db", db)
    expect(granted.error).toBeUndefined()
    expect(granted.stdout).toMatch(/sma-crossover promoted to paper \(promotion #1\)/)
    expect(granted.events.find((e) => e.event === "promotion.granted")).toMatchObject({ strategy: "sma-crossover", stage: "paper" })

    const live = await svcbot("promote", "sma-crossover", "--to", "live", "--params", params, "--db", db)
    expect(live.error?.message).toMatch(/paper.minDays[\s\S]*paper.maxFillMismatches[\s\S]*paper.maxTrackingErrorPct/)

    const listed = await svcbot("promotions", "--json", "--db", db)
    const records = JSON.parse(listed.stdout) as Array<{ strategy: string; stage: string }>
    expect(records).toEqual([expect.objectContaining({ strategy: "sma-crossover", stage: "paper" })])
    expect((await svcbot("promotions", "--db", db)).stdout).toMatch(/^#1 .* sma-crossover -> paper/)
  })
})

function countRuns(): number {
  if (!existsSync(db)) return 0
  const handle = openDatabase({ path: db })
  const n = listRuns(handle).length
  handle.close()
  return n
}

describe("svcbot backtest --report with a strategy whose plot fails", () => {
  it("ends the run with one line naming the strategy, the plot and the candle, exit 1", async () => {
    const plugin = join(dir, "bad-plot.ts")
    writeFileSync(
      plugin,
      `import { Schema } from "effect"
import { defineStrategy, result } from "${join(process.cwd(), "src/strategy/Strategy.js")}"
export default defineStrategy({
  name: "bad-plot",
  version: "1.0.0",
  params: Schema.Struct({}),
  state: Schema.Struct({ n: Schema.Number }),
  init: () => ({ n: 0 }),
  onCandle: (state) => result({ n: state.n + 1 }),
  plots: { count: (state) => (state.n > 3 ? ("many" as unknown as number) : state.n) }
})
`
    )
    const run = await svcbot("backtest", "--strategy", plugin, "--synthetic", "9:100", "--db", db, "--report", join(dir, "bad.html"))
    expect(run.error?.exitCode).toBe(1)
    expect(run.error?.message).toMatch(/^the report cannot be drawn: strategy bad-plot: plot "count" gave string at candle 3/)
    expect(existsSync(join(dir, "bad.html"))).toBe(false)
  })
})
