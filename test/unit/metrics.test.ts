import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { closedTradePnls, computeMetrics, metricsFromJson, metricsToJson, type MetricsInput, type RunFill } from "../../src/backtest/Metrics.js"

const d = (text: string) => new Decimal(text)
const YEAR_MS = 365 * 86_400_000

const fill = (side: "buy" | "sell", baseQty: string, price: string, fee = "0", feeAsset = side === "buy" ? "BTC" : "USDT"): RunFill => ({
  time: 0,
  fillId: `fill-${side}-${price}`,
  tag: `${side}-${price}`,
  clientOrderId: `co_${side}_${price}`,
  side,
  price: d(price),
  baseQty: d(baseQty),
  quoteQty: d(baseQty).mul(price),
  fee: d(fee),
  feeAsset,
  liquidity: "taker"
})

const input = (overrides: Partial<MetricsInput>): MetricsInput => ({
  baseAsset: "BTC",
  quoteAsset: "USDT",
  intervalMs: 60_000,
  fromMs: 0,
  initialEquity: d("100"),
  initialBase: d("0"),
  initialPrice: d("100"),
  equityMarks: [110, 99, 121],
  finalEquity: d("121"),
  inMarketCandles: 2,
  fills: [],
  ...overrides
})

describe("metrics on a three-candle equity curve 100 -> 110 -> 99 -> 121", () => {
  // Per-candle returns 1/10, -1/10, 2/9; mean 2/27; sample deviation sqrt(1929)/270;
  // downside deviation sqrt((1/10)^2 / 3). Three candles of a third of a year each make one year.
  const metrics = computeMetrics(input({ intervalMs: YEAR_MS / 3 }))

  it("has exact PnL and total return", () => {
    expect(metrics.finalEquity.toFixed()).toBe("121")
    expect(metrics.pnl.toFixed()).toBe("21")
    expect(metrics.totalReturnPct.toFixed()).toBe("21")
  })

  it("annualises over exactly one year to the total return", () => {
    expect(metrics.annualisedReturnPct).toBeCloseTo(21, 9)
  })

  it("computes Sharpe as 20 * sqrt(3 / 1929) and Sortino as 20 / 9", () => {
    expect(metrics.sharpe).toBeCloseTo(20 * Math.sqrt(3 / 1929), 12)
    expect(metrics.sortino).toBeCloseTo(20 / 9, 12)
  })

  it("finds the 10 % drawdown from 110 to 99, lasting from the peak until 121 two candles later", () => {
    expect(metrics.maxDrawdownPct).toBeCloseTo(10, 12)
    expect(metrics.maxDrawdownDurationMs).toBe(2 * (YEAR_MS / 3))
  })

  it("reports exposure and the data range", () => {
    expect(metrics.exposurePct).toBeCloseTo((2 / 3) * 100, 12)
    expect(metrics.candles).toBe(3)
    expect(metrics.toMs).toBe(YEAR_MS)
  })

  it("scales Sharpe by the number of candles in a year", () => {
    const minutely = computeMetrics(input({}))
    expect(minutely.sharpe! / metrics.sharpe!).toBeCloseTo(Math.sqrt(525_600 / 3), 9)
  })
})

describe("drawdown duration", () => {
  it("runs to the end of the data when equity never recovers", () => {
    const m = computeMetrics(input({ equityMarks: [120, 90, 100, 110], finalEquity: d("110") }))
    expect(m.maxDrawdownPct).toBeCloseTo(25, 12)
    expect(m.maxDrawdownDurationMs).toBe(3 * 60_000)
  })

  it("is zero for a curve that never falls", () => {
    const m = computeMetrics(input({ equityMarks: [100, 101, 101], finalEquity: d("101") }))
    expect(m.maxDrawdownPct).toBe(0)
    expect(m.maxDrawdownDurationMs).toBe(0)
  })
})

describe("trades, first in first out", () => {
  it("closes 1.5 of two lots at 130 for +35 and the rest at 90 for -15", () => {
    // Lots: 1 @ 100 and 1 @ 120. Selling 1.5 @ 130 = 195 against 100 + 0.5 * 120 = 160.
    // Selling 0.5 @ 90 = 45 against the other 0.5 * 120 = 60.
    const fills = [fill("buy", "1", "100"), fill("buy", "1", "120"), fill("sell", "1.5", "130"), fill("sell", "0.5", "90")]
    const m = computeMetrics(input({ fills }))
    expect(closedTradePnls(input({ fills })).map((p) => p.toFixed())).toEqual(["35", "-15"])
    expect(m.fills).toBe(4)
    expect(m.trades).toBe(2)
    expect(m.winRatePct).toBe(50)
    expect(m.profitFactor).toBeCloseTo(35 / 15, 12)
    expect(m.turnover.toFixed()).toBe("460")
    expect(m.turnoverRatio).toBeCloseTo(4.6, 12)
    expect(m.feesPaid.toFixed()).toBe("0")
  })

  it("counts a buy's base fee out of the lot and a sell's quote fee out of the proceeds", () => {
    // Buy 1 @ 100 paying 0.01 BTC: lot 0.99 BTC costing 100. Sell 0.99 @ 110 = 108.9 paying 0.1089 USDT.
    const fills = [fill("buy", "1", "100", "0.01"), fill("sell", "0.99", "110", "0.1089")]
    const m = computeMetrics(input({ fills }))
    expect(closedTradePnls(input({ fills }))[0]!.toFixed()).toBe("8.7911")
    // 0.01 BTC at the fill price 100 plus 0.1089 USDT.
    expect(m.feesPaid.toFixed()).toBe("1.1089")
    expect(m.profitFactor).toBeNull()
    expect(m.winRatePct).toBe(100)
  })

  it("takes initial holdings at the first price as their cost", () => {
    const pnls = closedTradePnls(input({ initialBase: d("1"), initialPrice: d("50"), fills: [fill("sell", "1", "60")] }))
    expect(pnls.map((p) => p.toFixed())).toEqual(["10"])
  })

  it("has no win rate without closed trades", () => {
    const m = computeMetrics(input({ fills: [fill("buy", "1", "100")] }))
    expect(m.trades).toBe(0)
    expect(m.winRatePct).toBeNull()
  })
})

describe("metrics as JSON", () => {
  it("round-trips metrics through JSON with exact amounts", () => {
    const m = computeMetrics(input({ fills: [fill("buy", "0.123456789", "100.01")] }))
    const back = metricsFromJson(JSON.parse(JSON.stringify(metricsToJson(m))) as Record<string, unknown>)
    expect(back.turnover.toFixed()).toBe("12.34691346789")
    expect(back).toEqual(m)
  })
})
