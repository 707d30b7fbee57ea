import { readFileSync } from "node:fs"
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { parseConfig } from "../../src/config/Load.js"
import { parse } from "../../src/domain/Json.js"
import { insertInstance } from "../../src/optimize/Instance.js"

const instance = { id: "btc-sma-opt", strategy: "sma-crossover", symbol: "BTCUSDT", params: parse(`{"fastPeriod": 6, "quoteQty": "1000.50", "slowPeriod": 40}`), enabled: false }

const inserted = (text: string): string => Either.getOrThrow(insertInstance(text, "cfg.json", instance))

describe("writing an instance into a config", () => {
  it("appends it to strategies and leaves every other byte of the file as it was", () => {
    const text = readFileSync("config/default.json", "utf8")
    const out = inserted(text)
    const entry = `{"id":"btc-sma-opt","strategy":"sma-crossover","symbol":"BTCUSDT","params":{"fastPeriod":6,"quoteQty":"1000.50","slowPeriod":40},"enabled":false}`
    const at = out.indexOf(entry)
    expect(at).toBeGreaterThan(0)
    // What was before the instance is the file up to its last instance, then a comma and the last instance's indentation.
    const lastEnd = text.lastIndexOf("}", text.lastIndexOf("]"))
    expect(out.slice(0, lastEnd + 1)).toBe(text.slice(0, lastEnd + 1))
    expect(out.slice(lastEnd + 1, at)).toBe(",\n    ")
    expect(out.slice(at + entry.length)).toBe(text.slice(lastEnd + 1))
    const config = Either.getOrThrow(parseConfig(JSON.parse(out), "cfg.json"))
    expect(config.strategies.map((s) => s.id)).toEqual(["btc-grid", "btc-sma", "btc-dca", "eth-mm", "btc-sma-opt"])
    expect(config.strategies[4]).toMatchObject({ strategy: "sma-crossover", enabled: false, params: { fastPeriod: 6, quoteQty: "1000.50", slowPeriod: 40 } })
  })

  it("fills an empty strategies list and adds one to a config without it", () => {
    expect(inserted(`{\n  "mode": "paper",\n  "strategies": []\n}\n`)).toBe(`{\n  "mode": "paper",\n  "strategies": [\n    ${JSON.stringify({ ...instance, params: { fastPeriod: 6, quoteQty: "1000.50", slowPeriod: 40 } })}\n  ]\n}\n`)
    const added = inserted(`{ "mode": "paper", "database": { "path": "strategies" } }`)
    expect(JSON.parse(added).strategies).toHaveLength(1)
    expect(added.startsWith(`{ "mode": "paper", "database": { "path": "strategies" },\n  "strategies": [\n    {"id":"btc-sma-opt"`)).toBe(true)
    expect(JSON.parse(inserted("{}")).strategies[0].id).toBe("btc-sma-opt")
  })

  it("refuses an id that is taken, a file that is not a JSON object, and a result the daemon would not accept", () => {
    const taken = insertInstance(`{"strategies": [{"id": "btc-sma-opt", "strategy": "dca", "symbol": "BTCUSDT"}]}`, "cfg.json", instance)
    expect(Either.isLeft(taken) && taken.left.message).toBe('cfg.json already has a strategy instance "btc-sma-opt"; choose a new id for --write-instance (taken: btc-sma-opt)')
    const notJson = insertInstance(`{"strategies": [`, "cfg.json", instance)
    expect(Either.isLeft(notJson) && notJson.left.message).toMatch(/^cfg.json is not JSON \(.*\); fix it before writing an instance into it$/)
    const invalid = insertInstance(`{"strategies": []}`, "cfg.json", { ...instance, symbol: "btc/usdt" })
    expect(Either.isLeft(invalid) && invalid.left.message).toBe(
      "the instance would leave cfg.json invalid, so nothing was written:\n  - strategies[0].symbol: must be a pair written as one upper-case word, e.g. BTCUSDT"
    )
  })
})
