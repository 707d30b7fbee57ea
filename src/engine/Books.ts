/**
 * Each strategy's own figures from its fills, kept up to date instead of folded
 * again from every fill on each read: positions and PnL (the heartbeat, the
 * portfolio), the UTC day's PnL (the daily loss limit) and what its fills moved
 * its allocation by (the allocation check). A read first takes in the fills
 * stored since the last one; the ledger stays the truth, and a book is folded
 * again from it whole when a fill arrives out of time order, when the UTC day
 * cannot be split from what is held, or after a start.
 *
 * A fill belongs to a strategy through its order (the fill's clientOrderId), and
 * an order learns its clientOrderId only when its placement is answered or a lost
 * placement is found. Fills the ledger stored before that moment are added at the
 * next read: `OrderMoves` hands the journal's attributions on (`attributed`) in the
 * same synchronous step as the commit that makes them, so no read comes between.
 * Fills stored after it arrive with the next read like any other.
 */
import { Effect } from "effect"
import { Decimal, ZERO } from "../domain/Decimal.js"
import { Database } from "../store/Database.js"
import { type FillTableRow, strategyFills } from "../store/FillLedger.js"
import type { Attribution } from "../store/OrderJournal.js"
import { applyFill, bookFillOf, emptyPosition, type PortfolioFill, type PortfolioSnapshot, type Position, startOfUtcDay } from "./Portfolio.js"
import type { ListedPair } from "./Risk.js"

type Pairs = ReadonlyMap<string, Pick<ListedPair, "base" | "quote">>

interface BookFill extends PortfolioFill {
  readonly fillId: string
  readonly quoteQty: Decimal
}

/** What a symbol's fills moved: base and quote (signed), and fees by asset. */
interface Flow {
  base: Decimal
  quote: Decimal
  readonly fees: Map<string, Decimal>
}

/** Attributions held for a book that is not read; beyond this many it is folded again whole instead. */
const MAX_PENDING_ATTRIBUTIONS = 1000

/** Ledger order: by time, then fill id, as `portfolio` and the ledger's reads sort them. */
const compareFills = (a: { readonly time: number; readonly fillId: string }, b: { readonly time: number; readonly fillId: string }): number =>
  a.time - b.time || (a.fillId < b.fillId ? -1 : a.fillId > b.fillId ? 1 : 0)

const toBookFill = (row: FillTableRow): BookFill => ({ ...bookFillOf(row), fillId: row.fill_id })

const add = (map: Map<string, Decimal>, key: string, amount: Decimal) => map.set(key, (map.get(key) ?? ZERO).plus(amount))

/** One strategy instance's fold of its fills, in ledger order (not a venue's order book). */
class InstanceBook {
  readonly positions = new Map<string, Position>()
  /** Fees by the asset they were charged in. */
  readonly fees = new Map<string, Decimal>()
  readonly flows = new Map<string, Flow>()
  /** Symbols folded while their pair was unknown: fees could not be told apart, so the book is folded again once it is known. */
  readonly pairless = new Set<string>()
  /** Realized PnL and fees over the fills before `dayStart`. */
  beforeDay: Totals = { realizedPnl: ZERO, feesQuote: ZERO }
  /** The newest fill folded in. */
  last: { readonly time: number; readonly fillId: string } | undefined
  /** Every ledger row up to this rowid that belonged to the strategy when it was read is in the book. */
  readRowid = 0
  /** Orders of the strategy that got their clientOrderId since the last read. */
  readonly attributed = new Set<string>()
  stale = false

  constructor(public dayStart: number) {}

  apply(fill: BookFill, pairs: Pairs): void {
    const pair = pairs.get(fill.symbol)
    if (pair === undefined) this.pairless.add(fill.symbol)
    this.positions.set(fill.symbol, applyFill(this.positions.get(fill.symbol) ?? emptyPosition(fill.symbol), fill, pair))
    if (fill.time < this.dayStart) this.beforeDay = this.totals()
    add(this.fees, fill.feeAsset, fill.fee)
    let flow = this.flows.get(fill.symbol)
    if (flow === undefined) {
      flow = { base: ZERO, quote: ZERO, fees: new Map() }
      this.flows.set(fill.symbol, flow)
    }
    const buy = fill.side === "buy"
    flow.base = flow.base.plus(buy ? fill.baseQty : fill.baseQty.neg())
    flow.quote = flow.quote.plus(buy ? fill.quoteQty.neg() : fill.quoteQty)
    add(flow.fees, fill.feeAsset, fill.fee)
    this.last = fill
  }

  /** Summed over the positions in their order, as `portfolio` sums them: the same digits, not only the same value. */
  totals(): Totals {
    let realizedPnl = ZERO
    let feesQuote = ZERO
    for (const p of this.positions.values()) {
      realizedPnl = realizedPnl.plus(p.realizedPnl)
      feesQuote = feesQuote.plus(p.feesQuote)
    }
    return { realizedPnl, feesQuote }
  }

  /** Unrealized PnL of what is held, at `lastPrices`, and each position with its own. */
  marked(lastPrices: ReadonlyMap<string, Decimal>) {
    let unrealizedPnl = ZERO
    const positions = [...this.positions.values()].map((p) => {
      const lastPrice = lastPrices.get(p.symbol) ?? null
      const unrealized = lastPrice === null ? ZERO : lastPrice.minus(p.avgCost).mul(p.baseQty)
      unrealizedPnl = unrealizedPnl.plus(unrealized)
      return { ...p, lastPrice, unrealizedPnl: unrealized }
    })
    return { positions, unrealizedPnl }
  }
}

interface Totals {
  readonly realizedPnl: Decimal
  readonly feesQuote: Decimal
}

/** A strategy's figures at one moment; the same numbers `portfolio`, `dayPnl` and `bookBalances` give for its fills. */
export interface StrategyFigures {
  /** Symbols the strategy has fills in. */
  readonly symbols: ReadonlyArray<string>
  readonly portfolio: (lastPrices: ReadonlyMap<string, Decimal>) => PortfolioSnapshot
  /** Realized PnL less fees since 00:00 UTC, plus the unrealized PnL of what is held. */
  readonly dayPnl: (lastPrices: ReadonlyMap<string, Decimal>) => Decimal
  /** The allocation moved by the strategy's fills (fills of pairs not in `pairs` left out). */
  readonly balances: (allocation: Readonly<Record<string, Decimal>>) => Map<string, Decimal>
}

export class Books extends Effect.Service<Books>()("svcbot/Books", {
  effect: Effect.gen(function* () {
    const { sqlite } = yield* Database
    const fills = strategyFills(sqlite)
    /** One book per strategy instance that has been read. */
    const books = new Map<string, InstanceBook>()

    const fold = (strategyId: string, pairs: Pairs, now: number): InstanceBook => {
      const book = new InstanceBook(startOfUtcDay(now))
      // Both reads see the same table: nothing writes between two synchronous statements.
      book.readRowid = fills.lastRowid()
      for (const row of fills.all(strategyId)) book.apply(toBookFill(row), pairs)
      books.set(strategyId, book)
      return book
    }

    const read = (strategyId: string, pairs: Pairs, now: number): InstanceBook => {
      const book = books.get(strategyId)
      if (book === undefined || book.stale || [...book.pairless].some((symbol) => pairs.has(symbol))) return fold(strategyId, pairs, now)
      const dayStart = startOfUtcDay(now)
      if (dayStart !== book.dayStart) {
        // A new UTC day splits where the book stands, unless it holds fills dated on or after its start (clock skew).
        if (book.last !== undefined && book.last.time >= dayStart) return fold(strategyId, pairs, now)
        book.dayStart = dayStart
        book.beforeDay = book.totals()
      }
      const upTo = fills.lastRowid()
      const fresh: Array<BookFill> = []
      // Read through the order: an attribution rolled back with its transaction adds nothing.
      for (const clientOrderId of book.attributed) for (const row of fills.ofOrder(strategyId, clientOrderId, book.readRowid)) fresh.push(toBookFill(row))
      book.attributed.clear()
      if (upTo > book.readRowid) for (const row of fills.storedAfter(strategyId, book.readRowid, upTo)) fresh.push(toBookFill(row))
      book.readRowid = upTo
      if (fresh.length === 0) return book
      fresh.sort(compareFills)
      // A fill older than the newest folded in changes the average cost of what came after it.
      if (book.last !== undefined && compareFills(fresh[0]!, book.last) < 0) return fold(strategyId, pairs, now)
      for (const fill of fresh) book.apply(fill, pairs)
      return book
    }

    const figures = (book: InstanceBook, pairs: Pairs): StrategyFigures => ({
      symbols: [...book.positions.keys()],
      portfolio: (lastPrices) => {
        const { realizedPnl, feesQuote } = book.totals()
        const { positions, unrealizedPnl } = book.marked(lastPrices)
        return {
          positions,
          realizedPnl,
          unrealizedPnl,
          feesQuote,
          netPnl: realizedPnl.plus(unrealizedPnl).minus(feesQuote),
          fees: Object.fromEntries([...book.fees].map(([asset, amount]) => [asset, amount.toFixed()]))
        }
      },
      dayPnl: (lastPrices) => {
        const all = book.totals()
        const before = book.beforeDay
        return all.realizedPnl.minus(all.feesQuote).minus(before.realizedPnl.minus(before.feesQuote)).plus(book.marked(lastPrices).unrealizedPnl)
      },
      balances: (allocation) => {
        const balances = new Map<string, Decimal>(Object.entries(allocation))
        for (const [symbol, flow] of book.flows) {
          const pair = pairs.get(symbol)
          if (pair === undefined) continue
          add(balances, pair.base, flow.base)
          add(balances, pair.quote, flow.quote)
          for (const [asset, fee] of flow.fees) add(balances, asset, fee.neg())
        }
        return balances
      }
    })

    return {
      /** The strategy's figures with every fill the ledger holds for it now. */
      figures: (strategyId: string, pairs: Pairs, now: number): Effect.Effect<StrategyFigures> =>
        Effect.sync(() => figures(read(strategyId, pairs, now), pairs)),
      /**
       * Told of strategy orders that got their clientOrderId (plain: in the same synchronous step
       * as the journal's commit). Read at the next read with the watermark of the read before:
       * their fills up to there were not the strategy's then.
       */
      attributed: (attributions: ReadonlyArray<Attribution>): void => {
        for (const { strategyId, clientOrderId } of attributions) {
          const book = books.get(strategyId)
          if (book === undefined || book.stale) continue
          book.attributed.add(clientOrderId)
          if (book.attributed.size > MAX_PENDING_ATTRIBUTIONS) {
            book.stale = true
            book.attributed.clear()
          }
        }
      }
    }
  })
}) {}
