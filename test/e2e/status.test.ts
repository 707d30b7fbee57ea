/**
 * `svcbot status` as an operator runs it: against the database of a daemon that
 * is trading (read-only, beside the writer) and of one that has stopped, its
 * figures checked against the SQLite file itself; and on a ledger written by
 * hand, whose every figure is known.
 */
import { execFile, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import BetterSqlite3 from "better-sqlite3"
import { afterAll, describe, expect, it } from "vitest"
import { Decimal, ZERO } from "../../src/domain/Decimal.js"
import { readStatus, renderStatus, type StatusReport } from "../../src/cli/status.js"
import { openDatabase } from "../../src/store/Database.js"
import { pollUntil } from "../support/daemon.js"

const ROOT = resolve(import.meta.dirname, "../..")
const BIN = join(ROOT, "bin/svcbot.js")
const ENV = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" }

const configuredIds = (JSON.parse(readFileSync(join(ROOT, "config/default.json"), "utf8")) as { strategies: Array<{ id: string }> }).strategies.map((s) => s.id)

const status = (args: ReadonlyArray<string>): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((done) => {
    execFile(process.execPath, [BIN, "status", ...args], { cwd: ROOT, env: ENV, timeout: 60_000 }, (error, stdout, stderr) =>
      done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr })
    )
  })

const daemons: Array<ReturnType<typeof spawn>> = []
const dirs: Array<string> = []
afterAll(() => {
  for (const child of daemons) if (child.exitCode === null) child.kill("SIGKILL")
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), "svcbot-status-"))
  dirs.push(dir)
  return dir
}

/** `svcbot run` for `runFor`; resolves `ready` at its `config.loaded` line and `exit` with its exit code. */
const startDaemon = (dbPath: string, runFor: string) => {
  const child = spawn(process.execPath, [BIN, "run", "--config", "config/default.json", "--for", runFor], {
    cwd: ROOT,
    env: { ...ENV, SVC_DATABASE_PATH: dbPath },
    stdio: ["ignore", "pipe", "pipe"]
  })
  daemons.push(child)
  let stdout = ""
  let markReady = () => {}
  const ready = new Promise<void>((done) => (markReady = done))
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8")
    if (stdout.includes('"event":"config.loaded"')) markReady()
  })
  const exit = new Promise<number | null>((done) => child.on("exit", (code) => done(code)))
  return {
    ready: Promise.race([ready, exit.then(() => Promise.reject(new Error(`the daemon exited before it was ready:\n${stdout}`)))]),
    exit,
    stop: () => child.kill("SIGTERM")
  }
}

interface FillRow {
  strategy_id: string | null
  side: string
  base_qty: string
  fee: string
  fee_asset: string
  symbol: string
  time: number
}

const fillsOf = (dbPath: string): Array<FillRow> => {
  const db = new BetterSqlite3(dbPath, { readonly: true })
  try {
    return db
      .prepare("SELECT o.strategy_id, f.side, f.base_qty, f.fee, f.fee_asset, f.symbol, f.time FROM fills f LEFT JOIN orders o ON o.client_order_id = f.client_order_id")
      .all() as Array<FillRow>
  } finally {
    db.close()
  }
}

describe("svcbot status", () => {
  it("shows the default instances, open orders, fills and PnL of a daemon's database, while it runs and after", async () => {
    const dbPath = join(tempDir(), "svcbot.db")
    const daemon = startDaemon(dbPath, "120s")
    await daemon.ready

    // Beside the running daemon: read-only, it neither blocks the writer nor fails on the lock.
    const during = await status(["--config", "config/default.json", "--db", dbPath, "--json"])
    expect(during.stderr).toBe("")
    expect(during.code).toBe(0)
    expect((JSON.parse(during.stdout) as StatusReport).strategies.map((s) => s.id).sort()).toEqual([...configuredIds].sort())

    // Until the grid has traded (a loaded machine starts the daemon slower than an idle one), then a clean stop.
    await pollUntil(async () => (fillsOf(dbPath).length > 0 ? true : undefined), 90_000, "the grid's first fill on the synthetic tape", 500)
    daemon.stop()
    expect(await daemon.exit).toBe(0)
    const [json, text] = await Promise.all([status(["--config", "config/default.json", "--db", dbPath, "--json"]), status(["--config", "config/default.json", "--db", dbPath])])
    expect(json.code).toBe(0)
    const report = JSON.parse(json.stdout) as StatusReport
    expect(report.database).toBe(dbPath)
    expect(report.strategies.map((s) => s.id).sort()).toEqual([...configuredIds].sort())
    expect(report.strategies.every((s) => s.configured === true && s.paused === null)).toBe(true)
    // Cancel-on-stop leaves nothing open.
    expect(report.openOrders).toEqual([])

    const fills = fillsOf(dbPath)
    expect(fills.length, "the grid traded").toBeGreaterThan(0)
    const dayStart = Date.parse(`${report.day}T00:00:00Z`)
    expect(report.fillsToday).toHaveLength(fills.filter((f) => f.time >= dayStart).length)
    const strategies = [...new Set(fills.flatMap((f) => (f.strategy_id === null ? [] : [f.strategy_id])))].sort()
    // Every configured instance has a PnL row, with or without fills (then exactly 0).
    expect(report.pnl.map((p) => p.strategy)).toEqual([...new Set([...strategies, ...configuredIds])].sort())
    for (const pnl of report.pnl) {
      const own = fills.filter((f) => f.strategy_id === pnl.strategy)
      expect(pnl.fills).toBe(own.length)
      // Position per symbol: bought minus sold, less fees charged in the base asset (a symbol starts with its base).
      for (const position of pnl.positions) {
        const expected = own
          .filter((f) => f.symbol === position.symbol)
          .reduce((sum, f) => {
            const qty = f.side === "buy" ? sum.plus(f.base_qty) : sum.minus(f.base_qty)
            return position.symbol.startsWith(f.fee_asset) ? qty.minus(f.fee) : qty
          }, ZERO)
        expect(position.baseQty).toBe(expected.toFixed())
      }
      expect(new Decimal(pnl.realizedPnl).plus(pnl.unrealizedPnl).minus(pnl.fees).toFixed()).toBe(pnl.netPnl)
    }
    // PnL and average cost at the exchange's precision, from the pair rules the daemon stored (USDT
    // at the 0.01 tick), never the long tail of a division; positions are exact sums.
    const handle = new BetterSqlite3(dbPath, { readonly: true })
    expect(handle.prepare("SELECT symbol FROM pair_rules ORDER BY symbol").all()).toEqual([{ symbol: "BTCUSDT" }, { symbol: "ETHUSDT" }])
    handle.close()
    const places = (text: string) => (text.includes(".") ? text.length - text.indexOf(".") - 1 : 0)
    for (const pnl of report.pnl) {
      for (const amount of [pnl.realizedPnl, pnl.unrealizedPnl, pnl.fees, pnl.netPnl, pnl.dayPnl]) expect(places(amount), `${pnl.strategy} ${amount}`).toBeLessThanOrEqual(2)
      for (const position of pnl.positions) expect(places(position.avgCost), position.avgCost).toBeLessThanOrEqual(2)
    }
    expect(report.lastPrices.map((p) => p.source)).toEqual(report.lastPrices.map(() => "last fill"))
    expect(report.budget.recorded).toBe(false)

    expect(text.code).toBe(0)
    for (const id of configuredIds) expect(text.stdout).toMatch(new RegExp(`^  ${id} `, "m"))
    expect(text.stdout).toContain(`Fills on ${report.day} (UTC): ${report.fillsToday.length}`)
    for (const pnl of report.pnl) expect(text.stdout).toMatch(new RegExp(`^  ${pnl.strategy} +${pnl.fills} .* ${pnl.netPnl.replace(".", "\\.")} `, "m"))
    expect(text.stdout).toContain("last fill price")
  }, 180_000)

  it("a missing database is a usage error naming the path and the fix", async () => {
    const missing = join(tempDir(), "nowhere.db")
    const result = await status(["--db", missing])
    expect(result.code).toBe(2)
    expect(result.stdout).toBe("")
    expect(result.stderr).toContain(`no database at ${missing}`)
    expect(result.stderr).toContain("start the daemon first")
    expect(result.stderr).toContain("--db")
  }, 90_000)
})

describe("the status of a known ledger", () => {
  const NOW = Date.UTC(2026, 10, 22, 12, 0, 0)
  const DAY = Date.UTC(2026, 10, 22)

  const ledger = (): string => {
    const path = join(tempDir(), "svcbot.db")
    const db = openDatabase({ path })
    const order = db.prepare(`INSERT INTO orders (strategy_id, tag, origin, client_order_id, state, symbol, side, type, base_qty,
      quote_order_qty, limit_price, stop_price, filled_base_qty, sent_at, created_at, updated_at)
      VALUES (@strategy, @tag, @origin, @clientOrderId, @state, @symbol, @side, @type, @baseQty, @quoteOrderQty, @limitPrice, @stopPrice, '0', @at, @at, @at)`)
    const event = db.prepare("INSERT INTO order_events (order_id, from_state, to_state, detail, at) VALUES (?, ?, ?, ?, ?)")
    const fill = db.prepare(`INSERT INTO fills (fill_id, client_order_id, symbol, side, liquidity, price, base_qty, quote_qty, fee, fee_asset, time, raw, synced_at)
      VALUES (?, ?, 'BTCUSDT', ?, 'taker', ?, ?, ?, ?, ?, ?, '{}', ?)`)
    const base = { strategy: "grid-1", tag: null, origin: "journal", clientOrderId: null, symbol: "BTCUSDT", quoteOrderQty: null, limitPrice: null, stopPrice: null }
    db.transaction(() => {
      order.run({ ...base, tag: "in", clientOrderId: "co_1", state: "fill", side: "buy", type: "market", baseQty: null, quoteOrderQty: "600", at: DAY - 3_600_000 })
      order.run({ ...base, tag: "out", clientOrderId: "co_2", state: "fill", side: "sell", type: "limit", baseQty: "0.005", limitPrice: "61000", at: DAY + 3_600_000 })
      order.run({ ...base, tag: "bid", clientOrderId: "co_3", state: "resting", side: "buy", type: "limit", baseQty: "0.002", limitPrice: "59000.10", at: DAY + 7_200_000 })
      order.run({ ...base, strategy: "stop-1", tag: "stop", clientOrderId: "co_4", state: "pending", side: "sell", type: "stop-limit", baseQty: "0.001", limitPrice: "58000", stopPrice: "58100", at: DAY + 7_300_000 })
      order.run({ ...base, tag: "gone", clientOrderId: "co_5", state: "cancelled", side: "buy", type: "limit", baseQty: "0.001", limitPrice: "1", at: DAY + 7_400_000 })
      order.run({ ...base, tag: "lost", state: "unknown", side: "buy", type: "limit", baseQty: "0.001", limitPrice: "59000", at: DAY + 7_500_000 })
      order.run({ ...base, tag: "never", state: "not_placed", side: "buy", type: "limit", baseQty: "0.001", limitPrice: "59000", at: DAY + 7_600_000 })
      event.run(7, "unknown", "not_placed", "not found on the service within the absence window", DAY + 7_700_000)
      order.run({ ...base, strategy: null, origin: "external", clientOrderId: "co_9", state: "resting", side: "sell", type: "limit", baseQty: "1", limitPrice: "70000", at: DAY + 7_800_000 })
      event.run(8, null, "resting", "adopted as external", DAY + 7_800_000)
      // Yesterday's buy paid its fee in the base asset; today's sell in the quote asset.
      fill.run("f1", "co_1", "buy", "60000", "0.01", "600", "0.00001", "BTC", DAY - 3_000_000, DAY - 3_000_000)
      fill.run("f2", "co_2", "sell", "61000", "0.005", "305", "0.305", "USDT", DAY + 3_600_000, DAY + 3_600_001)
      db.prepare("INSERT INTO sync_state (stream, high_water_fill_id, high_water_time, backfill_done, updated_at) VALUES ('fills', 'f2', ?, 1, ?)").run(DAY + 3_600_000, DAY + 8_000_000)
      db.prepare(`INSERT INTO strategy_state (strategy_id, strategy, version, state, paused_reason, updated_at) VALUES
        ('grid-1', 'grid', '1.0.0', '{}', NULL, ?), ('stop-1', 'protective-stop', '2.1.0', '{}', 'onTicker threw: boom', ?)`).run(DAY + 100, DAY + 200)
    })()
    db.close()
    return path
  }

  it("lists unfinished orders, the day's fills, and PnL by average cost valued at the last fill price", () => {
    const path = ledger()
    const db = new BetterSqlite3(path, { readonly: true })
    const report = readStatus(db, path, NOW, undefined)
    db.close()

    expect(report.day).toBe("2026-11-22")
    expect(report.strategies).toEqual([
      { id: "grid-1", plugin: "grid", version: "1.0.0", symbol: null, configured: null, enabled: null, paused: null, lastUpdate: new Date(DAY + 100).toISOString() },
      { id: "stop-1", plugin: "protective-stop", version: "2.1.0", symbol: null, configured: null, enabled: null, paused: "onTicker threw: boom", lastUpdate: new Date(DAY + 200).toISOString() }
    ])
    expect(report.openOrders.map((o) => [o.strategy, o.tag, o.state, o.limitPrice, o.stopPrice, o.clientOrderId])).toEqual([
      ["grid-1", "bid", "resting", "59000.10", null, "co_3"],
      ["stop-1", "stop", "pending", "58000", "58100", "co_4"],
      ["grid-1", "lost", "unknown", "59000", null, null],
      [null, null, "resting", "70000", null, "co_9"]
    ])
    expect(report.fillsToday.map((f) => [f.fillId, f.strategy, f.tag, f.price, f.fee, f.feeAsset])).toEqual([["f2", "grid-1", "out", "61000", "0.305", "USDT"]])

    // Bought 0.01 less a 0.00001 BTC fee at 60000; sold 0.005 at 61000; valued at 61000.
    expect(report.pnl).toEqual([
      {
        strategy: "grid-1",
        fills: 2,
        fillsToday: 1,
        positions: [{ symbol: "BTCUSDT", baseQty: "0.00499", avgCost: "60000", lastPrice: "61000" }],
        realizedPnl: "5",
        unrealizedPnl: "4.99",
        fees: "0.905",
        netPnl: "9.085",
        // Today: realized 5 less today's fee 0.305, plus the unrealized 4.99.
        dayPnl: "9.685",
        // Not configured with an allocation: no own balances to show.
        balances: null
      }
    ])
    expect(report.lastPrices).toEqual([{ symbol: "BTCUSDT", price: "61000", source: "last fill", at: new Date(DAY + 3_600_000).toISOString() }])
    expect(report.reconciliation).toMatchObject({
      lastFillSync: new Date(DAY + 8_000_000).toISOString(),
      backfillDone: true,
      inDoubt: 1,
      outcomes: { adopted: 0, notPlaced: 1, external: 1 },
      lastOutcome: { outcome: "external", clientOrderId: "co_9" }
    })
    expect(report.budget).toMatchObject({ recorded: false, placementsToday: 6 })

    const text = renderStatus(report)
    expect(text).toMatch(/^ {2}stop-1 +protective-stop +2\.1\.0 +- +paused: onTicker threw: boom /m)
    expect(text).toMatch(/^ {2}stop-1 +stop +BTCUSDT +sell +stop-limit +0\.001 +58000 stop 58100 +0 +pending +co_4$/m)
    expect(text).toMatch(/^ {2}grid-1 +2 +1 +BTCUSDT 0\.00499 @ 60000 +5 +4\.99 +0\.905 +9\.085 +9\.685 +-$/m)
  })
})
