/**
 * Waiting work of several owners, taken in turns: each owner with work waiting gives its
 * oldest item, one owner after the other, so that an owner with much work cannot keep one
 * with little waiting. The sender keeps its placements this way, one owner per strategy
 * instance: when the exchange's order budget binds, every instance gets placements out in
 * turn, instead of the first to submit many taking the budget for as long as they last.
 *
 * The owner whose turn came longest ago goes next; an owner that never had a turn goes
 * before every owner that had one, owners that never had one in the order they began to
 * wait. Owners that keep work waiting go round in a fixed order (round-robin), and an owner
 * that begins to wait is served before any other owner is served twice: an instance's first
 * placement goes out in the first turns the budget gives, not a whole round later.
 */
export class Turns<K, V> {
  /** Owners with work, each with its items in the order they came. */
  private readonly waiting = new Map<K, Array<V>>()
  /** When each owner last had its turn, on `tick`; before any turn, below every tick, in the order owners began to wait. */
  private readonly turnAt = new Map<K, number>()
  private tick = 0
  private count = 0

  /** Items waiting, of every owner. */
  get size(): number {
    return this.count
  }

  push(owner: K, item: V): void {
    const queue = this.waiting.get(owner)
    if (queue !== undefined) queue.push(item)
    else this.waiting.set(owner, [item])
    if (!this.turnAt.has(owner)) this.turnAt.set(owner, Number.MIN_SAFE_INTEGER + this.turnAt.size)
    this.count += 1
  }

  /** The oldest item of the owner whose turn it is; undefined when nothing waits. */
  take(): V | undefined {
    // A scan of the owners with work: they are the strategy instances, tens to hundreds.
    let next: K | undefined
    let nextAt = Number.POSITIVE_INFINITY
    for (const owner of this.waiting.keys()) {
      const at = this.turnAt.get(owner)!
      if (at < nextAt) {
        next = owner
        nextAt = at
      }
    }
    if (next === undefined) return undefined
    const queue = this.waiting.get(next)!
    const item = queue.shift()!
    if (queue.length === 0) this.waiting.delete(next)
    this.turnAt.set(next, this.tick++)
    this.count -= 1
    return item
  }

  /** Up to `n` items, in turn order. */
  takeUpTo(n: number): Array<V> {
    const taken: Array<V> = []
    while (taken.length < n && this.count > 0) taken.push(this.take()!)
    return taken
  }

  /** Every item waiting, in turn order; nothing waits afterwards. */
  takeAll(): Array<V> {
    return this.takeUpTo(this.count)
  }
}
