/** `svcbot config schema` prints the config's JSON Schema, the same text the committed file holds. */
import { afterAll, describe, expect, it } from "vitest"
import { configJsonSchemaText } from "../../src/config/JsonSchema.js"
import { killAll, svcbot } from "../support/daemon.js"

afterAll(killAll)

describe("the config's JSON Schema", () => {
  it("is what `svcbot config schema` prints", async () => {
    const run = svcbot(["config", "schema"])
    expect(await run.exit, run.stderr.join("")).toBe(0)
    expect(`${run.lines.join("\n")}\n`).toBe(configJsonSchemaText())
  })
})
