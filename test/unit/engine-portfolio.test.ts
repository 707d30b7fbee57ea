import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { portfolio, type PortfolioFill } from "../../src/engine/Portfolio.js"

const pairs = new Map([["BTCUSDT", { base: "BTC", quote: "USDT" }]])
const f = (side: string, qty: string, price: string, time: number, fee = "0", feeAsset = "USDT"): PortfolioFill => ({
  symbol: "BTCUSDT",
  side,
  baseQty: new Decimal(qty),
  price: new Decimal(price),
  fee: new Decimal(fee),
  feeAsset,
  time
})

describe("portfolio", () => {
  it("averages cost, realizes on sells and values the rest at the last price", () => {
    const snapshot = portfolio(
      [f("buy", "1", "100", 1, "0.1"), f("buy", "1", "200", 2, "0.2"), f("sell", "0.5", "300", 3, "0.15")],
      pairs,
      new Map([["BTCUSDT", new Decimal("250")]])
    )
    const position = snapshot.positions[0]!
    expect(position.baseQty.toFixed()).toBe("1.5")
    expect(position.avgCost.toFixed()).toBe("150")
    expect(snapshot.realizedPnl.toFixed()).toBe("75")
    expect(snapshot.unrealizedPnl.toFixed()).toBe("150")
    expect(snapshot.feesQuote.toFixed()).toBe("0.45")
    expect(snapshot.netPnl.toFixed()).toBe("224.55")
    expect(snapshot.fees).toEqual({ USDT: "0.45" })
  })

  it("a base-asset fee shrinks the position and is valued at the fill price", () => {
    const snapshot = portfolio([f("buy", "1", "100", 1, "0.001", "BTC")], pairs, new Map())
    expect(snapshot.positions[0]!.baseQty.toFixed()).toBe("0.999")
    expect(snapshot.feesQuote.toFixed()).toBe("0.1")
  })

  it("money is conserved: realized + unrealized equals sell proceeds + position value - buy cost", () => {
    const fillArb = fc.record({
      buy: fc.boolean(),
      qty: fc.integer({ min: 1, max: 1000 }),
      price: fc.integer({ min: 1, max: 100000 })
    })
    fc.assert(
      fc.property(fc.array(fillArb, { minLength: 1, maxLength: 30 }), fc.integer({ min: 1, max: 100000 }), (rows, last) => {
        const fills = rows.map((r, i) => f(r.buy ? "buy" : "sell", String(r.qty / 100), String(r.price / 100), i))
        const lastPrice = new Decimal(last).div(100)
        const snapshot = portfolio(fills, pairs, new Map([["BTCUSDT", lastPrice]]))
        let cash = new Decimal(0)
        let position = new Decimal(0)
        for (const fill of fills) {
          const value = fill.baseQty.mul(fill.price)
          cash = fill.side === "buy" ? cash.minus(value) : cash.plus(value)
          position = fill.side === "buy" ? position.plus(fill.baseQty) : position.minus(fill.baseQty)
        }
        // Average cost divides, so equality holds to the 64-digit working precision.
        const drift = snapshot.realizedPnl.plus(snapshot.unrealizedPnl).minus(cash.plus(position.mul(lastPrice))).abs()
        expect(drift.lt("1e-40")).toBe(true)
      }),
      { numRuns: 500 }
    )
  })
})
