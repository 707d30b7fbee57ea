/**
 * Each plain shape against the Schema it stands in for: for any answer a server
 * could send (fields valid, null, absent, of the wrong type, amounts and integers
 * spelled oddly, extra fields), the plain decoder gives exactly what the Schema
 * decoder gives, value or DecodeError; and a well-formed answer is read by the
 * shape itself, not handed to the Schema.
 */
import { Either, Schema } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { LosslessNumber, parse, stringify } from "../../src/domain/Json.js"
import { CancelAnswer, decoderFor, FundingRow, OpenOrderRow, OrderStatus, PlacementAnswer, Ticker, WalletRow } from "../../src/svc/Api.js"
import { plainDecoderFor, readPlain, type FieldKind, type Shape, Shapes } from "../../src/svc/PlainDecoder.js"

const ENDPOINT = "/api/test"

const number = (token: string) => new LosslessNumber(token)

const validValue = (kind: FieldKind): fc.Arbitrary<unknown> => {
  switch (kind) {
    case "string":
    case "optionalString":
      return fc.string({ maxLength: 12 })
    case "id":
      return fc.string({ minLength: 1, maxLength: 12 })
    case "positiveAmount":
    case "optionalPositiveAmount":
      return fc.oneof(
        fc.constantFrom("1", "0.1", "60000.25", "0.00000001", "123456789012345678901234.5", "1e-40", `${"9".repeat(40)}`),
        fc.constantFrom("2", "100000", "0.5", "20.125", "1e40").map(number)
      )
    case "nonNegativeAmount":
    case "optionalNonNegativeAmount":
      return fc.oneof(
        fc.constantFrom("0", "1", "0.1", "60000.25", "0.00000001", "123456789012345678901234.5"),
        fc.constantFrom("0", "2", "100000", "0.5", "20.125").map(number)
      )
    case "integer":
    case "optionalInteger":
      return fc.constantFrom("0", "1764126000000", "-5", "9007199254740991").map(number)
    default:
      return fc.constantFrom(...kind)
  }
}

/** Values that are wrong for some kinds and maybe right for others. */
const oddValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom("", "abc", "1e3", "-0", "0", "-1", "0.10", "NaN", " 1", "buy", "sell", "limit", "accepted", "maker", "1e900000000", "1e-41", "1".repeat(41)),
  fc.constantFrom("1.0", "1e3", "12345678901234567890", "-0", "0", "-2.5", "0.1", "7", "1e900000000", `0.${"0".repeat(45)}1`).map(number),
  fc.constant(true),
  fc.constant([]),
  fc.constant({ x: number("1") })
)

/** An answer object: each field valid, null, absent or odd; sometimes extra fields. */
const rowOf = (shape: Shape): fc.Arbitrary<Record<string, unknown>> =>
  fc
    .tuple(
      fc.tuple(...shape.map(([, kind]) => fc.oneof({ weight: 6, arbitrary: validValue(kind).map((v) => ({ v })) }, fc.constant("absent" as const), fc.constant({ v: null }), oddValue.map((v) => ({ v }))))),
      fc.dictionary(fc.constantFrom("extra", "note", "__proto__", "seq"), fc.oneof(fc.string({ maxLength: 4 }), fc.constantFrom("3", "0.5").map(number), fc.constant(null)), { maxKeys: 2 })
    )
    .map(([fields, extra]) => {
      const row: Record<string, unknown> = {}
      shape.forEach(([name], index) => {
        const field = fields[index]!
        if (field !== "absent") row[name] = field.v
      })
      for (const [key, value] of Object.entries(extra)) Object.defineProperty(row, key, { value, enumerable: true, writable: true, configurable: true })
      return row
    })

const wellFormedRow = (shape: Shape): fc.Arbitrary<Record<string, unknown>> =>
  fc.tuple(...shape.map(([, kind]) => validValue(kind))).map((values) => Object.fromEntries(shape.map(([name], index) => [name, values[index]])))

/** As the client reads an answer: its text parsed with exact numbers. */
const asAnswered = (value: unknown): unknown => parse(stringify(value))

const cases = [
  { name: "WalletRow list", schema: Schema.Array(WalletRow), shape: Shapes.WalletRow, list: true },
  { name: "FundingRow list", schema: Schema.Array(FundingRow), shape: Shapes.FundingRow, list: true },
  { name: "OpenOrderRow list", schema: Schema.Array(OpenOrderRow), shape: Shapes.OpenOrderRow, list: true },
  { name: "OrderStatus", schema: OrderStatus, shape: Shapes.OrderStatus, list: false },
  { name: "PlacementAnswer", schema: PlacementAnswer, shape: Shapes.PlacementAnswer, list: false },
  { name: "CancelAnswer", schema: CancelAnswer, shape: Shapes.CancelAnswer, list: false },
  { name: "Ticker", schema: Ticker, shape: Shapes.Ticker, list: false }
] as const

describe("plain answer decoders", () => {
  it("refuse what must not be stored, naming the endpoint and the field: amounts beyond the bounds, quantities not above zero, negative balances, empty ids", () => {
    const status = plainDecoderFor(OrderStatus, "/api/spot/order", Shapes.OrderStatus, false)
    const order = { clientOrderId: "c-1", kind: "resting", symbol: "BTCUSDT", side: "buy", type: "limit", baseQty: "0.01", filledBaseQty: "0" }
    expect(Either.isRight(status(asAnswered(order)))).toBe(true)
    const hostile: ReadonlyArray<readonly [string, unknown]> = [
      ["avgPrice", number("1e900000000")],
      ["avgPrice", "1e-900000000"],
      ["filledBaseQty", "-0.5"],
      ["baseQty", "0"],
      ["baseQty", "1".repeat(41)],
      ["clientOrderId", ""],
      ["filledBaseQty", "NaN"]
    ]
    for (const [field, value] of hostile) {
      expect(status(asAnswered({ ...order, [field]: value })), `${field}: ${String(value)}`).toMatchObject({ left: { _tag: "DecodeError", endpoint: "/api/spot/order", field } })
    }
    const wallets = plainDecoderFor(Schema.Array(WalletRow), "/api/wallets/spot", Shapes.WalletRow, true)
    expect(wallets(asAnswered([{ asset: "BTC", balance: number("1"), locked: "0" }, { asset: "USDT", balance: number("-5"), locked: "0" }]))).toMatchObject({
      left: { endpoint: "/api/wallets/spot", field: "[1].balance" }
    })
    const openOrders = plainDecoderFor(Schema.Array(OpenOrderRow), "/api/spot/open-orders", Shapes.OpenOrderRow, true)
    expect(openOrders(asAnswered([{ ...order, kind: "resting", createdAt: number("1"), limitPrice: number("1e900000000") }]))).toMatchObject({
      left: { endpoint: "/api/spot/open-orders", field: "[0].limitPrice" }
    })
    const ticker = plainDecoderFor(Ticker, "/api/spot/ticker", Shapes.Ticker, false)
    expect(ticker(asAnswered({ symbol: "BTCUSDT", price: number("1e900000000") }))).toMatchObject({ left: { field: "price" } })
    expect(ticker(asAnswered({ symbol: "BTCUSDT", price: "60000", bid: "-1" }))).toMatchObject({ left: { field: "bid" } })
  })

  for (const { name, schema, shape, list } of cases) {
    const bySchema = decoderFor(schema as Schema.Schema<unknown, unknown>, ENDPOINT)
    const plain = plainDecoderFor(schema as Schema.Schema<unknown, unknown>, ENDPOINT, shape, list)
    const answer = (row: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<unknown> => (list ? fc.array(row, { maxLength: 3 }) : row)

    it(`${name}: property: gives what the Schema gives, value or DecodeError`, () => {
      fc.assert(
        fc.property(fc.oneof(answer(rowOf(shape)), oddValue), (value) => {
          const json = asAnswered(value)
          expect(plain(json)).toEqual(bySchema(json))
        }),
        { numRuns: 400 }
      )
    })

    it(`${name}: property: a well-formed answer is read by the shape, to the Schema's value`, () => {
      fc.assert(
        fc.property(answer(wellFormedRow(shape)), (value) => {
          const json = asAnswered(value)
          const read = readPlain(shape, list, json)
          expect(read, "the shape handed a well-formed answer to the Schema").toBeDefined()
          const expected = bySchema(json)
          expect(Either.isRight(expected)).toBe(true)
          expect(read).toEqual(Either.getOrThrow(expected))
        }),
        { numRuns: 200 }
      )
    })
  }
})
