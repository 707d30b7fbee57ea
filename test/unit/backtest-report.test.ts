import { describe, expect, it } from "vitest"
import { computeMetrics } from "../../src/backtest/Metrics.js"
import { renderReport, type ReportInput } from "../../src/backtest/Report.js"
import { Decimal } from "../../src/domain/Decimal.js"
import type { Candle } from "../../src/venue/Matching.js"

const d = (n: number | string) => new Decimal(n)
const T0 = Date.UTC(2024, 0, 1)

const input = (closes: ReadonlyArray<number>, equity: ReadonlyArray<number>, title = "Backtest"): ReportInput => {
  const candles: Array<Candle> = closes.map((c, i) => ({ openTimeMs: T0 + i * 60_000, open: d(c), high: d(c), low: d(c), close: d(c), volume: d(1) }))
  const equityDecimals = equity.map((e) => d(e))
  const metrics = computeMetrics({
    baseAsset: "BTC",
    quoteAsset: "USDT",
    intervalMs: 60_000,
    fromMs: T0,
    initialEquity: d(1000),
    initialBase: d(0),
    initialPrice: d(closes[0] ?? 1),
    equityMarks: equity,
    finalEquity: equityDecimals[equityDecimals.length - 1] ?? d(1000),
    inMarketCandles: 0,
    fills: []
  })
  return { title, details: [["params", '{"a":"<b>"}']], candles, intervalMs: 60_000, equity: equityDecimals, fills: [], metrics }
}

const points = (html: string, id: string): ReadonlyArray<readonly [number, number]> => {
  const svg = html.slice(html.indexOf(`<svg id="${id}"`))
  const match = /points="([^"]*)"/.exec(svg)
  return match![1]!
    .trim()
    .split(" ")
    .map((pair) => pair.split(",").map(Number) as unknown as readonly [number, number])
}

describe("the HTML report", () => {
  it("is one self-contained document: no script, no external resource, text escaped", () => {
    const html = renderReport(input([100, 101, 99], [1000, 1010, 990], 'Backtest <script>alert("x")</script>'))
    expect(html).not.toMatch(/<script/i)
    expect(html).not.toMatch(/(src|href)=["']?https?:/i)
    expect(html).toContain("Backtest &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;")
    expect(html).toContain("{&quot;a&quot;:&quot;&lt;b&gt;&quot;}")
    for (const id of ["price-chart", "equity-chart", "drawdown-chart"]) expect(html).toContain(`<svg id="${id}"`)
  })

  it("draws a flat run without trades without NaN or Infinity", () => {
    const html = renderReport(input([100, 100, 100], [1000, 1000, 1000]))
    expect(html).not.toMatch(/NaN|Infinity/)
    expect(html).toMatch(/Profit factor<\/th><td class="num">n\/a/)
    expect(html).toMatch(/Max drawdown<\/th><td class="num">0.00 %/)
  })

  it("draws a long run from buckets that keep a one-candle spike", () => {
    const n = 200_000
    const closes = Array.from({ length: n }, (_, i) => (i === 123_457 ? 150 : 100 + (i % 10) / 10))
    const html = renderReport(input(closes, closes.map(() => 1000)))
    const price = points(html, "price-chart")
    expect(price.length).toBeLessThanOrEqual(4000)
    expect(price.length).toBeGreaterThan(1000)
    // The spike is the highest point of the chart: the smallest y.
    const top = Math.min(...price.map(([, y]) => y))
    const spikeX = price.find(([, y]) => y === top)![0]
    const expectedX = 72 + (123_457 / n) * (1000 - 72 - 12)
    expect(Math.abs(spikeX - expectedX)).toBeLessThan(1)
  })
})
