/**
 * Exact money. Every price, quantity, balance and fee in svcbot is a decimal.js
 * `Decimal`; a float never touches one. Importing this module configures the
 * shared Decimal constructor with enough precision for 18-decimal assets
 * multiplied by large prices (64 significant digits).
 *
 * Text that comes in (exchange answers, request bodies, config, CSV and tape files,
 * cluster messages, stored JSON) is read by `fromString`, within the bounds money
 * needs: at most MAX_SIGNIFICANT_DIGITS significant digits and a decimal exponent
 * within ±MAX_EXPONENT. The bounds are checked on the text before decimal.js sees
 * it: decimal.js takes `1e900000000` as a valid number, and writing it out (as the
 * ledger and every answer do) makes a string of 900 million characters.
 */
import { Decimal } from "decimal.js"
import { isLosslessNumber, type LosslessNumber } from "lossless-json"

Decimal.set({ precision: 64, rounding: Decimal.ROUND_HALF_EVEN, toExpNeg: -64, toExpPos: 64 })

export { Decimal }

/**
 * Most significant digits (first to last non-zero digit) an amount read from text may have:
 * an 18-decimal asset (wei-sized units) up to 10^22 whole units, with room to spare.
 */
export const MAX_SIGNIFICANT_DIGITS = 40

/**
 * Largest decimal exponent, either side of zero, of an amount read from text: the power of
 * ten of its leading digit, as in 1.5e-7. 10^40 is beyond any balance and 10^-40 below any
 * asset's smallest unit.
 */
export const MAX_EXPONENT = 40

/**
 * Longest text read as an amount. The smallest amount within the bounds written in plain
 * digits takes 82 characters (`-0.`, 39 zeros, 40 digits); the rest is room for trailing zeros
 * and an exponent. Checked first, so that a longer text is not even scanned.
 */
const MAX_TEXT_LENGTH = 2 * (MAX_SIGNIFICANT_DIGITS + MAX_EXPONENT)

/** A JSON number literal or decimal string as the spec writes it: no leading `+`, no leading zeros, no bare `.`. */
const DECIMAL_TEXT = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/
/** The problem of text that is not a number at all, as opposed to a number beyond the bounds. */
export const NOT_DECIMAL_TEXT = "expected plain decimal digits such as 12.345 (an optional leading -, no spaces, no NaN)"

const CHAR_ZERO = 48
const CHAR_POINT = 46
const CHAR_MINUS = 45
const CHAR_E = 101
const CHAR_UPPER_E = 69

/**
 * Why text of DECIMAL_TEXT's shape is out of bounds, or undefined when it is within them.
 * Read off the characters alone: the digits between the first and last non-zero digit, and
 * the power of ten of the first, the point's place plus any exponent.
 */
const outOfBounds = (text: string): string | undefined => {
  let first = -1
  let last = -1
  let wholeDigits = -1
  let digits = 0
  let at = text.charCodeAt(0) === CHAR_MINUS ? 1 : 0
  for (; at < text.length; at++) {
    const c = text.charCodeAt(at)
    if (c === CHAR_POINT) wholeDigits = digits
    else if (c === CHAR_E || c === CHAR_UPPER_E) break
    else {
      if (c !== CHAR_ZERO) {
        if (first < 0) first = digits
        last = digits
      }
      digits++
    }
  }
  // Zero, however written: nothing to bound but the length, checked before.
  if (first < 0) return undefined
  if (last - first + 1 > MAX_SIGNIFICANT_DIGITS) return `more than ${MAX_SIGNIFICANT_DIGITS} significant digits`
  // The exponent's text is at most MAX_TEXT_LENGTH characters: as a double it is exact or far out of bounds.
  const exponent = (wholeDigits < 0 ? digits : wholeDigits) - first - 1 + (at < text.length ? Number(text.slice(at + 1)) : 0)
  if (exponent > MAX_EXPONENT || exponent < -MAX_EXPONENT) return `out of range: the decimal exponent must be from -${MAX_EXPONENT} to ${MAX_EXPONENT}`
  return undefined
}

export class InvalidDecimal extends Error {
  override readonly name = "InvalidDecimal"
  /** `field`, when given, names where the text was read (a file's column, a message's field). */
  constructor(readonly input: string, readonly problem: string, readonly field?: string) {
    super(`${field === undefined ? "" : `${field}: `}invalid decimal ${JSON.stringify(input.length > 64 ? `${input.slice(0, 64)}...` : input)}: ${problem}`)
  }
}

/**
 * Parses a decimal string such as `"0.00001"` (the spec's string amounts) exactly, within the
 * bounds (MAX_SIGNIFICANT_DIGITS, MAX_EXPONENT); anything else throws InvalidDecimal naming
 * `field` when given.
 */
export const fromString = (text: string, field?: string): Decimal => {
  if (text.length > MAX_TEXT_LENGTH) throw new InvalidDecimal(text, `longer than ${MAX_TEXT_LENGTH} characters`, field)
  if (!DECIMAL_TEXT.test(text)) {
    throw new InvalidDecimal(text, NOT_DECIMAL_TEXT, field)
  }
  const problem = outOfBounds(text)
  if (problem !== undefined) throw new InvalidDecimal(text, problem, field)
  return new Decimal(text)
}

/**
 * `value` rounded (half to even) into what `fromString` reads back: at most
 * MAX_SIGNIFICANT_DIGITS significant digits, none below 10^-MAX_EXPONENT. For figures svcbot
 * works out at full precision (an average price, a share of a lot's cost) and writes as text
 * to read again; a value already within them is returned as it is.
 */
export const toBounds = (value: Decimal): Decimal => {
  if (value.e < -MAX_EXPONENT) return unsigned(value.toDecimalPlaces(MAX_EXPONENT, Decimal.ROUND_HALF_EVEN))
  return value.sd() > MAX_SIGNIFICANT_DIGITS ? value.toSignificantDigits(MAX_SIGNIFICANT_DIGITS, Decimal.ROUND_HALF_EVEN) : value
}

/**
 * The same value in the least memory. decimal.js builds the digits of a parsed or
 * computed value by pushing onto an array, which keeps spare room: about 250 bytes
 * a value instead of 130. Values held by the million, such as candles, are kept
 * compact; packed close together they are also read about twice as fast.
 */
export const compact = (value: Decimal): Decimal => new Decimal(value)

/** Parses a JSON number token kept as text by lossless-json (e.g. the spot wallet's `balance`), digit for digit. */
export const fromNumberToken = (token: LosslessNumber | string): Decimal =>
  fromString(isLosslessNumber(token) ? token.value : token)

/**
 * Reads a plain JS number, only where the spec itself sends JSON numbers that were
 * already parsed as numbers (integers such as `maxSlippageBps`). The shortest
 * round-trip text of the double is taken, so `0.1` reads as exactly 0.1.
 */
export const fromJsNumber = (n: number): Decimal => {
  if (!Number.isFinite(n)) throw new InvalidDecimal(String(n), "not a finite number")
  return new Decimal(String(n))
}

/** Accepts a Decimal, a decimal string or a lossless number token. */
export const from = (value: Decimal | string | LosslessNumber): Decimal =>
  Decimal.isDecimal(value) ? (value as Decimal) : fromNumberToken(value as LosslessNumber | string)

/**
 * The plain digits of a decimal as a JSON number literal: never an exponent and
 * never `-0`; NaN and Infinity are refused because JSON cannot carry them.
 */
export const toJsonNumber = (value: Decimal): string => {
  if (!value.isFinite()) throw new InvalidDecimal(value.toString(), "NaN and Infinity cannot be written as JSON numbers")
  if (value.isZero()) return "0"
  return value.toFixed()
}

export const ZERO = new Decimal(0)

/** One basis point. Multiplying by it is exact, where dividing by 10000 works out a 64-digit quotient. */
export const ONE_BPS = new Decimal("0.0001")

/** Rounding modes a caller must name when quantizing; there is no default on purpose. */
export const Rounding = {
  down: Decimal.ROUND_DOWN,
  up: Decimal.ROUND_UP,
  floor: Decimal.ROUND_FLOOR,
  ceil: Decimal.ROUND_CEIL,
  halfEven: Decimal.ROUND_HALF_EVEN,
  halfUp: Decimal.ROUND_HALF_UP
} as const
export type Rounding = keyof typeof Rounding

/** decimal.js's representation: sign, base-10 exponent of the leading digit, base-1e7 limbs (null for NaN and infinities, `[0]` for zero). */
interface Limbs {
  readonly s: number
  readonly e: number
  readonly d: ReadonlyArray<number> | null
}

const limbsOf = (value: Decimal): Limbs => value as unknown as Limbs

/** -1, 0 or 1 by the sign of `value` (0 for either zero), NaN for NaN. */
export const sign = (value: Decimal): number => {
  const { s, d } = limbsOf(value)
  return d !== null && d[0] === 0 ? 0 : s
}

/**
 * -1, 0 or 1 as `a` is below, equal to or above `b`: `a.cmp(b)` without the copy
 * of `b` that every decimal.js comparison makes first. The matching engine and the
 * backtest compare amounts many times per order, where those copies add up.
 */
export const compare = (a: Decimal, b: Decimal): number => {
  const x = limbsOf(a)
  const y = limbsOf(b)
  const xd = x.d
  const yd = y.d
  if (xd === null || yd === null) return a.cmp(b)
  if (xd[0] === 0) return yd[0] === 0 ? 0 : -y.s
  if (yd[0] === 0 || x.s !== y.s) return x.s
  // Same sign, both non-zero: the larger magnitude has the larger leading exponent,
  // or with equal exponents (so equally aligned limbs) the larger first differing limb.
  if (x.e !== y.e) return x.e > y.e ? x.s : -x.s
  const n = Math.min(xd.length, yd.length)
  for (let i = 0; i < n; i++) if (xd[i] !== yd[i]) return xd[i]! > yd[i]! ? x.s : -x.s
  return xd.length === yd.length ? 0 : xd.length > yd.length ? x.s : -x.s
}

/** The smaller of two amounts (the first when equal), without decimal.js's copies of both. */
export const min = (a: Decimal, b: Decimal): Decimal => (compare(b, a) < 0 ? b : a)

/**
 * Whether decimal.js's `amount.plus(other)` is `amount` itself: with `other` zero it answers a
 * copy of `amount` rounded to the precision, which is the same value when its significant digits
 * fit the precision. The limbs (7 digits each) answer most cases, the digits themselves the rest.
 */
const unchangedBy = (amount: Decimal, other: Decimal): boolean =>
  sign(other) === 0 && amount.isFinite() && sign(amount) !== 0 && (amount.d.length * 7 <= Decimal.precision || amount.sd() <= Decimal.precision)

/**
 * `amount.plus(other)`, answering `amount` itself, or `other` added to zero, when that is the sum
 * (no copy to allocate): a fresh order's filled quantity starts at zero, and an asset at rest has
 * nothing locked.
 */
export const plus = (amount: Decimal, other: Decimal): Decimal =>
  unchangedBy(amount, other) ? amount : unchangedBy(other, amount) ? other : amount.plus(other)

const checkStep = (step: Decimal): void => {
  if (!step.isFinite() || sign(step) <= 0) throw new InvalidDecimal(step.toString(), "a tick or step size must be positive")
}

/** Zero without a sign: a quantized `-0` would print as "-0". */
const unsigned = (value: Decimal): Decimal => (value.isZero() ? ZERO : value)

/** Per tick or step size: its decimal places when it is a power of ten no more than 1 (0.01, 1), else null. */
const powerOfTenPlaces = new WeakMap<Decimal, number | null>()

/**
 * The decimal places of a power-of-ten step, as tick and step sizes usually are, or null for any
 * other step. Worked out once per step object: pair rules hold theirs for the whole run.
 */
const stepPlaces = (step: Decimal): number | null => {
  let places = powerOfTenPlaces.get(step)
  if (places === undefined) {
    const dp = step.isFinite() ? step.decimalPlaces() : Number.NaN
    places = Number.isInteger(dp) && step.eq(new Decimal(10).pow(-dp)) ? dp : null
    powerOfTenPlaces.set(step, places)
  }
  return places
}

/**
 * Snaps `value` to a multiple of `step` (tick size or step size), rounding as told.
 * `toNearest` rounds the exact quotient to a whole number of steps, so no 64-digit
 * quotient is worked out and rounded twice; for a power-of-ten step, rounding at its
 * decimal places is the same number without a division at all.
 */
export const quantize = (value: Decimal, step: Decimal, rounding: Rounding): Decimal => {
  checkStep(step)
  const places = stepPlaces(step)
  return unsigned(places === null ? value.toNearest(step, Rounding[rounding]) : value.toDecimalPlaces(places, Rounding[rounding]))
}

/**
 * `dividend / divisor` rounded toward zero to a multiple of `step`: how much of an
 * asset on its step an amount buys at a price. Exact: the whole number of steps is
 * the integer part of `dividend / (divisor * step)`, which is all the division works out.
 */
export const divideDown = (dividend: Decimal, divisor: Decimal, step: Decimal): Decimal => {
  checkStep(step)
  return unsigned(dividend.divToInt(divisor.mul(step)).mul(step))
}

/**
 * How far a double worked out from exact decimals (each read as its nearest double, then a few
 * operations) may lie from the exact value, relatively: a few units in the last place are about
 * 1e-15, so this bound holds with room to spare.
 */
export const ESTIMATE_ERROR = 1e-12
/** Whole numbers of steps up to this are told apart by an estimate within ESTIMATE_ERROR. */
const MAX_ESTIMATED_STEPS = 2 ** 40

/**
 * The whole number of steps an exact quotient rounds to (down or up), from a double estimate of
 * it; undefined when the estimate lies too near a whole number to be sure, and the caller then
 * works it out in decimals. decimal.js divides to 64 digits to answer this; most quotients are
 * nowhere near a whole number, and for them this is a few float operations.
 */
export const estimatedSteps = (estimate: number, rounding: "down" | "up"): number | undefined => {
  if (!(estimate >= 0 && estimate < MAX_ESTIMATED_STEPS)) return undefined
  const low = estimate * (1 - ESTIMATE_ERROR)
  const high = estimate * (1 + ESTIMATE_ERROR)
  const round = rounding === "down" ? Math.floor : Math.ceil
  const steps = round(low)
  return steps === round(high) ? steps : undefined
}

/** `steps` whole steps of `step`, exactly (zero without a sign, as `divideDown` and `quantize` answer it). */
export const stepsOf = (steps: number, step: Decimal): Decimal => (steps === 0 ? ZERO : steps === 1 ? step : step.mul(steps))

/** `divideDown(dividend, divisor, step)`, by estimate when that is sure (see `estimatedSteps`). */
export const divideDownFast = (dividend: Decimal, divisor: Decimal, step: Decimal): Decimal => {
  const steps = estimatedSteps(toFloat(dividend) / (toFloat(divisor) * toFloat(step)), "down")
  return steps === undefined ? divideDown(dividend, divisor, step) : stepsOf(steps, step)
}

/**
 * True when `value` is an exact multiple of `step`. For a power-of-ten step that is a count of
 * decimal places, not the 64-digit division a remainder takes.
 */
export const isMultipleOf = (value: Decimal, step: Decimal): boolean => {
  const places = stepPlaces(step)
  return places === null ? value.mod(step).isZero() : value.decimalPlaces() <= places
}


/** Powers of ten that a double holds exactly. */
const EXACT_POWERS_OF_TEN = Array.from({ length: 23 }, (_, k) => 10 ** k)

/**
 * The nearest double to a decimal, for signals and ratios only (indicators,
 * Sharpe) — never for money. The same result as `value.toNumber()`, without its
 * detour through a string: decimal.js keeps base-1e7 limbs whose radix point sits
 * on a limb boundary, so when the digits make an integer below 2^53 and the power
 * of ten is exact, one multiplication or division of exact doubles is the
 * correctly rounded answer. The last limb's trailing zeros are not digits of that
 * integer: a balance such as 98999.8765432110 has 13 significant digits in three
 * limbs, and counting its zeros would send it down the general path. Anything else
 * takes the general path.
 */
export const toFloat = (value: Decimal): number => {
  const limbs = limbsOf(value).d
  if (limbs === null) return value.toNumber()
  // Unrolled: this runs for every candle a backtest reads.
  const count = limbs.length
  let power = 7 * (Math.floor(value.e / 7) - (count - 1))
  let mantissa: number
  if (count === 1) mantissa = limbs[0]!
  else if (count === 2) mantissa = limbs[0]! * 1e7 + limbs[1]!
  else if (count === 3) {
    const head = limbs[0]! * 1e7 + limbs[1]!
    mantissa = head * 1e7 + limbs[2]!
    if (mantissa > Number.MAX_SAFE_INTEGER) {
      // decimal.js drops zero limbs at the end, so the last one has a non-zero digit and this ends.
      let last = limbs[2]!
      let digits = 7
      while (last % 10 === 0) {
        last = (last / 10) | 0
        digits--
      }
      mantissa = head * EXACT_POWERS_OF_TEN[digits]! + last
      power += 7 - digits
    }
  } else return value.toNumber()
  if (mantissa > Number.MAX_SAFE_INTEGER || power > 22 || power < -22) return value.toNumber()
  const magnitude = power >= 0 ? mantissa * EXACT_POWERS_OF_TEN[power]! : mantissa / EXACT_POWERS_OF_TEN[-power]!
  return value.s < 0 ? -magnitude : magnitude
}
