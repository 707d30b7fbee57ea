/**
 * The config's JSON Schema: the committed file is what the daemon's schema makes today, and
 * every shipped config names it and still loads (test/integration/config-schema-cli.test.ts:
 * `svcbot config schema` prints it).
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { CONFIG_SCHEMA_FILE, configJsonSchema, configJsonSchemaText } from "../../src/config/JsonSchema.js"
import { loadConfig } from "../../src/config/Load.js"
import { ROOT } from "../support/daemon.js"

const SHIPPED = ["config/default.json", "config/compose.json", "config/live.example.json"]

describe("the config's JSON Schema", () => {
  it("is committed as the daemon's schema makes it (run `svcbot config schema > config/svcbot.schema.json` after changing the config)", () => {
    expect(readFileSync(join(ROOT, CONFIG_SCHEMA_FILE), "utf8")).toBe(configJsonSchemaText())
  })

  it("describes the fields a config holds, with their choices and bounds", () => {
    const schema = configJsonSchema() as { properties: Record<string, any>; additionalProperties: boolean }
    expect(schema.additionalProperties).toBe(false)
    expect(schema.properties.mode.enum).toEqual(["paper", "live"])
    expect(Object.keys(schema.properties)).toEqual(expect.arrayContaining(["$schema", "venue", "strategies", "engine", "evidence"]))
  })

  it.each(SHIPPED)("%s names it and loads", async (file) => {
    const raw = JSON.parse(readFileSync(join(ROOT, file), "utf8")) as { $schema?: string }
    expect(raw.$schema).toBe("./svcbot.schema.json")
    await Effect.runPromise(loadConfig(join(ROOT, file), {}))
  })
})
