/**
 * The double estimates market settlement takes instead of 64-digit divisions (Book.ts,
 * Matching.ts) must give exactly the decimals the divisions give, or say they cannot tell:
 * a backtest's fills are the same either way. Near-whole quotients are where an estimate
 * could round the wrong way, so they are drawn on purpose.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal, divideDown, divideDownFast, estimatedSteps, fromString, ONE_BPS, quantize } from "../../src/domain/Decimal.js"
import { levelSpacing } from "../../src/venue/Book.js"
import { MatchingEngine } from "../../src/venue/Matching.js"
import type { PairSpec } from "../../src/venue/Orders.js"

const d = fromString

/** A positive decimal of up to `digits` digits with up to `places` of them after the point. */
const amount = (digits: number, places: number) =>
  fc.tuple(fc.bigInt({ min: 1n, max: 10n ** BigInt(digits) - 1n }), fc.integer({ min: 0, max: places })).map(([units, scale]) => new Decimal(units.toString()).div(new Decimal(10).pow(scale)))

const step = fc.constantFrom("0.00001", "0.001", "0.01", "0.05", "0.1", "1", "0.0025").map(d)

/** The exact answers the estimates stand in for. */
const exactSpacing = (tickSize: Decimal, price: Decimal): Decimal => {
  const spacing = quantize(price.mul(ONE_BPS), tickSize, "ceil")
  return spacing.isZero() ? tickSize : spacing
}

describe("estimated steps", () => {
  it("refuses to round an estimate that lies within its error of a whole number", () => {
    expect(estimatedSteps(5.5, "down")).toBe(5)
    expect(estimatedSteps(5.5, "up")).toBe(6)
    expect(estimatedSteps(6, "down")).toBeUndefined()
    expect(estimatedSteps(6 * (1 + 1e-13), "up")).toBeUndefined()
    expect(estimatedSteps(6 * (1 - 1e-13), "down")).toBeUndefined()
    expect(estimatedSteps(-1, "down")).toBeUndefined()
    expect(estimatedSteps(Number.NaN, "down")).toBeUndefined()
    expect(estimatedSteps(Number.POSITIVE_INFINITY, "up")).toBeUndefined()
    expect(estimatedSteps(2 ** 41, "down")).toBeUndefined()
  })

  it("divideDownFast gives divideDown's decimal for any amounts", () => {
    fc.assert(
      fc.property(amount(20, 12), amount(12, 6), step, (dividend, divisor, unit) => {
        expect(divideDownFast(dividend, divisor, unit).eq(divideDown(dividend, divisor, unit))).toBe(true)
      }),
      { numRuns: 3000 }
    )
  })

  it("divideDownFast gives divideDown's decimal for quotients at or a hair from a whole number of steps", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), amount(10, 4), step, fc.constantFrom("0", "1e-30", "-1e-30", "1e-12", "-1e-12"), (steps, divisor, unit, nudge) => {
        const dividend = divisor.mul(unit).mul(steps).add(new Decimal(nudge))
        if (dividend.isNegative()) return
        const fast = divideDownFast(dividend, divisor, unit)
        expect(fast.eq(divideDown(dividend, divisor, unit))).toBe(true)
        // Zero is written without a sign, as divideDown writes it.
        expect(fast.toFixed()).not.toBe("-0")
      }),
      { numRuns: 3000 }
    )
  })

  it("levelSpacing gives the exact spacing, whole basis points of whole ticks included", () => {
    fc.assert(
      fc.property(amount(12, 8), step, (price, tickSize) => {
        const shape = { tickSize, stepSize: d("0.00001"), depthNotional: d("25000") }
        expect(levelSpacing(shape, price).eq(exactSpacing(tickSize, price))).toBe(true)
      }),
      { numRuns: 3000 }
    )
    for (const price of ["60000", "10000", "0.01", "123456789.01", "99999.99"]) {
      const shape = { tickSize: d("0.01"), stepSize: d("0.00001"), depthNotional: d("25000") }
      expect(levelSpacing(shape, d(price)).toFixed()).toBe(exactSpacing(d("0.01"), d(price)).toFixed())
    }
  })
})

describe("market orders against the slippage bound", () => {
  const pair = (tickSize: string): PairSpec => ({
    symbol: "BTCUSDT",
    base: "BTC",
    quote: "USDT",
    tickSize: d(tickSize),
    stepSize: d("0.00001"),
    minBaseQty: d("0.00001"),
    minNotional: d("5"),
    status: "trading",
    depthNotional: d("25000")
  })

  /** One market order settled at `price`: how it ended and what it filled at. */
  const settle = (price: string, side: "buy" | "sell", bps: number) => {
    const engine = new MatchingEngine({ pairs: [pair("0.01")], fees: { maker: d("0.001"), taker: d("0.002") }, settleDelayMs: 50, prices: { BTCUSDT: d(price) } })
    engine.setBalance(1, "USDT", d("10000000"))
    engine.setBalance(1, "BTC", d("100"))
    const request =
      side === "buy"
        ? { type: "market" as const, symbol: "BTCUSDT", side, quoteOrderQty: d("1000"), maxSlippageBps: bps }
        : { type: "market" as const, symbol: "BTCUSDT", side, baseQty: d("0.5"), maxSlippageBps: bps }
    const placed = engine.place(1, request, 0)
    if (!placed.ok) throw new Error(placed.msg)
    engine.settleDue(50)
    return { kind: engine.order(1, placed.clientOrderId)!.kind, prices: engine.allFills(1).map((fill) => fill.price.toFixed()) }
  }

  it("fills a level priced exactly at the bound and rejects one a tick beyond it", () => {
    // At 10000 the levels are 1.00 apart and one basis point is 1.00: the first ask is the bound of a 1 bps buy.
    expect(settle("10000", "buy", 1)).toEqual({ kind: "fill", prices: ["10001"] })
    expect(settle("10000", "sell", 1)).toEqual({ kind: "fill", prices: ["9999"] })
    // 0.5 BTC at 10000 takes the first bid (2.5 BTC deep): the same at 2 bps.
    expect(settle("10000", "sell", 2).kind).toBe("fill")
    // At 9999.99 the spacing rounds up to 1.00, beyond the 0.999999 of one basis point.
    expect(settle("9999.99", "buy", 1)).toEqual({ kind: "rejected", prices: [] })
    expect(settle("9999.99", "sell", 1)).toEqual({ kind: "rejected", prices: [] })
  })
})

describe("tick and step checks at placement", () => {
  const engineWith = (tickSize: string, stepSize: string) => {
    const engine = new MatchingEngine({
      pairs: [{ symbol: "BTCUSDT", base: "BTC", quote: "USDT", tickSize: d(tickSize), stepSize: d(stepSize), minBaseQty: d(stepSize), minNotional: d("5"), status: "trading", depthNotional: d("25000") }],
      fees: { maker: d("0.001"), taker: d("0.002") },
      settleDelayMs: 50,
      prices: { BTCUSDT: d("60000") }
    })
    engine.setBalance(1, "USDT", d("1000000"))
    return engine
  }
  const limit = (engine: MatchingEngine, baseQty: string, limitPrice: string) => {
    const placed = engine.place(1, { type: "limit", symbol: "BTCUSDT", side: "buy", baseQty: d(baseQty), limitPrice: d(limitPrice) }, 0)
    return placed.ok ? "accepted" : placed.reason
  }

  it("a power-of-ten tick or step counts decimal places; any other size takes the remainder", () => {
    const tenths = engineWith("0.01", "0.001")
    expect(limit(tenths, "0.001", "59000.01")).toBe("accepted")
    expect(limit(tenths, "0.001", "59000.001")).toBe("tick-size")
    expect(limit(tenths, "0.0015", "59000")).toBe("step-size")
    expect(limit(tenths, "1.5", "59000.1")).toBe("accepted")
    const fives = engineWith("0.05", "0.0025")
    expect(limit(fives, "0.0025", "59000.05")).toBe("accepted")
    expect(limit(fives, "0.0025", "59000.01")).toBe("tick-size")
    expect(limit(fives, "0.0030", "59000")).toBe("step-size")
    expect(limit(fives, "0.0075", "59000.1")).toBe("accepted")
  })
})
