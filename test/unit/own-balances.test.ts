/** An instance's own balances: its book, of which its unfinished orders hold the unfilled part of their locks. */
import { describe, expect, it } from "vitest"
import { ownBalances, stillHeld } from "../../src/engine/Portfolio.js"
import { d } from "../support/pair.js"

const shown = (balances: ReturnType<typeof ownBalances>) =>
  Object.fromEntries([...balances].map(([asset, b]) => [asset, `${b.free.toFixed()} free, ${b.locked.toFixed()} locked`]))

describe("ownBalances", () => {
  it("holds the unfilled part of each order's lock, in its lock asset", () => {
    const book = new Map([["USDT", d("1000")], ["BTC", d("0.05")]])
    const bid = { lockAsset: "USDT", lockAmount: d("600"), baseQty: d("0.01"), filledBaseQty: d("0.004") }
    const ask = { lockAsset: "BTC", lockAmount: d("0.02"), baseQty: d("0.02"), filledBaseQty: d("0") }
    expect(stillHeld(bid).toFixed()).toBe("360")
    expect(shown(ownBalances(book, [bid, ask]))).toEqual({ USDT: "640 free, 360 locked", BTC: "0.03 free, 0.02 locked" })
  })

  it("is the book, all free, without orders; an order without a lock holds nothing", () => {
    const book = new Map([["USDT", d("1000")]])
    expect(shown(ownBalances(book, [{ lockAsset: null, lockAmount: null, baseQty: null, filledBaseQty: d("0") }]))).toEqual({ USDT: "1000 free, 0 locked" })
  })
})
