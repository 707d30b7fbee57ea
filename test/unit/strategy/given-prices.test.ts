/**
 * A view's `lastPrices` (`GivenPrices`): the own pair at the price last given, the other pairs as
 * polled now, read through rather than copied, through every read a `ReadonlyMap` offers.
 */
import { describe, expect, it } from "vitest"
import { Decimal } from "../../../src/domain/Decimal.js"
import { GivenPrices } from "../../../src/strategy/GivenPrices.js"

const listed = (prices: ReadonlyMap<string, Decimal>) => [...prices].map(([symbol, price]) => `${symbol}=${price.toString()}`)

describe("GivenPrices", () => {
  it("shows the polled price of the own pair until one is given, then the given one", () => {
    const polled = new Map([
      ["BTCUSDT", new Decimal("61000")],
      ["ETHUSDT", new Decimal("2000")]
    ])
    const prices = new GivenPrices("BTCUSDT", undefined, () => polled)
    expect(prices.get("BTCUSDT")?.toString()).toBe("61000")
    expect(listed(prices)).toEqual(["BTCUSDT=61000", "ETHUSDT=2000"])
    prices.given = new Decimal("60500")
    expect(prices.get("BTCUSDT")?.toString()).toBe("60500")
    expect(prices.get("ETHUSDT")?.toString()).toBe("2000")
    expect(prices.size).toBe(2)
    expect(listed(prices)).toEqual(["BTCUSDT=60500", "ETHUSDT=2000"])
  })

  it("reads the polled prices as they are when asked", () => {
    let polled = new Map([["ETHUSDT", new Decimal("2000")]])
    const prices = new GivenPrices("BTCUSDT", new Decimal("60500"), () => polled)
    // The own pair not polled yet: it is still there, after the polled ones.
    expect(prices.size).toBe(2)
    expect(listed(prices)).toEqual(["ETHUSDT=2000", "BTCUSDT=60500"])
    polled = new Map([["SOLUSDT", new Decimal("150")]])
    expect(prices.has("ETHUSDT")).toBe(false)
    expect(prices.get("SOLUSDT")?.toString()).toBe("150")
    expect([...prices.keys()]).toEqual(["SOLUSDT", "BTCUSDT"])
    expect([...prices.values()].map(String)).toEqual(["150", "60500"])
    const each: Array<string> = []
    prices.forEach((price, symbol, map) => each.push(`${symbol}=${price.toString()} ${map === prices}`))
    expect(each).toEqual(["SOLUSDT=150 true", "BTCUSDT=60500 true"])
  })

  it("is empty for a pair nobody priced, and holds only the given price without polled ones (a backtest)", () => {
    const none = new GivenPrices("BTCUSDT")
    expect(none.size).toBe(0)
    expect(none.has("BTCUSDT")).toBe(false)
    expect(listed(none)).toEqual([])
    const backtest = new GivenPrices("BTCUSDT", new Decimal("100"))
    expect(backtest.size).toBe(1)
    expect(listed(backtest)).toEqual(["BTCUSDT=100"])
    expect(backtest.get("ETHUSDT")).toBeUndefined()
  })
})
