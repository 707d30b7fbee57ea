/**
 * `svcbot backtest`, `svcbot promote` and `svcbot promotions`: run a strategy on
 * candles (or sweep a grid of params), record the run as evidence, and promote a
 * strategy from backtest to paper to live when its evidence passes the gates.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { availableParallelism } from "node:os"
import { resolve } from "node:path"
import { Args, Command, Options } from "@effect/cli"
import type BetterSqlite3 from "better-sqlite3"
import { Console, Effect, Either, Option } from "effect"
import type { BacktestResult } from "../backtest/Backtest.js"
import { describeData, type JobSpec, parseBalances, parseDataSpec, parseFees, prepare, type PreparedJob, readParams, runPrepared } from "../backtest/Job.js"
import { fillToJson, metricsFromJson, metricsShown } from "../backtest/Metrics.js"
import { metricRows, renderReport } from "../backtest/Report.js"
import { PlotFailed, plotRecorder } from "../report/Plots.js"
import { parseGrid, rank, rankedCsv, runSweep, type SweepResult } from "../backtest/Sweep.js"
import { type Config, evidencePathOf, type StrategyInstanceConfig } from "../config/Config.js"
import { loadConfig } from "../config/Load.js"
import { checkStrategyParams } from "./strategyParams.js"
import { parse } from "../domain/Json.js"
import { logEvent } from "../log/Logger.js"
import { decodeGates, defaultGates, type PromotionGates } from "../promotion/Gates.js"
import { canonicalParams, paramsHash, sourceHashOfFile } from "../domain/Hash.js"
import { describeParity, type PaperReplay, promote } from "../promotion/Promotion.js"
import { replayPaperRun } from "../promotion/Replay.js"
import { listPromotions, recordRun } from "../promotion/Records.js"
import { openDatabase } from "../store/Database.js"
import { loadStrategy } from "../strategy/Loader.js"
import { decodeParams, type StrategyDefinition } from "../strategy/Strategy.js"
import { CliError, usageError } from "./errors.js"
import { described } from "./Help.js"
import { parseTime } from "./Times.js"

const DEFAULT_DB = "data/svcbot.db"

const fromEither = <A, E extends { readonly message: string }>(either: Either.Either<A, E>): Effect.Effect<A, CliError> =>
  Either.match(either, { onLeft: (e) => Effect.fail(usageError(e.message)), onRight: Effect.succeed })

const dbOption = Options.text("db").pipe(
  Options.withPseudoName("FILE"),
  Options.optional,
  Options.withDescription(
    `the evidence store: SQLite file that records runs and promotions (default: the --config's evidence.path or database.path, else $SVC_EVIDENCE_PATH, $SVC_DATABASE_PATH or ${DEFAULT_DB})`
  )
)

/** The evidence store a command records to or reads: the flag, the config's store, or the environment's, as the daemon resolves it. */
export const dbPath = (flag: Option.Option<string>, configured?: string): string =>
  Option.getOrElse(flag, () => configured ?? (process.env.SVC_EVIDENCE_PATH || process.env.SVC_DATABASE_PATH || DEFAULT_DB))

/** Opens the database for the length of `use` and closes it afterwards, whatever happens. */
export const withDatabase = <A, E>(path: string, use: (db: BetterSqlite3.Database) => Effect.Effect<A, E>): Effect.Effect<A, E | CliError> =>
  Effect.acquireUseRelease(
    Effect.try({
      try: () => openDatabase({ path }),
      catch: (cause) => new CliError({ message: `cannot open the database ${path}: ${cause instanceof Error ? cause.message : String(cause)}`, exitCode: 1 })
    }),
    use,
    (db) => Effect.sync(() => db.close())
  )

const optionalTime = (value: Option.Option<string>, flag: string): Effect.Effect<number | undefined, CliError> =>
  Option.isNone(value) ? Effect.succeed(undefined) : fromEither(parseTime(value.value, flag))

/** The strategy a backtest runs: shipped or a plugin file. */
export const strategyOption = Options.text("strategy").pipe(
  Options.withPseudoName("NAME"),
  Options.optional,
  Options.withDescription("a shipped strategy (dca, grid, market-maker, protective-stop, rebalance, sma-crossover) or a path to a plugin file; or give --config and --instance")
)

/** What a backtest runs on besides its strategy: the candles and their window, the pair, balances, fees, settlement and schedule. */
export const dataAndSetupOptions = {
  data: Options.text("data").pipe(
    Options.withPseudoName("FILE"),
    Options.optional,
    Options.withDescription("OHLCV CSV file (open_time_ms,open,high,low,close,volume or the exchange kline layout); give it or --synthetic")
  ),
  synthetic: Options.text("synthetic").pipe(
    Options.withPseudoName("SEED:CANDLES"),
    Options.optional,
    Options.withDescription("the venue's seeded synthetic tape of 1-minute candles, e.g. 42:10080 (a week); give it or --data")
  ),
  from: Options.text("from").pipe(Options.withPseudoName("TIME"), Options.optional, Options.withDescription("first candle open time (inclusive): epoch ms or UTC date (default: the first candle)")),
  to: Options.text("to").pipe(Options.withPseudoName("TIME"), Options.optional, Options.withDescription("last candle open time (exclusive): epoch ms or UTC date (default: after the last candle)")),
  symbol: Options.text("symbol").pipe(
    Options.withPseudoName("SYMBOL"),
    Options.withDefault("BTCUSDT"),
    Options.withDescription("the venue pair whose rules (tick, step, minimums, book depth) apply; an --instance's symbol wins")
  ),
  balances: Options.text("balances").pipe(
    Options.withPseudoName("JSON"),
    Options.withDefault('{"USDT": "10000"}'),
    Options.withDescription("starting balances as JSON; an --instance's allocation wins")
  ),
  fees: Options.text("fees").pipe(Options.withPseudoName("RATE|MAKER,TAKER"), Options.optional, Options.withDescription("fee rate for maker and taker, e.g. 0.001 or 0.0008,0.001 (default: the venue's fees)")),
  settleMs: Options.integer("settle-ms").pipe(Options.withPseudoName("MS"), Options.withDefault(50), Options.withDescription("milliseconds between acceptance and settlement, as on svc-venue")),
  schedule: Options.text("schedule").pipe(
    Options.withPseudoName("CRON"),
    Options.optional,
    Options.withDescription("cron expression firing the strategy's schedule timer (default: the --instance's schedule, else none)")
  ),
}

const jobOptions = { strategy: strategyOption, ...dataAndSetupOptions }

/** The job flags' values, as `svcbot backtest` and `svcbot optimize` parse them. */
export type JobFlags = Command.Command.ParseConfig<typeof jobOptions>

const backtestOptions = {
  strategy: strategyOption,
  config: Options.file("config").pipe(
    Options.optional,
    Options.withDescription("a daemon config: with --instance, the strategy, symbol, params, schedule and allocation (as balances) of that instance")
  ),
  instance: Options.text("instance").pipe(Options.withPseudoName("ID"), Options.optional, Options.withDescription("the strategies[].id (or strategy) of the --config instance to run")),
  params: Options.text("params").pipe(
    Options.withPseudoName("JSON|FILE"),
    Options.optional,
    Options.withDescription("the strategy's params: inline JSON or a JSON file (default: the --instance's params, else {}: the strategy's defaults)")
  ),
  ...dataAndSetupOptions,
  report: Options.text("report").pipe(Options.withPseudoName("FILE"), Options.optional, Options.withDescription("also write a self-contained HTML report to this file")),
  json: Options.boolean("json").pipe(Options.withDescription("print the result as one JSON object on stdout (the metrics and every fill; with --sweep, the ranked results)")),
  sweep: Options.text("sweep").pipe(Options.withPseudoName("FILE"), Options.optional, Options.withDescription("grid file: run every combination of its params and rank them (docs/backtest.md)")),
  threads: Options.integer("threads").pipe(Options.withPseudoName("N"), Options.optional, Options.withDescription("worker threads for --sweep (default: the number of cores)")),
  out: Options.text("out").pipe(Options.withPseudoName("FILE"), Options.optional, Options.withDescription("where --sweep writes its ranked CSV table (default: the grid file's name with .ranked.csv)")),
  db: dbOption
}

type BacktestFlags = Command.Command.ParseConfig<typeof backtestOptions>

/** The config's strategy instance named `name`: by id, else by strategy when one instance runs it. */
const instanceNamed = (config: Config, name: string, source: string): Effect.Effect<StrategyInstanceConfig | undefined, CliError> => {
  const byId = config.strategies.filter((s) => s.id === name)
  const matches = byId.length > 0 ? byId : config.strategies.filter((s) => s.strategy === name)
  return matches.length > 1
    ? Effect.fail(usageError(`${name} names ${matches.length} strategy instances in ${source}; give the instance id (${matches.map((m) => m.id).join(", ")})`))
    : Effect.succeed(matches[0])
}

/** The --config instance a backtest runs, when --config and --instance are given. */
const backtestInstance = (flags: BacktestFlags): Effect.Effect<StrategyInstanceConfig | undefined, CliError> =>
  Effect.gen(function* () {
    if (Option.isNone(flags.config)) {
      return Option.isSome(flags.instance) ? yield* Effect.fail(usageError("--instance names an instance of a config: give --config FILE too")) : undefined
    }
    if (Option.isNone(flags.instance)) return yield* Effect.fail(usageError(`--config needs --instance NAME: one of the strategies[].id in ${flags.config.value}`))
    const config = yield* loadConfig(flags.config.value).pipe(Effect.mapError((e) => usageError(e.message)))
    const instance = yield* instanceNamed(config, flags.instance.value, flags.config.value)
    if (instance === undefined) {
      return yield* Effect.fail(usageError(`no strategy instance ${flags.instance.value} in ${flags.config.value}; its instances: ${config.strategies.map((s) => s.id).join(", ") || "none"}`))
    }
    yield* checkStrategyParams(config, flags.config.value, [instance]).pipe(Effect.mapError((e) => usageError(e.message)))
    return instance
  })

/** The job the flags describe; an --instance's strategy, symbol, allocation and schedule take the place of theirs. */
export const jobSpec = (flags: JobFlags, instance: StrategyInstanceConfig | undefined): Effect.Effect<JobSpec, CliError> =>
  Effect.gen(function* () {
    const strategy = instance?.strategy ?? Option.getOrUndefined(flags.strategy)
    if (strategy === undefined) return yield* Effect.fail(usageError("give --strategy NAME (a shipped strategy or a plugin file), or --config FILE --instance NAME"))
    const data = yield* fromEither(parseDataSpec(Option.getOrUndefined(flags.data), Option.getOrUndefined(flags.synthetic)))
    // An instance's allocation is what it trades with; --balances stands in for an instance without one.
    const balances =
      instance?.allocation !== undefined
        ? Object.fromEntries(Object.entries(instance.allocation).map(([asset, amount]) => [asset, amount.toFixed()]))
        : yield* fromEither(parseBalances(flags.balances))
    const fees = Option.isSome(flags.fees) ? yield* fromEither(parseFees(flags.fees.value)) : undefined
    const fromMs = yield* optionalTime(flags.from, "--from")
    const toMs = yield* optionalTime(flags.to, "--to")
    if (flags.settleMs < 0 || flags.settleMs > 60_000) return yield* Effect.fail(usageError("--settle-ms must be from 0 to 60000"))
    const schedule = Option.getOrUndefined(flags.schedule) ?? instance?.schedule
    return {
      strategy,
      data,
      symbol: instance?.symbol ?? flags.symbol,
      balances,
      ...(fees === undefined ? {} : { fees }),
      settleDelayMs: flags.settleMs,
      ...(fromMs === undefined ? {} : { fromMs }),
      ...(toMs === undefined ? {} : { toMs }),
      ...(schedule === undefined ? {} : { schedule }),
      cwd: process.cwd()
    }
  })

/** Records a backtest of the job's strategy as evidence; `dataSource` names other data than the job's whole (an out-of-sample window). */
export const recordBacktest = (
  db: BetterSqlite3.Database,
  job: PreparedJob,
  sourceHash: string,
  params: unknown,
  metrics: BacktestResult["metrics"],
  dataSource: string = describeData(job.spec.data)
): number =>
  recordRun(db, {
    kind: "backtest",
    strategy: job.definition.name,
    sourceHash,
    paramsHash: paramsHash(params),
    params: canonicalParams(params),
    symbol: job.pair.symbol,
    dataSource,
    metrics,
    recordedAtMs: Date.now()
  })

const single = (flags: BacktestFlags, spec: JobSpec, job: PreparedJob, instance: StrategyInstanceConfig | undefined) =>
  Effect.gen(function* () {
    const params = Option.isSome(flags.params) ? yield* fromEither(readParams(flags.params.value, spec.cwd)) : (instance?.params ?? {})
    // The strategy's plotted series are read only for a report.
    const plots = Option.isSome(flags.report) ? plotRecorder(job.definition, job.series.candles.length) : undefined
    const result = yield* Effect.suspend(() => {
      try {
        return fromEither(runPrepared(job, params, plots?.afterCandle))
      } catch (error) {
        // A plot is the strategy's own code: its failure ends this run, named, instead of a crash.
        if (error instanceof PlotFailed) return Effect.fail(new CliError({ message: `the report cannot be drawn: ${error.message}`, exitCode: 1 }))
        throw error
      }
    })
    const sourceHash = sourceHashOfFile(job.sourcePath)
    const runId = yield* withDatabase(dbPath(flags.db), (db) => Effect.sync(() => recordBacktest(db, job, sourceHash, params, result.metrics)))
    if (Option.isSome(flags.report)) {
      const path = resolve(flags.report.value)
      const html = renderReport({
        title: `Backtest: ${job.definition.name} on ${job.pair.symbol}`,
        details: [
          ["strategy", `${job.definition.name} ${job.definition.version} (${job.sourcePath})`],
          ["source sha256", sourceHash],
          ["params", canonicalParams(params)],
          ["data", describeData(spec.data)],
          ["fees (maker, taker)", `${job.fees.maker.toFixed()}, ${job.fees.taker.toFixed()}`],
          ["starting balances", JSON.stringify(spec.balances)],
          ["settle delay", `${spec.settleDelayMs} ms`],
          ["run", `#${runId}`]
        ],
        candles: job.series.candles,
        intervalMs: job.series.intervalMs,
        pair: job.pair,
        ...(plots === undefined ? {} : { plots: plots.series }),
        equity: result.equity,
        fills: result.fills,
        metrics: result.metrics
      })
      yield* Effect.try({
        try: () => writeFileSync(path, html),
        catch: (cause) => new CliError({ message: `cannot write the report ${path}: ${String(cause)}`, exitCode: 1 })
      })
    }
    if (flags.json) {
      yield* Console.log(
        JSON.stringify({
          runId,
          strategy: job.definition.name,
          sourceHash,
          paramsHash: paramsHash(params),
          data: describeData(spec.data),
          symbol: job.pair.symbol,
          metrics: metricsShown(result.metrics),
          orders: result.orders,
          fills: result.fills.map(fillToJson)
        })
      )
      return
    }
    yield* logEvent("backtest.completed", { runId, strategy: job.definition.name, paramsHash: paramsHash(params), metrics: metricsShown(result.metrics) })
    const width = Math.max(...metricRows(result.metrics).map(([label]) => label.length))
    yield* Console.log(
      [
        `${job.definition.name} on ${job.pair.symbol}, ${describeData(spec.data)} (run #${runId})`,
        ...metricRows(result.metrics).map(([label, value]) => `  ${label.padEnd(width)}  ${value}`),
        ...(Option.isSome(flags.report) ? [`report: ${resolve(flags.report.value)}`] : [])
      ].join("\n")
    )
  })

const progressBar = (done: number, total: number): void => {
  const width = 30
  const filled = Math.round((done / total) * width)
  const line = `[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${done}/${total}`
  if (process.stderr.isTTY) process.stderr.write(`\r${line}${done === total ? "\n" : ""}`)
  else if (done === total || done % Math.max(1, Math.floor(total / 10)) === 0) process.stderr.write(`${line}\n`)
}

const sweep = (flags: BacktestFlags, spec: JobSpec, job: PreparedJob, gridPath: string) =>
  Effect.gen(function* () {
    const text = yield* Effect.try({
      try: () => readFileSync(gridPath, "utf8"),
      catch: (cause) => usageError(`cannot read the sweep grid ${gridPath}: ${(cause as NodeJS.ErrnoException).code ?? String(cause)}`)
    })
    const grid = yield* fromEither(parseGrid(text))
    const threads = Option.getOrElse(flags.threads, () => availableParallelism())
    if (threads < 1) return yield* Effect.fail(usageError("--threads must be at least 1"))
    const results: ReadonlyArray<SweepResult> = yield* Effect.tryPromise({
      try: () => runSweep(spec, grid, { threads, onProgress: progressBar }),
      catch: (cause) => new CliError({ message: cause instanceof Error ? cause.message : String(cause), exitCode: 1 })
    })
    const sourceHash = sourceHashOfFile(job.sourcePath)
    yield* withDatabase(dbPath(flags.db), (db) =>
      Effect.sync(() =>
        db.transaction(() => {
          for (const result of results) {
            if (result.metrics !== undefined) recordBacktest(db, job, sourceHash, parse(result.params), metricsFromJson(result.metrics))
          }
        })()
      )
    )
    // Ratios come back from the workers as full-precision floats; shown, like a single run's, to four places.
    const ranked = rank(results, grid.rankBy).map((result) =>
      result.metrics === undefined ? result : { ...result, metrics: metricsShown(metricsFromJson(result.metrics)) }
    )
    const out = resolve(Option.getOrElse(flags.out, () => gridPath.replace(/\.json$/i, "") + ".ranked.csv"))
    const table = rankedCsv(ranked)
    yield* Effect.try({
      try: () => writeFileSync(out, table),
      catch: (cause) => new CliError({ message: `cannot write the ranked table ${out}: ${String(cause)}`, exitCode: 1 })
    })
    if (flags.json) {
      yield* Console.log(JSON.stringify({ rankBy: grid.rankBy, table: out, results: ranked }))
      return
    }
    const top = table.trimEnd().split("\n").slice(0, 11)
    yield* Console.log([`${results.length} combinations ranked by ${grid.rankBy}; table: ${out}`, ...top].join("\n"))
  })

export const backtestCommand = Command.make("backtest", backtestOptions, (flags) =>
  Effect.gen(function* () {
    const instance = yield* backtestInstance(flags)
    const spec = yield* jobSpec(flags, instance)
    const job = yield* prepare(spec).pipe(Effect.mapError((e) => usageError(e.message)))
    if (Option.isSome(flags.sweep)) return yield* sweep(flags, spec, job, resolve(flags.sweep.value))
    return yield* single(flags, spec, job, instance)
  })
).pipe(
  Command.withDescription(
    described("Backtest a strategy on historical or synthetic candles, or sweep its params", {
      details: [
        "Orders are matched by the venue's own matching module, as in paper trading. The run is recorded in the evidence store (--db) as evidence for `svcbot promote`. Results go to stdout (a table, or JSON with --json); log lines and sweep progress go to stderr."
      ],
      examples: [
        "svcbot backtest --strategy sma-crossover --synthetic 42:10080",
        "svcbot backtest --config config/default.json --instance btc-grid --data data/btcusdt-1m.csv --report report.html",
        "svcbot backtest --strategy grid --synthetic 42:10080 --sweep grid.json --json"
      ]
    })
  )
)

// ---------------------------------------------------------------------------
// promote and promotions

interface PromotionSubject {
  /** The config's evidence store, when the subject came from a config. */
  readonly evidencePath: string | undefined
  readonly strategy: string
  readonly definition: StrategyDefinition
  readonly sourcePath: string
  readonly params: unknown
  readonly gates: PromotionGates
}

/** The live gate's replay of a recorded paper run, with this strategy and these params. */
const replayWith = (subject: PromotionSubject): PaperReplay => (run, toleranceMs) =>
  Either.flatMap(
    Either.mapLeft(decodeParams(subject.definition, subject.strategy, subject.params), (e) => e.message),
    (params) => Either.mapLeft(replayPaperRun(subject.definition, params, run, toleranceMs), (e) => e.message)
  )

/**
 * The strategy, params and gates to promote: the config instance named NAME (by
 * id or by strategy) when --config is given, with --params overriding its params;
 * otherwise the strategy NAME with --params and the default gates.
 */
const subjectOf = (name: string, config: Option.Option<string>, paramsFlag: Option.Option<string>): Effect.Effect<PromotionSubject, CliError> =>
  Effect.gen(function* () {
    const cwd = process.cwd()
    const explicitParams = Option.isSome(paramsFlag) ? yield* fromEither(readParams(paramsFlag.value, cwd)) : undefined
    let reference = name
    let params = explicitParams
    let gates = defaultGates
    let evidencePath: string | undefined
    if (Option.isSome(config)) {
      const loaded = yield* loadConfig(config.value).pipe(Effect.mapError((e) => usageError(e.message)))
      evidencePath = evidencePathOf(loaded)
      const instance = yield* instanceNamed(loaded, name, config.value)
      if (instance !== undefined) {
        reference = instance.strategy
        params = explicitParams ?? instance.params
        gates = yield* fromEither(Either.mapLeft(decodeGates(instance.promotion), (message) => usageError(`strategies[${instance.id}].promotion: ${message}`)))
      } else if (explicitParams === undefined) {
        return yield* Effect.fail(usageError(`no strategy instance ${name} in ${config.value}; give its id, or --params`))
      }
    }
    if (params === undefined) return yield* Effect.fail(usageError("give --config FILE (the strategy instance, its params and gates) or --params (inline JSON or a JSON file)"))
    const loaded = yield* loadStrategy(name, reference, cwd).pipe(
      Effect.mapError((e) => usageError(Option.isSome(config) ? e.message : `${e.message}; to promote a strategy instance by its id, give --config FILE`))
    )
    return { evidencePath, strategy: loaded.definition.name, definition: loaded.definition, sourcePath: loaded.sourcePath, params, gates }
  })

export const promoteCommand = Command.make(
  "promote",
  {
    name: Args.text({ name: "NAME" }).pipe(Args.withDescription("the strategy (or the config's strategy instance id)")),
    to: Options.choice("to", ["paper", "live"]).pipe(Options.withDescription("the stage to promote to")),
    params: Options.text("params").pipe(
      Options.withPseudoName("JSON|FILE"),
      Options.optional,
      Options.withDescription("params as inline JSON or a JSON file (default: the config instance's; without --config it is required)")
    ),
    config: Options.text("config").pipe(
      Options.withPseudoName("FILE"),
      Options.optional,
      Options.withDescription("config file with the strategy instance, its params and its promotion gates (default: none; the default gates apply)")
    ),
    json: Options.boolean("json").pipe(Options.withDescription("print the promotion record as one JSON object; refused, the refusal: strategy, stage, hashes, failed gates, every gate checked, replayed paper runs")),
    db: dbOption
  },
  (flags) =>
    Effect.gen(function* () {
      const subject = yield* subjectOf(flags.name, flags.config, flags.params)
      const outcome = yield* withDatabase(dbPath(flags.db, subject.evidencePath), (db) =>
        Effect.sync(() => promote(db, {
            strategy: subject.strategy,
            sourcePath: subject.sourcePath,
            params: subject.params,
            to: flags.to,
            gates: subject.gates,
            nowMs: Date.now(),
            replay: replayWith(subject)
          }))
      )
      if (Either.isLeft(outcome)) {
        const refused = outcome.left
        yield* logEvent("promotion.refused", { strategy: subject.strategy, stage: flags.to, failed: refused.failed })
        // A refusal is an answer, not a crash: a script reads it from stdout like a grant, and the exit code still says refused.
        if (flags.json) {
          const { strategy, stage, sourceHash, paramsHash, failed, checks, parity } = refused
          yield* Console.log(JSON.stringify({ strategy, stage, sourceHash, paramsHash, failed, checks, parity }))
        }
        return yield* Effect.fail(new CliError({ message: refused.message, exitCode: 1 }))
      }
      const promotion = outcome.right
      yield* logEvent("promotion.granted", { strategy: subject.strategy, stage: flags.to, promotionId: promotion.promotionId, sourceHash: promotion.sourceHash, paramsHash: promotion.paramsHash })
      if (flags.json) return yield* Console.log(JSON.stringify(promotion))
      yield* Console.log(
        [
          `${subject.strategy} promoted to ${flags.to} (promotion #${promotion.promotionId})`,
          `  source ${promotion.sourceHash} (${promotion.sourcePath})`,
          `  params ${promotion.paramsHash}`,
          ...promotion.evidence.checks.map((c) => `  ${c.gate}: required ${c.required}, evidence ${c.actual}`)
        ].join("\n") + describeParity(promotion.evidence.parity ?? [])
      )
    })
).pipe(
  Command.withDescription(
    described("Promote a strategy to paper or live on evidence", {
      details: ["Granted only when the evidence for its exact source and params passes every gate. Exit code 0 when promoted, 1 when a gate refuses (the failed gates are named on stderr, and with --json the refusal is the JSON on stdout)."],
      examples: [
        "svcbot promote btc-sma --to paper --config config/default.json",
        "svcbot promote btc-sma --to live --config config/live.json",
        "svcbot promote sma-crossover --to paper --params '{\"fastPeriod\": 9, \"slowPeriod\": 21}'"
      ]
    })
  )
)

export const promotionsCommand = Command.make(
  "promotions",
  {
    strategy: Args.text({ name: "NAME" }).pipe(Args.optional, Args.withDescription("only this strategy")),
    json: Options.boolean("json").pipe(Options.withDescription("print the records as one JSON array")),
    db: dbOption
  },
  (flags) =>
    Effect.gen(function* () {
      const records = yield* withDatabase(dbPath(flags.db), (db) => Effect.sync(() => listPromotions(db, Option.getOrUndefined(flags.strategy))))
      if (flags.json) {
        yield* Console.log(JSON.stringify(records))
        return
      }
      if (records.length === 0) {
        yield* Console.log("no promotions")
        return
      }
      yield* Console.log(
        records
          .map((r) => {
            const parity = r.evidence.parity
            const replayed = parity === undefined || parity.length === 0 ? "" : `  fill mismatches ${parity.reduce((sum, p) => sum + p.fillMismatches, 0)}`
            return `#${r.promotionId}  ${new Date(r.promotedAtMs).toISOString()}  ${r.strategy} -> ${r.stage}  source ${r.sourceHash.slice(0, 12)}  params ${r.paramsHash.slice(0, 12)}  runs ${r.evidence.runIds.join(",") || "-"}${replayed}`
          })
          .join("\n")
      )
    })
).pipe(
  Command.withDescription(
    described("List the promotion records", {
      examples: ["svcbot promotions", "svcbot promotions sma-crossover --json", "svcbot promotions --db data/evidence.db"]
    })
  )
)
