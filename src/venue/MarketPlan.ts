/**
 * A market order against the synthetic book: the fills it takes level by level, as long
 * as the level's price stays within its slippage bound of the reference price.
 */
import { compare, type Decimal, divideDownFast, ESTIMATE_ERROR, min, ONE_BPS, toFloat } from "../domain/Decimal.js"
import type { BookSide } from "./Book.js"
import type { EngineOrder, PairSpec } from "./Orders.js"

export interface PlannedFill {
  readonly price: Decimal
  readonly baseQty: Decimal
}

/**
 * The fills of a market order against the book, or undefined when it cannot fill
 * completely within its slippage bound (the order is then rejected as a whole).
 */
export const planMarket = (pair: PairSpec, order: EngineOrder, reference: Decimal, levels: BookSide): ReadonlyArray<PlannedFill> | undefined => {
  const plan: Array<PlannedFill> = []
  if (order.side === "buy") {
    const bound = new SlippageBound(reference, order.maxSlippageBps!, "above")
    let quoteLeft = order.quoteOrderQty!
    for (let i = 0, level = levels.level(0); level !== undefined; level = levels.level(++i)) {
      const affordable = divideDownFast(quoteLeft, level.price, pair.stepSize)
      // The rest of the quote cannot buy one more step: the order is complete.
      if (affordable.isZero()) return plan.length === 0 ? undefined : plan
      if (bound.compare(level.price) > 0) return undefined
      const qty = min(affordable, level.baseQty)
      plan.push({ price: level.price, baseQty: qty })
      if (compare(qty, affordable) === 0) return plan
      quoteLeft = quoteLeft.sub(qty.mul(level.price))
    }
    return undefined
  }
  const bound = new SlippageBound(reference, order.maxSlippageBps!, "below")
  let baseLeft = order.baseQty!
  for (let i = 0, level = levels.level(0); level !== undefined; level = levels.level(++i)) {
    if (baseLeft.isZero()) break
    if (bound.compare(level.price) < 0) return undefined
    const qty = min(baseLeft, level.baseQty)
    plan.push({ price: level.price, baseQty: qty })
    baseLeft = baseLeft.sub(qty)
    // Complete: the next level is not worked out.
    if (baseLeft.isZero()) return plan
  }
  return baseLeft.isZero() ? plan : undefined
}

/**
 * How far a market order may walk the book: `maxSlippageBps` of the reference price above it (a
 * buy) or below it (a sell). Levels are compared with a double estimate of the bound; the exact
 * bound is worked out only for a level whose price lies too near it for the estimate to tell.
 */
class SlippageBound {
  private readonly estimate: number
  private readonly margin: number
  private exact: Decimal | undefined

  constructor(
    private readonly reference: Decimal,
    private readonly bps: number,
    private readonly side: "above" | "below"
  ) {
    const price = toFloat(reference)
    const slip = price * bps * 1e-4
    this.estimate = side === "above" ? price + slip : price - slip
    this.margin = Math.abs(price) * ESTIMATE_ERROR
  }

  /** -1, 0 or 1 as `price` is below, at or above the bound. */
  compare(price: Decimal): number {
    const gap = toFloat(price) - this.estimate
    if (gap > this.margin) return 1
    if (gap < -this.margin) return -1
    if (this.exact === undefined) {
      const slip = this.reference.mul(this.bps).mul(ONE_BPS)
      this.exact = this.side === "above" ? this.reference.add(slip) : this.reference.sub(slip)
    }
    return compare(price, this.exact)
  }
}
