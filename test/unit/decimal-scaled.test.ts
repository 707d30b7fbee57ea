/**
 * The scaled-integer arithmetic of src/domain/Decimal.ts (`times`, `compactTimes`, `plus`,
 * `minus`, `stepsOf`, `fromScaled`) against decimal.js itself: every answer must be the very
 * Decimal decimal.js gives, limb for limb (its representation is canonical, so equal limbs mean
 * equal text, equal hashes and equal further arithmetic), whether the integers fit and the fast
 * path answers, or they do not and decimal.js does.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { compactTimes, Decimal, fromScaled, minus, plus, stepsOf, times, ZERO } from "../../src/domain/Decimal.js"

interface Limbs {
  readonly s: number
  readonly e: number
  readonly d: ReadonlyArray<number> | null
}

/** What decides a Decimal's value, text and arithmetic: sign, exponent and limbs, as plain data. */
const representation = (value: Decimal): { s: number; e: number; d: ReadonlyArray<number> | null; text: string } => {
  const { s, e, d } = value as unknown as Limbs
  return { s, e, d: d === null ? null : [...d], text: value.toString() }
}

/** Significant digits from 1 to 20 (beyond a safe integer too), at a power of ten from -30 to 30, either sign. */
const amount: fc.Arbitrary<Decimal> = fc
  .tuple(fc.boolean(), fc.stringMatching(/^[1-9][0-9]{0,19}$/), fc.integer({ min: -30, max: 30 }))
  .map(([negative, digits, power]) => new Decimal(`${negative ? "-" : ""}${digits}e${power}`))

/** Amounts as the engine sees them: a pair's ticks and steps, balances and fees, few digits, often trailing zeros. */
const onAGrid: fc.Arbitrary<Decimal> = fc
  .tuple(fc.integer({ min: 1, max: 99_999_999 }), fc.integer({ min: 0, max: 10 }))
  .map(([units, places]) => new Decimal(units).div(new Decimal(10).pow(places)))

const anyAmount = fc.oneof(amount, onAGrid, fc.constantFrom(ZERO, new Decimal("-0"), new Decimal(1), new Decimal("1e7"), new Decimal("9007199254740991"), new Decimal("9007199254740993")))

const runs = { numRuns: 1000 }

describe("scaled-integer arithmetic", () => {
  it("times and compactTimes are decimal.js's mul", () => {
    fc.assert(
      fc.property(anyAmount, anyAmount, (a, b) => {
        const expected = representation(a.mul(b))
        expect(representation(times(a, b))).toEqual(expected)
        expect(representation(compactTimes(a, b))).toEqual(expected)
      }),
      runs
    )
  })

  it("plus and minus are decimal.js's plus and minus", () => {
    fc.assert(
      fc.property(anyAmount, anyAmount, (a, b) => {
        expect(representation(plus(a, b))).toEqual(representation(a.plus(b)))
        expect(representation(minus(a, b))).toEqual(representation(a.minus(b)))
      }),
      runs
    )
  })

  it("a sum that cancels out is decimal.js's zero", () => {
    fc.assert(
      fc.property(anyAmount, (a) => {
        expect(representation(minus(a, a))).toEqual(representation(a.minus(a)))
        expect(representation(plus(a, a.neg()))).toEqual(representation(a.plus(a.neg())))
      }),
      runs
    )
  })

  it("stepsOf is the step times the whole count", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 40 }), anyAmount, (steps, step) => {
        const expected = steps === 0 ? ZERO : step.mul(steps)
        expect(representation(stepsOf(steps, step))).toEqual(representation(expected))
      }),
      runs
    )
  })

  it("fromScaled builds the Decimal of mantissa times a power of ten", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }).filter((m) => m !== 0),
        fc.integer({ min: -40, max: 40 }),
        (mantissa, power) => {
          const built = fromScaled(mantissa, power)
          expect(representation(built)).toEqual(representation(new Decimal(`${mantissa}e${power}`)))
          // A Decimal in every respect decimal.js checks, so its own arithmetic reads it.
          expect(Decimal.isDecimal(built)).toBe(true)
          expect(built.plus(1).toString()).toBe(new Decimal(`${mantissa}e${power}`).plus(1).toString())
        }
      ),
      runs
    )
  })

  it("answers the operands' own objects only where decimal.js's value is the same", () => {
    const price = new Decimal("60000.01")
    expect(plus(price, ZERO)).toBe(price)
    expect(minus(price, ZERO)).toBe(price)
    expect(stepsOf(1, price)).toBe(price)
  })
})
