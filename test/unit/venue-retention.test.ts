/**
 * The matching engine's history and open-order index under random trading: open
 * orders read from the index are exactly the pending and resting orders, in placement
 * order; a retention keeps at most its count of ended orders and fills per account
 * and no order an account still has open; without one nothing is forgotten.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { fromString } from "../../src/domain/Decimal.js"
import { MatchingEngine, type Retention } from "../../src/venue/Matching.js"
import type { PairSpec } from "../../src/venue/Orders.js"

const d = fromString
const pair = (symbol: string, base: string): PairSpec => ({
  symbol,
  base,
  quote: "USDT",
  tickSize: d("0.01"),
  stepSize: d("0.0001"),
  minBaseQty: d("0.0001"),
  minNotional: d("1"),
  status: "trading",
  depthNotional: d("25000")
})
const PAIRS = [pair("BTCUSDT", "BTC"), pair("ETHUSDT", "ETH")]
const START = { BTCUSDT: "100", ETHUSDT: "100" } as const
const UIDS = [1, 2]

type Op =
  | { readonly kind: "place"; readonly uid: number; readonly symbol: "BTCUSDT" | "ETHUSDT"; readonly side: "buy" | "sell"; readonly offsetTicks: number }
  | { readonly kind: "cancel"; readonly uid: number; readonly pick: number }
  | { readonly kind: "price"; readonly symbol: "BTCUSDT" | "ETHUSDT"; readonly offsetTicks: number }

const symbolArb = fc.constantFrom("BTCUSDT" as const, "ETHUSDT" as const)
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("place" as const), uid: fc.constantFrom(...UIDS), symbol: symbolArb, side: fc.constantFrom("buy" as const, "sell" as const), offsetTicks: fc.integer({ min: -300, max: 300 }) }),
  fc.record({ kind: fc.constant("cancel" as const), uid: fc.constantFrom(...UIDS), pick: fc.nat() }),
  fc.record({ kind: fc.constant("price" as const), symbol: symbolArb, offsetTicks: fc.integer({ min: -300, max: 300 }) })
)

/** Plays `ops`, one millisecond apart, settling as it goes; returns the engine and every id it handed out. */
const play = (ops: ReadonlyArray<Op>, retention?: Retention) => {
  const engine = new MatchingEngine({
    pairs: PAIRS,
    fees: { maker: d("0.001"), taker: d("0.001") },
    settleDelayMs: 1,
    prices: { BTCUSDT: d(START.BTCUSDT), ETHUSDT: d(START.ETHUSDT) },
    ...(retention === undefined ? {} : { retention })
  })
  for (const uid of UIDS) for (const asset of ["USDT", "BTC", "ETH"]) engine.setBalance(uid, asset, d("1000000"))
  const ids = new Map<number, Array<string>>(UIDS.map((uid) => [uid, []]))
  ops.forEach((op, now) => {
    engine.settleDue(now)
    if (op.kind === "price") return engine.onPrice(op.symbol, d(START[op.symbol]).add(d("0.01").mul(op.offsetTicks)), now)
    if (op.kind === "cancel") {
      const mine = ids.get(op.uid)!
      if (mine.length > 0) engine.cancel(op.uid, mine[op.pick % mine.length]!, now)
      return
    }
    const limitPrice = engine.price(op.symbol)!.add(d("0.01").mul(op.offsetTicks))
    if (limitPrice.lte(0)) return
    const placed = engine.place(op.uid, { type: "limit", symbol: op.symbol, side: op.side, baseQty: d("1"), limitPrice }, now)
    if (placed.ok) ids.get(op.uid)!.push(placed.clientOrderId)
  })
  engine.settleDue(ops.length)
  return { engine, ids }
}

const isOpen = (kind: string) => kind === "pending" || kind === "resting"

describe("venue retention and the open-order index", () => {
  it("open orders, whole or per symbol, are the kept orders that are pending or resting, in placement order", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 200 }), fc.integer({ min: 1, max: 8 }), (ops, terminalCount) => {
        const { engine } = play(ops, { terminalMs: 1_000_000, terminalCount })
        for (const uid of UIDS) {
          const kept = engine.allOrders(uid)
          const open = kept.filter((o) => isOpen(o.kind))
          expect(engine.openOrders(uid)).toEqual(open)
          for (const { symbol } of PAIRS) expect(engine.openOrders(uid, symbol)).toEqual(open.filter((o) => o.symbol === symbol))
          expect(kept.length - open.length).toBeLessThanOrEqual(terminalCount)
          expect(engine.allFills(uid).length).toBeLessThanOrEqual(terminalCount)
        }
      })
    )
  })

  it("an order is answered while kept and not after; an open order is always kept", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 200 }), fc.integer({ min: 1, max: 5 }), (ops, terminalCount) => {
        const { engine, ids } = play(ops, { terminalMs: 1_000_000, terminalCount })
        const unbounded = play(ops).engine
        for (const uid of UIDS) {
          const kept = new Set(engine.allOrders(uid).map((o) => o.clientOrderId))
          for (const id of ids.get(uid)!) {
            const order = engine.order(uid, id)
            expect(order !== undefined).toBe(kept.has(id))
            // The history changes nothing about what happens to orders: kept ones read as without a retention.
            if (order !== undefined) expect(order).toEqual(unbounded.order(uid, id))
            else expect(isOpen(unbounded.order(uid, id)!.kind)).toBe(false)
          }
          // The fills kept are the newest ones.
          const fills = engine.allFills(uid)
          const everyFill = unbounded.allFills(uid)
          expect(fills).toEqual(everyFill.slice(everyFill.length - fills.length))
        }
      })
    )
  })

  it("without a retention every order and fill is kept", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 200 }), (ops) => {
        const { engine, ids } = play(ops)
        for (const uid of UIDS) {
          expect(engine.allOrders(uid).map((o) => o.clientOrderId)).toEqual(ids.get(uid))
          for (const id of ids.get(uid)!) expect(engine.order(uid, id)).toBeDefined()
        }
      })
    )
  })

  it("pages of fills follow the cursor over the kept fills only", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 200 }), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 4 }), (ops, terminalCount, limit) => {
        const { engine } = play(ops, { terminalMs: 1_000_000, terminalCount })
        for (const uid of UIDS) {
          const seen: Array<string> = []
          let page = engine.fills(uid, { limit })
          seen.push(...page.fills.map((f) => f.fillId))
          while (page.hasOlder) {
            page = engine.fills(uid, { limit, beforeSeq: page.fills[page.fills.length - 1]!.seq })
            seen.push(...page.fills.map((f) => f.fillId))
          }
          expect(seen).toEqual(engine.allFills(uid).map((f) => f.fillId).reverse())
        }
      })
    )
  })
})
