/**
 * A first-in first-out queue whose oldest items leave in constant time: the history
 * svc-venue keeps (ended orders, fills) grows at one end and is forgotten at the
 * other, and `Array.shift` would move every item that stays.
 */
export class Fifo<T> {
  private items: Array<T | undefined> = []
  private head = 0

  get length(): number {
    return this.items.length - this.head
  }

  push(item: T): void {
    this.items.push(item)
  }

  /** The oldest item, if any. */
  peek(): T | undefined {
    return this.items[this.head]
  }

  /** Removes and returns the oldest item. */
  shift(): T | undefined {
    if (this.head === this.items.length) return undefined
    const item = this.items[this.head]
    this.items[this.head] = undefined
    this.head += 1
    // The dropped slots are given back once they are half the array: amortized constant time.
    if (this.head === this.items.length) {
      this.items = []
      this.head = 0
    } else if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return item
  }

  /** The item at `index`, 0 being the oldest. */
  at(index: number): T | undefined {
    return index < 0 ? undefined : this.items[this.head + index]
  }

  toArray(): Array<T> {
    return this.items.slice(this.head) as Array<T>
  }
}
