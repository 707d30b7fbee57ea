/**
 * A view's `lastPrices`: the instance's own pair at the price it was last given (a ticker, or a
 * candle's close), which a replay of the run can know, and every other pair as last polled.
 * Read through, not copied: the host and the backtester move the given price at every event,
 * where a map rebuilt or set per event cost a fifth of what the host spends on a candle.
 */
import type { Decimal } from "../domain/Decimal.js"

const NONE: ReadonlyMap<string, Decimal> = new Map()

export class GivenPrices implements ReadonlyMap<string, Decimal> {
  /** The own pair's price as last given; until one is, the polled price stands. */
  given: Decimal | undefined

  constructor(
    readonly symbol: string,
    given?: Decimal,
    /** Prices of the pairs as last polled (none in a backtest, which runs one pair). */
    private readonly polled: () => ReadonlyMap<string, Decimal> = () => NONE
  ) {
    this.given = given
  }

  get(symbol: string): Decimal | undefined {
    return symbol === this.symbol && this.given !== undefined ? this.given : this.polled().get(symbol)
  }

  has(symbol: string): boolean {
    return this.get(symbol) !== undefined
  }

  get size(): number {
    const polled = this.polled()
    return this.given !== undefined && !polled.has(this.symbol) ? polled.size + 1 : polled.size
  }

  forEach(callback: (value: Decimal, key: string, map: ReadonlyMap<string, Decimal>) => void, thisArg?: unknown): void {
    for (const [symbol, price] of this.entries()) callback.call(thisArg, price, symbol, this)
  }

  *entries(): MapIterator<[string, Decimal]> {
    const given = this.given
    let ownSeen = false
    for (const [symbol, price] of this.polled()) {
      if (symbol !== this.symbol || given === undefined) yield [symbol, price]
      else {
        ownSeen = true
        yield [symbol, given]
      }
    }
    if (given !== undefined && !ownSeen) yield [this.symbol, given]
  }

  *keys(): MapIterator<string> {
    for (const [symbol] of this.entries()) yield symbol
  }

  *values(): MapIterator<Decimal> {
    for (const [, price] of this.entries()) yield price
  }

  [Symbol.iterator](): MapIterator<[string, Decimal]> {
    return this.entries()
  }
}
