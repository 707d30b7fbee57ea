/**
 * The venue's side of a parity check: the dev account's fills in comparable
 * form, and its PnL over a tape, valued the way the backtester values a run
 * (start holdings at the first open, end holdings at the last close).
 */
import type { BacktestSetup } from "../../src/backtest/Backtest.js"
import type { ComparableFill } from "../../src/backtest/Parity.js"
import { type Decimal, fromString, ZERO } from "../../src/domain/Decimal.js"
import type { StrategyDefinition } from "../../src/strategy/Strategy.js"
import { decodeAccounts, devAccounts, devTradeKey, toFees, toPairSpec } from "../../src/venue/Accounts.js"
import type { VenueCandle as Candle } from "../../src/venue/Matching.js"
import type { TestVenue } from "./venue.js"

/** The dev account's starting balance of an asset. */
export const devBalance = (asset: string): Decimal => fromString(devAccounts.accounts[0]!.balances?.[asset] ?? "0")

/** A backtest of one-minute candles on the dev account's first pair, with its balances, the venue's fees and settle delay (50 ms). */
export const devBacktest = <P, S>(strategy: StrategyDefinition<P, S>, params: P, candles: ReadonlyArray<Candle>): BacktestSetup<P, S> => ({
  strategy,
  params,
  pair: toPairSpec(decodeAccounts(devAccounts).pairs[0]!),
  fees: toFees(devAccounts.fees),
  settleDelayMs: 50,
  balances: { USDT: devBalance("USDT"), BTC: devBalance("BTC") },
  candles,
  intervalMs: 60_000
})

export interface VenueFillRow {
  readonly side: "buy" | "sell"
  readonly liquidity: "maker" | "taker"
  readonly price: string
  readonly baseQty: string
  readonly fee: string
  readonly feeAsset: string
}

export const venueFillRows = async (venue: TestVenue): Promise<ReadonlyArray<VenueFillRow>> =>
  ((await venue.admin("GET", `/_venue/fills?uid=${devTradeKey.uid}`)) as { fills: ReadonlyArray<VenueFillRow> }).fills

export const comparable = (rows: ReadonlyArray<VenueFillRow>): Array<ComparableFill> =>
  rows.map((f) => ({ side: f.side, liquidity: f.liquidity, price: fromString(f.price), baseQty: fromString(f.baseQty) }))

/** PnL of the dev account's BTC and USDT over `candles`, in USDT. */
export const venuePnl = async (venue: TestVenue, candles: ReadonlyArray<Candle>): Promise<Decimal> => {
  const { accounts } = (await venue.admin("GET", "/_venue/accounts")) as {
    accounts: ReadonlyArray<{ uid: number; balances: ReadonlyArray<{ asset: string; free: string; locked: string }> }>
  }
  const rows = accounts.find((a) => a.uid === devTradeKey.uid)!.balances
  const held = (asset: string): Decimal => {
    const row = rows.find((r) => r.asset === asset)
    return row === undefined ? ZERO : fromString(row.free).plus(fromString(row.locked))
  }
  const last = candles[candles.length - 1]!
  return held("USDT").plus(held("BTC").mul(last.close)).minus(devBalance("USDT").plus(devBalance("BTC").mul(candles[0]!.open)))
}
