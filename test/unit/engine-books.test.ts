/**
 * The strategy books kept up to date fill by fill give the same figures as folding
 * every fill of the strategy again (`portfolio`, `dayPnl`, `bookBalances`), digit for
 * digit, whatever order the fills reach the ledger in, when an order learns its
 * clientOrderId (through the journal) after its fills were stored, across a UTC day
 * change, when a pair's rules arrive late, and after a restart (a new book over the
 * same file).
 */
import fc from "fast-check"
import { Effect, Layer, ManagedRuntime } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { Books, type StrategyFigures } from "../../src/engine/Books.js"
import { bookBalances, DAY_MS, dayPnl, portfolio, type PortfolioFill } from "../../src/engine/Portfolio.js"
import * as Logger from "../../src/log/Logger.js"
import { Database } from "../../src/store/Database.js"
import { OrderJournal } from "../../src/store/OrderJournal.js"

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const ALL_PAIRS = new Map([
  ["BTCUSDT", { base: "BTC", quote: "USDT" }],
  ["ETHUSDT", { base: "ETH", quote: "USDT" }]
])
const PRICES = new Map([
  ["BTCUSDT", new Decimal("60123.45")],
  ["ETHUSDT", new Decimal("2987.6")]
])
const ALLOCATION = { USDT: new Decimal("10000"), BTC: new Decimal("0.5") }
/** Noon of a UTC day: the scenario's reads start here and may cross the next midnight. */
const NOON = Date.UTC(2026, 10, 25, 12)

interface OrderSpec {
  readonly symbol: "BTCUSDT" | "ETHUSDT"
  /** Another strategy's order: its fills never count. */
  readonly other: boolean
  /** The step at which the order learns its clientOrderId (its fills may be stored before). */
  readonly attributedAt: number
}

interface FillSpec {
  readonly order: number
  readonly buy: boolean
  readonly qty: number
  readonly price: number
  readonly fee: number
  readonly feeInBase: boolean
  /** Minutes around noon of the first day; beyond +720 is the next UTC day. */
  readonly minute: number
  readonly storedAt: number
}

const STEPS = 4

const scenario = fc
  .array(fc.record<OrderSpec>({ symbol: fc.constantFrom("BTCUSDT" as const, "ETHUSDT" as const), other: fc.boolean(), attributedAt: fc.integer({ min: 0, max: STEPS - 1 }) }), {
    minLength: 1,
    maxLength: 5
  })
  .chain((orders) =>
    fc.record({
      orders: fc.constant(orders),
      fills: fc.array(
        fc.record<FillSpec>({
          order: fc.integer({ min: 0, max: orders.length - 1 }),
          buy: fc.boolean(),
          qty: fc.integer({ min: 1, max: 300 }),
          price: fc.integer({ min: 1, max: 9000 }),
          fee: fc.integer({ min: 0, max: 30 }),
          feeInBase: fc.boolean(),
          minute: fc.integer({ min: -600, max: 1400 }),
          storedAt: fc.integer({ min: 0, max: STEPS - 1 })
        }),
        { maxLength: 25 }
      ),
      /** Minutes past noon of each read, in order. */
      readAt: fc.array(fc.integer({ min: 0, max: 1400 }), { minLength: STEPS, maxLength: STEPS }).map((minutes) => minutes.sort((a, b) => a - b)),
      /** From this step on the ETH pair's rules are known. */
      ethRulesFrom: fc.integer({ min: 0, max: STEPS })
    })
  )

const openBooks = (path: string) =>
  ManagedRuntime.make(
    Books.Default.pipe(
      Layer.provideMerge(OrderJournal.Default),
      Layer.provideMerge(Database.Default({ path })),
      Layer.provide(Logger.layer({ destination: { write: () => undefined } }))
    )
  )

/** Journals a limit order of `strategyId` and sends it: it has no clientOrderId until `accept`. */
const placeOrder = (strategyId: string, symbol: string) =>
  Effect.gen(function* () {
    const journal = yield* OrderJournal
    const limitPrice = new Decimal(100)
    const order = yield* journal.journalPlacement({
      strategyId,
      tag: `t-${symbol}`,
      body: {},
      placement: { symbol, side: "buy", type: "limit", baseQty: new Decimal(1), limitPrice, lockAsset: "USDT", lockAmount: limitPrice },
      now: NOON
    })
    yield* journal.transition(order.orderId, "send", { sentAt: NOON }, NOON)
    return order.orderId
  })

/** The placement's answer: the order gets its clientOrderId, and the journal's attribution is handed to the books as OrderMoves does. */
const accept = (orderId: number, clientOrderId: string) =>
  Effect.gen(function* () {
    const journal = yield* OrderJournal
    const books = yield* Books
    yield* Effect.sync(() => books.attributed(journal.applyMoves([{ orderId, event: "accept", patch: { clientOrderId, acceptedAt: NOON } }], NOON).attributed))
  })

const expectSame = (figures: StrategyFigures, fills: ReadonlyArray<PortfolioFill & { readonly quoteQty: Decimal }>, pairs: typeof ALL_PAIRS, now: number) => {
  const want = portfolio(fills, pairs, PRICES)
  const got = figures.portfolio(PRICES)
  const shown = (s: typeof want) => ({
    realized: s.realizedPnl.toFixed(),
    unrealized: s.unrealizedPnl.toFixed(),
    fees: s.feesQuote.toFixed(),
    net: s.netPnl.toFixed(),
    byAsset: s.fees,
    positions: s.positions.map((p) => [p.symbol, p.baseQty.toFixed(), p.avgCost.toFixed(), p.realizedPnl.toFixed(), p.fills])
  })
  expect(shown(got)).toEqual(shown(want))
  expect(figures.dayPnl(PRICES).toFixed()).toBe(dayPnl(fills, pairs, PRICES, now).toFixed())
  const balances = (m: Map<string, Decimal>) => Object.fromEntries([...m].map(([asset, amount]) => [asset, amount.toFixed()]))
  expect(balances(figures.balances(ALLOCATION))).toEqual(balances(bookBalances(ALLOCATION, fills, pairs)))
}

describe("strategy books", () => {
  it("equal a fold of every fill of the strategy at each read, however the fills arrive", async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async ({ orders, fills, readAt, ethRulesFrom }) => {
        const dir = mkdtempSync(join(tmpdir(), "svcbot-books-"))
        dirs.push(dir)
        const path = join(dir, "svcbot.sqlite")
        let runtime = openBooks(path)
        try {
          // The ledger's rows are written as FillSync writes them; orders go through the journal.
          const fillInsert = async () =>
            (await runtime.runPromise(Database)).sqlite.prepare(
              "INSERT INTO fills (fill_id, client_order_id, symbol, side, liquidity, price, base_qty, quote_qty, fee, fee_asset, time, raw, synced_at) VALUES (?, ?, ?, ?, 'maker', ?, ?, ?, ?, ?, ?, '{}', 0)"
            )
          let insertFill = await fillInsert()
          const orderIds: Array<number> = []
          for (const [i, o] of orders.entries()) {
            const orderId = await runtime.runPromise(placeOrder(o.other ? "other" : "s", o.symbol))
            orderIds.push(orderId)
            if (o.attributedAt === 0) await runtime.runPromise(accept(orderId, `c-${i}`))
          }
          const ledger = fills.map((f, i) => {
            const order = orders[f.order]!
            const price = new Decimal(f.price).div(10)
            const baseQty = new Decimal(f.qty).div(1000)
            return {
              spec: f,
              fillId: `f-${String(i).padStart(4, "0")}`,
              clientOrderId: `c-${f.order}`,
              order,
              fill: {
                symbol: order.symbol,
                side: f.buy ? "buy" : "sell",
                price,
                baseQty,
                quoteQty: price.mul(baseQty),
                fee: new Decimal(f.fee).div(10000),
                feeAsset: f.feeInBase ? (order.symbol === "BTCUSDT" ? "BTC" : "ETH") : "USDT",
                time: NOON + f.minute * 60_000
              }
            }
          })
          for (let step = 0; step < STEPS; step++) {
            if (step === 2) {
              // A restart: the next reads come from a book folded again from the file.
              await runtime.dispose()
              runtime = openBooks(path)
              insertFill = await fillInsert()
            }
            // Newest first, as the venue pages them.
            for (const row of ledger.filter((r) => r.spec.storedAt === step).reverse()) {
              const f = row.fill
              insertFill.run(row.fillId, row.clientOrderId, f.symbol, f.side, f.price.toFixed(), f.baseQty.toFixed(), f.quoteQty.toFixed(), f.fee.toFixed(), f.feeAsset, f.time)
            }
            for (const [i, o] of orders.entries()) if (o.attributedAt === step && step > 0) await runtime.runPromise(accept(orderIds[i]!, `c-${i}`))
            const pairs = step >= ethRulesFrom ? ALL_PAIRS : new Map([...ALL_PAIRS].filter(([symbol]) => symbol !== "ETHUSDT"))
            const now = NOON + readAt[step]! * 60_000
            const figures = await runtime.runPromise(Effect.flatMap(Books, (books) => books.figures("s", pairs, now)))
            const counted = ledger
              .filter((r) => r.spec.storedAt <= step && !r.order.other && r.order.attributedAt <= step)
              .sort((a, b) => a.fill.time - b.fill.time || (a.fillId < b.fillId ? -1 : 1))
              .map((r) => r.fill)
            expectSame(figures, counted, pairs, now)
          }
        } finally {
          await runtime.dispose()
        }
      }),
      { numRuns: 60 }
    )
  })

  it("splits the day PnL at 00:00 UTC without reading the fills again", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svcbot-books-"))
    dirs.push(dir)
    const runtime = openBooks(join(dir, "svcbot.sqlite"))
    try {
      const { sqlite } = await runtime.runPromise(Database)
      await runtime.runPromise(Effect.flatMap(placeOrder("s", "BTCUSDT"), (orderId) => accept(orderId, "c-1")))
      const fill = sqlite.prepare("INSERT INTO fills (fill_id, client_order_id, symbol, side, liquidity, price, base_qty, quote_qty, fee, fee_asset, time, raw, synced_at) VALUES (?, 'c-1', 'BTCUSDT', ?, 'taker', ?, '1', ?, '0', 'USDT', ?, '{}', 0)")
      fill.run("a", "buy", "100", "100", NOON)
      fill.run("b", "sell", "110", "110", NOON + 60_000)
      const figures = (now: number) => runtime.runPromise(Effect.flatMap(Books, (books) => books.figures("s", ALL_PAIRS, now)))
      expect((await figures(NOON + 120_000)).dayPnl(new Map()).toFixed()).toBe("10")
      const midnight = NOON + DAY_MS / 2
      expect((await figures(midnight)).dayPnl(new Map()).toFixed()).toBe("0")
      fill.run("c", "buy", "120", "120", midnight + 1000)
      fill.run("d", "sell", "125", "125", midnight + 2000)
      expect((await figures(midnight + 3000)).dayPnl(new Map()).toFixed()).toBe("5")
    } finally {
      await runtime.dispose()
    }
  })
})
