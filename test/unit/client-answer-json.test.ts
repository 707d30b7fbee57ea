/**
 * Answers are read natively when that is exact, and otherwise by lossless-json:
 * either way the client sees what `Json.parse` gives, number tokens digit for digit.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { isLosslessNumber, LosslessNumber, parse, stringify } from "../../src/domain/Json.js"
import { MAX_ANSWER_DEPTH, nestedDeeperThan, parseAnswer } from "../../src/svc/AnswerJson.js"

const outcome = (read: (text: string) => unknown, text: string): { readonly value: unknown } | "refused" => {
  try {
    return { value: read(text) }
  } catch {
    return "refused"
  }
}

const digits = (min: number, max: number) => fc.string({ unit: fc.constantFrom(..."0123456789"), minLength: min, maxLength: max })

/** Number tokens a double holds exactly and tokens it does not: trailing zeros, exponents, -0, 25 digits. */
const numberToken = fc
  .tuple(fc.boolean(), fc.oneof(fc.constant("0"), fc.tuple(fc.constantFrom(..."123456789"), digits(0, 25)).map(([a, b]) => a + b)), fc.option(digits(1, 12)), fc.option(fc.tuple(fc.constantFrom("e", "E", "e+", "e-"), digits(1, 3))))
  .map(([negative, whole, fraction, exponent]) => new LosslessNumber(`${negative ? "-" : ""}${whole}${fraction === null ? "" : `.${fraction}`}${exponent === null ? "" : exponent.join("")}`))

const value: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.oneof(fc.string(), fc.string({ unit: "binary" })),
    numberToken,
    fc.integer().map((n) => new LosslessNumber(String(n))),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(fc.oneof(fc.string(), fc.constantFrom("1", "__proto__", "ok")), tie("value"), { maxKeys: 4 })
  )
})).value

/** Compact text as svc-venue writes it, spaced or re-escaped text as other servers may, and broken text. */
const text = fc
  .tuple(value, fc.constantFrom("compact", "spaced", "escaped"), fc.option(fc.tuple(fc.nat(), fc.constantFrom("", "}", "]", ",", "\"", "x")), { freq: 5 }))
  .map(([v, spelling, breakage]) => {
    const compact = stringify(v)
    const written = spelling === "compact" ? compact : spelling === "spaced" ? compact.replaceAll(",", ", ").replaceAll(":", ": ") : compact.replaceAll("/", "\\/")
    if (breakage === null) return written
    const [at, insert] = breakage
    const cut = at % (written.length + 1)
    return written.slice(0, cut) + insert + written.slice(cut + (insert === "" ? 1 : 0))
  })

describe("answer JSON", () => {
  it("reads a compact answer with exact and inexact doubles digit for digit", () => {
    const answer = '[{"asset":"BTC","balance":0.1000000000000000055511151231257827,"locked":"0"},{"asset":"ETH","balance":12.5,"locked":"1.50"}]'
    expect(parseAnswer(answer)).toEqual(parse(answer))
    expect((parseAnswer('{"balance":12.5}') as { balance: LosslessNumber }).balance).toEqual(new LosslessNumber("12.5"))
  })

  it("property: gives what Json.parse gives, or refuses what it refuses", () => {
    fc.assert(
      fc.property(text, (t) => {
        expect(outcome(parseAnswer, t)).toEqual(outcome(parse, t))
      }),
      { numRuns: 1000 }
    )
  })

  it("property: tells text nested deeper than a bound from text that is not, brackets and quotes inside strings aside", () => {
    const depthOf = (v: unknown): number =>
      typeof v !== "object" || v === null || isLosslessNumber(v) ? 0 : 1 + Math.max(0, ...Object.values(v as object).map(depthOf))
    fc.assert(
      fc.property(value, fc.nat(6), fc.constantFrom("compact", "spaced"), (v, levels, spelling) => {
        const compact = stringify(v)
        const written = spelling === "compact" ? compact : compact.replaceAll(",", " , ").replaceAll(":", " : ")
        expect(nestedDeeperThan(written, levels)).toBe(depthOf(v) > levels)
      }),
      { numRuns: 1000 }
    )
    expect(nestedDeeperThan(`{"fills":[${"[".repeat(100_000)}${"]".repeat(100_000)}]}`, MAX_ANSWER_DEPTH)).toBe(true)
    expect(nestedDeeperThan(`{"note":"${"[".repeat(100)}\\\"${"{".repeat(100)}","fills":[]}`, MAX_ANSWER_DEPTH)).toBe(false)
  })
})
