/**
 * Positions and PnL from fills, in exact decimals, by average cost. Spot only:
 * a position below zero means the strategy sold base it held before its first
 * recorded buy; its cost basis restarts when the position crosses zero.
 */
import { Decimal, ZERO } from "../domain/Decimal.js"
import type { ListedPair } from "./Risk.js"

export interface PortfolioFill {
  readonly symbol: string
  readonly side: string
  readonly price: Decimal
  readonly baseQty: Decimal
  readonly fee: Decimal
  readonly feeAsset: string
  readonly time: number
}

export interface Position {
  readonly symbol: string
  /** Net base quantity bought minus sold (after base-asset fees). */
  readonly baseQty: Decimal
  /** Average cost per unit of the open position, in the quote asset. */
  readonly avgCost: Decimal
  readonly realizedPnl: Decimal
  /** Fees converted to the quote asset at the fill price. */
  readonly feesQuote: Decimal
  readonly fills: number
}

export interface PortfolioSnapshot {
  readonly positions: ReadonlyArray<Position & { readonly lastPrice: Decimal | null; readonly unrealizedPnl: Decimal }>
  readonly realizedPnl: Decimal
  readonly unrealizedPnl: Decimal
  readonly feesQuote: Decimal
  /** realized + unrealized - fees. */
  readonly netPnl: Decimal
  /** Fees by the asset they were charged in. */
  readonly fees: Readonly<Record<string, string>>
}

export const emptyPosition = (symbol: string): Position => ({
  symbol,
  baseQty: ZERO,
  avgCost: ZERO,
  realizedPnl: ZERO,
  feesQuote: ZERO,
  fills: 0
})

/** Moves a position by `qty` (signed) at `price`, realizing PnL on the part that reduces it. */
const trade = (p: Position, qty: Decimal, price: Decimal): Pick<Position, "baseQty" | "avgCost" | "realizedPnl"> => {
  const next = p.baseQty.plus(qty)
  if (p.baseQty.isZero() || p.baseQty.isNeg() === qty.isNeg()) {
    // Adding to the position (or opening it): the cost averages in.
    const cost = p.avgCost.mul(p.baseQty.abs()).plus(price.mul(qty.abs()))
    return { baseQty: next, avgCost: next.isZero() ? ZERO : cost.div(next.abs()), realizedPnl: p.realizedPnl }
  }
  const closed = Decimal.min(qty.abs(), p.baseQty.abs())
  const direction = p.baseQty.isNeg() ? -1 : 1
  const realized = price.minus(p.avgCost).mul(closed).mul(direction)
  const crossed = next.isZero() ? false : next.isNeg() !== p.baseQty.isNeg()
  return {
    baseQty: next,
    avgCost: next.isZero() ? ZERO : crossed ? price : p.avgCost,
    realizedPnl: p.realizedPnl.plus(realized)
  }
}

export const applyFill = (p: Position, fill: PortfolioFill, pair: Pick<ListedPair, "base" | "quote"> | undefined): Position => {
  const signed = fill.side === "buy" ? fill.baseQty : fill.baseQty.neg()
  const feeInBase = pair !== undefined && fill.feeAsset === pair.base
  const feeInQuote = pair === undefined || fill.feeAsset === pair.quote
  // A fee charged in the base asset leaves the position smaller than the traded quantity.
  const moved = trade(p, feeInBase ? signed.minus(fill.fee) : signed, fill.price)
  const feeQuote = feeInBase ? fill.fee.mul(fill.price) : feeInQuote ? fill.fee : ZERO
  return { ...p, ...moved, feesQuote: p.feesQuote.plus(feeQuote), fills: p.fills + 1 }
}

/** Folds fills (any order; they are sorted by time) into per-symbol positions and totals. */
export const portfolio = (
  fills: ReadonlyArray<PortfolioFill>,
  pairs: ReadonlyMap<string, Pick<ListedPair, "base" | "quote">>,
  lastPrices: ReadonlyMap<string, Decimal>
): PortfolioSnapshot => {
  const bySymbol = new Map<string, Position>()
  const fees: Record<string, Decimal> = {}
  for (const fill of [...fills].sort((a, b) => a.time - b.time)) {
    bySymbol.set(fill.symbol, applyFill(bySymbol.get(fill.symbol) ?? emptyPosition(fill.symbol), fill, pairs.get(fill.symbol)))
    fees[fill.feeAsset] = (fees[fill.feeAsset] ?? ZERO).plus(fill.fee)
  }
  let realizedPnl = ZERO
  let unrealizedPnl = ZERO
  let feesQuote = ZERO
  const positions = [...bySymbol.values()].map((p) => {
    const lastPrice = lastPrices.get(p.symbol) ?? null
    const unrealized = lastPrice === null ? ZERO : lastPrice.minus(p.avgCost).mul(p.baseQty)
    realizedPnl = realizedPnl.plus(p.realizedPnl)
    unrealizedPnl = unrealizedPnl.plus(unrealized)
    feesQuote = feesQuote.plus(p.feesQuote)
    return { ...p, lastPrice, unrealizedPnl: unrealized }
  })
  return {
    positions,
    realizedPnl,
    unrealizedPnl,
    feesQuote,
    netPnl: realizedPnl.plus(unrealizedPnl).minus(feesQuote),
    fees: Object.fromEntries(Object.entries(fees).map(([asset, amount]) => [asset, amount.toFixed()]))
  }
}

export const DAY_MS = 86_400_000

/** Milliseconds of the UTC midnight that starts the day of `now`. */
export const startOfUtcDay = (now: number): number => now - (now % DAY_MS)

/**
 * The UTC day's PnL as the daily loss limit measures it: realized PnL minus fees
 * since midnight, plus the unrealized PnL of what is held now.
 */
export const dayPnl = (
  fills: ReadonlyArray<PortfolioFill>,
  pairs: ReadonlyMap<string, Pick<ListedPair, "base" | "quote">>,
  lastPrices: ReadonlyMap<string, Decimal>,
  now: number
): Decimal => {
  const dayStart = startOfUtcDay(now)
  const all = portfolio(fills, pairs, lastPrices)
  const before = portfolio(fills.filter((f) => f.time < dayStart), pairs, lastPrices)
  return all.realizedPnl.minus(all.feesQuote).minus(before.realizedPnl.minus(before.feesQuote)).plus(all.unrealizedPnl)
}

/**
 * An instance's own balances: its allocation moved by its own fills only (what it
 * bought and sold, and the fees it paid), never by the rest of the account.
 */
export const bookBalances = (
  allocation: Readonly<Record<string, Decimal>>,
  fills: ReadonlyArray<PortfolioFill & { readonly quoteQty: Decimal }>,
  pairs: ReadonlyMap<string, Pick<ListedPair, "base" | "quote">>
): Map<string, Decimal> => {
  const balances = new Map<string, Decimal>(Object.entries(allocation))
  const move = (asset: string, amount: Decimal) => balances.set(asset, (balances.get(asset) ?? ZERO).plus(amount))
  for (const fill of fills) {
    const pair = pairs.get(fill.symbol)
    if (pair === undefined) continue
    const buy = fill.side === "buy"
    move(pair.base, buy ? fill.baseQty : fill.baseQty.neg())
    move(pair.quote, buy ? fill.quoteQty.neg() : fill.quoteQty)
    move(fill.feeAsset, fill.fee.neg())
  }
  return balances
}

/** A fill as the ledger's `fills` table stores it (exact decimal strings). */
export interface LedgerFillRow {
  readonly symbol: string
  readonly side: string
  readonly price: string
  readonly base_qty: string
  readonly quote_qty: string
  readonly fee: string
  readonly fee_asset: string
  readonly time: number
}

/** A ledger row as the book reads it. */
export const bookFillOf = (row: LedgerFillRow): PortfolioFill & { readonly quoteQty: Decimal } => ({
  symbol: row.symbol,
  side: row.side,
  price: new Decimal(row.price),
  baseQty: new Decimal(row.base_qty),
  quoteQty: new Decimal(row.quote_qty),
  fee: new Decimal(row.fee),
  feeAsset: row.fee_asset,
  time: row.time
})

/** An unfinished order as far as what it holds of its lock asset. */
export interface HoldingOrder {
  readonly lockAsset: string | null
  readonly lockAmount: Decimal | null
  readonly baseQty: Decimal | null
  readonly filledBaseQty: Decimal
}

/** What an unfinished order still holds: the unfilled part of its lock (the filled part is in the fills). */
export const stillHeld = (order: HoldingOrder): Decimal => {
  if (order.lockAmount === null) return ZERO
  const base = order.baseQty
  return base !== null && base.gt(0) ? order.lockAmount.mul(base.minus(order.filledBaseQty)).div(base) : order.lockAmount
}

/**
 * An instance's own balances, free and locked: its book (allocation moved by its own fills),
 * of which its unfinished orders hold what they still hold.
 */
export const ownBalances = (
  book: ReadonlyMap<string, Decimal>,
  orders: ReadonlyArray<HoldingOrder>
): Map<string, { readonly free: Decimal; readonly locked: Decimal }> => {
  const locked = new Map<string, Decimal>()
  for (const order of orders) {
    if (order.lockAsset !== null) locked.set(order.lockAsset, (locked.get(order.lockAsset) ?? ZERO).plus(stillHeld(order)))
  }
  const balances = new Map<string, { readonly free: Decimal; readonly locked: Decimal }>()
  for (const asset of new Set([...book.keys(), ...locked.keys()])) {
    const held = locked.get(asset) ?? ZERO
    balances.set(asset, { free: (book.get(asset) ?? ZERO).minus(held), locked: held })
  }
  return balances
}
