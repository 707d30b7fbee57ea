/**
 * Orders of one symbol waiting for the tape: resting limit orders, and stop-limit orders
 * not yet triggered, each woken by the price that reaches it.
 */
import { compare, type Decimal } from "../domain/Decimal.js"
import type { EngineOrder } from "./Orders.js"

/**
 * Orders of one symbol waiting for the tape — resting limit orders or stops not yet
 * triggered — in time priority, with the bounds of the prices that wake any of them,
 * so a price that wakes none costs two comparisons and no allocation.
 */
export class Waiting {
  readonly orders: Array<EngineOrder> = []
  /** The highest wake price among orders woken by a price at or below it. */
  private highestBelow: Decimal | null = null
  /** The lowest wake price among orders woken by a price at or above it. */
  private lowestAbove: Decimal | null = null
  /** An order left: the bounds may be too wide and are worked out again on the next read. */
  private stale = false

  constructor(
    private readonly wakePrice: (order: EngineOrder) => Decimal,
    private readonly wakesAbove: (order: EngineOrder) => boolean
  ) {}

  push(order: EngineOrder): void {
    this.orders.push(order)
    if (!this.stale) this.widen(order)
  }

  remove(order: EngineOrder): void {
    const at = this.orders.indexOf(order)
    if (at === -1) return
    this.orders.splice(at, 1)
    this.stale = true
  }

  /** Keeps only the orders `keep` accepts, in their order. */
  retain(keep: (order: EngineOrder) => boolean): void {
    const orders = this.orders
    let kept = 0
    for (let i = 0; i < orders.length; i++) {
      const order = orders[i]!
      if (keep(order)) orders[kept++] = order
    }
    if (kept === orders.length) return
    orders.length = kept
    this.stale = true
  }

  /** Whether `price` can wake any order; false means no order needs looking at. */
  mayWake(price: Decimal): boolean {
    if (this.orders.length === 0) return false
    if (this.stale) {
      this.highestBelow = null
      this.lowestAbove = null
      for (const order of this.orders) this.widen(order)
      this.stale = false
    }
    return (this.highestBelow !== null && compare(price, this.highestBelow) <= 0) || (this.lowestAbove !== null && compare(price, this.lowestAbove) >= 0)
  }

  private widen(order: EngineOrder): void {
    const wake = this.wakePrice(order)
    if (this.wakesAbove(order)) {
      if (this.lowestAbove === null || compare(wake, this.lowestAbove) < 0) this.lowestAbove = wake
    } else if (this.highestBelow === null || compare(wake, this.highestBelow) > 0) {
      this.highestBelow = wake
    }
  }
}

/** A resting buy fills when the price comes down to its limit, a sell when it comes up to it. */
export const restingOrders = (): Waiting =>
  new Waiting(
    (order) => order.limitPrice!,
    (order) => order.side === "sell"
  )

/** A buy stop triggers when the price rises to its stop price, a sell stop when it falls to it. */
export const stopOrders = (): Waiting =>
  new Waiting(
    (order) => order.stopPrice!,
    (order) => order.side === "buy"
  )

/** Whether `price` triggers the stop-limit `order`. */
export const stopReached = (order: EngineOrder, price: Decimal): boolean =>
  compare(price, order.stopPrice!) !== (order.side === "buy" ? -1 : 1)
