/**
 * A strategy's fills are the ledger's fills of the orders it placed, read through the ledger's
 * one join to the journal: never another strategy's, an external order's or a fill of an order
 * the journal does not know; windows of stored rows as the books and the paper evidence fold
 * them; commands see every fill, attributed or not. A real migrated SQLite file.
 */
import type BetterSqlite3 from "better-sqlite3"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { openDatabase } from "../../src/store/Database.js"
import { readAttributedFills, strategyFills } from "../../src/store/FillLedger.js"

let dir: string
let db: BetterSqlite3.Database

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "svcbot-fills-"))
  db = openDatabase({ path: join(dir, "svcbot.db") })
  const intent = db.prepare("INSERT INTO intents (intent_id, strategy_id, seq, tag, type, body, created_at) VALUES (?, ?, ?, ?, 'limit', '{}', 0)")
  const order = db.prepare(
    "INSERT INTO orders (intent_id, strategy_id, tag, origin, client_order_id, state, symbol, side, type, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'fill', 'BTCUSDT', 'buy', 'limit', 0, 0)"
  )
  const fill = db.prepare(
    "INSERT INTO fills (fill_id, client_order_id, symbol, side, liquidity, price, base_qty, quote_qty, fee, fee_asset, time, raw, synced_at) VALUES (?, ?, 'BTCUSDT', 'buy', 'maker', '100', '1', '100', '0.1', 'USDT', ?, '{}', 0)"
  )
  intent.run("A:1", "A", 1, "entry")
  intent.run("A:2", "A", 2, "exit")
  intent.run("B:1", "B", 1, "entry")
  order.run("A:1", "A", "entry", "journal", "a1")
  order.run("A:2", "A", "exit", "journal", "a2")
  order.run("B:1", "B", "entry", "journal", "b1")
  order.run(null, null, null, "external", "x1")
  // Stored in this order: rowids 1..5.
  fill.run("fa1", "a1", 30)
  fill.run("fa2", "a2", 10)
  fill.run("fb1", "b1", 20)
  fill.run("fx1", "x1", 5)
  fill.run("fz1", "zz", 1)
})
afterAll(() => {
  db.close()
  rmSync(dir, { recursive: true, force: true })
})

const ids = (rows: ReadonlyArray<{ fill_id: string }>) => rows.map((r) => r.fill_id)

describe("a strategy's fills", () => {
  it("are the fills of its own orders, oldest first, with the order's tag and intent", () => {
    const fills = strategyFills(db)
    expect(fills.all("A").map((r) => [r.fill_id, r.strategy_id, r.tag, r.intent_id, r.ledger_rowid])).toEqual([
      ["fa2", "A", "exit", "A:2", 2],
      ["fa1", "A", "entry", "A:1", 1]
    ])
    expect(ids(fills.all("B"))).toEqual(["fb1"])
    expect(fills.all("C")).toEqual([])
  })

  it("are read in windows of stored rows", () => {
    const fills = strategyFills(db)
    expect(fills.lastRowid()).toBe(5)
    expect(ids(fills.storedAfter("A", 0))).toEqual(["fa1", "fa2"])
    expect(ids(fills.storedAfter("A", 1))).toEqual(["fa2"])
    expect(ids(fills.storedAfter("A", 0, 1))).toEqual(["fa1"])
    expect(fills.countStoredAfter("A", 0)).toBe(2)
    expect(fills.countStoredAfter("A", 2)).toBe(0)
    expect(ids(fills.ofOrder("A", "a1", 5))).toEqual(["fa1"])
    expect(fills.ofOrder("A", "a1", 0)).toEqual([])
    expect(fills.ofOrder("B", "a1", 5)).toEqual([])
  })

  it("it was not handed yet are those without heard_at", () => {
    const fills = strategyFills(db)
    expect(ids(fills.unheard("A"))).toEqual(["fa2", "fa1"])
    db.prepare("UPDATE fills SET heard_at = 1 WHERE fill_id = 'fa2'").run()
    expect(ids(fills.unheard("A"))).toEqual(["fa1"])
    db.prepare("UPDATE fills SET heard_at = NULL").run()
  })
})

describe("the ledger as commands show it", () => {
  it("has every fill, those no strategy placed with no strategy or tag, and no raw row", () => {
    const rows = readAttributedFills(db)
    expect(rows.map((r) => [r.fill_id, r.strategy_id, r.tag])).toEqual([
      ["fz1", null, null],
      ["fx1", null, null],
      ["fa2", "A", "exit"],
      ["fb1", "B", "entry"],
      ["fa1", "A", "entry"]
    ])
    expect(rows.every((r) => !("raw" in r))).toBe(true)
  })
})
