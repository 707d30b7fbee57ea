/** The pair and clock the backtest unit tests share. */
import { Decimal } from "../../src/domain/Decimal.js"
import type { PairSpec } from "../../src/venue/Matching.js"

export const d = (text: string | number) => new Decimal(text)
export const T0 = 1_700_000_040_000
export const MIN = 60_000

/** A pair whose synthetic book is one basis point per level and deep enough to fill any test order on its first level. */
export const testPair: PairSpec = {
  symbol: "BTCUSDT",
  base: "BTC",
  quote: "USDT",
  tickSize: d("0.01"),
  stepSize: d("0.001"),
  minBaseQty: d("0.001"),
  minNotional: d("5"),
  status: "trading",
  depthNotional: d("10000000")
}
