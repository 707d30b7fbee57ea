/**
 * `svcbot run`: the daemon. Exit codes: 0 after a clean stop (signal or --for),
 * 2 for a configuration or usage problem or a database it must not use (read-only,
 * held by another `svcbot run`, damaged, written by a newer svcbot; nothing was
 * written), 1 when the venue, the key or the database failed at start or the
 * engine stopped.
 */
import { existsSync } from "node:fs"
import { Command, Options } from "@effect/cli"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Duration, Effect, Either, Layer, Option, Redacted } from "effect"
import { evidencePathOf } from "../config/Config.js"
import { loadConfig } from "../config/Load.js"
import { checkStrategyParams } from "./strategyParams.js"
import { Health, healthLogHook } from "../daemon/Health.js"
import { runDaemon, StartupError, type ResolvedInstance } from "../daemon/Daemon.js"
import * as Log from "../log/Logger.js"
import { AlertWebhook } from "../ops/AlertWebhook.js"
import { liveStatus } from "../promotion/Promotion.js"
import { checkDatabase, claimDatabaseForRun, openReadOnlyDatabase } from "../store/Database.js"
import { CliError, usageError } from "./errors.js"
import { described } from "./Help.js"

const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** `20s`, `5m`, `1h30m`, `500ms`. */
export const parseDuration = (text: string): Either.Either<Duration.Duration, string> => {
  const parts = [...text.matchAll(/(\d+)(ms|s|m|h|d)/g)]
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text) {
    return Either.left(`--for ${JSON.stringify(text)} is not a duration (write e.g. 20s, 5m, 1h or 1h30m)`)
  }
  return Either.right(Duration.millis(parts.reduce((total, p) => total + Number(p[1]) * UNITS[p[2]!]!, 0)))
}

const options = {
  config: Options.file("config").pipe(Options.withDefault("config/default.json"), Options.withDescription("the daemon's JSON config")),
  mode: Options.choice("mode", ["paper", "live"]).pipe(Options.optional, Options.withDescription("overrides the config's mode (default: the config's, else $SVC_MODE, else paper)")),
  runFor: Options.text("for").pipe(Options.withPseudoName("DURATION"), Options.optional, Options.withDescription("stop by itself after this long, e.g. 20s, 5m or 1h30m (default: run until a signal)")),
  acceptUnpromoted: Options.boolean("i-accept-unpromoted").pipe(Options.withDescription("live mode: also start strategies without a live promotion record"))
}

/** The daemon's logger and the hooks that watch its lines, added once it is in place. */
export const daemonLogging = <E>(health: Health, options: Log.LoggerOptions, hooks: Layer.Layer<never, E> = Layer.empty as Layer.Layer<never, E>) =>
  Layer.merge(healthLogHook(health), hooks).pipe(Layer.provideMerge(Log.layer(options)))

/**
 * A live promotion check over the evidence store, opened read-only: a refused live start
 * writes nothing, and a store that does not exist holds no promotion.
 */
const liveGate = (evidencePath: string) => (instance: ResolvedInstance) =>
  Effect.sync(() => {
    if (!existsSync(evidencePath)) return `no promotion records: the evidence store ${evidencePath} does not exist (evidence.path, or database.path when unset)`
    const db = openReadOnlyDatabase(evidencePath)
    try {
      const status = liveStatus(db, instance.definition.name, instance.sourcePath, instance.rawParams)
      return status.live ? undefined : status.message
    } finally {
      db.close()
    }
  })

/**
 * Forces the exit when a graceful stop overruns its bound (a hung request must not keep a
 * container alive). It listens for as long as the daemon runs, so that a second signal (an
 * impatient Ctrl-C, a `docker stop` repeated) is absorbed instead of killing the process in the
 * middle of cancelling its orders: the bound, not the signal count, ends a stop.
 */
const shutdownWatchdog = (boundMs: number) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      let armed = false
      const arm = () => {
        if (armed) return
        armed = true
        setTimeout(() => {
          process.stderr.write(`svcbot: shutdown did not finish within ${boundMs} ms; exiting\n`)
          process.exit(1)
        }, boundMs).unref()
      }
      process.on("SIGTERM", arm)
      process.on("SIGINT", arm)
      return arm
    }),
    (arm) => Effect.sync(() => {
      process.off("SIGTERM", arm)
      process.off("SIGINT", arm)
    })
  )

export const runCommand = Command.make("run", options, (flags) =>
  Effect.gen(function* () {
    const env = { ...process.env, ...(Option.isSome(flags.mode) ? { SVC_MODE: flags.mode.value } : {}) }
    const loaded = yield* Effect.either(loadConfig(flags.config, env).pipe(Effect.tap((config) => checkStrategyParams(config, flags.config))))
    if (Either.isLeft(loaded)) {
      yield* Log.logEvent("config.invalid", { source: loaded.left.source, problems: loaded.left.problems }).pipe(Effect.provide(Log.layer({ pretty: false })))
      return yield* Effect.fail(usageError(loaded.left.message))
    }
    const config = loaded.right
    const runFor = Option.isSome(flags.runFor) ? Either.getOrUndefined(parseDuration(flags.runFor.value)) : undefined
    if (Option.isSome(flags.runFor) && runFor === undefined) {
      return yield* Effect.fail(usageError(Either.getLeft(parseDuration(flags.runFor.value)).pipe(Option.getOrElse(() => "bad --for"))))
    }
    const health = yield* Health
    const webhookUrl = config.alerts?.webhookUrl
    const alerts =
      webhookUrl === undefined
        ? Layer.empty
        : AlertWebhook.layer({ url: Redacted.make(webhookUrl) }).pipe(
            Layer.provide(NodeHttpClient.layerUndici),
            Layer.mapError((error) => usageError(`alerts.webhookUrl: ${error.problem}`))
          )
    const logging = daemonLogging(health, { level: config.log.level, ...(config.log.pretty === undefined ? {} : { pretty: config.log.pretty }) }, alerts)
    const evidencePath = evidencePathOf(config)
    // Before the venue is asked anything: a database this run must not use is refused unchanged,
    // and the daemon's own stays claimed by this process until it exits.
    const claimed = Effect.zipRight(
      claimDatabaseForRun(config.database.path),
      evidencePath === config.database.path ? Effect.void : Effect.try({ try: () => checkDatabase(evidencePath), catch: (error) => (error instanceof Error ? error : new Error(String(error))) })
    ).pipe(Effect.mapError((error) => new StartupError({ message: error.message, exitCode: 2 })))
    yield* shutdownWatchdog(config.engine.shutdownTimeoutMs).pipe(
      Effect.zipRight(claimed),
      Effect.zipRight(runDaemon({ config, env, runFor, acceptUnpromoted: flags.acceptUnpromoted, liveGate: liveGate(evidencePath) })),
      Effect.scoped,
      Effect.tap(() => Log.logEvent("app.stopped", { exitCode: 0 })),
      Effect.tapError((error) => Log.logEvent("app.stopped", { exitCode: error.exitCode, error: error.message })),
      // A signal interrupts the daemon: teardown has run by now, and the stop is a clean one.
      Effect.onInterrupt(() => Log.logEvent("app.stopped", { exitCode: 0, reason: "signal" })),
      Effect.mapError((error: StartupError) => new CliError({ message: error.message, exitCode: error.exitCode })),
      Effect.provide(logging)
    )
  }).pipe(Effect.provide(Health.Default))
).pipe(
  Command.withDescription(
    described("Run the trading daemon (paper trading on the embedded venue by default)", {
      details: [
        "Logs one JSON line per event on stdout (pretty on a terminal), for the container's log collector. Exit code 0 after a clean stop (a signal or --for), 2 for a configuration problem or a database it must not use: read-only, on a full disk, held by another svcbot run, damaged or from a newer svcbot (nothing was written), 1 when the venue, the key or the database failed at start or the engine stopped."
      ],
      examples: ["svcbot run", "svcbot run --config config/default.json --for 20s", "svcbot run --config config/live.json --mode live"]
    })
  )
)
