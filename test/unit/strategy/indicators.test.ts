import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Either, Schema } from "effect"
import { ema, emaPush, emaReady, smaPush, smaReady, smaValue, smaWindow, SmaWindowState } from "../../../src/strategy/indicators.js"

describe("indicators", () => {
  it("an SMA window equals the average of the last `period` values, however many were pushed", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.array(fc.integer({ min: 1, max: 1_000_000 }), { minLength: 1, maxLength: 200 }), (period, values) => {
        const window = smaWindow(period)
        values.forEach((value, i) => {
          smaPush(window, value)
          const last = values.slice(Math.max(0, i + 1 - period), i + 1)
          expect(smaValue(window)).toBeCloseTo(last.reduce((a, b) => a + b, 0) / last.length, 6)
          expect(smaReady(window)).toBe(i + 1 >= period)
        })
      })
    )
  })

  it("an SMA window survives a JSON round trip mid-lap", () => {
    const window = smaWindow(3)
    for (const value of [1, 2, 3, 4]) smaPush(window, value)
    const restored = JSON.parse(JSON.stringify(window)) as typeof window
    smaPush(restored, 8)
    expect(smaValue(restored)).toBe(5)
  })

  it("stored SMA windows decode only when their slots match the period", () => {
    const window = smaWindow(3)
    for (const value of [1, 2, 3, 4]) smaPush(window, value)
    const decode = Schema.decodeUnknownEither(SmaWindowState)
    expect(Either.getOrThrow(decode(JSON.parse(JSON.stringify(window))))).toEqual(window)
    for (const broken of [{ ...window, values: [1, 2] }, { ...window, head: 3 }, { ...window, count: 4 }, { ...window, period: 0 }]) {
      const decoded = decode(broken)
      expect(Either.isLeft(decoded)).toBe(true)
    }
    const short = decode({ ...window, values: [1, 2] })
    expect(Either.isLeft(short) && String(short.left)).toContain("an SMA window of period 3 needs 3 values")
  })

  it("an SMA window does not drift after millions of pushes", () => {
    const window = smaWindow(7)
    for (let i = 0; i < 3_000_000; i++) smaPush(window, 0.1 + (i % 13) * 1e-3 + 12345.6789)
    const exact = window.values.reduce((a, b) => a + b, 0) / 7
    expect(Math.abs(smaValue(window) - exact)).toBeLessThan(1e-9)
  })

  it("an EMA is seeded with the SMA of its first period, then smooths with 2 / (period + 1)", () => {
    const average = ema(3)
    for (const value of [2, 4, 6]) emaPush(average, value)
    expect(emaReady(average)).toBe(true)
    expect(average.value).toBe(4)
    emaPush(average, 8)
    expect(average.value).toBe(6)
  })

  it("refuses a period that is not a whole number of at least 1", () => {
    expect(() => smaWindow(0)).toThrow(RangeError)
    expect(() => ema(2.5)).toThrow(RangeError)
  })
})
