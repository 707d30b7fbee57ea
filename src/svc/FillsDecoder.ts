/**
 * The fills answer, read without a Schema pass per row. The ledger sync reads
 * fills by the thousand, and decoding each row through Effect Schema and writing
 * it out again for `raw` cost several times everything else on that path.
 *
 * `parseFillsAnswer` reads JSON text to exactly what `Json.parse` gives (every
 * number a `LosslessNumber` holding its token), natively when it can, and keeps
 * each fill row's text for `raw`. `decodeFillsPage` checks each row by plain code against
 * `FillRow` of Api.ts, field by field in its order, and fails with the
 * DecodeError (endpoint and field path) that the Schema would give.
 */
import { Either } from "effect"
import { fromString, InvalidDecimal, type Decimal } from "../domain/Decimal.js"
import { isLosslessNumber, LosslessNumber, parse, stringify } from "../domain/Json.js"
import type { Fill, FillsPage } from "./Api.js"
import { Liquidity, Side } from "./Dialect.js"
import { DecodeError } from "./Errors.js"

type Row = Record<string, unknown>

const isRecord = (value: unknown): value is Row => typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The text of each row of a `fills` array read by `parseFillsAnswer`'s fast path,
 * for `raw`: one entry per page, index for index with the array.
 */
const rowTexts = new WeakMap<ReadonlyArray<unknown>, ReadonlyArray<string>>()

const exact = (value: unknown): unknown => {
  if (typeof value === "number") return new LosslessNumber(String(value))
  if (typeof value === "object" && value !== null) exactNumbersIn(value)
  return value
}

/** Replaces every number inside a `JSON.parse` result with the LosslessNumber `Json.parse` would have made. */
const exactNumbersIn = (container: object): void => {
  if (Array.isArray(container)) {
    for (let index = 0; index < container.length; index++) {
      const value: unknown = container[index]
      if (typeof value === "number" || (typeof value === "object" && value !== null)) container[index] = exact(value)
    }
    return
  }
  const record = container as Row
  for (const key in record) {
    const value = record[key]
    if (typeof value === "number" || (typeof value === "object" && value !== null)) record[key] = exact(value)
  }
}

/**
 * Parses a fills answer to what `Json.parse` gives (every number a LosslessNumber
 * holding its exact token), remembering each fill row's JSON text for `raw`.
 *
 * Native JSON.parse is several times faster than any parser written in
 * JavaScript, but reads numbers as doubles. When JSON.stringify writes the parsed
 * value back as exactly the same text, every number token in it was the shortest
 * form of its double, so the token is that double's String() and nothing was
 * lost. That holds for compact answers such as svc-venue writes. Anything else
 * (whitespace, exponents, trailing zeros, digits a double cannot hold, escapes
 * written differently, duplicate keys) takes `Json.parse`, and `raw` is written
 * from the parsed row.
 */
export const parseFillsAnswer = (text: string): unknown => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return parse(text)
  }
  if (JSON.stringify(value) !== text) return parse(text)
  if (isRecord(value) && Array.isArray(value.fills)) {
    const rows: Array<unknown> = value.fills
    rowTexts.set(rows, rows.map((row) => JSON.stringify(row)))
  }
  return exact(value)
}

const has = (row: Row, key: string): boolean => Object.prototype.hasOwnProperty.call(row, key)

const shown = (value: unknown): string => {
  if (value === undefined) return "undefined"
  if (isLosslessNumber(value)) return value.value
  const text = stringify(value)
  return text.length > 80 ? `${text.slice(0, 80)}...` : text
}

/** Why a field is unreadable: the first problem stops the row, as in the Schema. */
class Refusal {
  constructor(readonly field: string, readonly detail: string) {}
}

const wrong = (row: Row, key: string, expected: string): Refusal =>
  new Refusal(key, has(row, key) ? `Expected ${expected}, actual ${shown(row[key])}` : "is missing")

/** One of a Dialect enum's literals, and how to name them in a DecodeError. */
const literalOf = (literals: ReadonlyArray<string>) => ({
  allows: (value: unknown): boolean => typeof value === "string" && literals.includes(value),
  names: literals.map((literal) => `"${literal}"`).join(" or ")
})

const SIDE = literalOf(Side.literals)
const LIQUIDITY = literalOf(Liquidity.literals)

/** An amount as a decimal string or a JSON number, read digit for digit. */
const amount = (row: Row, key: string, value: unknown): Decimal | Refusal => {
  const digits = typeof value === "string" ? value : isLosslessNumber(value) ? value.value : undefined
  if (digits === undefined) return wrong(row, key, "string")
  try {
    return fromString(digits)
  } catch (error) {
    return new Refusal(key, error instanceof InvalidDecimal ? error.problem : "not a decimal")
  }
}

/** JsonInteger's rule: digits only, so `1.0` and `1e3` are refused although they are whole. */
const WHOLE_NUMBER = /^-?\d+$/

const FIELDS: ReadonlySet<string> = new Set(["fillId", "clientOrderId", "symbol", "side", "liquidity", "price", "baseQty", "quoteQty", "fee", "feeAsset", "time"])

/** Checks the fields in FillRow's order: the first problem is the one the Schema reports. */
const decodeRow = (row: unknown, rawText: string | undefined): Fill | Refusal => {
  if (!isRecord(row)) return new Refusal("", `Expected a fill object, actual ${shown(row)}`)
  const { fillId, clientOrderId, symbol, side, liquidity, feeAsset, time } = row
  if (typeof fillId !== "string") return wrong(row, "fillId", "string")
  if (clientOrderId !== null && typeof clientOrderId !== "string") return wrong(row, "clientOrderId", "string or null")
  if (typeof symbol !== "string") return wrong(row, "symbol", "string")
  if (!SIDE.allows(side)) return wrong(row, "side", SIDE.names)
  if (!LIQUIDITY.allows(liquidity)) return wrong(row, "liquidity", LIQUIDITY.names)
  const price = amount(row, "price", row.price)
  if (price instanceof Refusal) return price
  const baseQty = amount(row, "baseQty", row.baseQty)
  if (baseQty instanceof Refusal) return baseQty
  const quoteQty = amount(row, "quoteQty", row.quoteQty)
  if (quoteQty instanceof Refusal) return quoteQty
  const fee = amount(row, "fee", row.fee)
  if (fee instanceof Refusal) return fee
  if (typeof feeAsset !== "string") return wrong(row, "feeAsset", "string")
  if (!isLosslessNumber(time)) return wrong(row, "time", "JsonNumber")
  const millis = Number(time.value)
  if (!WHOLE_NUMBER.test(time.value) || !Number.isSafeInteger(millis)) return new Refusal("time", `expected a whole number, got ${time.value}`)
  const fill: Record<string, unknown> = {
    fillId,
    clientOrderId,
    symbol,
    side,
    liquidity,
    price,
    baseQty,
    quoteQty,
    fee,
    feeAsset,
    time: millis,
    raw: rawText ?? stringify(row)
  }
  // Fields the Dialect does not name are kept, as the other answers keep them.
  const keys = Object.keys(row)
  if (keys.length > FIELDS.size) {
    for (const key of keys) if (!FIELDS.has(key) && key !== "raw" && key !== "__proto__") fill[key] = row[key]
  }
  return fill as unknown as Fill
}

/** Decodes a fills answer (as `parseFillsAnswer` or `Json.parse` read it), keeping each row's exact JSON text as `raw`. */
export const decodeFillsPage =
  (endpoint: string) =>
  (json: unknown): Either.Either<FillsPage, DecodeError> => {
    const refuse = (field: string, detail: string) => Either.left(new DecodeError({ endpoint, field, detail }))
    if (!isRecord(json)) return refuse("", `Expected { fills, nextCursor }, actual ${shown(json)}`)
    const rows = json.fills
    if (!Array.isArray(rows)) return refuse("fills", has(json, "fills") ? `Expected an array, actual ${shown(rows)}` : "is missing")
    const nextCursor = json.nextCursor
    if (nextCursor !== null && typeof nextCursor !== "string") {
      return refuse("nextCursor", has(json, "nextCursor") ? `Expected string or null, actual ${shown(nextCursor)}` : "is missing")
    }
    const texts = rowTexts.get(rows)
    const fills: Array<Fill> = new Array(rows.length)
    for (let index = 0; index < rows.length; index++) {
      const fill = decodeRow(rows[index], texts?.[index])
      if (fill instanceof Refusal) return refuse(`fills[${index}]${fill.field === "" ? "" : `.${fill.field}`}`, fill.detail)
      fills[index] = fill
    }
    return Either.right({ fills, nextCursor })
  }
