/**
 * Backtest = paper: two runs of one tape must produce the same fills. A fill is
 * compared on what the venue decides — price, quantity, side and liquidity — in
 * order; times and ids differ between an in-process run and a venue over HTTP.
 */
import type { Decimal } from "../domain/Decimal.js"
import type { Liquidity, Side } from "../svc/Dialect.js"

export interface ComparableFill {
  readonly price: Decimal
  readonly baseQty: Decimal
  readonly side: Side
  readonly liquidity: Liquidity
}

export interface FillMismatch {
  /** Position in both fill sequences, oldest first. */
  readonly index: number
  readonly expected?: ComparableFill
  readonly actual?: ComparableFill
}

const same = (a: ComparableFill, b: ComparableFill): boolean =>
  a.side === b.side && a.liquidity === b.liquidity && a.price.eq(b.price) && a.baseQty.eq(b.baseQty)

/** Every position where the two sequences differ, including fills only one of them has. */
export const compareFills = (expected: ReadonlyArray<ComparableFill>, actual: ReadonlyArray<ComparableFill>): ReadonlyArray<FillMismatch> => {
  const mismatches: Array<FillMismatch> = []
  const n = Math.max(expected.length, actual.length)
  for (let index = 0; index < n; index++) {
    const e = expected[index]
    const a = actual[index]
    if (e !== undefined && a !== undefined && same(e, a)) continue
    mismatches.push({ index, ...(e === undefined ? {} : { expected: e }), ...(a === undefined ? {} : { actual: a }) })
  }
  return mismatches
}

const show = (fill: ComparableFill | undefined): string =>
  fill === undefined ? "nothing" : `${fill.side} ${fill.baseQty.toFixed()} @ ${fill.price.toFixed()} ${fill.liquidity}`

/** One line per mismatch, for test output and logs. */
export const describeMismatches = (mismatches: ReadonlyArray<FillMismatch>): string =>
  mismatches.map((m) => `fill ${m.index}: expected ${show(m.expected)}, got ${show(m.actual)}`).join("\n")
