import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { type CandleDataInvalid, type CandleSeries, parseCsv, sliceByTime } from "../../src/backtest/Candles.js"

const ok = (text: string): CandleSeries => {
  const result = parseCsv(text, { source: "test.csv" })
  if (Either.isLeft(result)) throw new Error(result.left.message)
  return result.right
}

const problems = (text: string): CandleDataInvalid => {
  const result = parseCsv(text, { source: "test.csv" })
  if (Either.isRight(result)) throw new Error("expected the data to be refused")
  return result.left
}

const T0 = 1_700_000_040_000

describe("OHLCV CSV", () => {
  it("reads open_time_ms,open,high,low,close,volume with a header, digit for digit", () => {
    const series = ok(
      ["open_time_ms,open,high,low,close,volume", `${T0},100.10,101.5,99.99,100.2,12.000001`, `${T0 + 60_000},100.2,100.3,100.1,100.1,0`].join("\n")
    )
    expect(series.intervalMs).toBe(60_000)
    expect(series.candles).toHaveLength(2)
    expect(series.candles[0]!.open.toFixed()).toBe("100.1")
    expect(series.candles[0]!.volume.toFixed()).toBe("12.000001")
    expect(series.candles[1]!.openTimeMs).toBe(T0 + 60_000)
  })

  it("reads the 12-column exchange kline layout, with open times in micro- or milliseconds", () => {
    const row = (time: string, close: string) => `${time},"100.00000000","101.00000000","99.00000000","${close}","5.5",${time}999,550.0,42,2.0,200.0,0`
    const millis = ok([row(String(T0), "100.5"), row(String(T0 + 60_000), "100.7")].join("\r\n"))
    expect(millis.candles.map((c) => c.close.toFixed())).toEqual(["100.5", "100.7"])
    const micros = ok([row(`${T0}000`, "100.5"), row(`${T0 + 60_000}000`, "100.7")].join("\n"))
    expect(micros.candles[1]!.openTimeMs).toBe(T0 + 60_000)
  })

  it("infers the interval from the first two rows", () => {
    expect(ok([`${T0},1,1,1,1,1`, `${T0 + 3_600_000},1,1,1,1,1`].join("\n")).intervalMs).toBe(3_600_000)
  })

  it("names the row of every problem: non-numeric, high < low, outside range, unsorted, duplicate, gap, columns", () => {
    const error = problems(
      [
        "open_time_ms,open,high,low,close,volume", // row 1
        `${T0},100,101,99,100,1`, // row 2: fine
        `${T0 + 60_000},abc,101,99,100,1`, // row 3: non-numeric open
        `${T0 + 120_000},100,98,99,98.5,1`, // row 4: high below low
        `${T0 + 180_000},100,101,99,102,1`, // row 5: close above high
        `${T0 + 180_000},100,101,99,100,1`, // row 6: duplicate time of row 5
        `${T0 + 120_000},100,101,99,100,1`, // row 7: before row 6
        `${T0 + 600_000},100,101,99,100,1`, // row 8: gap of 7 candles after row 7... and of the grid
        `${T0 + 660_000},100,101,99`, // row 9: too few columns
        `${T0 + 720_000},100,101,99,100,-1` // row 10: negative volume; a gap too, as row 9 could not be read
      ].join("\n")
    )
    const byRow = new Map<number, string>()
    for (const p of error.problems) byRow.set(p.row, `${byRow.get(p.row) ?? ""}${p.message}; `)
    expect(error.problems.map((p) => p.row)).toEqual([...error.problems.map((p) => p.row)].sort((a, b) => a - b))
    expect(byRow.get(3)).toMatch(/open "abc" is not a non-negative decimal/)
    expect(byRow.get(4)).toMatch(/high 98 is below low 99/)
    expect(byRow.get(5)).toMatch(/close 102 is outside low..high/)
    expect(byRow.get(6)).toMatch(/duplicate open time/)
    expect(byRow.get(7)).toMatch(/before the previous row's .* \(rows must be sorted\)/)
    expect(byRow.get(8)).toMatch(/gap: 7 candle\(s\) missing/)
    expect(byRow.get(9)).toMatch(/has 4 columns; expected 6/)
    expect(byRow.get(10)).toMatch(/volume "-1".*gap: 1 candle/)
    expect(byRow.has(2)).toBe(false)
    expect(error.message).toContain("candle data test.csv is invalid")
    expect(error.message).toContain("row 4: high 98 is below low 99")
  })

  it("refuses an amount beyond the bounds, naming its row and column, without reading its digits", () => {
    const error = problems(["open_time_ms,open,high,low,close,volume", `${T0},100,101,99,100,1`, `${T0 + 60_000},100,101,99,100,${"9".repeat(1_000_000)}`, `${T0 + 120_000},100,${"1".repeat(41)},99,100,1`].join("\n"))
    const byRow = new Map(error.problems.map((p) => [p.row, p.message]))
    expect(byRow.get(3)).toMatch(/^volume: invalid decimal "9{64}\.\.\.": longer than 160 characters/)
    expect(byRow.get(4)).toMatch(/^high: invalid decimal .*more than 40 significant digits/)
    expect(error.message.length).toBeLessThan(2000)
  })

  it("refuses an empty file and times that are not integers", () => {
    expect(problems("open_time_ms,open,high,low,close,volume\n").problems[0]!.message).toBe("no candles")
    expect(problems(`${T0}.5,1,1,1,1,1\n`).problems[0]!.message).toMatch(/not an integer/)
  })

  it("lists at most 50 problems and counts the rest", () => {
    const rows = Array.from({ length: 80 }, (_, i) => `${T0 + i * 60_000},x,1,1,1,1`)
    const error = problems(rows.join("\n"))
    expect(error.problems).toHaveLength(50)
    expect(error.moreProblems).toBe(30)
    expect(error.message).toContain("and 30 more")
  })

  it("slices by open time, from inclusive and to exclusive", () => {
    const series = ok(Array.from({ length: 5 }, (_, i) => `${T0 + i * 60_000},1,1,1,1,1`).join("\n"))
    const sliced = sliceByTime(series, T0 + 60_000, T0 + 180_000)
    expect(sliced.candles.map((c) => c.openTimeMs)).toEqual([T0 + 60_000, T0 + 120_000])
  })

  it("slices between candles, past either end, and to nothing, as a filter on open time would", () => {
    const series = ok(Array.from({ length: 5 }, (_, i) => `${T0 + i * 60_000},1,1,1,1,1`).join("\n"))
    const times = (fromMs: number | undefined, toMs: number | undefined) => sliceByTime(series, fromMs, toMs).candles.map((c) => c.openTimeMs)
    for (const [fromMs, toMs] of [
      [T0 + 30_000, T0 + 150_000],
      [T0 - 1, T0 + 60_000],
      [undefined, T0 + 120_001],
      [T0 + 240_000, undefined],
      [T0 + 300_000, T0 + 900_000],
      [T0 + 120_000, T0 + 120_000],
      [T0 + 180_000, T0 + 60_000]
    ] as const) {
      const expected = series.candles.filter((c) => c.openTimeMs >= (fromMs ?? -Infinity) && c.openTimeMs < (toMs ?? Infinity)).map((c) => c.openTimeMs)
      expect(times(fromMs, toMs)).toEqual(expected)
    }
  })

  it("gives the series itself when the window holds every candle: a trial over the whole data copies nothing", () => {
    const series = ok(Array.from({ length: 5 }, (_, i) => `${T0 + i * 60_000},1,1,1,1,1`).join("\n"))
    expect(sliceByTime(series, T0, T0 + 300_000)).toBe(series)
    expect(sliceByTime(series, undefined, undefined)).toBe(series)
    expect(sliceByTime(series, T0 + 1, undefined)).not.toBe(series)
  })
})
