import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal, isMultipleOf } from "../../../src/domain/Decimal.js"
import { FreeFunds, limitOrder, marketBuy, marketSell, positionChange, roundPrice, shiftBps, stopLimitOrder } from "../../../src/strategy/orders.js"
import { BTCUSDT, viewOf } from "../../../src/strategy/testing.js"

const view = (balances: Record<string, string>) => viewOf({ params: {}, balances })

describe("order builders", () => {
  it("round buy prices down and sell prices up to the tick", () => {
    expect(roundPrice(new Decimal("100.019"), "buy", BTCUSDT).toFixed()).toBe("100.01")
    expect(roundPrice(new Decimal("100.011"), "sell", BTCUSDT).toFixed()).toBe("100.02")
    expect(shiftBps(new Decimal("10000"), -25).toFixed()).toBe("9975")
  })

  it("a limit order is on the tick and the step, above the minimums, and within the free balance — or not placed", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("buy" as const, "sell" as const),
        fc.integer({ min: 1, max: 10_000_000 }),
        fc.integer({ min: 1, max: 10_000_000 }),
        fc.integer({ min: 0, max: 100_000 }),
        (side, priceCents, qtyUnits, free) => {
          const funds = new FreeFunds(view({ USDT: String(free), BTC: new Decimal(free).div(1000).toFixed() }))
          const wanted = { tag: "t", side, limitPrice: new Decimal(priceCents).div(1000), baseQty: new Decimal(qtyUnits).div(1e7) }
          const before = { USDT: funds.available("USDT"), BTC: funds.available("BTC") }
          const intent = limitOrder(wanted, BTCUSDT, funds)
          if (intent === undefined) {
            expect(funds.available("USDT").eq(before.USDT) && funds.available("BTC").eq(before.BTC)).toBe(true)
            return
          }
          expect(isMultipleOf(intent.limitPrice, BTCUSDT.tickSize) && isMultipleOf(intent.baseQty, BTCUSDT.stepSize)).toBe(true)
          expect(intent.baseQty.lte(wanted.baseQty)).toBe(true)
          expect(intent.baseQty.mul(intent.limitPrice).gte(BTCUSDT.minNotional)).toBe(true)
          if (side === "buy") expect(intent.baseQty.mul(intent.limitPrice).lte(before.USDT)).toBe(true)
          else expect(intent.baseQty.lte(before.BTC)).toBe(true)
          expect(funds.available("USDT").gte(0) && funds.available("BTC").gte(0)).toBe(true)
        }
      ),
      { numRuns: 500 }
    )
  })

  it("free funds are shared by every order built in one handler call", () => {
    const funds = new FreeFunds(view({ USDT: "150" }))
    const first = limitOrder({ tag: "a", side: "buy", baseQty: new Decimal("0.01"), limitPrice: new Decimal("10000") }, BTCUSDT, funds)
    const second = limitOrder({ tag: "b", side: "buy", baseQty: new Decimal("0.01"), limitPrice: new Decimal("10000") }, BTCUSDT, funds)
    expect([first?.tag, second?.tag]).toEqual(["a", undefined])
    expect(funds.available("USDT").toFixed()).toBe("50")
    expect(marketBuy({ tag: "c", quoteOrderQty: new Decimal("50"), maxSlippageBps: 10 }, BTCUSDT, funds)?.tag).toBe("c")
    expect(marketBuy({ tag: "d", quoteOrderQty: new Decimal("5"), maxSlippageBps: 10 }, BTCUSDT, funds)).toBeUndefined()
  })

  it("market and stop-limit orders respect the minimums", () => {
    const funds = new FreeFunds(view({ USDT: "100", BTC: "1" }))
    expect(marketBuy({ tag: "a", quoteOrderQty: new Decimal("4.99"), maxSlippageBps: 10 }, BTCUSDT, funds)).toBeUndefined()
    expect(marketSell({ tag: "b", baseQty: new Decimal("0.000499"), maxSlippageBps: 10, referencePrice: new Decimal("10000") }, BTCUSDT, funds)).toBeUndefined()
    const sell = marketSell({ tag: "c", baseQty: new Decimal("0.000509"), maxSlippageBps: 10, referencePrice: new Decimal("10000") }, BTCUSDT, funds)
    expect(sell?.type === "market" && sell.side === "sell" && sell.baseQty.toFixed()).toBe("0.0005")
    const stop = stopLimitOrder({ tag: "d", side: "sell", baseQty: new Decimal("0.5"), stopPrice: new Decimal("9800.001"), limitPrice: new Decimal("9750.001") }, BTCUSDT, funds)
    expect([stop?.stopPrice.toFixed(), stop?.limitPrice.toFixed()]).toEqual(["9800.01", "9750.01"])
  })

  it("a fill changes a position by its base quantity, net of a fee paid in base", () => {
    expect(positionChange({ side: "buy", baseQty: new Decimal("1"), fee: new Decimal("0.001"), feeAsset: "BTC" }, "BTC").toFixed()).toBe("0.999")
    expect(positionChange({ side: "sell", baseQty: new Decimal("1"), fee: new Decimal("10"), feeAsset: "USDT" }, "BTC").toFixed()).toBe("-1")
  })
})
