/**
 * The tape: seeded synthetic candles (deterministic per seed, whole ticks, consistent
 * OHLC), the CSV replay parser, one-minute candle recording, and the synthetic book.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal, fromString, isMultipleOf } from "../../src/domain/Decimal.js"
import { bookAround } from "../../src/venue/Book.js"
import { CandleRecorder, InvalidCsv, parseOhlcvCsv, syntheticCandles } from "../../src/venue/Tape.js"

const d = fromString
const walk = (seed: number) => ({ seed, startPrice: d("60000"), tickSize: d("0.01"), stepSize: d("0.00001") })

describe("Tape", () => {
  it("property: the same seed gives the same candles; candles are whole ticks with high/low enclosing open/close", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 }), fc.integer({ min: 1, max: 200 }), (seed, count) => {
        const a = syntheticCandles(count, walk(seed))
        const b = syntheticCandles(count, walk(seed))
        expect(JSON.stringify(a)).toBe(JSON.stringify(b))
        expect(a).toHaveLength(count)
        a.forEach((c, i) => {
          expect(c.openTimeMs).toBe(i * 60_000)
          for (const p of [c.open, c.high, c.low, c.close]) {
            expect(p.gt(0)).toBe(true)
            expect(isMultipleOf(p, d("0.01"))).toBe(true)
          }
          expect(c.high.gte(Decimal.max(c.open, c.close))).toBe(true)
          expect(c.low.lte(Decimal.min(c.open, c.close))).toBe(true)
          if (i > 0) expect(c.open.eq(a[i - 1]!.close)).toBe(true)
        })
      }),
      { numRuns: 50 }
    )
  })

  it("different seeds walk differently", () => {
    expect(JSON.stringify(syntheticCandles(20, walk(1)))).not.toBe(JSON.stringify(syntheticCandles(20, walk(2))))
  })

  it("parses an OHLCV CSV with or without a header and names the bad line", () => {
    const candles = parseOhlcvCsv("open_time_ms,open,high,low,close,volume\n0,100,110,90,105,3.5\n60000,105,106,104,104.5,1\n")
    expect(candles).toHaveLength(2)
    expect(candles[1]!.close.eq(d("104.5"))).toBe(true)
    expect(parseOhlcvCsv("0,1,1,1,1,0")).toHaveLength(1)
    expect(() => parseOhlcvCsv("0,100,110,90,105")).toThrow(InvalidCsv)
    expect(() => parseOhlcvCsv("0,100,110,90,105,1\n60000,100,99,90,105,1")).toThrow(/line 2/)
    expect(() => parseOhlcvCsv("0,1e3,1,1,1,0")).toThrow(/line 1/)
  })

  it("records prices into one-minute candles and merges them into longer intervals", () => {
    const r = new CandleRecorder()
    r.record(d("100"), d("1"), 0)
    r.record(d("103"), d("1"), 30_000)
    r.record(d("99"), d("1"), 61_000)
    r.record(d("101"), d("2"), 299_000)
    const minutes = r.candles(60_000, 10)
    expect(minutes.map((c) => c.openTimeMs)).toEqual([0, 60_000, 240_000])
    expect(minutes[0]).toMatchObject({ open: d("100"), high: d("103"), low: d("100"), close: d("103") })
    const fives = r.candles(300_000, 10)
    expect(fives).toHaveLength(1)
    expect(fives[0]).toMatchObject({ open: d("100"), high: d("103"), low: d("99"), close: d("101"), volume: d("5") })
    expect(r.candles(60_000, 10, 60_000).map((c) => c.openTimeMs)).toEqual([0])
  })

  it("the synthetic book has bids below and asks above the price, growing with distance", () => {
    const book = bookAround({ tickSize: d("0.01"), stepSize: d("0.00001"), depthNotional: d("25000") }, d("60000"), 5)
    expect(book.bids.map((l) => l.price.toFixed())).toEqual(["59994", "59988", "59982", "59976", "59970"])
    expect(book.asks[0]!.price.eq(60006)).toBe(true)
    expect(book.asks[1]!.baseQty.gt(book.asks[0]!.baseQty)).toBe(true)
  })
})
