/**
 * `svcbot resume INSTANCE`: clears the pause of a strategy instance (after
 * repeated refusals, or a handler that threw) in the daemon's database. The
 * running daemon takes it up within a second or two and logs `strategy.resumed`;
 * a restart resumes every instance anyway.
 */
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Layer } from "effect"
import { existsSync } from "node:fs"
import { Database } from "../store/Database.js"
import { StrategyStateStore } from "../strategy/StateStore.js"
import { CliError, usageError } from "./errors.js"
import { described } from "./Help.js"
import { daemonDatabase } from "./status.js"

const options = {
  instance: Args.text({ name: "INSTANCE" }).pipe(Args.withDescription("the strategy instance id, as in the config's strategies[].id")),
  config: Options.file("config").pipe(Options.optional, Options.withDescription("the daemon's JSON config (for its database.path)")),
  db: Options.text("db").pipe(
    Options.withPseudoName("FILE"),
    Options.optional,
    Options.withDescription("the daemon's SQLite file (default: the config's database.path, else $SVC_DATABASE_PATH, else data/svcbot.db)")
  )
}

export const resumeCommand = Command.make("resume", options, (flags) =>
  Effect.gen(function* () {
    const { path } = yield* daemonDatabase(flags.config, flags.db)
    if (!existsSync(path)) return yield* Effect.fail(usageError(`no database at ${path}: pass the daemon's --config or --db`))
    const outcome = yield* Effect.flatMap(StrategyStateStore, (store) => store.resume(flags.instance, Date.now())).pipe(
      Effect.provide(StrategyStateStore.Default.pipe(Layer.provide(Database.Default({ path })))),
      Effect.scoped,
      Effect.mapError((error) => new CliError({ message: `cannot update the database ${path}: ${error.message}`, exitCode: 1 }))
    )
    if (outcome === "unknown") {
      return yield* Effect.fail(usageError(`no strategy instance "${flags.instance}" in ${path}: use an id from the config's strategies[] (\`svcbot status\` lists them)`))
    }
    yield* Console.log(outcome === "resumed" ? `${flags.instance} resumed: the running daemon takes it up within seconds` : `${flags.instance} is not paused`)
  })
).pipe(
  Command.withDescription(
    described("Resume a paused strategy instance", {
      details: ["An instance pauses after repeated refusals or a handler error. The running daemon takes it up within seconds; a restart resumes every instance anyway."],
      examples: ["svcbot resume btc-sma", "svcbot resume btc-grid --config config/default.json", "svcbot resume eth-mm --db data/svcbot.db"]
    })
  )
)
