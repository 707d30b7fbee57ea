/**
 * `svcbot optimize`: searches a strategy's params over a space file (grid or
 * random, with successive halving and constraints), optionally walk-forward,
 * stores every trial's result in a results database, shows a stored run as a
 * table and an HTML page, and writes the winner into a config as a new instance.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { availableParallelism } from "node:os"
import { dirname, join, resolve } from "node:path"
import { Command, Options } from "@effect/cli"
import { Console, Effect, Either, Option } from "effect"
import { describeData, type JobSpec, prepare, type PreparedJob, readParams } from "../backtest/Job.js"
import { loadClusterUrl, loadConfig } from "../config/Load.js"
import { type Config, type StrategyInstanceConfig } from "../config/Config.js"
import { parse, stringify } from "../domain/Json.js"
import { insertInstance } from "../optimize/Instance.js"
import { heatMapOf, renderPage } from "../optimize/Page.js"
import { connectCluster } from "../optimize/Cluster.js"
import { type ResultsBackend, ResultsStore, ResultsUnavailable } from "../optimize/Results.js"
import { inProcessRunner, recordedRunner, startWorkerRunner, type TrialRunner } from "../optimize/Runner.js"
import { foldWindows, optimiseWindow, parseWalkForward, type RankedCandidate, walkForward } from "../optimize/Search.js"
import { candidates, isObject, parseSpace } from "../optimize/Space.js"
import { outcomeJson, outcomeText, type RunOutcome } from "../optimize/Summary.js"
import { type Study, studyOf } from "../optimize/Trial.js"
import { metricsFromJson } from "../backtest/Metrics.js"
import { outOfSampleSource } from "../promotion/Gates.js"
import type { Fold } from "../optimize/Search.js"
import { dataAndSetupOptions, jobSpec, recordBacktest, strategyOption, withDatabase } from "./backtest.js"
import { CliError, usageError } from "./errors.js"
import { described } from "./Help.js"

/** Where the results database goes without --db: next to a CSV, else here. */
const DEFAULT_RESULTS_DB = "data/optimize.db"

const fromEither = <A, E extends { readonly message: string }>(either: Either.Either<A, E>): Effect.Effect<A, CliError> =>
  Either.match(either, { onLeft: (e) => Effect.fail(usageError(e.message)), onRight: Effect.succeed })

const failure = (cause: unknown): CliError => new CliError({ message: cause instanceof Error ? cause.message : String(cause), exitCode: 1 })

const options = {
  space: Options.text("space").pipe(Options.withPseudoName("FILE"), Options.optional, Options.withDescription("the search space file: params (lists, {min, max, step} ranges, fixed values), rankBy, search, samples, halving, constraints")),
  strategy: strategyOption,
  config: Options.text("config").pipe(Options.withPseudoName("FILE"), Options.optional, Options.withDescription("a daemon config: with --instance, the instance to optimise; with --write-instance, the file the winner is written into")),
  instance: Options.text("instance").pipe(Options.withPseudoName("ID"), Options.optional, Options.withDescription("the strategies[].id of the --config instance whose strategy, symbol, params (the base the space overrides), schedule and allocation are used")),
  params: Options.text("params").pipe(Options.withPseudoName("JSON|FILE"), Options.optional, Options.withDescription("base params the space overrides: inline JSON or a JSON file (default: the --instance's, else {})")),
  ...dataAndSetupOptions,
  threads: Options.integer("threads").pipe(Options.withPseudoName("N"), Options.optional, Options.withDescription("worker threads (default: the number of cores; 0 runs every trial on the main thread)")),
  seed: Options.integer("seed").pipe(Options.withPseudoName("N"), Options.withDefault(1), Options.withDescription("seed of a random search: the same seed draws the same candidates")),
  walkForward: Options.text("walk-forward").pipe(Options.withPseudoName("TRAIN:TEST"), Options.optional, Options.withDescription("walk-forward windows with units h, d or w, e.g. 90d:30d: optimise on each training window, score the winner on the test window after it")),
  json: Options.boolean("json").pipe(Options.withDescription("print the run as one JSON object: ranked (params, metrics), and folds with walk-forward")),
  db: Options.text("db").pipe(Options.withPseudoName("FILE"), Options.optional, Options.withDescription(`the results database (default: optimize.db next to the --data file, else ${DEFAULT_RESULTS_DB})`)),
  show: Options.integer("show").pipe(Options.withPseudoName("RUN"), Options.optional, Options.withDescription("print stored run RUN's ranked table and write its HTML page instead of running")),
  html: Options.text("html").pipe(Options.withPseudoName("FILE"), Options.optional, Options.withDescription("where the HTML page goes (default with --show: optimize-run-RUN.html next to the results database)")),
  heatmap: Options.text("heatmap").pipe(Options.withPseudoName("X,Y"), Options.optional, Options.withDescription("the two params of the page's heat map, e.g. fastPeriod,slowPeriod (default: the first two that vary)")),
  evidence: Options.text("evidence").pipe(Options.withPseudoName("FILE"), Options.optional, Options.withDescription("with --walk-forward: record the winner's out-of-sample figures (the last fold's test window) in this evidence store as its backtest, for `svcbot promote` and the outOfSample gate")),
  cluster: Options.text("cluster").pipe(Options.withPseudoName("URL"), Options.optional, Options.withDescription("run the trials on the cluster whose Postgres this is (postgres://USER@HOST:PORT/DB), on the `svcbot worker --cluster URL` processes, and keep the results there instead of --db; without it, and without --db and --threads, SVC_CLUSTER_URL or the file SVC_CLUSTER_URL_FILE names, when set")),
  writeInstance: Options.text("write-instance").pipe(Options.withPseudoName("ID"), Options.optional, Options.withDescription("write the best candidate into --config as a new strategy instance with this id (written disabled)"))
}

type Flags = Command.Command.ParseConfig<typeof options>

const resultsPath = (flags: Flags): string =>
  Option.getOrElse(flags.db, () => (Option.isSome(flags.data) ? join(dirname(resolve(flags.data.value)), "optimize.db") : DEFAULT_RESULTS_DB))

/** Where a run's results are and, on a cluster, the session its trials go through. */
interface Results {
  readonly store: ResultsBackend
  readonly openRunner: (study: Study, job: PreparedJob, runId: number, threads: number) => Effect.Effect<TrialRunner, CliError>
}

const ask = <A>(question: () => A | PromiseLike<A>): Effect.Effect<A, CliError> => Effect.tryPromise({ try: async () => question(), catch: failure })

/** The results database (--db) with local workers, or the --cluster's Postgres with its workers. */
const withResults = <A, E>(flags: Flags, use: (results: Results) => Effect.Effect<A, E>): Effect.Effect<A, E | CliError> =>
  Option.isSome(flags.cluster)
    ? Effect.acquireUseRelease(
        ask(() => connectCluster(flags.cluster.pipe(Option.getOrThrow))),
        (session) =>
          use({
            store: session.results,
            openRunner: (study, job, runId) =>
              Effect.gen(function* () {
                if ((yield* ask(() => session.workers())) === 0) {
                  progress(`no svcbot worker is running on ${session.results.where}; the trials wait there until one starts (svcbot worker --cluster URL)`)
                }
                return yield* ask(() => session.runner(study, job, runId))
              })
          }),
        (session) => Effect.promise(() => session.close())
      )
    : Effect.acquireUseRelease(
        Effect.try({
          try: () => ResultsStore.open(resultsPath(flags)),
          // A results file svcbot must not write is the operator's to fix, as a bad flag is: exit 2.
          catch: (cause) => (cause instanceof ResultsUnavailable && cause.refused ? usageError(cause.message) : failure(cause))
        }),
        (store) => use({ store, openRunner: (_study, job, _runId, threads) => openRunner(job.spec, job, threads) }),
        (store) => Effect.sync(() => store.close())
      )

const readText = (path: string, what: string): Effect.Effect<string, CliError> =>
  Effect.try({
    try: () => readFileSync(path, "utf8"),
    catch: (cause) => usageError(`cannot read ${what} ${path}: ${(cause as NodeJS.ErrnoException).code ?? String(cause)}`)
  })

const writeText = (path: string, text: string, what: string): Effect.Effect<void, CliError> =>
  Effect.try({ try: () => writeFileSync(path, text), catch: (cause) => failure(`cannot write ${what} ${path}: ${String(cause)}`) })

interface Subject {
  readonly config?: Config
  readonly instance?: StrategyInstanceConfig
  /** The instance's entry exactly as the config file writes it, for --write-instance. */
  readonly instanceEntry?: Record<string, unknown>
}

/** The --config instance, by id; with its entry as written in the file. */
const subjectOf = (flags: Flags): Effect.Effect<Subject, CliError> =>
  Effect.gen(function* () {
    if (Option.isNone(flags.instance)) return {}
    if (Option.isNone(flags.config)) return yield* Effect.fail(usageError("--instance names an instance of a config: give --config FILE too"))
    const path = flags.config.value
    const id = flags.instance.value
    const config = yield* loadConfig(path).pipe(Effect.mapError((e) => usageError(e.message)))
    const instance = config.strategies.find((s) => s.id === id)
    if (instance === undefined) {
      return yield* Effect.fail(usageError(`no strategy instance ${id} in ${path}; its instances: ${config.strategies.map((s) => s.id).join(", ") || "none"}`))
    }
    const raw = parse(yield* readText(path, "the config")) as { strategies?: ReadonlyArray<Record<string, unknown>> }
    const instanceEntry = raw.strategies?.find((entry) => entry.id === instance.id)
    return { config, instance, ...(instanceEntry === undefined ? {} : { instanceEntry }) }
  })



/** What a run stores about its setup: enough to show it and to write its winner as an instance. */
interface RunSettings {
  readonly spec: JobSpec
  readonly space: string
  readonly seed: number
  readonly walkForward: string | null
  /** The optimised instance's config entry (lossless JSON text), or null for --strategy. */
  readonly instanceEntry: string | null
}

const progress = (line: string): void => {
  process.stderr.write(`${line}\n`)
}

const openRunner = (spec: JobSpec, job: PreparedJob, threads: number): Effect.Effect<TrialRunner, CliError> =>
  threads === 0 ? Effect.succeed(inProcessRunner(job)) : Effect.tryPromise({ try: () => startWorkerRunner(spec, threads), catch: failure })

/** Flags that name local resources make no sense beside --cluster: its workers run the trials and its Postgres keeps the results. */
const clusterFlags = (flags: Flags): Effect.Effect<void, CliError> => {
  const url = Option.getOrThrow(flags.cluster)
  if (!/^postgres(ql)?:\/\//.test(url)) return Effect.fail(usageError(`--cluster takes the cluster's Postgres URL, e.g. postgres://svcbot@db:5432/svcbot; got "${url.slice(0, 40)}"`))
  if (Option.isSome(flags.db)) return Effect.fail(usageError("--db and --cluster both name where results go: a --cluster run keeps them in the cluster's Postgres; drop --db"))
  if (Option.isSome(flags.threads)) return Effect.fail(usageError("--threads sets local worker threads: a --cluster run's trials go to its svcbot worker processes; drop --threads"))
  return Effect.void
}

const runOptimisation = (flags: Flags) =>
  Effect.gen(function* () {
    if (Option.isNone(flags.space)) return yield* Effect.fail(usageError("give --space FILE (the params to search), or --show RUN to show a stored run"))
    if (Option.isSome(flags.cluster)) yield* clusterFlags(flags)
    const subject = yield* subjectOf(flags)
    const spec = yield* jobSpec(flags, subject.instance)
    const spacePath = resolve(flags.space.value)
    const spaceText = yield* readText(spacePath, "the space file")
    const space = yield* fromEither(parseSpace(spaceText, flags.space.value))
    const walk = Option.isSome(flags.walkForward) ? yield* fromEither(parseWalkForward(flags.walkForward.value)) : undefined
    if (Option.isSome(flags.evidence) && walk === undefined) {
      return yield* Effect.fail(usageError("--evidence records a walk-forward's out-of-sample figures: give --walk-forward TRAIN:TEST too"))
    }
    const threads = Option.getOrElse(flags.threads, () => availableParallelism())
    if (threads < 0) return yield* Effect.fail(usageError("--threads must be 0 (the main thread only) or more"))
    const configPath = Option.getOrUndefined(flags.config)
    const newId = Option.getOrUndefined(flags.writeInstance)
    if (newId !== undefined) {
      if (configPath === undefined) return yield* Effect.fail(usageError("--write-instance writes into a config: give --config FILE too"))
      // Refused before the search rather than after it: a taken id would waste the whole run.
      const config = subject.config ?? (yield* loadConfig(configPath).pipe(Effect.mapError((e) => usageError(e.message))))
      if (config.strategies.some((s) => s.id === newId)) {
        return yield* Effect.fail(usageError(`${configPath} already has a strategy instance "${newId}"; choose a new id for --write-instance`))
      }
    }
    const base = Option.isSome(flags.params) ? yield* fromEither(readParams(flags.params.value, spec.cwd)) : (subject.instance?.params ?? {})
    if (!isObject(base)) return yield* Effect.fail(usageError(`the base params must be a JSON object, e.g. {"quoteQty": "100"}`))
    const job = yield* prepare(spec).pipe(Effect.mapError((e) => usageError(e.message)))
    const study = studyOf(job)
    const whole = { fromMs: study.fromMs, toMs: study.toMs }
    const folds = walk === undefined ? undefined : yield* fromEither(foldWindows(whole, walk))
    const tried = candidates(space, base, flags.seed)
    const settings: RunSettings = {
      spec,
      space: spaceText,
      seed: flags.seed,
      walkForward: walk?.text ?? null,
      instanceEntry: subject.instanceEntry === undefined ? null : stringify(subject.instanceEntry)
    }
    const { outcome, where, page } = yield* withResults(flags, ({ store, openRunner }) =>
      Effect.gen(function* () {
        const runId = yield* ask(() => store.startRun({
          createdAtMs: Date.now(),
          strategy: study.strategy,
          sourceHash: study.sourceHash,
          data: describeData(spec.data),
          dataHash: study.dataHash,
          symbol: spec.symbol,
          settings
        }))
        const search = { objective: space.rankBy, constraints: space.constraints, ...(space.halving === undefined ? {} : { halving: space.halving }) }
        const found = yield* Effect.acquireUseRelease(
          openRunner(study, job, runId, Math.min(threads, tried.length)),
          (runner) => {
            const recorded = recordedRunner(runner, store, runId)
            return Effect.tryPromise({
              try: async () => {
                if (folds === undefined) {
                  const window = await optimiseWindow(study, recorded, tried, search, whole, (rung, rungs, count) =>
                    progress(`slice ${rung + 1}/${rungs}: ${count} candidates`)
                  )
                  return { ranked: window.ranked, trials: window.trials }
                }
                const walked = await walkForward(study, recorded, tried, search, folds, (index, count) => progress(`fold ${index + 1}/${count}`))
                return { ranked: walked.latest.ranked, trials: walked.trials, folds: walked.folds }
              },
              catch: failure
            })
          },
          (runner) => Effect.promise(() => runner.close())
        )
        const outcome: RunOutcome = {
          runId,
          strategy: study.strategy,
          symbol: spec.symbol,
          data: describeData(spec.data),
          objective: space.rankBy,
          window: whole,
          candidates: tried.length,
          trials: found.trials,
          search: space.search,
          seed: flags.seed,
          ...(space.halving === undefined ? {} : { halving: space.halving }),
          constraints: space.constraints,
          ranked: found.ranked,
          ...(found.folds === undefined || walk === undefined ? {} : { walkForward: { spec: walk.text, folds: found.folds, overfitFolds: found.folds.filter((f) => f.overfit).length } })
        }
        yield* ask(() => store.finishRun(runId, outcome))
        const page = Option.isSome(flags.html) ? yield* writePage(store, outcome, flags) : undefined
        return { outcome, where: store.where, page }
      })
    )
    if (newId !== undefined && configPath !== undefined) yield* writeInstance(configPath, newId, outcome, settings)
    const lastFold = outcome.walkForward?.folds.at(-1)
    if (Option.isSome(flags.evidence) && lastFold !== undefined) yield* recordOutOfSample(flags.evidence.value, job, study.sourceHash, lastFold, describeData(spec.data))
    yield* Console.log(flags.json ? outcomeJson(outcome) : [outcomeText(outcome), `results: ${where}`, ...(page === undefined ? [] : [`page: ${page}`])].join("\n"))
  })

/**
 * The last fold's winner as backtest evidence, on its test window only: the one window of the
 * data its params were not chosen on. `svcbot promote` judges it like any backtest, and the
 * `outOfSample` gate accepts nothing else.
 */
const recordOutOfSample = (path: string, job: PreparedJob, sourceHash: string, fold: Fold, data: string) =>
  Effect.gen(function* () {
    const metrics = fold.outOfSample.metrics
    if (metrics === undefined) {
      return yield* Effect.fail(new CliError({ message: `fold ${fold.index + 1}'s out-of-sample backtest gave no figures (${fold.outOfSample.error ?? "no candles"}); nothing was recorded in ${path}`, exitCode: 1 }))
    }
    const runId = yield* withDatabase(path, (db) => Effect.sync(() => recordBacktest(db, job, sourceHash, parse(fold.params), metricsFromJson(metrics), outOfSampleSource(data, fold.test))))
    yield* Console.error(`recorded fold ${fold.index + 1}'s out-of-sample figures for ${fold.params} as backtest run #${runId} in ${path}`)
  })

const heatmapChoice = (flags: Flags): Effect.Effect<readonly [string, string] | undefined, CliError> => {
  if (Option.isNone(flags.heatmap)) return Effect.succeed(undefined)
  const parts = flags.heatmap.value.split(",").map((p) => p.trim())
  return parts.length === 2 && parts.every((p) => p !== "")
    ? Effect.succeed([parts[0]!, parts[1]!] as const)
    : Effect.fail(usageError(`--heatmap must name two params as X,Y, e.g. fastPeriod,slowPeriod; got "${flags.heatmap.value}"`))
}

const writePage = (store: ResultsBackend, outcome: RunOutcome, flags: Flags) =>
  Effect.gen(function* () {
    const chosen = yield* heatmapChoice(flags)
    const results = yield* ask(() => store.results(outcome.runId))
    const map = heatMapOf(results, outcome.objective, chosen)
    if (Either.isLeft(map) && chosen !== undefined) return yield* Effect.fail(usageError(map.left.message))
    // Beside a results file; a cluster's results have no folder, so the page goes here.
    const folder = Option.isSome(flags.cluster) ? "." : dirname(resolve(store.where))
    const path = resolve(Option.getOrElse(flags.html, () => join(folder, `optimize-run-${outcome.runId}.html`)))
    yield* writeText(path, renderPage(outcome, map), "the page")
    return path
  })

/** The winner as a new instance of `configPath`: the optimised instance's entry (or the run's setup) with the winner's params, disabled. */
const writeInstance = (configPath: string, id: string, outcome: RunOutcome, settings: RunSettings) =>
  Effect.gen(function* () {
    const best: RankedCandidate | undefined = outcome.ranked[0]
    if (best === undefined || best.error !== undefined || best.objective === null) {
      return yield* Effect.fail(new CliError({ message: `run #${outcome.runId} has no candidate with a ${outcome.objective} to write as an instance`, exitCode: 1 }))
    }
    if (!best.feasible) {
      return yield* Effect.fail(new CliError({ message: `run #${outcome.runId}'s best candidate breaks its constraints (${best.violations.join("; ")}); nothing was written`, exitCode: 1 }))
    }
    const spec = settings.spec
    const from = settings.instanceEntry === null ? undefined : (parse(settings.instanceEntry) as Record<string, unknown>)
    const { id: _id, params: _params, enabled: _enabled, ...rest } = from ?? {
      strategy: spec.strategy,
      symbol: spec.symbol,
      ...(spec.schedule === undefined ? {} : { schedule: spec.schedule }),
      allocation: spec.balances
    }
    // Written disabled: its allocation is taken beside the others only once someone enables it.
    const instance = { id, ...rest, params: parse(best.params), enabled: false }
    const path = resolve(configPath)
    const text = yield* readText(path, "the config")
    const updated = yield* fromEither(insertInstance(text, configPath, instance))
    yield* writeText(path, updated, "the config")
    yield* Console.error(`wrote instance ${id} (disabled) into ${configPath}: ${best.params}`)
  })

const showRun = (flags: Flags, runId: number) =>
  Effect.gen(function* () {
    if (Option.isSome(flags.cluster) && Option.isSome(flags.db)) yield* clusterFlags(flags)
    const { stored, page } = yield* withResults(flags, ({ store }) =>
      Effect.gen(function* () {
        const run = yield* ask(() => store.run(runId))
        if (run === undefined) {
          const known = yield* ask(() => store.runIds())
          const hint = Option.isSome(flags.cluster) ? "" : " (give the results database with --db)"
          return yield* Effect.fail(usageError(`no optimisation run #${runId} in ${store.where}; its runs: ${known.slice(0, 20).join(", ") || "none"}${hint}`))
        }
        if (run.outcome === undefined) {
          return yield* Effect.fail(new CliError({ message: `run #${runId} in ${store.where} did not finish (its trial results are stored; run the optimisation again)`, exitCode: 1 }))
        }
        return { stored: run, page: yield* writePage(store, run.outcome as RunOutcome, flags) }
      })
    )
    const outcome = stored.outcome as RunOutcome
    if (Option.isSome(flags.writeInstance)) {
      if (Option.isNone(flags.config)) return yield* Effect.fail(usageError("--write-instance writes into a config: give --config FILE too"))
      yield* writeInstance(flags.config.value, flags.writeInstance.value, outcome, stored.settings as RunSettings)
    }
    yield* Console.log(flags.json ? outcomeJson(outcome) : `${outcomeText(outcome, 20)}\npage: ${page}`)
  })

export const optimizeCommand = Command.make("optimize", options, (given) =>
  Effect.gen(function* () {
    // --db or --threads keep the run here; otherwise a cluster URL from the environment (which keeps
    // its password off the command line) sends it to the cluster as --cluster would.
    const local = Option.isNone(given.cluster) && (Option.isSome(given.db) || Option.isSome(given.threads))
    const flags = local ? given : { ...given, cluster: yield* fromEither(loadClusterUrl(given.cluster)) }
    return yield* Option.isSome(flags.show) ? showRun(flags, flags.show.value) : runOptimisation(flags)
  })
).pipe(
  Command.withDescription(
    described("Search a strategy's params over a space file (grid or random, successive halving, constraints, walk-forward) and store, show and deploy the results", {
      details: [
        "Every trial's result is stored once in the results database; --show RUN prints a stored run and writes its HTML page (heat map, walk-forward folds). docs/optimize.md describes the space file and the overfitting rule."
      ],
      examples: [
        "svcbot optimize --strategy sma-crossover --params '{\"quoteQty\": \"1000\"}' --synthetic 42:43200 --space space.json --threads 2",
        "svcbot optimize --config config/default.json --instance btc-sma --synthetic 42:43200 --space space.json --walk-forward 10d:5d --json",
        "svcbot optimize --show 1 --config config/default.json --write-instance btc-sma-tuned"
      ]
    })
  )
)
