/**
 * `svcbot config schema`: prints the config file's JSON Schema (the one committed as
 * config/svcbot.schema.json), for editors and for configs kept outside this repository.
 */
import { Command } from "@effect/cli"
import { Console } from "effect"
import { configJsonSchemaText } from "../config/JsonSchema.js"
import { described } from "./Help.js"

const schemaCommand = Command.make("schema", {}, () => Console.log(configJsonSchemaText().trimEnd())).pipe(
  Command.withDescription(
    described("Print the config file's JSON Schema", {
      details: ['The same as the committed config/svcbot.schema.json. Name it in a config\'s "$schema" for checks and completion in editors.'],
      examples: ["svcbot config schema", "svcbot config schema > config/svcbot.schema.json"]
    })
  )
)

export const configCommand = Command.make("config").pipe(
  Command.withDescription(
    described("The config file's tools", {
      examples: ["svcbot config schema", "svcbot config schema --help"]
    })
  ),
  Command.withSubcommands([schemaCommand])
)
