/**
 * The whole-number arithmetic of Exact.ts must answer, for every operation, the very decimal
 * decimal.js answers at the shared precision: amounts of every size up to the 64 digits of a
 * division and past them, either sign, points anywhere, and the cases where rounding is decided
 * (a discarded half, a carry to a digit more) drawn on purpose.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { EXACT_ZERO, exactCompare, exactDiv, exactMinus, exactOf, exactPlus, exactSign, exactTimes, toDecimal } from "../../src/domain/Exact.js"

/** A decimal of up to `digits` significant digits, its point from `minScale` to `maxScale` places, either sign. */
const decimal = (digits: number, minScale: number, maxScale: number) =>
  fc
    .tuple(fc.bigInt({ min: -(10n ** BigInt(digits)) + 1n, max: 10n ** BigInt(digits) - 1n }), fc.integer({ min: minScale, max: maxScale }))
    .map(([units, scale]) => new Decimal(`${units}e${-scale}`))

/** Amounts as a backtest's metrics meet them: fill amounts, 64-digit shares of a lot, and longer text. */
const amount = fc.oneof(
  decimal(12, -4, 12),
  decimal(7, 0, 8),
  decimal(12, 0, 8).map((c) => c.mul(7).div(3)),
  decimal(64, 0, 70),
  decimal(64, -30, 30),
  // Rounding is decided here: 65 digits ending in 5, and 64 nines that carry to a digit more.
  fc.integer({ min: 0, max: 9 }).map((d) => new Decimal(`1${"0".repeat(62)}${d}5e-40`)),
  fc.integer({ min: 1, max: 20 }).map((scale) => new Decimal(`${"9".repeat(64)}e-${scale}`)),
  fc.constant(new Decimal(0))
)

const same = (got: Decimal, expected: Decimal): void => {
  expect(got.toString()).toBe(expected.toString())
}

describe("Exact", () => {
  it("reads a Decimal digit for digit and writes it back", () => {
    fc.assert(
      fc.property(amount, (a) => {
        same(toDecimal(exactOf(a)), a)
        expect(exactSign(exactOf(a))).toBe(a.isZero() ? 0 : a.s)
      }),
      { numRuns: 3000 }
    )
  })

  it("adds and subtracts as decimal.js does, rounded where decimal.js rounds", () => {
    fc.assert(
      fc.property(amount, amount, (a, b) => {
        same(toDecimal(exactPlus(exactOf(a), exactOf(b))), a.plus(b))
        same(toDecimal(exactMinus(exactOf(a), exactOf(b))), a.minus(b))
      }),
      { numRuns: 5000 }
    )
  })

  it("multiplies as decimal.js does", () => {
    fc.assert(
      fc.property(amount, amount, (a, b) => {
        same(toDecimal(exactTimes(exactOf(a), exactOf(b))), a.mul(b))
      }),
      { numRuns: 5000 }
    )
  })

  it("divides as decimal.js does, to 64 digits half to even", () => {
    fc.assert(
      fc.property(amount, amount.filter((b) => !b.isZero()), (a, b) => {
        same(toDecimal(exactDiv(exactOf(a), exactOf(b))), a.div(b))
      }),
      { numRuns: 5000 }
    )
  })

  it("shares a lot's cost out as the metrics do: amount × part / whole", () => {
    fc.assert(
      fc.property(amount, decimal(7, -3, 12), decimal(12, 0, 16).filter((w) => !w.isZero()), (cost, part, whole) => {
        same(toDecimal(exactDiv(exactTimes(exactOf(cost), exactOf(part)), exactOf(whole))), cost.mul(part).div(whole))
      }),
      { numRuns: 5000 }
    )
  })

  it("compares as decimal.js does", () => {
    fc.assert(
      fc.property(amount, amount, (a, b) => {
        expect(exactCompare(exactOf(a), exactOf(b))).toBe(a.cmp(b))
      }),
      { numRuns: 3000 }
    )
  })

  it("gives a backtest's partial lot its 64-digit share, and ties go to the even digit", () => {
    const share = exactDiv(exactTimes(exactOf(new Decimal("999.8835006")), exactOf(new Decimal("0.01651"))), exactOf(new Decimal("0.01651347")))
    expect(toDecimal(share).toFixed()).toBe("999.6733935935935935935935935935935935935935935935935935935935936")
    const even = new Decimal(`1${"0".repeat(62)}25`)
    expect(toDecimal(exactPlus(exactOf(even), EXACT_ZERO)).toFixed()).toBe(`1${"0".repeat(62)}20`)
    const odd = new Decimal(`1${"0".repeat(62)}35`)
    expect(toDecimal(exactPlus(exactOf(odd), EXACT_ZERO)).toFixed()).toBe(`1${"0".repeat(62)}40`)
  })

  it("refuses what is not a finite amount and a division by zero", () => {
    expect(() => exactOf(new Decimal(Infinity))).toThrow(/not a finite amount/)
    expect(() => exactOf(new Decimal(NaN))).toThrow(/not a finite amount/)
    expect(() => exactDiv(exactOf(new Decimal(1)), EXACT_ZERO)).toThrow(/division by zero/)
  })
})
