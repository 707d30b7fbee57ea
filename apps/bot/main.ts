/** svcbot: the trading daemon and its tools. Only composes commands from src/. */
import { Command } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import { CliError } from "../../src/cli/errors.js"
import { signCommand } from "../../src/cli/sign.js"

const svcbot = Command.make("svcbot").pipe(
  Command.withDescription("Algorithmic trading daemon for the SVC Spot Trading and Account API"),
  Command.withSubcommands([signCommand])
)

const cli = Command.run(svcbot, { name: "svcbot", version: "0.1.0" })

cli(process.argv).pipe(
  Effect.catchIf(
    (error): error is CliError => error instanceof CliError,
    (error) => Console.error(`svcbot: ${error.message}`).pipe(Effect.andThen(() => { process.exitCode = error.exitCode }))
  ),
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain
)
