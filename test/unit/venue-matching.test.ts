/**
 * The matching engine in-process, as the backtester drives it: deterministic, no I/O,
 * time passed in. Property tests check that funds are conserved and never negative.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal, fromString, MAX_SIGNIFICANT_DIGITS, toBounds } from "../../src/domain/Decimal.js"
import { MatchingEngine } from "../../src/venue/Matching.js"
import type { PairSpec, PlaceRequest } from "../../src/venue/Orders.js"

const d = fromString
const BTCUSDT: PairSpec = {
  symbol: "BTCUSDT",
  base: "BTC",
  quote: "USDT",
  tickSize: d("0.01"),
  stepSize: d("0.00001"),
  minBaseQty: d("0.00001"),
  minNotional: d("5"),
  status: "trading",
  depthNotional: d("25000")
}
const UID = 1

const engine = (balances: Record<string, string> = { USDT: "100000", BTC: "2" }) => {
  const e = new MatchingEngine({ pairs: [BTCUSDT], fees: { maker: d("0.001"), taker: d("0.002") }, settleDelayMs: 50, prices: { BTCUSDT: d("60000") } })
  for (const [asset, amount] of Object.entries(balances)) e.setBalance(UID, asset, d(amount))
  return e
}

const wallet = (e: MatchingEngine, asset: string) => e.balances(UID).find((row) => row.asset === asset) ?? { asset, free: new Decimal(0), locked: new Decimal(0) }

const placed = (e: MatchingEngine, request: PlaceRequest, nowMs = 0): string => {
  const r = e.place(UID, request, nowMs)
  if (!r.ok) throw new Error(r.msg)
  return r.clientOrderId
}

describe("MatchingEngine", () => {
  it("accepts an order as pending and settles it only after the settle delay", () => {
    const e = engine()
    const id = placed(e, { type: "limit", symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), limitPrice: d("59000") })
    expect(e.settleDue(49)).toBe(0)
    expect(e.order(UID, id)?.kind).toBe("pending")
    expect(e.nextSettlementAt()).toBe(50)
    expect(e.settleDue(50)).toBe(1)
    expect(e.order(UID, id)?.kind).toBe("resting")
    expect(wallet(e, "USDT").locked.eq(590)).toBe(true)
  })

  it("refuses invalid orders outright with a field and a reason", () => {
    const e = engine()
    const refusal = (request: PlaceRequest) => {
      const r = e.place(UID, request, 0)
      return r.ok ? undefined : { code: r.code, field: r.field, reason: r.reason }
    }
    expect(refusal({ type: "limit", symbol: "XXX", side: "buy", baseQty: d("1"), limitPrice: d("1") })).toMatchObject({ code: "UNKNOWN_SYMBOL" })
    expect(refusal({ type: "limit", symbol: "BTCUSDT", side: "buy", baseQty: d("0.000001"), limitPrice: d("60000") })).toMatchObject({ field: "baseQty", reason: "step-size" })
    expect(refusal({ type: "limit", symbol: "BTCUSDT", side: "buy", baseQty: d("0.001"), limitPrice: d("60000.001") })).toMatchObject({ field: "limitPrice", reason: "tick-size" })
    expect(refusal({ type: "limit", symbol: "BTCUSDT", side: "buy", baseQty: d("0.00001"), limitPrice: d("100") })).toMatchObject({ reason: "below-min-notional" })
    expect(refusal({ type: "market", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("100"), maxSlippageBps: 0 })).toMatchObject({ field: "maxSlippageBps" })
  })

  it("a resting buy fills as maker at its limit when a price tick crosses it; a touch fills half", () => {
    const e = engine()
    const id = placed(e, { type: "limit", symbol: "BTCUSDT", side: "buy", baseQty: d("0.02"), limitPrice: d("59000") })
    e.settleDue(50)
    e.onPrice("BTCUSDT", d("59000"), 60)
    expect(e.order(UID, id)).toMatchObject({ kind: "resting" })
    expect(e.order(UID, id)?.filledBaseQty.eq("0.01")).toBe(true)
    e.onPrice("BTCUSDT", d("58000"), 70)
    const view = e.order(UID, id)!
    expect(view.kind).toBe("fill")
    expect(view.avgPrice?.eq(59000)).toBe(true)
    const fills = e.allFills(UID)
    expect(fills.map((f) => f.liquidity)).toEqual(["maker", "maker"])
    expect(fills.map((f) => f.time)).toEqual([60, 70])
    expect(fills[0]).toMatchObject({ fillId: expect.any(String), clientOrderId: id, symbol: "BTCUSDT", side: "buy", feeAsset: "BTC" })
    expect(fills[0]!.fee.eq(d("0.01").mul("0.001"))).toBe(true)
  })

  it("an order's average price is its fill's price after one fill and the quotient of its fills after several, within the bounds amounts are read with", () => {
    const e = engine()
    // 30000 quote walks past the first level of the synthetic book (25000 quote deep).
    const walked = placed(e, { type: "market", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("30000"), maxSlippageBps: 50 })
    const single = placed(e, { type: "market", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("100"), maxSlippageBps: 50 })
    e.settleDue(50)
    const fillsOf = (id: string) => e.allFills(UID).filter((f) => f.clientOrderId === id)
    const several = fillsOf(walked)
    expect(several.length).toBeGreaterThan(1)
    expect(new Set(several.map((f) => f.price.toFixed())).size).toBe(several.length)
    const quote = several.reduce((sum, f) => sum.add(f.quoteQty), d("0"))
    const base = several.reduce((sum, f) => sum.add(f.baseQty), d("0"))
    expect(e.order(UID, walked)?.avgPrice?.toFixed()).toBe(toBounds(quote.div(base)).toFixed())
    expect(e.order(UID, walked)?.avgPrice?.toFixed()).toBe(toBounds(quote.div(base)).toFixed())
    expect(e.order(UID, walked)!.avgPrice!.sd()).toBeLessThanOrEqual(MAX_SIGNIFICANT_DIGITS)
    const [one] = fillsOf(single)
    expect(fillsOf(single)).toHaveLength(1)
    expect(e.order(UID, single)?.avgPrice?.toFixed()).toBe(one!.price.toFixed())
    expect(e.order(UID, single)?.avgPrice?.toFixed()).toBe(one!.quoteQty.div(one!.baseQty).toFixed())
  })

  it("a candle is fed as its path: open, the near extreme, the far extreme, close", () => {
    const e = engine()
    const id = placed(e, { type: "limit", symbol: "BTCUSDT", side: "sell", baseQty: d("0.01"), limitPrice: d("61000") })
    e.settleDue(50)
    e.onCandle("BTCUSDT", { openTimeMs: 0, open: d("60000"), high: d("61500"), low: d("59800"), close: d("60100"), volume: d("1") }, 100)
    expect(e.order(UID, id)?.kind).toBe("fill")
    expect(e.price("BTCUSDT")?.eq(60100)).toBe(true)
  })

  it("a stop-limit waits for its stop price, then behaves as a limit", () => {
    const e = engine()
    const id = placed(e, { type: "stop-limit", symbol: "BTCUSDT", side: "buy", baseQty: d("0.01"), limitPrice: d("61100"), stopPrice: d("61000") })
    e.settleDue(50)
    expect(e.order(UID, id)?.kind).toBe("pending")
    e.onPrice("BTCUSDT", d("60999.99"), 60)
    expect(e.order(UID, id)?.kind).toBe("pending")
    e.onPrice("BTCUSDT", d("61000"), 70)
    expect(e.order(UID, id)?.kind).toBe("fill")
    const fills = e.allFills(UID)
    expect(fills.every((f) => f.liquidity === "taker")).toBe(true)
    // Taker fee from the fees table, paid in the received base asset.
    for (const f of fills) expect(f.fee.eq(f.baseQty.mul("0.002"))).toBe(true)
  })

  it("the same operations give the same fills (deterministic)", () => {
    const run = () => {
      const e = engine()
      placed(e, { type: "market", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d("30000"), maxSlippageBps: 50 })
      placed(e, { type: "limit", symbol: "BTCUSDT", side: "sell", baseQty: d("0.3"), limitPrice: d("60500") })
      e.settleDue(100)
      e.onPrice("BTCUSDT", d("60600"), 200)
      return JSON.stringify(e.allFills(UID))
    }
    expect(run()).toBe(run())
  })

  it("property: funds are conserved, never negative, and locks equal what open orders hold", () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant("limit" as const), side: fc.constantFrom("buy" as const, "sell" as const), qty: fc.integer({ min: 1, max: 5000 }), ticks: fc.integer({ min: -300, max: 300 }) }),
      fc.record({ kind: fc.constant("stop" as const), side: fc.constantFrom("buy" as const, "sell" as const), qty: fc.integer({ min: 1, max: 5000 }), ticks: fc.integer({ min: -300, max: 300 }) }),
      fc.record({ kind: fc.constant("market" as const), side: fc.constantFrom("buy" as const, "sell" as const), qty: fc.integer({ min: 1, max: 50000 }), bps: fc.integer({ min: 1, max: 1000 }) }),
      fc.record({ kind: fc.constant("cancel" as const), index: fc.nat() }),
      fc.record({ kind: fc.constant("price" as const), ticks: fc.integer({ min: -500, max: 500 }) }),
      fc.record({ kind: fc.constant("settle" as const) })
    )
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const e = engine({ USDT: "50000", BTC: "1" })
        const ids: Array<string> = []
        let now = 0
        const step = d("0.00001")
        const tick = d("10")
        for (const o of ops) {
          now += 10
          const reference = e.price("BTCUSDT")!
          if (o.kind === "limit" || o.kind === "stop") {
            const limitPrice = Decimal.max(d("1000"), reference.add(tick.mul(o.ticks)))
            const baseQty = step.mul(o.qty * 100)
            const r =
              o.kind === "limit"
                ? e.place(UID, { type: "limit", symbol: "BTCUSDT", side: o.side, baseQty, limitPrice }, now)
                : e.place(UID, { type: "stop-limit", symbol: "BTCUSDT", side: o.side, baseQty, limitPrice, stopPrice: limitPrice }, now)
            if (r.ok) ids.push(r.clientOrderId)
          } else if (o.kind === "market") {
            const r =
              o.side === "buy"
                ? e.place(UID, { type: "market", symbol: "BTCUSDT", side: "buy", quoteOrderQty: d(String(o.qty)), maxSlippageBps: o.bps }, now)
                : e.place(UID, { type: "market", symbol: "BTCUSDT", side: "sell", baseQty: step.mul(o.qty), maxSlippageBps: o.bps }, now)
            if (r.ok) ids.push(r.clientOrderId)
          } else if (o.kind === "cancel") {
            const id = ids[o.index % Math.max(1, ids.length)]
            if (id !== undefined) e.cancel(UID, id, now)
          } else if (o.kind === "price") {
            e.onPrice("BTCUSDT", Decimal.max(d("1000"), reference.add(tick.mul(o.ticks))), now)
          } else {
            e.settleDue(now)
          }
        }
        // Settle what is still waiting, so every open order holds its lock.
        e.settleDue(Number.MAX_SAFE_INTEGER)
        const usdt = wallet(e, "USDT")
        const btc = wallet(e, "BTC")
        for (const w of [usdt, btc]) {
          expect(w.free.gte(0)).toBe(true)
          expect(w.locked.gte(0)).toBe(true)
        }
        // Conservation: start + what fills moved, net of fees.
        let expectedUsdt = d("50000")
        let expectedBtc = d("1")
        for (const f of e.allFills(UID)) {
          if (f.side === "buy") {
            expectedUsdt = expectedUsdt.sub(f.quoteQty)
            expectedBtc = expectedBtc.add(f.baseQty).sub(f.fee)
          } else {
            expectedUsdt = expectedUsdt.add(f.quoteQty).sub(f.fee)
            expectedBtc = expectedBtc.sub(f.baseQty)
          }
        }
        expect(usdt.free.add(usdt.locked).eq(expectedUsdt)).toBe(true)
        expect(btc.free.add(btc.locked).eq(expectedBtc)).toBe(true)
        // Locks are exactly what settled open orders still hold.
        let heldUsdt = d("0")
        let heldBtc = d("0")
        for (const o of e.openOrders(UID)) {
          const remaining = o.baseQty!.sub(o.filledBaseQty)
          if (o.side === "buy") heldUsdt = heldUsdt.add(remaining.mul(o.limitPrice!))
          else heldBtc = heldBtc.add(remaining)
        }
        expect(usdt.locked.eq(heldUsdt)).toBe(true)
        expect(btc.locked.eq(heldBtc)).toBe(true)
        // Every filled order's fills add up to its filled quantity.
        for (const o of e.allOrders(UID)) {
          const sum = e.allFills(UID).filter((f) => f.clientOrderId === o.clientOrderId).reduce((acc, f) => acc.add(f.baseQty), d("0"))
          expect(sum.eq(o.filledBaseQty)).toBe(true)
          if (o.kind === "fill" && o.baseQty !== null) expect(o.filledBaseQty.eq(o.baseQty)).toBe(true)
        }
      }),
      { numRuns: 200 }
    )
  })
})
