/**
 * The risk decisions of a strategy's batch: each placement is checked against the orders
 * before it, the ones approved earlier in the batch included. The batch keeps its sums up
 * as orders join; it must decide exactly as checking each placement against a fold over
 * every order from scratch does, and what it approves together must fit the caps and the
 * free balance.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal, ZERO } from "../../src/domain/Decimal.js"
import type { PlaceIntent } from "../../src/domain/Intent.js"
import { stillHeld } from "../../src/engine/Portfolio.js"
import { type Assessment, assess, type ListedPair, type RiskLimits } from "../../src/engine/Risk.js"
import { type BatchInputs, decideBatch, type HeldOrder } from "../../src/engine/RiskBatch.js"

const rules = (symbol: string, base: string): ListedPair => ({
  symbol,
  base,
  quote: "USDT",
  status: "trading",
  tickSize: new Decimal("0.01"),
  stepSize: new Decimal("0.001"),
  minBaseQty: new Decimal("0.001"),
  minNotional: new Decimal("5")
})
const pairs = new Map([
  ["BTCUSDT", rules("BTCUSDT", "BTC")],
  ["ETHUSDT", rules("ETHUSDT", "ETH")]
])
const lastPrices = new Map<string, Decimal | undefined>([
  ["BTCUSDT", new Decimal("100")],
  ["ETHUSDT", new Decimal("10")]
])
const ME = "grid-1"

const amount = (min: number, max: number) => fc.integer({ min, max }).map((n) => new Decimal(n).div(1000))
const symbol = fc.constantFrom("BTCUSDT", "ETHUSDT", "XRPUSDT")
const tag = fc.constantFrom("a", "b", "c", "d", "e", "f")

const placement: fc.Arbitrary<PlaceIntent> = fc.oneof(
  fc.record({ symbol, tag, side: fc.constantFrom("buy" as const, "sell" as const), baseQty: amount(0, 2000), limitPrice: amount(5_000, 150_000) }).map(
    (r): PlaceIntent => ({ type: "limit", ...r })
  ),
  fc.record({ symbol, tag, quoteOrderQty: amount(1_000, 200_000) }).map((r): PlaceIntent => ({ type: "market", side: "buy", maxSlippageBps: 50, ...r })),
  fc.record({ symbol, tag, baseQty: amount(0, 2000) }).map((r): PlaceIntent => ({ type: "market", side: "sell", maxSlippageBps: 50, ...r }))
)

const held: fc.Arbitrary<HeldOrder> = fc
  .record({
    strategyId: fc.constantFrom(ME, "other"),
    tag: fc.option(tag, { nil: null }),
    lockAsset: fc.constantFrom("USDT", "BTC", "ETH"),
    lockAmount: amount(1, 50_000),
    limitPrice: fc.option(amount(5_000, 150_000), { nil: null }),
    baseQty: amount(1, 2000),
    filledPart: fc.integer({ min: 0, max: 4 }),
    acceptedAt: fc.option(fc.integer({ min: 0, max: 2_000 }), { nil: null })
  })
  .map(({ filledPart, ...o }) => ({ ...o, filledBaseQty: o.baseQty.mul(filledPart).div(4) }))

const inputs: fc.Arbitrary<BatchInputs> = fc.record({
  at: fc.integer({ min: 0, max: 2_000 }),
  usdt: amount(0, 600_000),
  btc: amount(0, 3_000),
  eth: amount(0, 30_000),
  dailyPnl: fc.integer({ min: -50, max: 300 }).map((n) => new Decimal(n)),
  allocated: fc.option(fc.record({ USDT: amount(0, 600_000), BTC: amount(0, 3_000) }), { nil: undefined })
}).map(({ at, usdt, btc, eth, dailyPnl, allocated }) => ({
  balances: {
    at,
    byAsset: new Map([
      ["USDT", { free: usdt, locked: ZERO }],
      ["BTC", { free: btc, locked: ZERO }],
      ["ETH", { free: eth, locked: ZERO }]
    ])
  },
  pairs,
  lastPrices,
  dailyPnl,
  allocation: allocated === undefined ? undefined : { allocated, afterFills: new Map(Object.entries(allocated)) }
}))

const limits: fc.Arbitrary<RiskLimits> = fc.record(
  {
    maxOrderNotional: amount(10_000, 500_000),
    maxStrategyNotional: amount(10_000, 2_000_000),
    maxOpenOrders: fc.integer({ min: 0, max: 8 }),
    priceCollarBps: fc.integer({ min: 10, max: 100_000 }),
    dailyLossLimit: fc.integer({ min: 1, max: 200 }).map((n) => new Decimal(n))
  },
  { requiredKeys: [] }
)

const batch = fc.record({
  placements: fc.array(placement, { maxLength: 12 }),
  unfinished: fc.array(held, { maxLength: 10 }),
  inputs,
  limits,
  blockedFrom: fc.integer({ min: 0, max: 14 })
})

const blockedList = (count: number, from: number) => Array.from({ length: count }, (_, i) => (i >= from ? "ACCOUNT_FROZEN: resolve it on the website" : undefined))

const heldOfApproved = (intent: PlaceIntent, approved: Extract<Assessment, { _tag: "Approved" }>): HeldOrder => ({
  strategyId: ME,
  tag: intent.tag,
  lockAsset: approved.lock.asset,
  lockAmount: approved.lock.amount,
  limitPrice: approved.order.limitPrice ?? null,
  baseQty: approved.order.baseQty ?? null,
  filledBaseQty: ZERO,
  acceptedAt: null
})

const sum = (values: Iterable<Decimal>) => [...values].reduce((a, b) => a.plus(b), ZERO)

/** Each placement checked against every order before it, folded from scratch: the obvious, slow way. */
const decideOneByOne = (placements: ReadonlyArray<PlaceIntent>, unfinished: ReadonlyArray<HeldOrder>, input: BatchInputs, blocked: ReadonlyArray<string | undefined>, limit: RiskLimits) => {
  const orders = [...unfinished]
  return placements.map((intent, i) => {
    const own = orders.filter((o) => o.strategyId === ME)
    const pair = input.pairs.get(intent.symbol)
    const lastPrice = pair === undefined ? undefined : input.lastPrices.get(intent.symbol)
    const reservedOf = (asset: string) =>
      sum(orders.filter((o) => o.lockAsset === asset && o.lockAmount !== null && (o.acceptedAt === null || o.acceptedAt >= input.balances.at)).map((o) => o.lockAmount!))
    const allocation = input.allocation
    const assessment = assess(
      intent,
      {
        pair,
        lastPrice,
        available: (asset) => (input.balances.byAsset.get(asset)?.free ?? ZERO).minus(reservedOf(asset)),
        openOrders: own.length,
        openNotional: sum(own.map((o) => (o.lockAsset === pair?.quote ? o.lockAmount! : o.lockAmount!.mul(o.limitPrice ?? lastPrice ?? ZERO)))),
        tagInUse: own.some((o) => o.tag === intent.tag),
        dailyPnl: input.dailyPnl,
        placementsBlocked: blocked[i],
        allocation:
          allocation === undefined
            ? undefined
            : {
                free: (asset) => (allocation.afterFills.get(asset) ?? ZERO).minus(sum(own.filter((o) => o.lockAsset === asset).map(stillHeld))),
                allocated: (asset) => allocation.allocated[asset] ?? ZERO
              }
      },
      limit
    )
    if (assessment._tag === "Approved") orders.push(heldOfApproved(intent, assessment))
    return assessment
  })
}

describe("a batch's risk decisions", () => {
  it("are those of checking each placement against a fold of every order before it", () => {
    fc.assert(
      fc.property(batch, ({ placements, unfinished, inputs: input, limits: limit, blockedFrom }) => {
        const blocked = blockedList(placements.length, blockedFrom)
        expect(decideBatch(ME, placements, unfinished, input, blocked, limit)).toEqual(decideOneByOne(placements, unfinished, input, blocked, limit))
      }),
      { numRuns: 400 }
    )
  })

  it("approve together no more than the open-order cap, the free balance and the instance's allocation allow, and never one tag twice", () => {
    fc.assert(
      fc.property(batch, ({ placements, unfinished, inputs: input, limits: limit }) => {
        const decisions = decideBatch(ME, placements, unfinished, input, [], limit)
        const approved = placements.flatMap((intent, i) => {
          const d = decisions[i]!
          return d._tag === "Approved" ? [{ intent, d }] : []
        })
        const own = unfinished.filter((o) => o.strategyId === ME)
        if (limit.maxOpenOrders !== undefined && approved.length > 0) expect(own.length + approved.length).toBeLessThanOrEqual(limit.maxOpenOrders)
        const tags = approved.map(({ intent }) => intent.tag)
        expect(new Set(tags).size).toBe(tags.length)
        for (const t of tags) expect(own.some((o) => o.tag === t)).toBe(false)
        for (const asset of ["USDT", "BTC", "ETH"]) {
          const locks = sum(approved.filter(({ d }) => d.lock.asset === asset).map(({ d }) => d.lock.amount))
          if (locks.eq(0)) continue
          const reserved = sum(
            unfinished.filter((o) => o.lockAsset === asset && (o.acceptedAt === null || o.acceptedAt >= input.balances.at)).map((o) => o.lockAmount!)
          )
          expect(locks.lte(input.balances.byAsset.get(asset)!.free.minus(reserved))).toBe(true)
          if (input.allocation !== undefined) {
            const ownHeld = sum(own.filter((o) => o.lockAsset === asset).map(stillHeld))
            expect(locks.lte((input.allocation.afterFills.get(asset) ?? ZERO).minus(ownHeld))).toBe(true)
          }
        }
      }),
      { numRuns: 400 }
    )
  })

  it("refuse every placement while placements are blocked, and only those", () => {
    fc.assert(
      fc.property(batch, ({ placements, unfinished, inputs: input, limits: limit, blockedFrom }) => {
        const decisions = decideBatch(ME, placements, unfinished, input, blockedList(placements.length, blockedFrom), limit)
        decisions.forEach((d, i) => {
          expect(d._tag === "Refused" && d.reason === "placements-blocked").toBe(i >= blockedFrom)
        })
      }),
      { numRuns: 200 }
    )
  })
})
