/**
 * An instance's own book: PnL from its own fills against holding its allocation (0 with
 * no fills, whatever the price does), its balances, and the tracking error between two
 * PnL curves in percent of the allocation's starting value.
 */
import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { bookBalances } from "../../src/engine/Portfolio.js"
import { allocationValue, pnlCurve, trackingErrorPct } from "../../src/promotion/Book.js"

const d = (text: string) => new Decimal(text)
const pair = { symbol: "BTCUSDT", base: "BTC", quote: "USDT", minNotional: d("5") }
const fill = (side: "buy" | "sell", qty: string, price: string, fee = "0") => ({
  symbol: "BTCUSDT",
  side,
  price: d(price),
  baseQty: d(qty),
  quoteQty: d(qty).mul(d(price)),
  fee: d(fee),
  feeAsset: "USDT",
  time: 0
})

describe("an instance's own book", () => {
  it("has PnL exactly 0 with no fills while the price moves", () => {
    const curve = pnlCurve(pair, [{ close: d("60000"), fillsKnown: 0 }, { close: d("65000"), fillsKnown: 0 }, { close: d("50000"), fillsKnown: 0 }], [])
    expect(curve.pnl.map((p) => p.toFixed())).toEqual(["0", "0", "0"])
    expect(curve.inMarket).toBe(0)
  })

  it("counts the fills known at each close: unrealised, then realised, minus fees", () => {
    const fills = [fill("buy", "0.1", "60000", "6"), fill("sell", "0.1", "61000", "6.1")]
    const curve = pnlCurve(pair, [{ close: d("60500"), fillsKnown: 1 }, { close: d("59000"), fillsKnown: 1 }, { close: d("70000"), fillsKnown: 2 }], fills)
    expect(curve.pnl.map((p) => p.toFixed())).toEqual(["44", "-106", "87.9"])
    expect(curve.inMarket).toBe(2)
  })

  it("moves only the allocation by its own fills and fees", () => {
    const balances = bookBalances({ USDT: d("1000"), BTC: d("0.01") }, [fill("buy", "0.01", "60000", "0.6")], new Map([["BTCUSDT", pair]]))
    expect(Object.fromEntries([...balances].map(([asset, amount]) => [asset, amount.toFixed()]))).toEqual({ USDT: "399.4", BTC: "0.02" })
    expect(allocationValue(pair, { USDT: d("1000"), BTC: d("0.01") }, d("60000")).toFixed()).toBe("1600")
  })

  it("measures tracking error on the allocation's starting value, and not without one", () => {
    const paper = [d("0"), d("30"), d("-20")]
    const replay = [d("0"), d("10"), d("0")]
    expect(trackingErrorPct(paper, replay, d("1000"))!.toFixed()).toBe("2")
    expect(trackingErrorPct(paper, replay, d("0"))).toBeUndefined()
  })
})
