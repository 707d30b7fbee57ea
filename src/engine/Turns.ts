/**
 * Waiting work of several owners, taken in turns (round-robin): each owner with work
 * waiting gives its oldest item, one owner after the other, so that an owner with much
 * work cannot keep one with little waiting. The sender keeps its placements this way,
 * one owner per strategy instance: when the exchange's order budget binds, every
 * instance gets placements out in turn, instead of the first to submit many taking the
 * budget for as long as they last.
 *
 * The turn order is a ring: an owner that gets work while it has none joins at the end
 * of the ring (it goes after every owner waiting already), an owner that gave an item
 * goes to the end if it has more, and leaves the ring when it has none.
 */
export class Turns<K, V> {
  /** The ring, in turn order: a Map keeps the order keys were set in, so moving an owner to the end is a delete and a set. */
  private readonly ring = new Map<K, Array<V>>()
  private count = 0

  /** Items waiting, of every owner. */
  get size(): number {
    return this.count
  }

  push(owner: K, item: V): void {
    const queue = this.ring.get(owner)
    if (queue === undefined) this.ring.set(owner, [item])
    else queue.push(item)
    this.count += 1
  }

  /** The oldest item of the owner whose turn it is; undefined when nothing waits. */
  take(): V | undefined {
    const next = this.ring.entries().next()
    if (next.done === true) return undefined
    const [owner, queue] = next.value
    const item = queue.shift()!
    this.ring.delete(owner)
    if (queue.length > 0) this.ring.set(owner, queue)
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
