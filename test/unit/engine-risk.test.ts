import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal, isMultipleOf, ZERO } from "../../src/domain/Decimal.js"
import type { PlaceIntent } from "../../src/domain/Intent.js"
import { assess, type ListedPair, type RiskContext, type RiskLimits } from "../../src/engine/Risk.js"

const pair: ListedPair = {
  symbol: "BTCUSDT",
  base: "BTC",
  quote: "USDT",
  status: "trading",
  tickSize: new Decimal("0.01"),
  stepSize: new Decimal("0.00001"),
  minBaseQty: new Decimal("0.0001"),
  minNotional: new Decimal("5")
}

const ctx = (overrides: Partial<RiskContext> = {}): RiskContext => ({
  pair,
  lastPrice: new Decimal("65000"),
  available: (asset) => (asset === "USDT" ? new Decimal("10000") : new Decimal("1")),
  openOrders: 0,
  openNotional: ZERO,
  tagInUse: false,
  dailyPnl: ZERO,
  placementsBlocked: undefined,
  ...overrides
})

const limits: RiskLimits = {
  maxOrderNotional: new Decimal("5000"),
  maxStrategyNotional: new Decimal("8000"),
  maxOpenOrders: 3,
  priceCollarBps: 500,
  dailyLossLimit: new Decimal("100")
}

const limitBuy = (baseQty: string, limitPrice: string): PlaceIntent => ({
  type: "limit",
  tag: "t",
  symbol: "BTCUSDT",
  side: "buy",
  baseQty: new Decimal(baseQty),
  limitPrice: new Decimal(limitPrice)
})

const reason = (intent: PlaceIntent, c: RiskContext, l: RiskLimits = limits) => {
  const result = assess(intent, c, l)
  return result._tag === "Refused" ? result.reason : "approved"
}

describe("pre-trade risk", () => {
  it("quantizes toward caution and locks the notional of a buy", () => {
    const result = assess(limitBuy("0.0123456", "64999.999"), ctx(), limits)
    expect(result._tag).toBe("Approved")
    if (result._tag !== "Approved") return
    expect(result.order.baseQty?.toFixed()).toBe("0.01234")
    expect(result.order.limitPrice?.toFixed()).toBe("64999.99")
    expect(result.lock).toEqual({ asset: "USDT", amount: new Decimal("0.01234").mul("64999.99") })
  })

  it("refuses each rule with its reason", () => {
    expect(reason(limitBuy("0.01", "65000"), ctx({ placementsBlocked: "ACCOUNT_FROZEN" }))).toBe("placements-blocked")
    expect(reason(limitBuy("0.01", "65000"), ctx({ dailyPnl: new Decimal("-100") }))).toBe("kill-switch")
    expect(reason(limitBuy("0.01", "65000"), ctx({ tagInUse: true }))).toBe("tag-in-use")
    expect(reason(limitBuy("0.01", "65000"), ctx({ pair: undefined }))).toBe("unknown-pair")
    expect(reason(limitBuy("0.01", "65000"), ctx({ pair: { ...pair, status: "halted" } }))).toBe("pair-not-trading")
    expect(reason(limitBuy("0.00005", "65000"), ctx())).toBe("below-min-qty")
    expect(reason(limitBuy("0.0001", "40000"), ctx({ lastPrice: new Decimal("40000") }))).toBe("below-min-notional")
    expect(reason(limitBuy("0.01", "70000"), ctx())).toBe("price-collar")
    expect(reason(limitBuy("0.01", "65000"), ctx({ lastPrice: undefined }))).toBe("no-last-price")
    expect(reason(limitBuy("0.1", "65000"), ctx())).toBe("order-notional-cap")
    expect(reason(limitBuy("0.05", "65000"), ctx({ openNotional: new Decimal("5000") }))).toBe("strategy-notional-cap")
    expect(reason(limitBuy("0.01", "65000"), ctx({ openOrders: 3 }))).toBe("open-order-cap")
    expect(reason(limitBuy("0.01", "65000"), ctx({ available: () => new Decimal("10") }))).toBe("insufficient-balance")
    const market: PlaceIntent = { type: "market", tag: "m", symbol: "BTCUSDT", side: "buy", quoteOrderQty: new Decimal("50"), maxSlippageBps: 0 }
    expect(reason(market, ctx())).toBe("invalid-amount")
    expect(reason({ ...market, maxSlippageBps: 50 }, ctx())).toBe("approved")
  })

  it("an approved order is always on the pair's grid, within caps and covered by the available balance", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10_000_000 }),
        fc.integer({ min: 1, max: 20_000_000 }),
        fc.constantFrom("buy" as const, "sell" as const),
        fc.integer({ min: 0, max: 20000 }),
        (qtyUnits, priceCents, side, freeUnits) => {
          const intent: PlaceIntent = {
            type: "limit",
            tag: "p",
            symbol: "BTCUSDT",
            side,
            baseQty: new Decimal(qtyUnits).div(1_000_000_0),
            limitPrice: new Decimal(priceCents).div(300)
          }
          const free = new Decimal(freeUnits).div(10)
          const result = assess(intent, ctx({ available: () => free }), limits)
          if (result._tag === "Refused") return
          const { baseQty, limitPrice } = result.order
          expect(isMultipleOf(baseQty!, pair.stepSize) && isMultipleOf(limitPrice!, pair.tickSize)).toBe(true)
          expect(baseQty!.lte(intent.baseQty)).toBe(true)
          if (side === "buy") expect(limitPrice!.lte(intent.limitPrice)).toBe(true)
          else expect(limitPrice!.gte(intent.limitPrice)).toBe(true)
          expect(result.notional.gte(pair.minNotional) && result.notional.lte(limits.maxOrderNotional!)).toBe(true)
          expect(result.lock.amount.lte(free)).toBe(true)
        }
      ),
      { numRuns: 1000 }
    )
  })
})
