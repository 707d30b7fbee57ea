/** svcbot: the trading daemon and its tools. Only composes commands from src/. */
import { Command, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer } from "effect"
import { backtestCommand, promoteCommand, promotionsCommand } from "../../src/cli/backtest.js"
import { clientCommands } from "../../src/cli/client.js"
import { configCommand } from "../../src/cli/config.js"
import { dataCommand } from "../../src/cli/data.js"
import { CliError } from "../../src/cli/errors.js"
import * as Log from "../../src/log/Logger.js"
import { optimizeCommand } from "../../src/cli/optimize.js"
import { runCommand } from "../../src/cli/run.js"
import { signCommand } from "../../src/cli/sign.js"
import { statusCommand } from "../../src/cli/status.js"
import { profitCommand, tradesCommand } from "../../src/cli/trades.js"
import { ackLostCommand } from "../../src/cli/ackLost.js"
import { resumeCommand } from "../../src/cli/resume.js"
import { venueCommand } from "../../src/venue/cli.js"

const svcbot = Command.make("svcbot").pipe(
  Command.withDescription("Algorithmic trading daemon for the SVC Spot Trading and Account API"),
  Command.withSubcommands([runCommand, statusCommand, tradesCommand, profitCommand, resumeCommand, ackLostCommand, backtestCommand, promoteCommand, promotionsCommand, optimizeCommand, dataCommand, ...clientCommands, configCommand, signCommand, venueCommand])
)

const cli = Command.run(svcbot, { name: "svcbot", version: "0.1.0" })

/** The command named on the command line, for the hint after a usage error. */
const commandOf = (argv: ReadonlyArray<string>): string | undefined => argv.slice(2).find((arg) => !arg.startsWith("-"))

cli(process.argv).pipe(
  Effect.catchIf(
    (error): error is CliError => error instanceof CliError,
    (error) => Console.error(`svcbot: ${error.message}`).pipe(Effect.andThen(() => { process.exitCode = error.exitCode }))
  ),
  // The parser has printed what was wrong; what is left is the way to the usage, and exit code 2.
  Effect.catchIf(ValidationError.isValidationError, (error) => {
    const command = ValidationError.isCommandMismatch(error) ? undefined : commandOf(process.argv)
    return Console.error(`svcbot: see 'svcbot${command === undefined ? "" : ` ${command}`} --help' for the usage`).pipe(
      Effect.andThen(() => { process.exitCode = 2 })
    )
  }),
  // Commands log through pino; `run` installs its own configured logger over this one.
  Effect.provide(Layer.merge(NodeContext.layer, Log.layer())),
  // Log lines go through pino (src/log); the runtime's own pretty logger would print each twice.
  (program) => NodeRuntime.runMain(program, { disablePrettyLogger: true })
)
