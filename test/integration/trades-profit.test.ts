/**
 * Round trips and profit from a known ledger (a real SQLite file with the daemon's schema):
 * a long trip closed at a profit, one closed at a loss, one still open; fees in base and quote.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { roundTrips } from "../../src/engine/RoundTrips.js"
import { openDatabase } from "../../src/store/Database.js"
import { d } from "../support/pair.js"
import { killAll, svcbot } from "../support/daemon.js"

afterAll(killAll)

const T = Date.UTC(2026, 10, 20)
const MIN = 60_000
const pairs = new Map([["BTCUSDT", { base: "BTC", quote: "USDT" }]])
const fill = (side: "buy" | "sell", price: string, qty: string, fee: string, feeAsset: string, minutes: number) => ({
  symbol: "BTCUSDT",
  side,
  price: d(price),
  baseQty: d(qty),
  quoteQty: d(price).mul(qty),
  fee: d(fee),
  feeAsset,
  time: T + minutes * MIN
})

describe("roundTrips", () => {
  it("opens a trip when the position leaves flat and closes it when it is back under one step", () => {
    const trips = roundTrips(
      [
        // Buy 0.01, fee in base: 0.00999 held; sold in two parts.
        fill("buy", "60000", "0.01", "0.00001", "BTC", 0),
        fill("sell", "61000", "0.005", "0.305", "USDT", 10),
        fill("sell", "62000", "0.00499", "0.30938", "USDT", 30),
        fill("buy", "62000", "0.01", "0.62", "USDT", 40),
        fill("sell", "61000", "0.01", "0.61", "USDT", 50),
        fill("buy", "61500", "0.002", "0.123", "USDT", 60)
      ],
      pairs,
      new Map([["BTCUSDT", d("0.00001")]])
    )
    expect(trips.map((t) => [t.side, t.closedAt === undefined ? "open" : (t.closedAt - t.openedAt) / MIN, t.entryPrice.toFixed(), t.exitPrice?.toDecimalPlaces(2).toFixed(), t.netPnl.toFixed()])).toEqual([
      // Cost 60000 per unit on 0.00999 (the fee in base is 0.6 USDT): (61000-60000)*0.005 + (62000-60000)*0.00499 = 14.98, less 0.6 + 0.305 + 0.30938.
      ["long", 30, "60000", "61499.5", "13.76562"],
      ["long", 10, "62000", "61000", "-11.23"],
      ["long", "open", "61500", undefined, "-0.123"]
    ])
  })
})

describe("svcbot trades and svcbot profit", () => {
  const ledger = (): string => {
    const path = join(mkdtempSync(join(tmpdir(), "svcbot-trades-")), "svcbot.db")
    const db = openDatabase({ path })
    const order = db.prepare(`INSERT INTO orders (strategy_id, tag, origin, client_order_id, state, symbol, side, type, base_qty, filled_base_qty, created_at, updated_at)
      VALUES (?, ?, 'journal', ?, 'fill', 'BTCUSDT', ?, 'limit', ?, ?, ?, ?)`)
    const insertFill = db.prepare(`INSERT INTO fills (fill_id, client_order_id, symbol, side, liquidity, price, base_qty, quote_qty, fee, fee_asset, time, raw, synced_at)
      VALUES (?, ?, 'BTCUSDT', ?, 'taker', ?, ?, ?, ?, ?, ?, '{}', ?)`)
    const rows: Array<[string, string, "buy" | "sell", string, string, string, string, number]> = [
      ["grid", "co_1", "buy", "60000", "0.01", "0.6", "USDT", 0],
      ["grid", "co_2", "sell", "61000", "0.01", "0.61", "USDT", 20],
      ["grid", "co_3", "buy", "62000", "0.01", "0.62", "USDT", 40],
      ["grid", "co_4", "sell", "61000", "0.01", "0.61", "USDT", 50],
      ["dca", "co_5", "buy", "61000", "0.002", "0.122", "USDT", 60]
    ]
    db.transaction(() => {
      for (const [strategy, id, side, price, qty, fee, feeAsset, minutes] of rows) {
        order.run(strategy, id, id, side, qty, qty, T, T)
        insertFill.run(`f-${id}`, id, side, price, qty, d(price).mul(qty).toFixed(), fee, feeAsset, T + minutes * MIN, T + minutes * MIN)
      }
    })()
    db.close()
    return path
  }

  it("trades --json lists each instance's round trips; --instance and --since narrow them", async () => {
    const path = ledger()
    const all = svcbot(["trades", "--db", path, "--json"])
    expect(await all.exit, all.stderr.join("")).toBe(0)
    const { trades } = JSON.parse(all.lines.join("")) as { trades: Array<Record<string, unknown>> }
    expect(trades.map((t) => [t.instance, t.netPnl, t.fees, t.durationMs])).toEqual([
      ["dca", "-0.122", "0.122", null],
      ["grid", "8.79", "1.21", 20 * MIN],
      ["grid", "-11.23", "1.23", 10 * MIN]
    ])
    const narrowed = svcbot(["trades", "--db", path, "--instance", "grid", "--since", String(T + 30 * MIN)])
    expect(await narrowed.exit).toBe(0)
    expect(narrowed.lines[0]).toMatch(/^instance\s+symbol\s+side\s+opened/)
    expect(narrowed.lines.slice(1).map((l) => l.split(/\s+/).slice(0, 3).join(" "))).toEqual(["grid BTCUSDT long"])
  })

  it("profit shows realised, unrealised, fees, win rate, best and worst per instance", async () => {
    const path = ledger()
    const run = svcbot(["profit", "--db", path, "--json"])
    expect(await run.exit, run.stderr.join("")).toBe(0)
    const { profit } = JSON.parse(run.lines.join("")) as { profit: Array<Record<string, unknown>> }
    expect(profit).toEqual([
      { instance: "dca", symbol: null, realizedPnl: "0", unrealizedPnl: "0", fees: "0.122", netPnl: "-0.122", trades: 0, winRatePct: null, best: null, worst: null },
      { instance: "grid", symbol: null, realizedPnl: "0", unrealizedPnl: "0", fees: "2.44", netPnl: "-2.44", trades: 2, winRatePct: "50", best: "8.79", worst: "-11.23" }
    ])
  })
})
