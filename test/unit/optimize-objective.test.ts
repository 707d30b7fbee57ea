import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { compareRanked, type MetricsJson, objectiveValue, overfit, perWindow, type Rankable, violations } from "../../src/optimize/Objective.js"

const metrics = (fields: Record<string, string | number | null>): MetricsJson => ({
  pnl: "0",
  sharpe: null,
  sortino: null,
  annualisedReturnPct: null,
  maxDrawdownPct: 0,
  trades: 0,
  ...fields
})

const valueOf = (...args: Parameters<typeof objectiveValue>): string | undefined => objectiveValue(...args)?.toFixed()

describe("objectives", () => {
  it("sharpe and sortino are the backtest's ratios; none when the run has none", () => {
    expect(valueOf("sharpe", metrics({ sharpe: 1.25, sortino: 2.5 }))).toBe("1.25")
    expect(valueOf("sortino", metrics({ sharpe: 1.25, sortino: 2.5 }))).toBe("2.5")
    expect(valueOf("sharpe", metrics({}))).toBeUndefined()
  })

  it("calmar is the annualised return over the maximum drawdown, none without a drawdown", () => {
    expect(valueOf("calmar", metrics({ annualisedReturnPct: 36, maxDrawdownPct: 12 }))).toBe("3")
    expect(valueOf("calmar", metrics({ annualisedReturnPct: -9, maxDrawdownPct: 4.5 }))).toBe("-2")
    expect(valueOf("calmar", metrics({ annualisedReturnPct: 36, maxDrawdownPct: 0 }))).toBeUndefined()
    expect(valueOf("calmar", metrics({ maxDrawdownPct: 3 }))).toBeUndefined()
  })

  it("profit is the PnL, every digit kept", () => {
    expect(valueOf("profit", metrics({ pnl: "123.456789012345678901" }))).toBe("123.456789012345678901")
    expect(valueOf("profit", metrics({ pnl: "-0.01" }))).toBe("-0.01")
  })

  it("profit compares across windows per day; the ratios are annualised already", () => {
    const twoDays = 2 * 24 * 60 * 60 * 1000
    expect(perWindow("profit", new Decimal("50"), twoDays).toFixed()).toBe("25")
    expect(perWindow("sharpe", new Decimal("1.5"), twoDays).toFixed()).toBe("1.5")
  })
})

describe("constraints", () => {
  it("name each broken constraint with the measured and the required value", () => {
    const constraints = { minTrades: 10, maxDrawdownPct: 20 }
    expect(violations(constraints, metrics({ trades: 12, maxDrawdownPct: 19.5 }))).toEqual([])
    expect(violations(constraints, metrics({ trades: 10, maxDrawdownPct: 20 }))).toEqual([])
    expect(violations(constraints, metrics({ trades: 9, maxDrawdownPct: 25.125 }))).toEqual(["trades 9 < minTrades 10", "maxDrawdownPct 25.13 > 20"])
    expect(violations({}, metrics({ trades: 0, maxDrawdownPct: 99 }))).toEqual([])
  })
})

describe("the overfitting rule", () => {
  const d = (text: string) => new Decimal(text)
  it("flags a positive in-sample figure whose out-of-sample keeps less than half of it, or has none", () => {
    expect(overfit(d("2"), d("1"))).toBe(false)
    expect(overfit(d("2"), d("0.99"))).toBe(true)
    expect(overfit(d("2"), d("-1"))).toBe(true)
    expect(overfit(d("2"), undefined)).toBe(true)
    expect(overfit(d("2"), d("3"))).toBe(false)
  })

  it("does not judge a winner without a positive in-sample figure", () => {
    expect(overfit(d("0"), d("-5"))).toBe(false)
    expect(overfit(d("-1"), d("-5"))).toBe(false)
    expect(overfit(undefined, d("1"))).toBe(false)
  })
})

describe("ranking", () => {
  const entry = (params: string, value: string | undefined, rung = 0, feasible = true): Rankable => ({ params, rung, feasible, value: value === undefined ? undefined : new Decimal(value) })

  it("later rungs first, then feasible, then by value, missing values last, ties by params", () => {
    const entries = [
      entry('{"a":4}', "9", 0),
      entry('{"a":3}', undefined, 1),
      entry('{"a":2}', "1", 1),
      entry('{"a":1}', "1", 1),
      entry('{"a":0}', "5", 1, false),
      entry('{"a":5}', "2", 1)
    ]
    expect([...entries].sort(compareRanked).map((e) => e.params)).toEqual(['{"a":5}', '{"a":1}', '{"a":2}', '{"a":3}', '{"a":0}', '{"a":4}'])
    expect([...entries].reverse().sort(compareRanked)).toEqual([...entries].sort(compareRanked))
  })
})
