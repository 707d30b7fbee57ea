/**
 * The price steps svc-venue's matching engine saw for one pair, newest last, in a
 * ring of bounded size. A paper run records them (`GET /api/_venue/steps`) so its
 * parity replay plays exactly the prices the venue matched against, not candles.
 */
import type { Decimal } from "../domain/Decimal.js"

export interface PriceStep {
  /** 1, 2, 3… per pair, for this venue process. */
  readonly seq: number
  readonly timeMs: number
  readonly price: Decimal
}

export class StepLog {
  private readonly ring: Array<PriceStep> = []
  private next = 1

  constructor(private readonly capacity: number) {}

  push(timeMs: number, price: Decimal): void {
    const step = { seq: this.next++, timeMs, price }
    if (this.ring.length < this.capacity) this.ring.push(step)
    else this.ring[(step.seq - 1) % this.capacity] = step
  }

  /** The oldest step still kept (a reader that fell further behind has a gap). */
  get oldestSeq(): number {
    return Math.max(1, this.next - this.ring.length)
  }

  /** Up to `limit` steps with a sequence number above `afterSeq`, oldest first. */
  after(afterSeq: number, limit: number): ReadonlyArray<PriceStep> {
    const out: Array<PriceStep> = []
    for (let seq = Math.max(afterSeq + 1, this.oldestSeq); seq < this.next && out.length < limit; seq++) {
      out.push(this.ring[(seq - 1) % this.capacity]!)
    }
    return out
  }
}
