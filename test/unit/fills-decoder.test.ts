/**
 * The fills decoder against the Schema it stands in for. The reference reads the
 * answer the way every other endpoint is read (Json.parse, then `FillsAnswer`
 * and `FillRow` through Effect Schema, unknown fields kept, `raw` written back
 * from the parsed row); the decoder must give the same page, or a DecodeError
 * naming the same field, for any text a server could send: compact or spaced,
 * escaped or not, valid or broken anywhere.
 */
import { Either, Schema } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { isLosslessNumber, LosslessNumber, parse, stringify } from "../../src/domain/Json.js"
import { decodeErrorOf, type Fill, FillRow, FillsAnswer, type FillsPage } from "../../src/svc/Api.js"
import { DecodeError } from "../../src/svc/Errors.js"
import { decodeFillsPage, parseFillsAnswer } from "../../src/svc/FillsDecoder.js"

const ENDPOINT = "/api/spot/fills"

const decodeAnswer = Schema.decodeUnknownEither(FillsAnswer, { onExcessProperty: "preserve" })
const decodeRow = Schema.decodeUnknownEither(FillRow, { onExcessProperty: "preserve" })

/** The Schema path, row by row. */
const referenceDecode = (json: unknown): Either.Either<FillsPage, DecodeError> => {
  const answer = decodeAnswer(json)
  if (Either.isLeft(answer)) return Either.left(decodeErrorOf(ENDPOINT, answer.left))
  const fills: Array<Fill> = []
  for (const [index, row] of answer.right.fills.entries()) {
    // A number where a row belongs is no row. The Schema would look into it for `fillId`, only
    // because the parse holds each number as a LosslessNumber object; the field is the row itself.
    if (isLosslessNumber(row)) return Either.left(new DecodeError({ endpoint: ENDPOINT, field: `fills[${index}]`, detail: "a number, not a fill" }))
    const decoded = decodeRow(row)
    if (Either.isLeft(decoded)) {
      const error = decodeErrorOf(ENDPOINT, decoded.left)
      return Either.left(new DecodeError({ endpoint: ENDPOINT, field: `fills[${index}]${error.field === "" ? "" : `.${error.field}`}`, detail: error.detail }))
    }
    fills.push({ ...decoded.right, raw: stringify(row) })
  }
  return Either.right({ fills, nextCursor: answer.right.nextCursor })
}

/** As the client reads an answer: text it cannot parse is no JSON at all. */
const readWith = (parseText: (text: string) => unknown, text: string): unknown => {
  try {
    return parseText(text)
  } catch {
    return undefined
  }
}

const reference = (text: string) => referenceDecode(readWith(parse, text))
const decoder = decodeFillsPage(ENDPOINT)
const candidate = (text: string) => decoder(readWith(parseFillsAnswer, text))

const expectSame = (text: string) => {
  const expected = reference(text)
  const actual = candidate(text)
  if (Either.isRight(expected)) {
    expect(actual).toEqual(expected)
  } else {
    expect(Either.isLeft(actual), `expected a DecodeError at ${expected.left.field}`).toBe(true)
    const error = (actual as Either.Left<DecodeError, FillsPage>).left
    expect({ tag: error._tag, endpoint: error.endpoint, field: error.field }).toEqual({ tag: "DecodeError", endpoint: ENDPOINT, field: expected.left.field })
    expect(error.detail).not.toBe("")
  }
}

// ---------------------------------------------------------------------------
// Values. Numbers are LosslessNumber tokens, so that a token the text carries
// (1.50, 1e3, -0, 20 digits) is exactly what is written.

const digits = (min: number, max: number) => fc.string({ unit: fc.constantFrom(..."0123456789"), minLength: min, maxLength: max })

/** A JSON number token: plain, fractional, with trailing zeros or an exponent, beyond a double's digits. */
const numberToken = fc
  .tuple(fc.boolean(), fc.oneof(fc.constant("0"), fc.tuple(fc.constantFrom(..."123456789"), digits(0, 22)).map(([a, b]) => a + b)), fc.option(digits(1, 12)), fc.option(fc.tuple(fc.constantFrom("e", "E", "e+", "e-"), digits(1, 3))))
  .map(([negative, whole, fraction, exponent]) => `${negative ? "-" : ""}${whole}${fraction === null ? "" : `.${fraction}`}${exponent === null ? "" : exponent.join("")}`)

const jsonNumber = numberToken.map((token) => new LosslessNumber(token))

/** Strings with everything JSON must escape, unpaired surrogates and non-ASCII included. */
const anyString = fc.oneof(fc.string(), fc.string({ unit: "binary" }), fc.string({ unit: "grapheme" }))

const jsonValue: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    anyString,
    jsonNumber,
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 3 }),
    fc.dictionary(anyString, tie("value"), { maxKeys: 3 })
  )
})).value

/** Amounts as the spec writes them (strings), as JSON numbers, and as strings that are no decimal. */
const amount = fc.oneof(
  { weight: 4, arbitrary: numberToken.filter((t) => !t.includes("e") && !t.includes("E")) },
  { weight: 2, arbitrary: numberToken },
  { weight: 2, arbitrary: jsonNumber },
  { weight: 1, arbitrary: fc.constantFrom("+1", ".5", "1.", " 1", "1 ", "NaN", "Infinity", "0x10", "1e", "01", "--1", "", "1_000", "1,5") }
)

const FIELD_NAMES = ["fillId", "clientOrderId", "symbol", "side", "liquidity", "price", "baseQty", "quoteQty", "fee", "feeAsset", "time"] as const

const validRow = fc.record({
  fillId: anyString,
  clientOrderId: fc.option(anyString),
  symbol: fc.constantFrom("BTCUSDT", "ETHUSDT", "ÄÖÜ/€"),
  side: fc.constantFrom("buy", "sell"),
  liquidity: fc.constantFrom("maker", "taker"),
  price: amount,
  baseQty: amount,
  quoteQty: amount,
  fee: amount,
  feeAsset: fc.constantFrom("USDT", "BTC", "BNB"),
  time: fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: 4_102_444_800_000 }).map((n) => new LosslessNumber(String(n))) },
    { weight: 1, arbitrary: fc.constantFrom("1.0", "1e3", "-0", "9007199254740993", "-5", "1.5").map((t) => new LosslessNumber(t)) }
  )
})

/** Fields the Dialect does not name, including names that JSON.stringify reorders or that collide with ours. */
const extraFields = fc.dictionary(
  fc.oneof(fc.constantFrom("note", "orderId", "raw", "1", "42", "isBuyerMaker", "commission"), anyString),
  jsonValue,
  { maxKeys: 3 }
)

const WRONG_VALUES: ReadonlyArray<unknown> = [null, true, 5, new LosslessNumber("1.5"), "", "x", [], {}, ["buy"], { value: "1" }]

/** A row with one thing wrong, or none: a field deleted or replaced by a value of another type. */
const row = fc
  .tuple(validRow, extraFields, fc.option(fc.tuple(fc.constantFrom(...FIELD_NAMES), fc.oneof(fc.constant(undefined), fc.constantFrom(...WRONG_VALUES), anyString)), { freq: 3 }))
  .map(([fields, extra, damage]) => {
    const out: Record<string, unknown> = { ...extra, ...fields }
    if (damage !== null) {
      const [name, value] = damage
      if (value === undefined) delete out[name]
      else out[name] = value
    }
    return out
  })

const cursor = fc.oneof({ weight: 4, arbitrary: fc.option(anyString) }, { weight: 1, arbitrary: fc.constantFrom(5, true, [], undefined) })

/** A whole answer: mostly well-formed pages, sometimes a non-row or a broken envelope. */
const answer: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      fills: fc.array(fc.oneof({ weight: 12, arbitrary: row }, { weight: 1, arbitrary: jsonValue }), { maxLength: 12 }),
      nextCursor: cursor,
      extra: extraFields
    }).map(({ fills, nextCursor, extra }) => {
      const out: Record<string, unknown> = { ...extra, fills }
      if (nextCursor !== undefined) out.nextCursor = nextCursor
      return out
    })
  },
  { weight: 1, arbitrary: fc.record({ fills: jsonValue, nextCursor: cursor }) },
  { weight: 1, arbitrary: jsonValue }
)

// ---------------------------------------------------------------------------
// Text. Compact canonical text is what svc-venue sends; the rest is what other
// servers may send: whitespace, other escape spellings, broken syntax.

interface Spelling {
  readonly space: string
  /** Writes a character that JSON.stringify would write as itself as a \u escape instead. */
  readonly escapeLetters: boolean
  readonly escapeSlash: boolean
}

const writeString = (value: string, spelling: Spelling): string => {
  let out = JSON.stringify(value)
  if (spelling.escapeSlash) out = out.replaceAll("/", "\\/")
  if (spelling.escapeLetters) out = out.replace(/[A-Za-z]/, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0").toUpperCase()}`)
  return out
}

const write = (value: unknown, spelling: Spelling): string => {
  if (typeof value === "string") return writeString(value, spelling)
  if (value instanceof LosslessNumber) return value.value
  if (typeof value !== "object" || value === null) return JSON.stringify(value)
  const s = spelling.space
  if (Array.isArray(value)) return `[${s}${value.map((item) => write(item, spelling)).join(`${s},${s}`)}${s}]`
  const entries = Object.keys(value).map((key) => `${writeString(key, spelling)}${s}:${s}${write((value as Record<string, unknown>)[key], spelling)}`)
  return `{${s}${entries.join(`${s},${s}`)}${s}}`
}

const text = fc.tuple(
  answer,
  fc.oneof(
    { weight: 4, arbitrary: fc.constant<Spelling | "canonical">("canonical") },
    { weight: 2, arbitrary: fc.record({ space: fc.constantFrom("", " ", "\n\t"), escapeLetters: fc.boolean(), escapeSlash: fc.boolean() }) }
  ),
  fc.option(fc.tuple(fc.nat(), fc.constantFrom("", "}", "]", ",", "\"", "\\", "x", "{\"fills\":")), { freq: 6 })
).map(([value, spelling, breakage]) => {
  const written = spelling === "canonical" ? stringify(value) : write(value, spelling)
  if (breakage === null) return written
  const [at, insert] = breakage
  const cut = at % (written.length + 1)
  return written.slice(0, cut) + insert + written.slice(cut + (insert === "" ? 1 : 0))
})

const svcVenuePage = (rows: number): string =>
  JSON.stringify({
    fills: Array.from({ length: rows }, (_, i) => ({
      fillId: `F${1000 + i}`,
      clientOrderId: i % 5 === 0 ? null : `svc-${i >> 2}`,
      symbol: "BTCUSDT",
      side: i % 2 === 0 ? "buy" : "sell",
      liquidity: i % 3 === 0 ? "maker" : "taker",
      price: `6000${i}.12`,
      baseQty: "0.00100000",
      quoteQty: "60.00012",
      fee: "0.06",
      feeAsset: "USDT",
      time: 1_700_000_000_000 + i
    })),
    nextCursor: "c-1020"
  })

describe("fills decoder", () => {
  it("reads svc-venue's pages as the Schema does, raw text and all", () => {
    const page = svcVenuePage(50)
    expectSame(page)
    const decoded = candidate(page)
    if (Either.isLeft(decoded)) throw decoded.left
    expect(decoded.right.fills[7]).toMatchObject({ fillId: "F1007", side: "sell", time: 1_700_000_000_007 })
    expect(decoded.right.fills[7]!.raw).toBe(JSON.stringify(JSON.parse(page).fills[7]))
    expect(decoded.right.fills[0]!.baseQty.eq(new Decimal("0.001"))).toBe(true)
  })

  it("keeps digits a double cannot hold, and refuses a time that is no safe whole number or before 1970", () => {
    const exact = `{"fills":[{"fillId":"a","clientOrderId":null,"symbol":"BTCUSDT","side":"buy","liquidity":"maker","price":0.1000000000000000055511151231257827,"baseQty":"1","quoteQty":"2","fee":"0","feeAsset":"BTC","time":1,"extra":123456789012345678901234567890}],"nextCursor":null}`
    expectSame(exact)
    const decoded = candidate(exact)
    if (Either.isLeft(decoded)) throw decoded.left
    expect(decoded.right.fills[0]!.price.toFixed()).toBe("0.1000000000000000055511151231257827")
    expect(decoded.right.fills[0]!.raw).toContain("123456789012345678901234567890")
    const late = exact.replace('"time":1,', '"time":9007199254740993,')
    expectSame(late)
    expect(candidate(late)).toMatchObject({ left: { field: "fills[0].time" } })
    const negative = exact.replace('"time":1,', '"time":-1700000000000,')
    expectSame(negative)
    expect(candidate(negative)).toMatchObject({ left: { field: "fills[0].time", detail: "must not be negative" } })
  })

  it("names the field of the first problem, row by row", () => {
    const page = JSON.parse(svcVenuePage(4)) as { fills: Array<Record<string, unknown>> }
    page.fills[2]!.price = "1.2.3"
    page.fills[3]!.side = "BUY"
    expectSame(JSON.stringify(page))
    expect(candidate(JSON.stringify(page))).toMatchObject({ left: { _tag: "DecodeError", endpoint: ENDPOINT, field: "fills[2].price" } })
    // A row that is not an object is named itself, whatever it is, read natively or (an escaped key) through Json.parse.
    for (const row of ["1.8", "0", "null", '"fill"', "[]"]) {
      for (const fills of ["fills", "\\u0066ills"]) {
        const text = `{"${fills}":[${row}],"nextCursor":null}`
        expectSame(text)
        expect(candidate(text)).toMatchObject({ left: { _tag: "DecodeError", field: "fills[0]" } })
      }
    }
  })

  it("refuses a page whole for one fill that must not be stored, naming the fill and the field", () => {
    const hostile: ReadonlyArray<readonly [string, unknown, string]> = [
      ["price", new LosslessNumber("1e900000000"), "exponent"],
      ["price", "1e20000000", "exponent"],
      ["baseQty", "-0.001", "greater than 0"],
      ["baseQty", "0", "greater than 0"],
      ["quoteQty", "1".repeat(41), "significant digits"],
      ["fee", "NaN", "plain decimal digits"],
      ["fee", "0x10", "plain decimal digits"],
      ["side", "BUY", "buy"],
      ["fillId", undefined, "missing"],
      ["fillId", "", "empty"]
    ]
    for (const [field, value, why] of hostile) {
      const page = JSON.parse(svcVenuePage(6)) as { fills: Array<Record<string, unknown>> }
      if (value === undefined) delete page.fills[4]![field]
      else page.fills[4]![field] = value
      const text = stringify(page)
      expectSame(text)
      const decoded = candidate(text)
      expect(decoded, `${field}: ${String(value)}`).toMatchObject({ left: { _tag: "DecodeError", endpoint: ENDPOINT, field: `fills[4].${field}` } })
      expect((decoded as Either.Left<DecodeError, FillsPage>).left.detail).toContain(why)
    }
    // A maker rebate is a negative fee: that is the venue's value, stored as it is.
    const rebate = JSON.parse(svcVenuePage(2)) as { fills: Array<Record<string, unknown>> }
    rebate.fills[1]!.fee = "-0.002"
    expectSame(JSON.stringify(rebate))
    expect(Either.isRight(candidate(JSON.stringify(rebate)))).toBe(true)
  })

  it("reads exactly a page that JSON.stringify would write otherwise: keys twice, fills after another key, numbers not in their shortest form", () => {
    const row = JSON.stringify((JSON.parse(svcVenuePage(1)) as { fills: Array<unknown> }).fills[0])
    // A key twice: refused, as Json.parse refuses it.
    expectSame(`{"fills":[],"nextCursor":null,"fills":[${row}]}`)
    for (const page of [
      `{"nextCursor":null,"fills":[${row},${row.replace("F1000", "F1001")}]}`,
      `{"fills":[${row.replace('"time":', '"other":1.0e3,"time":')}],"nextCursor":null}`,
      `{"fills":[${row}],"nextCursor":null,"extra":1.50}`
    ]) {
      expectSame(page)
      expect(Either.isRight(candidate(page)), page).toBe(true)
    }
  })

  it("property: parses any text to what Json.parse gives, or refuses it as Json.parse does", () => {
    // A natively read page's rows keep the doubles that hold their number tokens exactly.
    const tokens = (value: unknown): unknown =>
      typeof value === "number"
        ? new LosslessNumber(String(value))
        : Array.isArray(value)
          ? value.map(tokens)
          : typeof value === "object" && value !== null && !(value instanceof LosslessNumber)
            ? Object.fromEntries(Object.entries(value).map(([key, item]) => [key, tokens(item)]))
            : value
    const rowTokens = (value: unknown): unknown =>
      typeof value === "object" && value !== null && Array.isArray((value as { fills?: unknown }).fills)
        ? { ...value, fills: ((value as { fills: Array<unknown> }).fills).map(tokens) }
        : value
    fc.assert(
      fc.property(text, (t) => {
        expect(rowTokens(readWith(parseFillsAnswer, t))).toEqual(rowTokens(readWith(parse, t)))
      }),
      { numRuns: 500 }
    )
  })

  it("property: decodes any answer to the Schema's page, or fails at the Schema's field", () => {
    fc.assert(fc.property(text, expectSame), { numRuns: 1000 })
  })
})
