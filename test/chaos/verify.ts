/**
 * The chaos suite's verdict on one run: the venue's own order list against the
 * journal (zero duplicates: every venue order belongs to exactly one journaled
 * intent), the venue's fills against the SQLite ledger row for row, and the
 * venue's balances against the starting balances moved by the ledger's fills.
 */
import BetterSqlite3 from "better-sqlite3"
import { expect } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import type { FillTableRow } from "../../src/store/FillLedger.js"
import { admin, type TestVenue } from "../support/venue.js"

/** The chaos runs' strategies: a grid on BTC and a market maker on ETH, both placing and cancelling all the time. */
export const CHAOS_STRATEGIES = [
  { id: "grid", strategy: "grid", symbol: "BTCUSDT", pollMs: 500, params: { lowerPrice: "59000", upperPrice: "61000", levels: 11, orderQty: "0.002", retryAfterMs: 2000 } },
  { id: "mm", strategy: "market-maker", symbol: "ETHUSDT", pollMs: 500, params: { halfSpreadBps: 15, orderQty: "0.05", maxInventory: "0.5", skewBps: 20, requoteBps: 5 } }
]

export const START_BALANCES: Readonly<Record<string, string>> = { USDT: "100000", BTC: "2", ETH: "20" }
const PAIRS: Readonly<Record<string, readonly [string, string]>> = { BTCUSDT: ["BTC", "USDT"], ETHUSDT: ["ETH", "USDT"] }

export interface Verdict {
  /** Placement intents the strategy submitted (cancels aside). */
  readonly intents: number
  /** Refused by the pre-trade risk check (including "placements blocked"): journaled, never sent. */
  readonly riskRefused: number
  readonly placed: number
  /** Refused by the service or the client before acceptance (account status, circuit, 4xx). */
  readonly refused: number
  readonly notPlaced: number
  readonly adoptedAfterLoss: number
  readonly venueOrders: number
  /** Venue orders that no journaled intent accounts for (a second copy of an order would be one). */
  readonly duplicates: number
  /** Journaled intents that ended up with more than one venue order. */
  readonly intentsWithTwoOrders: number
  readonly venueFills: number
  readonly ledgerFills: number
  readonly fillMismatches: number
  readonly balanceMismatches: ReadonlyArray<string>
}

interface OrderRowRaw {
  order_id: number
  intent_id: string | null
  origin: string
  client_order_id: string | null
  state: string
}

type FillRowRaw = Omit<FillTableRow, "raw">

export const verify = async (venue: TestVenue, dbPath: string): Promise<Verdict> => {
  const db = new BetterSqlite3(dbPath, { readonly: true })
  try {
    const orders = db.prepare("SELECT order_id, intent_id, origin, client_order_id, state FROM orders").all() as Array<OrderRowRaw>
    const adoptedAfterLoss = (
      db.prepare("SELECT COUNT(DISTINCT order_id) AS n FROM order_events WHERE from_state = 'unknown' AND to_state = 'accepted'").get() as { n: number }
    ).n
    const ledger = db.prepare("SELECT * FROM fills").all() as Array<FillRowRaw>
    const venueOrders = (await admin(venue, "GET", `/_venue/orders?uid=${venue.uid}`)).orders as Array<{ clientOrderId: string }>
    const venueFills = (await admin(venue, "GET", `/_venue/fills?uid=${venue.uid}`)).fills as Array<Record<string, string | number | null>>
    const accounts = (await admin(venue, "GET", "/_venue/accounts")).accounts as Array<{
      uid: number
      balances: Array<{ asset: string; free: string; locked: string }>
    }>

    const journalByCoid = new Map(orders.filter((o) => o.client_order_id !== null).map((o) => [o.client_order_id!, o]))
    const duplicates = venueOrders.filter((o) => {
      const row = journalByCoid.get(o.clientOrderId)
      return row === undefined || row.origin !== "journal"
    }).length
    const perIntent = new Map<string, number>()
    for (const o of venueOrders) {
      const intent = journalByCoid.get(o.clientOrderId)?.intent_id
      if (intent !== undefined && intent !== null) perIntent.set(intent, (perIntent.get(intent) ?? 0) + 1)
    }

    const ledgerById = new Map(ledger.map((f) => [f.fill_id, f]))
    let fillMismatches = Math.abs(ledger.length - venueFills.length)
    for (const want of venueFills) {
      const got = ledgerById.get(String(want.fillId))
      const same =
        got !== undefined &&
        got.client_order_id === want.clientOrderId &&
        got.symbol === want.symbol &&
        got.side === want.side &&
        got.liquidity === want.liquidity &&
        new Decimal(got.price).eq(String(want.price)) &&
        new Decimal(got.base_qty).eq(String(want.baseQty)) &&
        new Decimal(got.quote_qty).eq(String(want.quoteQty)) &&
        new Decimal(got.fee).eq(String(want.fee)) &&
        got.fee_asset === want.feeAsset &&
        got.time === Number(want.time)
      if (!same) fillMismatches += 1
    }

    const expected = new Map(Object.entries(START_BALANCES).map(([asset, amount]) => [asset, new Decimal(amount)]))
    const add = (asset: string, amount: Decimal) => expected.set(asset, (expected.get(asset) ?? new Decimal(0)).plus(amount))
    for (const f of ledger) {
      const [base, quote] = PAIRS[f.symbol]!
      const sign = f.side === "buy" ? 1 : -1
      add(base, new Decimal(f.base_qty).mul(sign))
      add(quote, new Decimal(f.quote_qty).mul(-sign))
      add(f.fee_asset, new Decimal(f.fee).neg())
    }
    const actual = accounts.find((a) => a.uid === venue.uid)!.balances
    const balanceMismatches: Array<string> = []
    for (const row of actual) {
      const total = new Decimal(row.free).plus(row.locked)
      const want = expected.get(row.asset) ?? new Decimal(0)
      if (!total.eq(want)) balanceMismatches.push(`${row.asset}: venue ${total.toFixed()} vs ledger ${want.toFixed()}`)
    }

    const journaled = orders.filter((o) => o.origin === "journal")
    const intents = db.prepare("SELECT outcome FROM intents WHERE type <> 'cancel'").all() as Array<{ outcome: string }>
    return {
      intents: intents.length,
      riskRefused: intents.filter((i) => i.outcome === "refused").length,
      placed: journaled.filter((o) => o.client_order_id !== null).length,
      refused: journaled.filter((o) => o.state === "refused").length,
      notPlaced: journaled.filter((o) => o.state === "not_placed").length,
      adoptedAfterLoss,
      venueOrders: venueOrders.length,
      duplicates,
      intentsWithTwoOrders: [...perIntent.values()].filter((n) => n > 1).length,
      venueFills: venueFills.length,
      ledgerFills: ledger.length,
      fillMismatches,
      balanceMismatches
    }
  } finally {
    db.close()
  }
}

/** The figures the suite prints after each run. */
export const report = (scenario: string, verdict: Verdict): string =>
  `chaos ${scenario}: intents ${verdict.intents}, placed ${verdict.placed} (adopted after a lost answer ${verdict.adoptedAfterLoss}), ` +
  `refused by risk ${verdict.riskRefused}, refused by the service ${verdict.refused}, not placed ${verdict.notPlaced}, venue orders ${verdict.venueOrders}, duplicates ${verdict.duplicates}, ` +
  `fills venue ${verdict.venueFills} / ledger ${verdict.ledgerFills} (mismatches ${verdict.fillMismatches}), ` +
  `balances ${verdict.balanceMismatches.length === 0 ? "agree" : verdict.balanceMismatches.join("; ")}`

/** The verdict of a clean run: nothing duplicated, nothing lost, the ledger equal to the venue's fills, balances agreeing. */
export const expectNothingLostOrDuplicated = (verdict: Verdict): void => {
  expect(verdict.duplicates).toBe(0)
  expect(verdict.intentsWithTwoOrders).toBe(0)
  expect(verdict.fillMismatches).toBe(0)
  expect(verdict.ledgerFills).toBe(verdict.venueFills)
  expect(verdict.balanceMismatches).toEqual([])
}
