/**
 * Round trips of a strategy's fills, per symbol: a trade opens when its position
 * leaves flat and closes when it is flat again, by the same average-cost rules as
 * the portfolio. Flat is a position smaller than one step of the pair (the dust a
 * fee charged in base can leave cannot be sold), or zero when the step is unknown.
 * A single fill that takes a position across zero stays in the trip it closes.
 */
import { Decimal, ZERO } from "../domain/Decimal.js"
import { applyFill, emptyPosition, type PortfolioFill, type Position } from "./Portfolio.js"
import type { ListedPair } from "./Risk.js"

export interface RoundTrip {
  readonly symbol: string
  /** long: opened by buying; short: by selling base held from before the first recorded buy. */
  readonly side: "long" | "short"
  readonly openedAt: number
  /** Undefined while the position is still open. */
  readonly closedAt: number | undefined
  /** Base quantity the opening fills took on, and their average price. */
  readonly entryQty: Decimal
  readonly entryPrice: Decimal
  /** Base quantity the closing fills gave back, and their average price (undefined before any). */
  readonly exitQty: Decimal
  readonly exitPrice: Decimal | undefined
  readonly realizedPnl: Decimal
  /** Fees, in the quote asset at the fill price. */
  readonly fees: Decimal
  /** realized - fees. */
  readonly netPnl: Decimal
  readonly fills: number
}

interface Open {
  readonly symbol: string
  readonly side: "long" | "short"
  readonly openedAt: number
  readonly realizedBefore: Decimal
  readonly feesBefore: Decimal
  entryQty: Decimal
  entryCost: Decimal
  exitQty: Decimal
  exitProceeds: Decimal
  fills: number
}

const close = (open: Open, position: Position, closedAt: number | undefined): RoundTrip => {
  const realizedPnl = position.realizedPnl.minus(open.realizedBefore)
  const fees = position.feesQuote.minus(open.feesBefore)
  return {
    symbol: open.symbol,
    side: open.side,
    openedAt: open.openedAt,
    closedAt,
    entryQty: open.entryQty,
    entryPrice: open.entryQty.isZero() ? ZERO : open.entryCost.div(open.entryQty),
    exitQty: open.exitQty,
    exitPrice: open.exitQty.isZero() ? undefined : open.exitProceeds.div(open.exitQty),
    realizedPnl,
    fees,
    netPnl: realizedPnl.minus(fees),
    fills: open.fills
  }
}

/** The round trips of one strategy's fills (oldest first, closed and still open), in the order they opened. */
export const roundTrips = (
  fills: ReadonlyArray<PortfolioFill>,
  pairs: ReadonlyMap<string, Pick<ListedPair, "base" | "quote">>,
  stepSizes: ReadonlyMap<string, Decimal>
): ReadonlyArray<RoundTrip> => {
  const trips: Array<RoundTrip> = []
  const positions = new Map<string, Position>()
  const open = new Map<string, Open>()
  const flat = (symbol: string, qty: Decimal): boolean => {
    const step = stepSizes.get(symbol)
    return step === undefined ? qty.isZero() : qty.abs().lt(step)
  }
  for (const fill of [...fills].sort((a, b) => a.time - b.time)) {
    const before = positions.get(fill.symbol) ?? emptyPosition(fill.symbol)
    const after = applyFill(before, fill, pairs.get(fill.symbol))
    positions.set(fill.symbol, after)
    let trip = open.get(fill.symbol)
    if (trip === undefined) {
      trip = {
        symbol: fill.symbol,
        side: fill.side === "buy" ? "long" : "short",
        openedAt: fill.time,
        realizedBefore: before.realizedPnl,
        feesBefore: before.feesQuote,
        entryQty: ZERO,
        entryCost: ZERO,
        exitQty: ZERO,
        exitProceeds: ZERO,
        fills: 0
      }
      open.set(fill.symbol, trip)
    }
    trip.fills += 1
    const opening = (trip.side === "long") === (fill.side === "buy")
    if (opening) {
      trip.entryQty = trip.entryQty.plus(fill.baseQty)
      trip.entryCost = trip.entryCost.plus(fill.baseQty.mul(fill.price))
    } else {
      trip.exitQty = trip.exitQty.plus(fill.baseQty)
      trip.exitProceeds = trip.exitProceeds.plus(fill.baseQty.mul(fill.price))
    }
    if (flat(fill.symbol, after.baseQty)) {
      trips.push(close(trip, after, fill.time))
      open.delete(fill.symbol)
    }
  }
  for (const trip of open.values()) trips.push(close(trip, positions.get(trip.symbol)!, undefined))
  return trips.sort((a, b) => a.openedAt - b.openedAt)
}
