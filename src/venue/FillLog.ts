/**
 * An account's fills, oldest first (and so in `seq` order), with the reads svc-venue
 * answers from them: pages newest first cut on `seq`, and the fills after a `seq`.
 */
import { firstNotBelow } from "../domain/Bisect.js"
import { Fifo } from "./Fifo.js"
import type { VenueFill } from "./Orders.js"

const NO_FILLS: ReadonlyArray<VenueFill> = []

export class FillLog {
  private readonly fills = new Fifo<VenueFill>()

  /** `maxCount`: the most fills kept; the oldest is forgotten when one more arrives. */
  constructor(private readonly maxCount: number) {}

  push(fill: VenueFill): void {
    this.fills.push(fill)
    if (this.fills.length > this.maxCount) this.fills.shift()
  }

  /** Forgets the fills that happened at or before `timeMs`. */
  forgetUntil(timeMs: number): void {
    for (let oldest = this.fills.peek(); oldest !== undefined && oldest.time <= timeMs; oldest = this.fills.peek()) this.fills.shift()
  }

  /** One page of fills, newest first, older than the fill `beforeSeq` when given. */
  page(page: { readonly symbol?: string; readonly limit: number; readonly beforeSeq?: number }): {
    readonly fills: ReadonlyArray<VenueFill>
    readonly hasOlder: boolean
  } {
    const all = this.fills
    const out: Array<VenueFill> = []
    let i = page.beforeSeq === undefined ? all.length - 1 : newestBefore(all, page.beforeSeq)
    for (; i >= 0 && out.length < page.limit; i--) {
      const fill = all.at(i)!
      if (page.symbol === undefined || fill.symbol === page.symbol) out.push(fill)
    }
    let hasOlder = false
    for (; i >= 0; i--) {
      if (page.symbol === undefined || all.at(i)!.symbol === page.symbol) {
        hasOlder = true
        break
      }
    }
    return { fills: out, hasOlder }
  }

  /** The fills after the fill `seq` (those a reader that has seen up to it has not), oldest first. */
  after(seq: number): ReadonlyArray<VenueFill> {
    const all = this.fills
    let from = all.length
    while (from > 0 && all.at(from - 1)!.seq > seq) from--
    if (from === all.length) return NO_FILLS
    const after: Array<VenueFill> = []
    for (let i = from; i < all.length; i++) after.push(all.at(i)!)
    return after
  }

  /** Every fill kept, oldest first. */
  all(): ReadonlyArray<VenueFill> {
    return this.fills.toArray()
  }
}

/** Index of the newest fill older than the fill `seq` (-1 for none): fills are kept in `seq` order. */
const newestBefore = (fills: Fifo<VenueFill>, seq: number): number => firstNotBelow(fills.length, (i) => fills.at(i)!.seq < seq) - 1
