/** svcbot: the trading daemon and its tools. Only composes commands from src/. */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer } from "effect"
import { runCli } from "../../src/cli/App.js"
import { svcbotCommand } from "../../src/cli/Commands.js"
import * as Log from "../../src/log/Logger.js"

runCli(await svcbotCommand(process.argv.slice(2)), { name: "svcbot", version: "0.1.0" })(process.argv).pipe(
  // Stdout holds a command's results; its log lines go to stderr (`run` installs the daemon's own logger over this one).
  Effect.provide(Layer.merge(NodeContext.layer, Log.layer({ destination: process.stderr }))),
  // Log lines go through pino (src/log); the runtime's own pretty logger would print each twice.
  (program) => NodeRuntime.runMain(program, { disablePrettyLogger: true })
)
