/**
 * svcbot's command tree, by the module that declares each subcommand. A command line that names a
 * subcommand loads only that subcommand's module: each module pulls in what its command runs (the
 * daemon, the backtester and its report, the optimiser's cluster and PostgreSQL), and loading all
 * of them cost every start, `svcbot --version` included, about a second of CPU more. Help on the
 * whole program, the version and a line naming no subcommand get the whole tree.
 */
import { Command } from "@effect/cli"
import type { NodeContext } from "@effect/platform-node"

/** A subcommand of any name and flags, needing at most what the platform provides. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the name and flags are each subcommand's own; only its context matters here
type Subcommand = Command.Command<any, NodeContext.NodeContext, unknown, any>

/** Subcommand names with the module that declares them, in the order help lists them. */
const MODULES: ReadonlyArray<readonly [names: ReadonlyArray<string>, load: () => Promise<ReadonlyArray<Subcommand>>]> = [
  [["run"], async () => [(await import("./run.js")).runCommand]],
  [["status"], async () => [(await import("./status.js")).statusCommand]],
  [["trades", "profit"], async () => { const m = await import("./trades.js"); return [m.tradesCommand, m.profitCommand] }],
  [["resume"], async () => [(await import("./resume.js")).resumeCommand]],
  [["ack-lost"], async () => [(await import("./ackLost.js")).ackLostCommand]],
  [["backtest", "promote", "promotions"], async () => { const m = await import("./backtest.js"); return [m.backtestCommand, m.promoteCommand, m.promotionsCommand] }],
  [["optimize"], async () => [(await import("./optimize.js")).optimizeCommand]],
  [["worker"], async () => [(await import("./worker.js")).workerCommand]],
  [["data"], async () => [(await import("./data.js")).dataCommand]],
  [["balances", "orders", "fills", "doctor"], async () => (await import("./client.js")).clientCommands],
  [["config"], async () => [(await import("./config.js")).configCommand]],
  [["sign"], async () => [(await import("./sign.js")).signCommand]],
  [["venue"], async () => [(await import("./venue.js")).venueCommand]]
]

/** Every subcommand name, as the modules declare them. */
export const subcommandNames: ReadonlyArray<string> = MODULES.flatMap(([names]) => names)

/** The subcommands a command line needs: the module of the one it names, else all of them. */
export const subcommandsFor = async (args: ReadonlyArray<string>): Promise<ReadonlyArray<Subcommand>> => {
  const named = MODULES.find(([names]) => names.includes(args[0] ?? ""))
  if (named !== undefined) return named[1]()
  return (await Promise.all(MODULES.map(([, load]) => load()))).flat()
}

/** svcbot with the subcommands `args` need (see subcommandsFor). */
export const svcbotCommand = async (args: ReadonlyArray<string>) => {
  const [first, ...rest] = await subcommandsFor(args)
  return Command.make("svcbot").pipe(
    Command.withDescription("Algorithmic trading daemon for the SVC Spot Trading and Account API"),
    Command.withSubcommands([first!, ...rest])
  )
}
