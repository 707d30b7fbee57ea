/**
 * `plus` (Decimal.ts) skips the copy when adding zero, on either side, changes nothing, and must
 * still give the very decimal decimal.js's own sum gives. Amounts of every size up to the 64 digits of a
 * division, and past them (a decimal parsed from a longer string), are drawn.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal, plus, ZERO } from "../../src/domain/Decimal.js"

/** A positive decimal of up to `digits` significant digits, its point anywhere from `minScale` to `maxScale` places. */
const decimal = (digits: number, minScale: number, maxScale: number) =>
  fc
    .tuple(fc.bigInt({ min: 1n, max: 10n ** BigInt(digits) - 1n }), fc.integer({ min: minScale, max: maxScale }))
    .map(([units, scale]) => new Decimal(`${units}e${-scale}`))

/** What a lot costs: a fill's quote amount, or what is left of one after a division (all 64 digits). */
const cost = fc.oneof(decimal(12, 0, 8), decimal(12, 0, 8).map((c) => c.mul(7).div(3)))

describe("plus", () => {
  it("adding zero answers the amount itself when nothing rounds, and decimal.js's rounded sum otherwise", () => {
    fc.assert(
      fc.property(fc.oneof(decimal(20, 0, 10), cost, decimal(70, 0, 40)), (amount) => {
        const got = plus(amount, ZERO)
        expect(got.toFixed()).toBe(amount.plus(ZERO).toFixed())
        if (amount.sd() <= Decimal.precision) expect(got).toBe(amount)
        const toZero = plus(ZERO, amount)
        expect(toZero.toFixed()).toBe(ZERO.plus(amount).toFixed())
        if (amount.sd() <= Decimal.precision) expect(toZero).toBe(amount)
      }),
      { numRuns: 3000 }
    )
  })

  it("adds two amounts neither of which is zero as decimal.js does", () => {
    fc.assert(
      fc.property(fc.oneof(decimal(20, 0, 10), cost, decimal(70, 0, 40)), fc.oneof(decimal(20, 0, 10), cost), (amount, other) => {
        expect(plus(amount, other).toFixed()).toBe(amount.plus(other).toFixed())
      }),
      { numRuns: 2000 }
    )
  })

  it("a 70-digit amount is rounded to the precision, as decimal.js rounds it", () => {
    const long = new Decimal(`1.${"3".repeat(69)}`)
    expect(plus(long, ZERO).sd()).toBe(Decimal.precision)
  })
})
