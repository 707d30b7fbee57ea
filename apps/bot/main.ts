/** svcbot: the trading daemon and its tools. Only composes commands from src/. */
import { Command } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { backtestCommand, promoteCommand, promotionsCommand } from "../../src/cli/backtest.js"
import { clientCommands } from "../../src/cli/client.js"
import { configCommand } from "../../src/cli/config.js"
import { dataCommand } from "../../src/cli/data.js"
import { runCli } from "../../src/cli/App.js"
import * as Log from "../../src/log/Logger.js"
import { optimizeCommand } from "../../src/cli/optimize.js"
import { runCommand } from "../../src/cli/run.js"
import { signCommand } from "../../src/cli/sign.js"
import { statusCommand } from "../../src/cli/status.js"
import { profitCommand, tradesCommand } from "../../src/cli/trades.js"
import { ackLostCommand } from "../../src/cli/ackLost.js"
import { resumeCommand } from "../../src/cli/resume.js"
import { venueCommand } from "../../src/cli/venue.js"
import { workerCommand } from "../../src/cli/worker.js"

const svcbot = Command.make("svcbot").pipe(
  Command.withDescription("Algorithmic trading daemon for the SVC Spot Trading and Account API"),
  Command.withSubcommands([runCommand, statusCommand, tradesCommand, profitCommand, resumeCommand, ackLostCommand, backtestCommand, promoteCommand, promotionsCommand, optimizeCommand, workerCommand, dataCommand, ...clientCommands, configCommand, signCommand, venueCommand])
)

runCli(svcbot, { name: "svcbot", version: "0.1.0" })(process.argv).pipe(
  // Stdout holds a command's results; its log lines go to stderr (`run` installs the daemon's own logger over this one).
  Effect.provide(Layer.merge(NodeContext.layer, Log.layer({ destination: process.stderr }))),
  // Log lines go through pino (src/log); the runtime's own pretty logger would print each twice.
  (program) => NodeRuntime.runMain(program, { disablePrettyLogger: true })
)
