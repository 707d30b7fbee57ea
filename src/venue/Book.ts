/**
 * The synthetic order book: price levels on both sides of the tape price. It is a
 * pure function of the pair and the price, so the depth endpoint, market orders
 * and the backtester all see the same liquidity for the same tape.
 */
import { Decimal, quantize } from "../domain/Decimal.js"

export interface BookLevel {
  readonly price: Decimal
  readonly baseQty: Decimal
}

export interface Book {
  /** Best (highest) bid first. */
  readonly bids: ReadonlyArray<BookLevel>
  /** Best (lowest) ask first. */
  readonly asks: ReadonlyArray<BookLevel>
}

export interface BookShape {
  readonly tickSize: Decimal
  readonly stepSize: Decimal
  /** Quote value of the first level on each side; level k holds k times as much. */
  readonly depthNotional: Decimal
}

/** Levels on each side of the synthetic book. */
export const BOOK_LEVELS = 20

const ONE_BPS = new Decimal("0.0001")

/** Distance between levels: one basis point of the price, at least one tick. */
export const levelSpacing = (shape: BookShape, price: Decimal): Decimal => {
  const spacing = quantize(price.mul(ONE_BPS), shape.tickSize, "ceil")
  return spacing.isZero() ? shape.tickSize : spacing
}

export const bookAround = (shape: BookShape, price: Decimal, levels: number = BOOK_LEVELS): Book => {
  const spacing = levelSpacing(shape, price)
  const bids: Array<BookLevel> = []
  const asks: Array<BookLevel> = []
  for (let k = 1; k <= levels; k++) {
    const offset = spacing.mul(k)
    const ask = price.add(offset)
    asks.push({ price: ask, baseQty: levelQty(shape, ask, k) })
    const bid = price.sub(offset)
    if (bid.gt(0)) bids.push({ price: bid, baseQty: levelQty(shape, bid, k) })
  }
  return { bids, asks }
}

const levelQty = (shape: BookShape, price: Decimal, k: number): Decimal => {
  const qty = quantize(shape.depthNotional.mul(k).div(price), shape.stepSize, "down")
  return qty.isZero() ? shape.stepSize : qty
}
