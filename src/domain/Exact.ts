/**
 * Decimal arithmetic on whole numbers: an amount is an integer coefficient times a power of ten,
 * and every result is rounded to the shared Decimal precision (64 significant digits, half to
 * even) exactly as decimal.js rounds it, so each operation answers the very number decimal.js
 * answers. decimal.js's sums, products and quotients are correctly rounded: the exact result,
 * rounded once. This module works out the exact result in BigInt and rounds it the same way.
 *
 * Why it exists: a backtest's trade PnL shares a lot's cost out by division, which carries all
 * 64 digits into every sum after it. decimal.js takes microseconds for each such operation, and
 * BigInt a fraction of one. Amounts come in and go out as Decimals (`exactOf`, `toDecimal`); what
 * is worked out in between stays here.
 */
import { Decimal } from "./Decimal.js"

/** `coefficient × 10^exponent`. Zero is `0n` with any exponent. */
export interface Exact {
  readonly coefficient: bigint
  readonly exponent: number
}

export const EXACT_ZERO: Exact = { coefficient: 0n, exponent: 0 }

if (Decimal.rounding !== Decimal.ROUND_HALF_EVEN) throw new Error("Exact rounds half to even, as the shared Decimal must be set to")
const PRECISION = Decimal.precision

/** 10^k, for the k this module meets (a coefficient of a few hundred digits at most). */
const powers: Array<bigint> = [1n]
const tenTo = (k: number): bigint => {
  for (let next = powers.length; next <= k; next++) powers.push(powers[next - 1]! * 10n)
  return powers[k]!
}

/** Coefficients below this in magnitude have no more digits than the precision. */
const FITS = tenTo(PRECISION)

/** How many digits a positive coefficient has. A double's logarithm is off by one at most, near a power of ten. */
const digitsOf = (magnitude: bigint): number => {
  const approximate = Number(magnitude)
  // Past the largest double (309 digits and more) the text tells.
  if (approximate === Infinity) return magnitude.toString().length
  let digits = Math.floor(Math.log10(approximate)) + 1
  if (magnitude < tenTo(digits - 1)) digits -= 1
  else if (magnitude >= tenTo(digits)) digits += 1
  return digits
}

/** decimal.js keeps 7 digits a limb. */
const LIMB = 10_000_000
const LIMB_BIG = 10_000_000n

/** The amount a finite Decimal is, digit for digit. */
export const exactOf = (value: Decimal): Exact => {
  const limbs = value.d
  if (limbs === null || !value.isFinite()) throw new RangeError(`not a finite amount: ${value.toString()}`)
  if (limbs[0] === 0) return EXACT_ZERO
  const count = limbs.length
  // The radix point sits on a limb boundary: the limbs read as one integer, times a power of ten.
  const exponent = 7 * (Math.floor(value.e / 7) - (count - 1))
  // Two limbs are at most 14 digits, a whole double: one BigInt instead of one per limb.
  let coefficient = count === 1 ? BigInt(limbs[0]!) : BigInt(limbs[0]! * LIMB + limbs[1]!)
  for (let i = 2; i < count; i++) coefficient = coefficient * LIMB_BIG + BigInt(limbs[i]!)
  return { coefficient: value.s < 0 ? -coefficient : coefficient, exponent }
}

export const toDecimal = (value: Exact): Decimal => new Decimal(`${value.coefficient}e${value.exponent}`)

export const exactSign = (value: Exact): number => (value.coefficient > 0n ? 1 : value.coefficient < 0n ? -1 : 0)

/**
 * `coefficient × 10^exponent` rounded to the precision, half to even. `inexact` says the exact
 * value lies above the coefficient in magnitude (the remainder of a division): a discarded half
 * is then more than half.
 */
const rounded = (coefficient: bigint, exponent: number, inexact: boolean): Exact => {
  // Most results fit: two comparisons answer them, without counting digits.
  if (coefficient < FITS && coefficient > -FITS) return coefficient === 0n ? EXACT_ZERO : { coefficient, exponent }
  const negative = coefficient < 0n
  const magnitude = negative ? -coefficient : coefficient
  const excess = digitsOf(magnitude) - PRECISION
  if (excess <= 0) return { coefficient, exponent }
  const unit = tenTo(excess)
  let kept = magnitude / unit
  const dropped = magnitude - kept * unit
  const half = unit / 2n
  if (dropped > half || (dropped === half && (inexact || (kept & 1n) === 1n))) kept += 1n
  let shift = excess
  // Rounding up 99…9 gives a digit more: 10^precision, which drops its last zero exactly.
  if (kept === tenTo(PRECISION)) {
    kept = tenTo(PRECISION - 1)
    shift += 1
  }
  return { coefficient: negative ? -kept : kept, exponent: exponent + shift }
}

/** `a` plus `coefficient × 10^exponent`, both over the smaller exponent. */
const sum = (a: Exact, coefficient: bigint, exponent: number): Exact => {
  if (coefficient === 0n) return rounded(a.coefficient, a.exponent, false)
  if (a.coefficient === 0n) return rounded(coefficient, exponent, false)
  const apart = a.exponent - exponent
  if (apart === 0) return rounded(a.coefficient + coefficient, exponent, false)
  return apart > 0 ? rounded(a.coefficient * tenTo(apart) + coefficient, exponent, false) : rounded(a.coefficient + coefficient * tenTo(-apart), a.exponent, false)
}

export const exactPlus = (a: Exact, b: Exact): Exact => sum(a, b.coefficient, b.exponent)

export const exactMinus = (a: Exact, b: Exact): Exact => sum(a, -b.coefficient, b.exponent)

export const exactTimes = (a: Exact, b: Exact): Exact => rounded(a.coefficient * b.coefficient, a.exponent + b.exponent, false)

/** `a / b`, rounded to the precision; `b` must not be zero. */
export const exactDiv = (a: Exact, b: Exact): Exact => {
  if (b.coefficient === 0n) throw new RangeError("division by zero")
  if (a.coefficient === 0n) return EXACT_ZERO
  const negative = a.coefficient < 0n !== b.coefficient < 0n
  const dividend = a.coefficient < 0n ? -a.coefficient : a.coefficient
  const divisor = b.coefficient < 0n ? -b.coefficient : b.coefficient
  // Scaled so the whole quotient has more digits than the precision: the rounding digit is in it,
  // and the remainder only says whether anything lies beyond.
  const scale = Math.max(0, PRECISION + 2 - digitsOf(dividend) + digitsOf(divisor))
  const scaled = dividend * tenTo(scale)
  const quotient = scaled / divisor
  const inexact = scaled !== quotient * divisor
  return rounded(negative ? -quotient : quotient, a.exponent - b.exponent - scale, inexact)
}

/** -1, 0 or 1 as `a` is below, equal to or above `b`. */
export const exactCompare = (a: Exact, b: Exact): number => {
  const apart = a.exponent - b.exponent
  const x = apart > 0 ? a.coefficient * tenTo(apart) : a.coefficient
  const y = apart < 0 ? b.coefficient * tenTo(-apart) : b.coefficient
  return x < y ? -1 : x > y ? 1 : 0
}
