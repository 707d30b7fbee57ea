/**
 * `svcbot ack-lost`: an operator acknowledges orders the venue no longer knows
 * (state `lost`), after checking on the website what became of them. Health
 * names unacknowledged lost orders; acknowledging clears that reason. Works on
 * the daemon's database while it runs (SQLite WAL, one short transaction).
 */
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Layer, Option } from "effect"
import { existsSync } from "node:fs"
import { Database } from "../store/Database.js"
import { OrderJournal } from "../store/OrderJournal.js"
import { CliError, usageError } from "./errors.js"
import { described } from "./Help.js"
import { daemonDatabase } from "./status.js"

const options = {
  clientOrderId: Args.text({ name: "CLIENT_ORDER_ID" }).pipe(Args.optional, Args.withDescription("the lost order to acknowledge")),
  all: Options.boolean("all").pipe(Options.withDescription("acknowledge every lost order")),
  config: Options.file("config").pipe(Options.optional, Options.withDescription("the daemon's JSON config (for its database.path)")),
  db: Options.text("db").pipe(
    Options.withPseudoName("FILE"),
    Options.optional,
    Options.withDescription("the daemon's SQLite file (default: the config's database.path, else $SVC_DATABASE_PATH, else data/svcbot.db)")
  )
}

export const ackLostCommand = Command.make("ack-lost", options, (flags) =>
  Effect.gen(function* () {
    if (Option.isSome(flags.clientOrderId) === flags.all) {
      return yield* Effect.fail(usageError("name one lost order (svcbot ack-lost CLIENT_ORDER_ID) or pass --all, not both"))
    }
    const { path } = yield* daemonDatabase(flags.config, flags.db)
    if (!existsSync(path)) return yield* Effect.fail(usageError(`no database at ${path}: pass the daemon's --config or --db`))
    const acknowledged = yield* Effect.flatMap(OrderJournal, (journal) => journal.acknowledgeLost(Option.getOrUndefined(flags.clientOrderId), Date.now())).pipe(
      Effect.provide(OrderJournal.Default.pipe(Layer.provide(Database.Default({ path })))),
      Effect.scoped,
      Effect.mapError((error) => new CliError({ message: `cannot update the database ${path}: ${error.message}`, exitCode: 1 }))
    )
    if (Option.isSome(flags.clientOrderId) && acknowledged.length === 0) {
      return yield* Effect.fail(usageError(`${flags.clientOrderId.value} is not an unacknowledged lost order in ${path}: \`svcbot status\` lists the lost ones`))
    }
    yield* Console.log(acknowledged.length === 0 ? "no lost orders to acknowledge" : `acknowledged ${acknowledged.length} lost order(s): ${acknowledged.join(", ")}`)
  })
).pipe(
  Command.withDescription(
    described("Acknowledge lost orders once checked on the website", {
      details: ["A lost order is one the venue no longer knows; health names it until it is acknowledged. Give one CLIENT_ORDER_ID or --all. `svcbot status` lists the lost orders."],
      examples: ["svcbot ack-lost co_0000000001", "svcbot ack-lost --all --config config/default.json", "svcbot ack-lost co_0000000001 --db data/svcbot.db"]
    })
  )
)
