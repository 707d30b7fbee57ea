import fc from "fast-check"
import { LosslessNumber } from "lossless-json"
import { describe, expect, it } from "vitest"
import { compact, compare, Decimal, divideDown, min, sign, fromJsNumber, fromNumberToken, fromString, InvalidDecimal, isMultipleOf, MAX_EXPONENT, MAX_SIGNIFICANT_DIGITS, quantize, Rounding, toBounds, toFloat, toJsonNumber } from "../../src/domain/Decimal.js"
import { isLosslessNumber, parse, stringify } from "../../src/domain/Json.js"

/** Random decimals with up to 30 significant digits and up to 18 places. */
const decimalText = fc
  .tuple(fc.boolean(), fc.stringMatching(/^[1-9][0-9]{0,11}$/), fc.stringMatching(/^[0-9]{0,18}$/), fc.boolean())
  .map(([negative, whole, fraction, zeroWhole]) => {
    const w = zeroWhole ? "0" : whole
    const digits = `${w}${fraction}`.replace(/^0+/, "")
    const trimmed = digits.length > 30 ? fraction.slice(0, Math.max(0, 30 - w.length)) : fraction
    return `${negative ? "-" : ""}${w}${trimmed === "" ? "" : `.${trimmed}`}`
  })

/** Significant digits: a non-zero first and last digit, `count` in all. */
const significand = (count: number) =>
  count === 1
    ? fc.constantFrom(..."123456789")
    : fc
        .tuple(fc.constantFrom(..."123456789"), fc.string({ unit: fc.constantFrom(..."0123456789"), minLength: count - 2, maxLength: count - 2 }), fc.constantFrom(..."123456789"))
        .map(([a, b, c]) => a + b + c)

/** `digits` × 10^(exponent of the leading digit), written as a JSON number may be: plain, or with an exponent. */
const written = (negative: boolean, digits: string, exponent: number, form: "plain" | "scientific" | "padded"): string => {
  const sign = negative ? "-" : ""
  if (form === "scientific") return `${sign}${digits[0]}${digits.length > 1 ? `.${digits.slice(1)}` : ""}e${exponent}`
  const value = new Decimal(`${digits[0]}.${digits.slice(1) || "0"}e${exponent}`)
  const plain = value.toFixed()
  return `${sign}${form === "padded" && !plain.includes(".") ? `${plain}.000` : form === "padded" ? `${plain}000` : plain}`
}

const inBounds = fc
  .tuple(fc.boolean(), fc.integer({ min: 1, max: MAX_SIGNIFICANT_DIGITS }).chain(significand), fc.integer({ min: -MAX_EXPONENT, max: MAX_EXPONENT }), fc.constantFrom("plain", "scientific", "padded") as fc.Arbitrary<"plain" | "scientific" | "padded">)
  .map(([negative, digits, exponent, form]) => ({ text: written(negative, digits, exponent, form), negative, digits, exponent }))

const outOfBounds = fc.oneof(
  fc.tuple(fc.boolean(), fc.integer({ min: MAX_SIGNIFICANT_DIGITS + 1, max: 70 }).chain(significand), fc.integer({ min: -MAX_EXPONENT, max: MAX_EXPONENT - 30 }), fc.constantFrom("plain", "scientific") as fc.Arbitrary<"plain" | "scientific">)
    .map(([negative, digits, exponent, form]) => written(negative, digits, exponent, form)),
  fc.tuple(fc.boolean(), fc.integer({ min: 1, max: 10 }).chain(significand), fc.oneof(fc.integer({ min: MAX_EXPONENT + 1, max: 2_000_000_000 }), fc.integer({ min: -2_000_000_000, max: -MAX_EXPONENT - 1 })))
    .map(([negative, digits, exponent]) => written(negative, digits, exponent, "scientific")),
  fc.tuple(fc.boolean(), fc.integer({ min: MAX_EXPONENT + 1, max: 80 }), fc.boolean())
    .map(([negative, exponent, small]) => `${negative ? "-" : ""}${small ? `0.${"0".repeat(exponent - 1)}1` : `1${"0".repeat(exponent)}`}`)
)

describe("Decimal bounds", () => {
  it("property: an amount within the bounds reads back exactly, however it is written", () => {
    fc.assert(
      fc.property(inBounds, ({ text, negative, digits, exponent }) => {
        const value = fromString(text, "price")
        expect(value.sd()).toBe(digits.length)
        expect(value.e).toBe(exponent)
        expect(value.isNeg()).toBe(negative)
        expect(value.eq(new Decimal(text))).toBe(true)
        // Written out and read again, it is the same number: the ledger stores what it was given.
        expect(fromString(toJsonNumber(value)).eq(value)).toBe(true)
      }),
      { numRuns: 3000 }
    )
  })

  it("property: an amount beyond the bounds is refused before it is parsed, naming the field", () => {
    fc.assert(
      fc.property(outOfBounds, fc.constantFrom("price", "fills[3].baseQty", "balances.USDT"), (text, field) => {
        let refusal: unknown
        try {
          fromString(text, field)
        } catch (error) {
          refusal = error
        }
        expect(refusal, text).toBeInstanceOf(InvalidDecimal)
        expect((refusal as InvalidDecimal).field).toBe(field)
        expect((refusal as InvalidDecimal).message.startsWith(`${field}: `)).toBe(true)
        expect((refusal as InvalidDecimal).problem).toMatch(/significant digits|exponent|longer than/)
      }),
      { numRuns: 3000 }
    )
  })

  it("refuses the texts that ran the process out of memory or time, at once", () => {
    for (const text of ["1e900000000", "1e20000000", "-1e-900000000", `1${"0".repeat(100_000)}`, `0.${"0".repeat(100_000)}1`, "9".repeat(10_000_000)]) {
      expect(() => fromString(text, "price")).toThrow(InvalidDecimal)
    }
    expect(fromString(`0.${"0".repeat(MAX_EXPONENT - 1)}1`).eq("1e-40")).toBe(true)
    expect(fromString("9".repeat(MAX_SIGNIFICANT_DIGITS)).sd()).toBe(MAX_SIGNIFICANT_DIGITS)
    expect(fromString("-0.000000").isZero()).toBe(true)
  })

  it("toBounds rounds a worked-out figure into what reads back, and leaves an amount within them as it is", () => {
    const third = new Decimal(1).div(3)
    expect(third.sd()).toBe(64)
    expect(toBounds(third).toFixed()).toBe(`0.${"3".repeat(MAX_SIGNIFICANT_DIGITS)}`)
    expect(fromString(toBounds(third).toFixed()).eq(toBounds(third))).toBe(true)
    expect(toBounds(new Decimal("4e-41")).toFixed()).toBe("0")
    expect(toBounds(new Decimal("6e-41")).toFixed()).toBe("0.0000000000000000000000000000000000000001")
    const amount = fromString("60000.12345678")
    expect(toBounds(amount)).toBe(amount)
  })
})

describe("Decimal", () => {
  it("reads strings exactly, including 0.1000000000000000055511151231257827", () => {
    const text = "0.1000000000000000055511151231257827"
    expect(toJsonNumber(fromString(text))).toBe(text)
    expect(toJsonNumber(fromString("123456789012345678.123456789"))).toBe("123456789012345678.123456789")
  })

  it("refuses what is not a plain decimal, naming the problem", () => {
    for (const bad of ["", " 1", "1 ", "+1", "01", ".5", "5.", "NaN", "Infinity", "1,5", "0x10", "1e"]) {
      expect(() => fromString(bad)).toThrow(InvalidDecimal)
    }
    expect(() => fromString("abc")).toThrow(/plain decimal digits/)
  })

  it("toJsonNumber never writes an exponent or -0 and refuses NaN/Infinity", () => {
    expect(toJsonNumber(new Decimal("1e-20"))).toBe("0.00000000000000000001")
    expect(toJsonNumber(new Decimal("1.5e30"))).toBe("1500000000000000000000000000000")
    expect(toJsonNumber(new Decimal("-0"))).toBe("0")
    expect(toJsonNumber(new Decimal("-0.000"))).toBe("0")
    expect(() => toJsonNumber(new Decimal(NaN))).toThrow(InvalidDecimal)
    expect(() => toJsonNumber(new Decimal(Infinity))).toThrow(InvalidDecimal)
  })

  it("reads lossless number tokens and plain JS numbers", () => {
    expect(fromNumberToken(new LosslessNumber("100000.000000000000000001")).toFixed()).toBe("100000.000000000000000001")
    expect(fromJsNumber(0.1).toFixed()).toBe("0.1")
    expect(fromJsNumber(250).toFixed()).toBe("250")
    expect(() => fromJsNumber(Number.NaN)).toThrow(InvalidDecimal)
  })

  it("quantizes to tick and step sizes with an explicit rounding mode", () => {
    const tick = fromString("0.01")
    expect(quantize(fromString("60000.017"), tick, "down").toFixed()).toBe("60000.01")
    expect(quantize(fromString("60000.011"), tick, "up").toFixed()).toBe("60000.02")
    expect(quantize(fromString("60000.015"), tick, "halfEven").toFixed()).toBe("60000.02")
    expect(quantize(fromString("60000.025"), tick, "halfEven").toFixed()).toBe("60000.02")
    expect(quantize(fromString("-1.005"), tick, "floor").toFixed()).toBe("-1.01")
    expect(quantize(fromString("7.3"), fromString("0.5"), "down").toFixed()).toBe("7")
    expect(toJsonNumber(quantize(fromString("-0.001"), tick, "down"))).toBe("0")
    expect(() => quantize(fromString("1"), fromString("0"), "down")).toThrow(/positive/)
  })

  it("property: quantized values are multiples of the step and within one step", () => {
    fc.assert(
      fc.property(decimalText, fc.constantFrom("0.01", "0.00001", "0.5", "1", "0.000000000000000001"), fc.constantFrom("down", "up", "halfEven", "floor", "ceil") , (text, stepText, mode) => {
        const value = fromString(text)
        const step = fromString(stepText)
        const q = quantize(value, step, mode as "down")
        expect(isMultipleOf(q, step)).toBe(true)
        expect(q.minus(value).abs().lt(step)).toBe(true)
      })
    )
  })

  it("property: a power-of-ten step rounds at its decimal places to the same number decimal.js's toNearest gives, and other steps take toNearest itself", () => {
    const steps = ["1", "0.1", "0.01", "0.00001", "0.000000000000000001", "0.5", "0.25", "10", "0.0002"]
    const modes = ["down", "up", "halfEven", "halfUp", "floor", "ceil"] as const
    fc.assert(
      fc.property(decimalText, fc.constantFrom(...steps), fc.constantFrom(...modes), (text, stepText, mode) => {
        const value = fromString(text)
        const step = fromString(stepText)
        const expected = value.toNearest(step, Rounding[mode])
        expect(quantize(value, step, mode).eq(expected)).toBe(true)
        expect(isMultipleOf(value, step)).toBe(value.mod(step).isZero())
      }),
      { numRuns: 3000 }
    )
  })

  it("divides down to the step exactly, where a 64-digit quotient would round up to the next step", () => {
    const step = fromString("0.00001")
    expect(divideDown(fromString("1000"), fromString("60489.02"), step).toFixed()).toBe("0.01653")
    // 1 - 1e-70 over 1 is a whole step short of 1 at any precision below 70 digits (a worked-out figure: no text reads as it).
    const justUnder = new Decimal(`0.${"9".repeat(70)}`)
    expect(divideDown(justUnder, fromString("1"), step).toFixed()).toBe("0.99999")
    expect(divideDown(fromString("-7"), fromString("2"), fromString("1")).toFixed()).toBe("-3")
    expect(toJsonNumber(divideDown(fromString("0.000001"), fromString("1"), step))).toBe("0")
    expect(() => divideDown(fromString("1"), fromString("1"), fromString("0"))).toThrow(/positive/)
  })

  it("property: divideDown is the largest multiple of the step whose product with the divisor fits the dividend", () => {
    fc.assert(
      fc.property(decimalText, decimalText, fc.constantFrom("0.01", "0.00001", "0.5", "1", "0.000000000000000001"), (dividendText, divisorText, stepText) => {
        const dividend = fromString(dividendText).abs()
        const divisor = fromString(divisorText).abs()
        fc.pre(!divisor.isZero())
        const step = fromString(stepText)
        const q = divideDown(dividend, divisor, step)
        expect(isMultipleOf(q, step)).toBe(true)
        expect(q.mul(divisor).lte(dividend)).toBe(true)
        expect(q.add(step).mul(divisor).gt(dividend)).toBe(true)
      })
    )
  })

  it("property: compare, sign and min agree with decimal.js, near and far apart, zero and signs included", () => {
    const value = fc.oneof(decimalText.map(fromString), fc.constantFrom(new Decimal(0), new Decimal("-0"), new Decimal(10_000_000), new Decimal("1e-7")))
    // A value and one near it share exponent and leading limbs, where the comparison walks the limbs.
    const pair = fc.oneof(
      fc.tuple(value, value),
      fc.tuple(value, fc.constantFrom("0", "1e-30", "-1e-30", "0.0000001", "1", "-10000000")).map(([a, delta]) => [a, a.add(delta)] as const)
    )
    fc.assert(
      fc.property(pair, ([a, b]) => {
        expect(compare(a, b)).toBe(a.cmp(b))
        expect(compare(b, a)).toBe(b.cmp(a))
        expect(sign(a)).toBe(a.isZero() ? 0 : a.isNegative() ? -1 : 1)
        expect(min(a, b).eq(Decimal.min(a, b))).toBe(true)
      })
    )
    expect(compare(new Decimal(Infinity), new Decimal(1))).toBe(1)
    expect(compare(new Decimal(-Infinity), new Decimal(1))).toBe(-1)
    expect(Number.isNaN(compare(new Decimal(NaN), new Decimal(1)))).toBe(true)
    expect(Number.isNaN(sign(new Decimal(NaN)))).toBe(true)
  })

  it("property: compact keeps the value, its sign and its exponent", () => {
    fc.assert(
      fc.property(decimalText, fc.integer({ min: -1_000_000, max: 1_000_000 }), (text, ticks) => {
        for (const value of [fromString(text), fromString("0.01").mul(ticks)]) {
          const tight = compact(value)
          expect(tight).not.toBe(value)
          expect(tight.eq(value)).toBe(true)
          expect(tight.toString()).toBe(value.toString())
          expect(Object.is(tight.isNegative(), value.isNegative())).toBe(true)
        }
      })
    )
  })
})

describe("Json", () => {
  it("parse keeps every number token exact", () => {
    const parsed = parse('{"balance": 0.1000000000000000055511151231257827, "big": 123456789012345678.123456789, "n": [1, -0.0, 2e-7]}') as Record<string, unknown>
    expect(isLosslessNumber(parsed.balance)).toBe(true)
    expect((parsed.balance as LosslessNumber).value).toBe("0.1000000000000000055511151231257827")
    expect((parsed.big as LosslessNumber).value).toBe("123456789012345678.123456789")
    expect((parsed.n as Array<LosslessNumber>).map((n) => n.value)).toEqual(["1", "-0.0", "2e-7"])
  })

  it("stringify writes Decimals as number literals digit for digit", () => {
    const body = stringify({ symbol: "BTCUSDT", baseQty: fromString("0.00001"), limitPrice: fromString("60000.10"), maxSlippageBps: 50 })
    expect(body).toBe('{"symbol":"BTCUSDT","baseQty":0.00001,"limitPrice":60000.1,"maxSlippageBps":50}')
    expect(stringify({ q: new Decimal("1e-20"), z: new Decimal("-0") })).toBe('{"q":0.00000000000000000001,"z":0}')
    expect(() => stringify({ x: Number.NaN })).toThrow()
    expect(() => stringify({ x: new Decimal(Infinity) })).toThrow()
  })

  it("property: parse(stringify(x)) is exact and never carries an exponent", () => {
    fc.assert(
      fc.property(decimalText, (text) => {
        const value = fromString(text)
        const json = stringify({ amount: value })
        expect(json).not.toMatch(/[eE]/)
        const back = fromNumberToken((parse(json) as { amount: LosslessNumber }).amount)
        expect(back.eq(value)).toBe(true)
        expect(toJsonNumber(back)).toBe(toJsonNumber(value))
      }),
      { numRuns: 1000 }
    )
  })

  it("0.1000000000000000055511151231257827 survives a round trip", () => {
    const text = "0.1000000000000000055511151231257827"
    const json = stringify({ balance: fromString(text) })
    expect(json).toBe(`{"balance":${text}}`)
    expect(fromNumberToken((parse(json) as { balance: LosslessNumber }).balance).toFixed()).toBe(text)
  })
})

describe("toFloat", () => {
  it("property: the same double as decimal.js's own conversion", () => {
    const wide = fc.oneof(
      fc.tuple(fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }), fc.integer({ min: 0, max: 40 })).map(([digits, places]) => {
        const text = (digits < 0n ? -digits : digits).toString().padStart(places + 1, "0")
        return `${digits < 0n ? "-" : ""}${places === 0 ? text : `${text.slice(0, -places)}.${text.slice(-places)}`}`
      }),
      fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => String(n)),
      // Up to 16 significant digits anywhere in three limbs, as balances after fees are: the
      // last limb's trailing zeros are where the quick path and the general one could part.
      fc.tuple(fc.bigInt({ min: 1n, max: 2n ** 54n }), fc.integer({ min: -30, max: 30 })).map(([digits, exponent]) => `${digits}e${exponent}`)
    )
    fc.assert(
      fc.property(wide, (text) => {
        const value = new Decimal(text)
        expect(Object.is(toFloat(value), value.toNumber()) || (value.isZero() && toFloat(value) === 0)).toBe(true)
      }),
      { numRuns: 5000 }
    )
    for (const text of ["60000.01", "0.00001", "123456789.123", "-5.5", "1e-20", "9007199254740993", "0.1000000000000000055511151231257827", "98999.876543211", "-1234567.89012345", "9007199254.740993", "9007199254.740995"]) {
      expect(toFloat(new Decimal(text))).toBe(new Decimal(text).toNumber())
    }
  })
})
