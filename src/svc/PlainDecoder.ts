/**
 * The answers read on every poll (wallets, open orders, order status, placements,
 * cancels, tickers) read by plain code. An Effect Schema pass costs more per answer
 * than signing and sending the request, and these answers are regular: the same
 * few fields every time.
 *
 * A shape lists its Schema's fields (Api.ts) with how each is read. An answer the
 * shape reads completely gives the value the Schema gives: amounts digit for digit
 * as Decimal, optional fields left out when absent or null, fields the Dialect
 * does not name kept as they came (test/unit/client-plain-decoder.test.ts holds
 * each shape to its Schema). Anything else (a missing field, a wrong type, an
 * unreadable or out-of-bounds amount, a quantity not above zero, an empty id) is
 * decoded by the Schema, which names the problem: a shape never refuses an answer,
 * so it cannot refuse one differently.
 */
import { Either, type Schema } from "effect"
import { type Decimal, fromNumberToken, sign } from "../domain/Decimal.js"
import { isLosslessNumber } from "../domain/Json.js"
import { decoderFor } from "./Api.js"
import { OrderType, Side } from "../domain/OrderTerms.js"
import type { DecodeError } from "./Errors.js"

/** How a field is read: as its Schema in Api.ts reads it, or the literals it allows. */
export type FieldKind =
  /** Schema.String */
  | "string"
  /** optionalWith(Schema.String, { nullable: true, exact: true }) */
  | "optionalString"
  /** Id: a non-empty string */
  | "id"
  /** PositiveAmount */
  | "positiveAmount"
  /** optionalWith(PositiveAmount, { nullable: true, exact: true }) */
  | "optionalPositiveAmount"
  /** NonNegativeAmount */
  | "nonNegativeAmount"
  /** optionalWith(NonNegativeAmount, { nullable: true, exact: true }) */
  | "optionalNonNegativeAmount"
  /** JsonInteger */
  | "integer"
  /** optionalWith(JsonInteger, { exact: true }) */
  | "optionalInteger"
  /** Schema.Literal(...) */
  | ReadonlyArray<string>

export type Shape = ReadonlyArray<readonly [name: string, kind: FieldKind]>

/** What a shape cannot read: the Schema decides. */
const UNREAD: unique symbol = Symbol("unread")
/** An optional field absent or null: left out of the value. */
const LEFT_OUT: unique symbol = Symbol("left out")

const WHOLE_NUMBER = /^-?\d+$/

/** An amount whose sign is at least `least`: 1 as PositiveAmount reads it, 0 as NonNegativeAmount does. */
const amountOf = (value: unknown, least: 0 | 1): Decimal | typeof UNREAD => {
  if (typeof value !== "string" && !isLosslessNumber(value)) return UNREAD
  let amount: Decimal
  try {
    amount = fromNumberToken(value)
  } catch {
    return UNREAD
  }
  return sign(amount) >= least ? amount : UNREAD
}

const absent = (row: Readonly<Record<string, unknown>>, name: string, value: unknown): boolean =>
  value === null || (value === undefined && !Object.hasOwn(row, name))

const integerOf = (value: unknown): number | typeof UNREAD => {
  if (!isLosslessNumber(value) || !WHOLE_NUMBER.test(value.value)) return UNREAD
  const n = Number(value.value)
  return Number.isSafeInteger(n) ? n : UNREAD
}

const fieldOf = (kind: FieldKind, row: Readonly<Record<string, unknown>>, name: string): unknown => {
  const value = row[name]
  switch (kind) {
    case "string":
      return typeof value === "string" ? value : UNREAD
    case "optionalString":
      return absent(row, name, value) ? LEFT_OUT : typeof value === "string" ? value : UNREAD
    case "id":
      return typeof value === "string" && value.length > 0 ? value : UNREAD
    case "positiveAmount":
      return amountOf(value, 1)
    case "optionalPositiveAmount":
      return absent(row, name, value) ? LEFT_OUT : amountOf(value, 1)
    case "nonNegativeAmount":
      return amountOf(value, 0)
    case "optionalNonNegativeAmount":
      return absent(row, name, value) ? LEFT_OUT : amountOf(value, 0)
    case "integer":
      return integerOf(value)
    case "optionalInteger":
      return value === undefined && !Object.hasOwn(row, name) ? LEFT_OUT : integerOf(value)
    default:
      return typeof value === "string" && kind.includes(value) ? value : UNREAD
  }
}

/** The value of one answer object, or UNREAD. */
const readObject = (shape: Shape, names: ReadonlySet<string>, json: unknown): Record<string, unknown> | typeof UNREAD => {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return UNREAD
  const row = json as Record<string, unknown>
  const value: Record<string, unknown> = {}
  for (const [name, kind] of shape) {
    const field = fieldOf(kind, row, name)
    if (field === UNREAD) return UNREAD
    if (field !== LEFT_OUT) value[name] = field
  }
  for (const key of Object.keys(row)) {
    if (names.has(key)) continue
    // Assigning `__proto__` would set the prototype rather than keep a field.
    if (key === "__proto__") return UNREAD
    value[key] = row[key]
  }
  return value
}

/**
 * Reads `json` with `shape` (a list of such objects when `list`), or undefined when
 * the shape cannot read it. Exported for the test that holds shapes to their Schemas.
 */
export const readPlain = (shape: Shape, list: boolean, json: unknown): unknown => readWith(shape, new Set(shape.map(([name]) => name)), list, json)

const readWith = (shape: Shape, names: ReadonlySet<string>, list: boolean, json: unknown): unknown => {
  if (!list) {
    const value = readObject(shape, names, json)
    return value === UNREAD ? undefined : value
  }
  if (!Array.isArray(json)) return undefined
  const rows: Array<unknown> = new Array(json.length)
  for (let index = 0; index < json.length; index++) {
    const value = readObject(shape, names, json[index])
    if (value === UNREAD) return undefined
    rows[index] = value
  }
  return rows
}

/**
 * A decoder for one endpoint's answer: `shape` reads what it can (a list of such
 * objects when `list`), `schema` decodes the rest and names any problem.
 */
export const plainDecoderFor = <A, I>(schema: Schema.Schema<A, I>, endpoint: string, shape: Shape, list: boolean) => {
  const names: ReadonlySet<string> = new Set(shape.map(([name]) => name))
  const bySchema = decoderFor(schema, endpoint)
  return (json: unknown): Either.Either<A, DecodeError> => {
    const value = readWith(shape, names, list, json)
    return value === undefined ? bySchema(json) : Either.right(value as A)
  }
}

const SIDES = Side.literals
const ORDER_TYPES = OrderType.literals

/** The shapes of Api.ts's Schemas, field for field. */
export const Shapes = {
  WalletRow: [
    ["asset", "string"],
    ["balance", "nonNegativeAmount"],
    ["locked", "nonNegativeAmount"]
  ],
  FundingRow: [
    ["asset", "string"],
    ["balance", "optionalNonNegativeAmount"],
    ["locked", "optionalNonNegativeAmount"]
  ],
  OpenOrderRow: [
    ["clientOrderId", "id"],
    ["symbol", "string"],
    ["side", SIDES],
    ["type", ORDER_TYPES],
    ["baseQty", "optionalPositiveAmount"],
    ["quoteOrderQty", "optionalPositiveAmount"],
    ["filledBaseQty", "nonNegativeAmount"],
    ["limitPrice", "optionalPositiveAmount"],
    ["stopPrice", "optionalPositiveAmount"],
    ["kind", "string"],
    ["createdAt", "integer"]
  ],
  OrderStatus: [
    ["clientOrderId", "id"],
    ["kind", "string"],
    ["code", "optionalString"],
    ["symbol", "string"],
    ["side", SIDES],
    ["type", ORDER_TYPES],
    ["baseQty", "optionalPositiveAmount"],
    ["quoteOrderQty", "optionalPositiveAmount"],
    ["filledBaseQty", "nonNegativeAmount"],
    ["avgPrice", "optionalPositiveAmount"],
    ["limitPrice", "optionalPositiveAmount"],
    ["stopPrice", "optionalPositiveAmount"],
    ["createdAt", "optionalInteger"],
    ["updatedAt", "optionalInteger"]
  ],
  PlacementAnswer: [
    ["clientOrderId", "id"],
    ["status", ["accepted"]]
  ],
  CancelAnswer: [
    ["clientOrderId", "string"],
    ["kind", "optionalString"]
  ],
  Ticker: [
    ["symbol", "string"],
    ["price", "positiveAmount"],
    ["bid", "optionalPositiveAmount"],
    ["ask", "optionalPositiveAmount"],
    ["time", "optionalInteger"]
  ]
} as const satisfies Record<string, Shape>
