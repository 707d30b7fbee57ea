/**
 * The synthetic order book: price levels on both sides of the tape price. It is a
 * pure function of the pair and the price, so the depth endpoint, market orders
 * and the backtester all see the same liquidity for the same tape.
 */
import { type Decimal, divideDownFast, estimatedSteps, ONE_BPS, quantize, sign, stepsOf, toFloat } from "../domain/Decimal.js"

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

/**
 * The last spacing each tick size was multiplied out for: the price moves far less than a basis
 * point between most orders, so the count of ticks repeats, and its product need not be made again.
 */
const lastSpacing = new WeakMap<Decimal, { readonly ticks: number; readonly spacing: Decimal }>()

/** Distance between levels: one basis point of the price, at least one tick. */
export const levelSpacing = (shape: BookShape, price: Decimal): Decimal => {
  const ticks = estimatedSteps((toFloat(price) * 1e-4) / toFloat(shape.tickSize), "up")
  if (ticks === undefined) {
    const spacing = quantize(price.mul(ONE_BPS), shape.tickSize, "ceil")
    return spacing.isZero() ? shape.tickSize : spacing
  }
  if (ticks === 0) return shape.tickSize
  const last = lastSpacing.get(shape.tickSize)
  if (last !== undefined && last.ticks === ticks) return last.spacing
  const spacing = stepsOf(ticks, shape.tickSize)
  lastSpacing.set(shape.tickSize, { ticks, spacing })
  return spacing
}

/**
 * One side of the book around a price, each level worked out on its first read:
 * an order walks only the few levels it reaches, and a level's quantity (a Decimal
 * division) only once its price is reached. `asks` is the side a buy takes, `bids`
 * the side a sell takes.
 */
export class BookSide {
  private readonly prices: Array<Decimal> = []
  private readonly levels: Array<BookLevel> = []
  /** Bids stop above zero: past the first non-positive price there are no more levels. */
  private exhausted = false

  constructor(
    private readonly shape: BookShape,
    private readonly price: Decimal,
    private readonly side: "bids" | "asks",
    private readonly depth: number = BOOK_LEVELS,
    private readonly spacing: Decimal = levelSpacing(shape, price)
  ) {}

  /** The price of the level `index` places from the touch (0 is the best), or undefined past the side's last level. */
  priceAt(index: number): Decimal | undefined {
    const prices = this.prices
    while (prices.length <= index) {
      if (this.exhausted || prices.length >= this.depth) return undefined
      // The first level is one spacing away: no product to work out.
      const offset = prices.length === 0 ? this.spacing : this.spacing.mul(prices.length + 1)
      const price = this.side === "asks" ? this.price.add(offset) : this.price.sub(offset)
      if (this.side === "bids" && sign(price) <= 0) {
        this.exhausted = true
        return undefined
      }
      prices.push(price)
    }
    return prices[index]
  }

  /** The level `index` places from the touch, with its quantity. */
  level(index: number): BookLevel | undefined {
    const levels = this.levels
    while (levels.length <= index) {
      const k = levels.length + 1
      const price = this.priceAt(levels.length)
      if (price === undefined) return undefined
      levels.push({ price, baseQty: levelQty(this.shape, price, k) })
    }
    return levels[index]
  }

  /** Every level of the side, best first. */
  all(): ReadonlyArray<BookLevel> {
    this.level(this.depth - 1)
    return this.levels
  }
}

export const bookAround = (shape: BookShape, price: Decimal, levels: number = BOOK_LEVELS): Book => {
  const spacing = levelSpacing(shape, price)
  return { bids: new BookSide(shape, price, "bids", levels, spacing).all(), asks: new BookSide(shape, price, "asks", levels, spacing).all() }
}

const levelQty = (shape: BookShape, price: Decimal, k: number): Decimal => {
  const qty = divideDownFast(k === 1 ? shape.depthNotional : shape.depthNotional.mul(k), price, shape.stepSize)
  return qty.isZero() ? shape.stepSize : qty
}
