import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { runBacktest } from "../../src/backtest/Backtest.js"
import { computeMetrics } from "../../src/backtest/Metrics.js"
import { renderReport, type ReportInput } from "../../src/backtest/Report.js"
import { Decimal } from "../../src/domain/Decimal.js"
import { buyAndHold, buyAndHoldMarks } from "../../src/report/Benchmark.js"
import { CHART_LIBRARY } from "../../src/report/ChartScript.js"
import { periodReturns } from "../../src/report/Monthly.js"
import { PlotFailed, plotRecorder } from "../../src/report/Plots.js"
import { decodeParams, defineStrategy, result } from "../../src/strategy/Strategy.js"
import { decodeAccounts, devAccounts, toFees, toPairSpec } from "../../src/venue/Accounts.js"
import type { VenueCandle } from "../../src/venue/PricePath.js"
import { syntheticCandles } from "../../src/venue/Tape.js"
import smaCrossover from "../../strategies/sma-crossover.js"

const d = (n: number | string) => new Decimal(n)
const T0 = Date.UTC(2024, 0, 1)
const MINUTE = 60_000
const HOUR = 3_600_000
const DAY = 86_400_000

interface Tick {
  readonly time: number
  readonly label: string
}
interface ValueTick {
  readonly value: number
  readonly label: string
}
/** The page's own chart library, evaluated as the browser evaluates it. */
const SvcChart = new Function(`${CHART_LIBRARY}; return SvcChart`)() as {
  calendarTicks(fromMs: number, toMs: number, maxTicks: number): { unit: string; n: number; ticks: ReadonlyArray<Tick> }
  valueTicks(lo: number, hi: number, maxTicks: number): { step: number; decimals: number; ticks: ReadonlyArray<ValueTick> }
  envelope(xs: ReadonlyArray<number>, ys: ReadonlyArray<number | null>, from: number, to: number, buckets: number): ReadonlyArray<number>
  thinMarkers(positions: ReadonlyArray<number>, sides: ReadonlyArray<string>, cellWidth: number): ReadonlyArray<number>
}

const candle = (openTimeMs: number, open: number | string, close: number | string = open): VenueCandle => ({
  openTimeMs,
  open: d(open),
  high: Decimal.max(d(open), d(close)),
  low: Decimal.min(d(open), d(close)),
  close: d(close),
  volume: d(1)
})

const input = (closes: ReadonlyArray<number>, equity: ReadonlyArray<number>, title = "Backtest"): ReportInput => {
  const candles = closes.map((c, i) => candle(T0 + i * MINUTE, c))
  const equityDecimals = equity.map((e) => d(e))
  const metrics = computeMetrics({
    baseAsset: "BTC",
    quoteAsset: "USDT",
    intervalMs: MINUTE,
    fromMs: T0,
    initialEquity: d(1000),
    initialBase: d(0),
    initialPrice: d(closes[0] ?? 1),
    equityMarks: equity,
    finalEquity: equityDecimals[equityDecimals.length - 1] ?? d(1000),
    inMarketCandles: 0,
    fills: []
  })
  return { title, details: [["params", '{"a":"<b>"}']], candles, intervalMs: MINUTE, equity: equityDecimals, fills: [], metrics }
}

/** The JSON the page draws from. */
const pageData = (html: string) => {
  const match = /<script type="application\/json" id="report-data">([\s\S]*?)<\/script>/.exec(html)
  return JSON.parse(match![1]!) as {
    span: number
    price: { x: Array<number>; y: Array<number | null> }
    plots: Array<{ name: string; x: Array<number>; y: Array<number | null> }>
    equity: { x: Array<number>; y: Array<number> }
    benchmark: { x: Array<number>; y: Array<number> }
    trades: Array<{ text: Array<string>; key: Array<number | string | null> }>
  }
}

describe("the HTML report", () => {
  it("is one self-contained document: inline script and style only, nothing fetched, text escaped", () => {
    const html = renderReport(input([100, 101, 99], [1000, 1010, 990], 'Backtest <script>alert("x")</script>'))
    expect(html).not.toMatch(/<script[^>]*\bsrc=/i)
    expect(html).not.toMatch(/<link\b/i)
    expect(html).not.toMatch(/(src|href)=["']?(https?:|\/\/)/i)
    expect(html).not.toMatch(/url\(\s*["']?(https?:|\/\/)/i)
    expect(html).toContain(`content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"`)
    expect(html).toContain("<title>Backtest &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</title>")
    expect(html).toContain("{&quot;a&quot;:&quot;&lt;b&gt;&quot;}")
    for (const id of ["price-chart", "equity-chart", "drawdown-chart"]) expect(html).toContain(`<svg id="${id}"`)
  })

  it("keeps a plot's name from closing the data's script element", () => {
    const base = input([100, 101, 99], [1000, 1010, 990])
    const html = renderReport({ ...base, plots: [{ name: "</script><script>alert(1)", values: new Float64Array([1, 2, 3]) }] })
    expect(html.match(/<\/script>/g)).toHaveLength(2)
    expect(pageData(html).plots[0]!.name).toBe("</script><script>alert(1)")
  })

  it("writes a flat run without trades without NaN or Infinity", () => {
    const html = renderReport(input([100, 100, 100], [1000, 1000, 1000]))
    // The page's script names Infinity itself; what is written up to it must not.
    expect(html.slice(0, html.lastIndexOf("<script>"))).not.toMatch(/NaN|Infinity/)
    expect(html).toMatch(/Profit factor<\/th><td class="num">n\/a/)
    expect(html).toMatch(/Max drawdown<\/th><td class="num">0.00 %/)
  })

  it("embeds a long run from buckets that keep a one-candle spike where it happened", () => {
    const n = 200_000
    const closes = Array.from({ length: n }, (_, i) => (i === 123_457 ? 150 : 100 + (i % 10) / 10))
    const price = pageData(renderReport(input(closes, closes.map(() => 1000)))).price
    expect(price.x.length).toBeLessThanOrEqual(100_000)
    expect(price.x.length).toBeGreaterThan(50_000)
    const top = price.y.indexOf(150)
    // Closes are drawn at their candle's close: one interval after the open.
    expect(price.x[top]).toBe(123_457 + 1)
  })
})

describe("calendar ticks", () => {
  const at = (iso: string) => Date.parse(iso)

  it("chooses whole hours for a few hours, labelled by the clock and by the date at midnight", () => {
    const { unit, n, ticks } = SvcChart.calendarTicks(at("2024-03-04T21:07:00Z"), at("2024-03-05T03:50:00Z"), 8)
    expect([unit, n]).toEqual(["hour", 1])
    expect(ticks.map((t) => t.label)).toEqual(["22:00", "23:00", "Mar 5", "01:00", "02:00", "03:00"])
    for (const tick of ticks) expect(tick.time % HOUR).toBe(0)
  })

  it("chooses minutes for a narrow view", () => {
    const { unit, n, ticks } = SvcChart.calendarTicks(at("2024-03-04T10:03:30Z"), at("2024-03-04T10:41:00Z"), 8)
    expect([unit, n]).toEqual(["minute", 5])
    expect(ticks.map((t) => t.label)).toEqual(["10:05", "10:10", "10:15", "10:20", "10:25", "10:30", "10:35", "10:40"])
  })

  it("chooses UTC midnights for two weeks, and names the new year", () => {
    const { unit, ticks } = SvcChart.calendarTicks(at("2023-12-25T00:00:00Z"), at("2024-01-08T00:00:00Z"), 15)
    expect(unit).toBe("day")
    expect(ticks).toHaveLength(15)
    for (const tick of ticks) expect(tick.time % DAY).toBe(0)
    expect(ticks.map((t) => t.label).slice(5, 9)).toEqual(["Dec 30", "Dec 31", "2024", "Jan 2"])
  })

  it("chooses Mondays for some weeks", () => {
    const { unit, ticks } = SvcChart.calendarTicks(at("2024-02-03T05:00:00Z"), at("2024-03-14T00:00:00Z"), 8)
    expect(unit).toBe("week")
    expect(ticks.map((t) => t.label)).toEqual(["Feb 5", "Feb 12", "Feb 19", "Feb 26", "Mar 4", "Mar 11"])
    for (const tick of ticks) expect(new Date(tick.time).getUTCDay()).toBe(1)
  })

  it("chooses first days of months, and of quarters and half-years for longer spans", () => {
    const months = SvcChart.calendarTicks(at("2023-11-15T00:00:00Z"), at("2024-04-20T00:00:00Z"), 8)
    expect([months.unit, months.n]).toEqual(["month", 1])
    expect(months.ticks.map((t) => t.label)).toEqual(["Dec", "Jan 2024", "Feb", "Mar", "Apr"])
    const quarters = SvcChart.calendarTicks(at("2023-02-10T00:00:00Z"), at("2024-12-01T00:00:00Z"), 8)
    expect([quarters.unit, quarters.n]).toEqual(["month", 3])
    expect(quarters.ticks.map((t) => t.label)).toEqual(["Apr", "Jul", "Oct", "Jan 2024", "Apr", "Jul", "Oct"])
    const halves = SvcChart.calendarTicks(at("2021-03-01T00:00:00Z"), at("2024-06-01T00:00:00Z"), 8)
    expect(halves.ticks.map((t) => t.label)).toEqual(["Jul", "Jan 2022", "Jul", "Jan 2023", "Jul", "Jan 2024"])
  })

  it("chooses round years for decades", () => {
    const { unit, n, ticks } = SvcChart.calendarTicks(at("1993-06-01T00:00:00Z"), at("2031-01-01T00:00:00Z"), 8)
    expect([unit, n]).toEqual(["year", 5])
    expect(ticks.map((t) => t.label)).toEqual(["1995", "2000", "2005", "2010", "2015", "2020", "2025", "2030"])
  })

  it("never gives more ticks than asked, nor a tick outside the span", () => {
    for (let span = MINUTE; span < 40 * 365 * DAY; span *= 1.7) {
      for (const maxTicks of [3, 8, 14]) {
        const from = T0 + 12_345_678
        const { ticks } = SvcChart.calendarTicks(from, from + span, maxTicks)
        expect(ticks.length).toBeLessThanOrEqual(maxTicks + 1)
        for (const tick of ticks) expect(tick.time >= from && tick.time <= from + span).toBe(true)
      }
    }
  })
})

describe("value ticks", () => {
  it("land on round values", () => {
    expect(SvcChart.valueTicks(59_873.2, 80_211.7, 5).ticks.map((t) => t.label)).toEqual(["60000", "65000", "70000", "75000", "80000"])
    expect(SvcChart.valueTicks(9_812.34, 10_310.9, 5).ticks.map((t) => t.label)).toEqual(["9900", "10000", "10100", "10200", "10300"])
    expect(SvcChart.valueTicks(0.000123, 0.000456, 5).ticks.map((t) => t.label)).toEqual(["0.0002", "0.0003", "0.0004"])
    expect(SvcChart.valueTicks(-23.1, 0, 4).ticks.map((t) => t.label)).toEqual(["-20", "-10", "0"])
    expect(SvcChart.valueTicks(0.3, 1.01, 4).ticks.map((t) => t.label)).toEqual(["0.4", "0.6", "0.8", "1.0"])
  })

  it("are multiples of 1, 2 or 5 times a power of ten with no floating-point noise, at most as many as asked", () => {
    for (let lo = -1234.5; lo < 1e7; lo = lo * -3.7 + 0.37) {
      for (const width of [1e-6, 0.37, 12.5, 1000, 2.5e6]) {
        const { step, ticks } = SvcChart.valueTicks(lo, lo + width, 5)
        const mantissa = step / Math.pow(10, Math.floor(Math.log10(step) + 1e-9))
        expect([1, 2, 5].some((m) => Math.abs(mantissa - m) < 1e-9)).toBe(true)
        expect(ticks.length).toBeGreaterThanOrEqual(2)
        expect(ticks.length).toBeLessThanOrEqual(6)
        for (const tick of ticks) {
          expect(tick.label).toMatch(/^-?\d+(\.\d+)?$/)
          const steps = tick.value / step
          expect(Math.abs(steps - Math.round(steps))).toBeLessThan(1e-6 * Math.max(1, Math.abs(steps)))
        }
      }
    }
  })

  it("give a flat series an axis around its value", () => {
    const ticks = SvcChart.valueTicks(100, 100, 5).ticks
    expect(ticks.length).toBeGreaterThan(1)
    expect(ticks.some((t) => t.value === 100)).toBe(true)
  })
})

describe("what the page draws", () => {
  it("keeps per bucket the first, lowest, highest and last point of what is in view", () => {
    const xs = Array.from({ length: 10_000 }, (_, i) => i)
    const ys = xs.map((i) => (i === 5_432 ? 999 : i === 7_001 ? -999 : i % 7))
    const picked = SvcChart.envelope(xs, ys, 2_000, 9_000, 100)
    expect(picked.length).toBeLessThanOrEqual(400 + 2)
    expect(picked).toContain(5_432)
    expect(picked).toContain(7_001)
    expect(picked[0]).toBe(1_999)
    expect([...picked].sort((a, b) => a - b)).toEqual(picked)
    // Few enough points are drawn one for one.
    expect(SvcChart.envelope(xs, ys, 10, 20, 100)).toEqual(Array.from({ length: 12 }, (_, i) => 9 + i))
  })

  it("thins markers to one per side per cell, and keeps them all once they are cells apart", () => {
    const positions = [0, 1, 2, 3, 11, 12, 25]
    const sides = ["buy", "sell", "buy", "sell", "buy", "buy", "sell"]
    expect(SvcChart.thinMarkers(positions, sides, 10)).toEqual([0, 1, 4, 6])
    expect(SvcChart.thinMarkers(positions.map((p) => p * 10), sides, 10)).toEqual([0, 1, 2, 3, 4, 5, 6])
  })
})

describe("the buy-and-hold benchmark", () => {
  it("puts the starting equity into base at the first open and values it at each close, exactly", () => {
    const candles = [candle(T0, 200, 210), candle(T0 + MINUTE, 210, 190), candle(T0 + 2 * MINUTE, 190, 250)]
    const benchmark = buyAndHold(d(10000), candles)
    expect(benchmark.baseQty.toFixed()).toBe("50")
    expect(benchmark.finalEquity.toFixed()).toBe("12500")
    expect(benchmark.pnl.toFixed()).toBe("2500")
    expect(benchmark.returnPct.toFixed()).toBe("25")
    expect([...buyAndHoldMarks(benchmark, candles.map((c) => c.close.toNumber()))]).toEqual([10500, 9500, 12500])
  })

  it("divides once, after multiplying, so a price that does not divide the equity loses nothing", () => {
    const benchmark = buyAndHold(d("1000.5"), [candle(T0, 3, 3), candle(T0 + MINUTE, 3, 4)])
    expect(benchmark.finalEquity.toDecimalPlaces(10).toFixed()).toBe("1334")
    expect(benchmark.returnPct.toDecimalPlaces(10).toFixed()).toBe("33.3333333333")
  })

  it("refuses a tape that opens at zero, naming the price", () => {
    expect(() => buyAndHold(d(100), [candle(T0, 0, 1)])).toThrow(/opens at 0: a benchmark needs a positive price/)
  })

  it("is drawn from the starting equity and shown beside the strategy's return", () => {
    const html = renderReport(input([100, 110, 120], [1000, 1010, 990]))
    expect(pageData(html).benchmark.y).toEqual([1000, 1000, 1100, 1200])
    expect(html).toMatch(/Final equity<\/th><td class="num">1200<\/td>/)
    expect(html).toMatch(/Total return<\/th><td class="num">20 %<\/td>/)
    expect(html).toMatch(/Strategy return less buy and hold<\/th><td class="num">-21 points/)
  })
})

describe("monthly returns", () => {
  it("compound each UTC month from the last close before it, and each year", () => {
    const days = [Date.UTC(2023, 11, 30), Date.UTC(2023, 11, 31), Date.UTC(2024, 0, 1), Date.UTC(2024, 0, 31), Date.UTC(2024, 1, 1)]
    const candles = days.map((t) => candle(t, 1))
    const equity = [d(1100), d(1200), d(1300), d(900), d(990)]
    const { months, years } = periodReturns(d(1000), candles, equity)
    expect(months.map((m) => [m.year, m.month, m.returnPct!.toFixed()])).toEqual([
      [2023, 11, "20"],
      [2024, 0, "-25"],
      [2024, 1, "10"]
    ])
    expect(years.map((y) => [y.year, y.returnPct!.toFixed()])).toEqual([
      [2023, "20"],
      [2024, "-17.5"]
    ])
  })
})

describe("a strategy's plots", () => {
  const pair = toPairSpec(decodeAccounts(devAccounts).pairs[0]!)
  const candles = syntheticCandles(400, { seed: 9, startPrice: d(60000), tickSize: pair.tickSize, stepSize: pair.stepSize, startMs: T0 })
  const run = (afterCandle?: (index: number, state: unknown) => void) =>
    Either.getOrThrow(
      runBacktest({
        strategy: smaCrossover,
        params: Either.getOrThrow(decodeParams(smaCrossover, "report", { fastPeriod: 3, slowPeriod: 8, entry: "market", quoteQty: "1000" })),
        pair,
        fees: toFees(devAccounts.fees),
        settleDelayMs: 50,
        balances: { USDT: d(10000) },
        candles,
        intervalMs: MINUTE,
        ...(afterCandle === undefined ? {} : { afterCandle })
      })
    )

  it("are read after each candle: sma-crossover's averages of the closes, none before the window fills", () => {
    const recorder = plotRecorder(smaCrossover, candles.length)!
    const withPlots = run(recorder.afterCandle as (index: number, state: unknown) => void)
    const [fast, slow] = recorder.series
    expect([fast!.name, slow!.name]).toEqual(["fast SMA", "slow SMA"])
    expect(Number.isNaN(slow!.values[6]!)).toBe(true)
    const mean = (from: number, to: number) => candles.slice(from, to).reduce((sum, c) => sum + c.close.toNumber(), 0) / (to - from)
    for (const i of [7, 100, 399]) {
      expect(slow!.values[i]).toBeCloseTo(mean(i - 7, i + 1), 6)
      expect(fast!.values[i]).toBeCloseTo(mean(i - 2, i + 1), 6)
    }
    // Reading the plots changes nothing of the run.
    const without = run()
    expect(withPlots.fills.map((f) => [f.side, f.price.toFixed(), f.baseQty.toFixed()])).toEqual(without.fills.map((f) => [f.side, f.price.toFixed(), f.baseQty.toFixed()]))
    expect(withPlots.metrics.finalEquity.toFixed()).toBe(without.metrics.finalEquity.toFixed())

    const html = renderReport({ title: "t", details: [], candles, intervalMs: MINUTE, equity: withPlots.equity, fills: withPlots.fills, metrics: withPlots.metrics, pair, plots: recorder.series })
    const data = pageData(html)
    expect(data.plots.map((p) => p.name)).toEqual(["fast SMA", "slow SMA"])
    expect(data.plots[1]!.y.slice(0, 7)).toEqual([null, null, null, null, null, null, null])
    // The round trips are engine/RoundTrips' pairing of the run's fills: each closed one sells what it bought.
    expect(data.trades.length).toBeGreaterThan(3)
    for (const trade of data.trades) expect(trade.text).toHaveLength(10)
    const closed = data.trades.filter((t) => t.text[2] !== "open")
    expect(closed.every((t) => t.text[3] === "long")).toBe(true)
  })

  it("cost nothing for a strategy that plots nothing, and name the series that gives a bad value", () => {
    const base = {
      version: "1.0.0",
      params: Schema.Struct({}),
      state: Schema.Struct({ n: Schema.Number }),
      init: () => ({ n: 0 }),
      onCandle: (state: { n: number }) => result({ n: state.n + 1 })
    }
    expect(plotRecorder(defineStrategy({ name: "quiet", ...base }), 10)).toBeUndefined()
    const bad = defineStrategy({ name: "bad-plot", ...base, plots: { count: (state) => (state.n > 1 ? (String(state.n) as unknown as number) : state.n) } })
    const recorder = plotRecorder(bad, 3)!
    recorder.afterCandle(0, { n: 1 })
    expect(() => recorder.afterCandle(1, { n: 2 })).toThrow(PlotFailed)
    expect(() => recorder.afterCandle(1, { n: 2 })).toThrow(/bad-plot: plot "count" gave string at candle 1 \(return a number, a Decimal, or undefined/)
    expect(() => defineStrategy({ name: "not-a-plot", ...base, plots: { count: 3 as unknown as () => number } })).toThrow(/plot "count" must be a function/)
  })
})
