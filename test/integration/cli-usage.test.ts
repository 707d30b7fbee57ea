/**
 * svcbot's command line conventions, as the built CLI answers them: a usage error is one line
 * naming the problem and one line pointing at the right `--help`, exit code 2, nothing on
 * stdout, no log line, no internals; results go to stdout and logs and progress to stderr; a
 * broken config is one line per problem with its file and field; and every shipped strategy
 * backtests without --params. Each case spawns the CLI as users run it.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { killAll, svcbot } from "../support/daemon.js"

afterAll(killAll)

const dir = mkdtempSync(join(tmpdir(), "svcbot-cli-"))
const db = join(dir, "evidence.db")

const spawned = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const run = svcbot(args, env)
  const code = await run.exit
  return { code, stdout: run.lines, stderr: run.stderr.join("") }
}

const usageErrors: ReadonlyArray<readonly [string, ReadonlyArray<string>, string, string]> = [
  ["an unknown flag", ["backtest", "--bogus"], "svcbot backtest: unknown option '--bogus'", "svcbot backtest"],
  ["a misspelt flag", ["backtest", "--strateg", "grid"], "svcbot backtest: unknown option '--strateg'; did you mean --strategy?", "svcbot backtest"],
  ["a flag without its value", ["backtest", "--strategy"], "svcbot backtest: --strategy needs a value: --strategy NAME", "svcbot backtest"],
  ["a malformed number", ["backtest", "--strategy", "grid", "--settle-ms", "abc"], "svcbot backtest: --settle-ms must be a whole number, got 'abc'", "svcbot backtest"],
  ["a value outside the choices", ["run", "--mode", "demo"], "svcbot run: --mode must be one of paper, live, got 'demo'", "svcbot run"],
  ["a missing required flag", ["promote", "btc-sma"], "svcbot promote: missing --to paper|live: the stage to promote to", "svcbot promote"],
  ["a missing argument", ["resume"], "svcbot resume: missing INSTANCE: the strategy instance id, as in the config's strategies[].id", "svcbot resume"],
  ["an argument too many", ["status", "now"], "svcbot status: unexpected argument 'now' (svcbot status takes no arguments)", "svcbot status"],
  ["a value given to a flag that takes none", ["backtest", "--json=3"], "svcbot backtest: --json takes no value (give --json alone)", "svcbot backtest"],
  ["an unknown command", ["frobnicate"], "svcbot: unknown command 'frobnicate'", "svcbot"],
  ["an unknown command, even with --help", ["nosuch", "--help"], "svcbot: unknown command 'nosuch'", "svcbot"],
  ["an unknown sub-subcommand", ["config", "scheme"], "svcbot config: unknown command 'scheme'; did you mean 'schema'?", "svcbot config"],
  ["a framework option svcbot does not offer", ["backtest", "--wizard"], "svcbot backtest: unknown option '--wizard'", "svcbot backtest"]
]

describe("usage errors", () => {
  it.each(usageErrors)("%s: the problem in one line, the way to --help, exit 2", async (_, args, problem, command) => {
    const { code, stdout, stderr } = await spawned(args)
    expect(code).toBe(2)
    expect(stdout).toEqual([])
    expect(stderr).toBe(`${problem}\nRun '${command} --help' for the usage.\n`)
  })

  it("a check of the command's own: its one line naming the fix, exit 2", async () => {
    const { code, stderr } = await spawned(["backtest", "--synthetic", "1:10"])
    expect(code).toBe(2)
    expect(stderr.trim()).toBe("svcbot: give --strategy NAME (a shipped strategy or a plugin file), or --config FILE --instance NAME")
  })

  it.each([
    ["a worker given no database URL", ["worker", "--cluster", "db:5432"], `svcbot: --cluster takes the cluster's Postgres URL, e.g. postgres://svcbot@db:5432/svcbot; got "db:5432"`],
    ["a worker port out of range", ["worker", "--cluster", "postgres://svcbot@127.0.0.1:9/svcbot", "--port", "70000"], "svcbot: --port must be from 1 to 65535; got 70000"],
    [
      "a cluster run given a local results file",
      ["optimize", "--strategy", "grid", "--synthetic", "1:100", "--space", "x.json", "--cluster", "postgres://svcbot@127.0.0.1:9/svcbot", "--db", "r.db"],
      "svcbot: --db and --cluster both name where results go: a --cluster run keeps them in the cluster's Postgres; drop --db"
    ]
  ])("%s: one line naming the fix, exit 2, before anything connects", async (_, args, problem) => {
    const { code, stdout, stderr } = await spawned(args)
    expect(code).toBe(2)
    expect(stdout).toEqual([])
    expect(stderr.trim()).toBe(problem)
  })
})

describe("the cluster's URL from the environment", () => {
  const missingFile = join(dir, "no-such-secret")

  it.each([
    ["a worker given no cluster at all", ["worker"], {}, "svcbot: give the cluster's Postgres as --cluster URL, or in SVC_CLUSTER_URL, or in the file SVC_CLUSTER_URL_FILE names"],
    ["a worker given a URL that is not Postgres's, not shown", ["worker"], { SVC_CLUSTER_URL: "mysql://svcbot:hunter2-hunter2@db/svcbot" }, "svcbot: environment: SVC_CLUSTER_URL: must be the cluster's Postgres URL, postgres://USER:PASSWORD@HOST:PORT/DB"],
    ["a worker whose URL file is missing", ["worker"], { SVC_CLUSTER_URL_FILE: missingFile }, `svcbot: environment: SVC_CLUSTER_URL_FILE: cannot read ${missingFile}: ENOENT (check the path and that the file is mounted)`],
    [
      "an optimize run whose URL file is missing",
      ["optimize", "--strategy", "grid", "--synthetic", "1:100", "--space", "x.json"],
      { SVC_CLUSTER_URL_FILE: missingFile },
      `svcbot: environment: SVC_CLUSTER_URL_FILE: cannot read ${missingFile}: ENOENT (check the path and that the file is mounted)`
    ],
    // --db keeps the run here: the environment's cluster is not even read, and the run goes on to its space file.
    ["an optimize run with --db", ["optimize", "--strategy", "grid", "--synthetic", "1:100", "--space", join(dir, "no-space.json"), "--db", join(dir, "r.db")], { SVC_CLUSTER_URL_FILE: missingFile }, `svcbot: cannot read the space file ${join(dir, "no-space.json")}: ENOENT`]
  ])("%s: one line naming the fix, exit 2", async (_, args, env, problem) => {
    const { code, stdout, stderr } = await spawned(args, env)
    expect(code).toBe(2)
    expect(stdout).toEqual([])
    expect(stderr.trim()).toBe(problem)
  })
})

describe("config errors", () => {
  const broken = join(dir, "broken.json")
  writeFileSync(
    broken,
    JSON.stringify({
      venue: { tickMs: "fast" },
      strategies: [
        { id: "a", strategy: "grid", symbol: "BTCUSDT" },
        { id: "b", strategy: "grid", symbol: "btcusdt", params: { levels: "x" } }
      ]
    })
  )

  it("backtest --config: one line per problem, with the file and the field path", async () => {
    const { code, stdout, stderr } = await spawned(["backtest", "--config", broken, "--instance", "a", "--synthetic", "1:100", "--db", db])
    expect(code).toBe(2)
    expect(stdout).toEqual([])
    expect(stderr.trimEnd().split("\n")).toEqual([
      `svcbot: ${broken}: venue.tickMs: expected a number, got "fast"`,
      `svcbot: ${broken}: strategies[1].symbol: must be a pair written as one upper-case word, e.g. BTCUSDT`
    ])
  })

  it("run --config: a strategy's params by their place in strategies[], nothing run", async () => {
    const params = join(dir, "params.json")
    writeFileSync(params, JSON.stringify({ strategies: [{ id: "a", strategy: "grid", symbol: "BTCUSDT" }, { id: "b", strategy: "grid", symbol: "BTCUSDT", params: { levels: "x" } }] }))
    const { code, stderr } = await spawned(["run", "--config", params], { SVC_DATABASE_PATH: join(dir, "run.db") })
    expect(code).toBe(2)
    expect(stderr.trimEnd().split("\n")).toEqual([
      `svcbot: ${params}: strategies[1].params.levels: "x" is not a whole number (expected the number of grid lines, 3 to 200)`
    ])
  })
})

describe("results on stdout, logs and progress on stderr", () => {
  it("backtest --sweep --json: one JSON document on stdout with decimal ratios, progress on stderr", async () => {
    const grid = join(dir, "grid.json")
    writeFileSync(grid, JSON.stringify({ params: { rangeBps: [200, 500], levels: 5 }, rankBy: "pnl" }))
    const { code, stdout, stderr } = await spawned(["backtest", "--strategy", "grid", "--synthetic", "42:1500", "--sweep", grid, "--threads", "1", "--json", "--db", db])
    expect(code).toBe(0)
    expect(stdout).toHaveLength(1)
    const answer = JSON.parse(stdout[0]!) as { readonly results: ReadonlyArray<{ readonly metrics: Record<string, unknown> }> }
    expect(answer.results).toHaveLength(2)
    // Four places at most, as a single run shows its ratios; never a float's seventeen digits.
    for (const result of answer.results) for (const value of Object.values(result.metrics)) if (typeof value === "number") expect(String(value)).toMatch(/^-?\d+(\.\d{1,4})?$/)
    expect(stderr).toContain("2/2")
    const table = readFileSync(join(dir, "grid.ranked.csv"), "utf8")
    // The ranked CSV file shows the same figures.
    expect(table).toContain(`,${String(answer.results[0]!.metrics.sharpe)},`)
  })

  it("promote: a refusal is one message on stderr with exit 1; nothing on stdout", async () => {
    const { code, stdout, stderr } = await spawned(["promote", "grid", "--to", "paper", "--params", "{}", "--db", db])
    expect(code).toBe(1)
    expect(stdout).toEqual([])
    expect(stderr).toContain('"event":"promotion.refused"')
    expect(stderr).toMatch(/^svcbot: /m)
  })
})

describe("every shipped strategy backtests with its default params", () => {
  it.each(["dca", "grid", "market-maker", "protective-stop", "rebalance", "sma-crossover"])("%s", async (strategy) => {
    const { code, stdout, stderr } = await spawned(["backtest", "--strategy", strategy, "--synthetic", "42:1500", "--json", "--db", db])
    expect(stderr.split("\n").filter((line) => line.startsWith("svcbot:"))).toEqual([])
    expect(code).toBe(0)
    expect(JSON.parse(stdout[0]!)).toMatchObject({ strategy, metrics: { candles: 1500 } })
  })

  it.each([
    ["config/default.json", "btc-grid"],
    ["config/default.json", "btc-sma"],
    ["config/default.json", "btc-dca"],
    ["config/default.json", "eth-mm"],
    ["config/compose.json", "grid-btc"],
    ["config/compose.json", "sma-eth"],
    ["config/live.example.json", "grid-btc"]
  ])("the shipped %s's instance %s", async (config, instance) => {
    const { code, stdout } = await spawned(["backtest", "--config", config, "--instance", instance, "--synthetic", "42:1500", "--json", "--db", db])
    expect(code).toBe(0)
    expect(JSON.parse(stdout[0]!)).toMatchObject({ metrics: { candles: 1500 } })
  })
})
