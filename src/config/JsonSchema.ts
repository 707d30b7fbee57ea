/**
 * The config file's JSON Schema, made from the same Effect schema the daemon validates
 * with, so an editor checks and completes a config as the daemon will read it. It is
 * committed as config/svcbot.schema.json, which the shipped configs name in `$schema`;
 * `svcbot config schema` prints it, and a test keeps the committed file in step.
 */
import { JSONSchema } from "effect"
import { Config } from "./Config.js"

/** Where the committed schema lives, from the repository root. */
export const CONFIG_SCHEMA_FILE = "config/svcbot.schema.json"

export const configJsonSchema = (): object => ({
  ...JSONSchema.make(Config),
  title: "svcbot config",
  description: "The svcbot daemon's configuration (README.md, Configuration). Strategy params are checked against each strategy's own schema when the daemon loads it."
})

/** The schema as the committed file holds it. */
export const configJsonSchemaText = (): string => `${JSON.stringify(configJsonSchema(), null, 2)}\n`
