/** Numbers for people: exact values rounded half-even to the exchange's increments, ratios to 4 places. */
import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { atIncrement, placesSeen, precisionOf, ratio } from "../../src/domain/Display.js"

const d = (text: string) => new Decimal(text)

describe("numbers shown", () => {
  it("rounds an average cost or a PnL to the tick, half-even, without trailing zeros", () => {
    expect(atIncrement(d("60000").div(3), d("0.01"))).toBe("20000")
    expect(atIncrement(d("10").div(3), d("0.01"))).toBe("3.33")
    expect(atIncrement(d("0.125"), d("0.01"))).toBe("0.12")
    expect(atIncrement(d("0.135"), d("0.01"))).toBe("0.14")
    expect(atIncrement(d("-0.150049999"), d("0.00001"))).toBe("-0.15005")
    expect(ratio(d("2.000049"))).toBe("2")
    expect(ratio(d("0.0911250375"))).toBe("0.0911")
  })

  it("knows each asset's precision from exchange-info: its finest step as a base, tick as a quote", () => {
    const precision = precisionOf([
      { symbol: "BTCUSDT", base: "BTC", quote: "USDT", tickSize: d("0.01"), stepSize: d("0.00001") },
      { symbol: "ETHBTC", base: "ETH", quote: "BTC", tickSize: d("0.000001"), stepSize: d("0.001") }
    ])
    expect(precision.asset("USDT")).toBe(2)
    expect(precision.asset("BTC")).toBe(6)
    expect(precision.asset("ETH")).toBe(3)
    expect(precision.price("ETHBTC")).toBe(6)
    expect(precision.asset("DOGE")).toBeUndefined()
    expect(placesSeen(["118.4", "0.00001", "60000"])).toBe(5)
  })
})
