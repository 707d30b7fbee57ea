/**
 * The pairs' rules as the daemon stored them, read by commands that do not ask the exchange:
 * exact increments, and nothing (not an error) from a database older than the table.
 */
import BetterSqlite3 from "better-sqlite3"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { openDatabase } from "../../src/store/Database.js"
import { storedPairs, storedPrecision, storedStepSizes } from "../../src/store/PairRules.js"

let dir: string
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "svcbot-pairs-"))
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("stored pair rules", () => {
  it("reads the increments as stored, digit for digit", () => {
    const db = openDatabase({ path: join(dir, "svcbot.db") })
    try {
      expect(storedPairs(db)).toEqual([])
      db.prepare("INSERT INTO pair_rules (symbol, base, quote, tick_size, step_size, updated_at) VALUES ('BTCUSDT', 'BTC', 'USDT', '0.01', '0.00001', 0)").run()
      const [pair] = storedPairs(db)
      expect([pair?.symbol, pair?.base, pair?.quote, pair?.tickSize.toFixed(), pair?.stepSize.toFixed()]).toEqual(["BTCUSDT", "BTC", "USDT", "0.01", "0.00001"])
      expect([...storedStepSizes(db)].map(([symbol, step]) => [symbol, step.toFixed()])).toEqual([["BTCUSDT", "0.00001"]])
      const precision = storedPrecision(db)
      expect([precision.price("BTCUSDT"), precision.asset("BTC"), precision.asset("USDT")]).toEqual([2, 5, 2])
    } finally {
      db.close()
    }
  })

  it("are none in a database from before the table", () => {
    const db = new BetterSqlite3(join(dir, "old.db"))
    try {
      db.exec("CREATE TABLE fills (fill_id TEXT PRIMARY KEY)")
      expect(storedPairs(db)).toEqual([])
      expect(storedStepSizes(db).size).toBe(0)
      expect(storedPrecision(db).price("BTCUSDT")).toBeUndefined()
    } finally {
      db.close()
    }
  })
})
