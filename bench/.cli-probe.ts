import { Command } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import { backtestCommand, promoteCommand, promotionsCommand } from "../src/cli/backtest.js"
import { CliError } from "../src/cli/errors.js"
const svcbot = Command.make("svcbot").pipe(Command.withSubcommands([backtestCommand, promoteCommand, promotionsCommand]))
Command.run(svcbot, { name: "svcbot", version: "0" })(process.argv).pipe(
  Effect.catchIf((e): e is CliError => e instanceof CliError, (e) => Console.error(`svcbot: ${e.message}`).pipe(Effect.andThen(() => { process.exitCode = e.exitCode }))),
  Effect.provide(NodeContext.layer), NodeRuntime.runMain)
