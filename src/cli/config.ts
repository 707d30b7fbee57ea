/**
 * `svcbot config schema`: prints the config file's JSON Schema (the one committed as
 * config/svcbot.schema.json), for editors and for configs kept outside this repository.
 */
import { Command } from "@effect/cli"
import { Console } from "effect"
import { configJsonSchemaText } from "../config/JsonSchema.js"

const schemaCommand = Command.make("schema", {}, () => Console.log(configJsonSchemaText().trimEnd())).pipe(
  Command.withDescription("Print the config file's JSON Schema (config/svcbot.schema.json); name it in a config's \"$schema\" for checks and completion in editors")
)

export const configCommand = Command.make("config").pipe(
  Command.withDescription("The config file's tools"),
  Command.withSubcommands([schemaCommand])
)
