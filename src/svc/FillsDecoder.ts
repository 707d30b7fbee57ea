/**
 * The fills answer, read without a Schema pass per row. The ledger sync reads
 * fills by the thousand, and decoding each row through Effect Schema and writing
 * it out again for `raw` cost several times everything else on that path.
 *
 * `parseFillsAnswer` reads the JSON text natively when that is exact, and keeps
 * each fill row's text for `raw` instead of writing it again. `decodeFillsPage`
 * checks each row by plain code against `FillRow` of Api.ts, field by field in
 * its order, and fails with the DecodeError (endpoint and field path) that the
 * Schema would give: a page is taken whole or refused whole, so nothing of a page
 * with one bad row (an empty fillId, a quantity not above zero, an amount beyond
 * the bounds of `fromString`, a time before 1970) reaches the ledger.
 */
import { Either } from "effect"
import { fromString, InvalidDecimal, sign, type Decimal } from "../domain/Decimal.js"
import { isLosslessNumber, parse, stringify } from "../domain/Json.js"
import { exact, parseAnswer } from "./AnswerJson.js"
import type { Fill, FillsPage } from "./Api.js"
import { Side } from "../domain/OrderTerms.js"
import { Liquidity } from "./Dialect.js"
import { DecodeError } from "./Errors.js"

type Row = Record<string, unknown>

const isRecord = (value: unknown): value is Row => typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The rows of `fills` arrays read natively by `parseFillsAnswer`, with each row's
 * JSON text (for `raw`), index for index. Their numbers are still JSON.parse's
 * doubles, each known to hold its token exactly: `decodeFillsPage` reads the
 * tokens as it reads the rows, rather than every row being walked once more.
 */
const nativeRows = new WeakMap<ReadonlyArray<unknown>, ReadonlyArray<string>>()

/**
 * Parses a fills answer to what `Json.parse` gives (see AnswerJson.ts), but for the
 * fill rows of a page read natively, which `decodeFillsPage` reads.
 */
export const parseFillsAnswer = (text: string): unknown => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return parse(text)
  }
  // No page (an error answer): read as every other answer is.
  if (!isRecord(value) || !Array.isArray(value.fills)) return parseAnswer(text)
  const rows: Array<unknown> = value.fills
  const texts = rows.map((row) => JSON.stringify(row))
  // The exactness check of AnswerJson.ts, with the page written out from the rows' texts rather
  // than written out again: JSON.stringify writes a parsed object's keys in this order, this way.
  const keys = Object.keys(value)
  const written = keys.map((key) => `${JSON.stringify(key)}:${key === "fills" ? `[${texts.join(",")}]` : JSON.stringify(value[key])}`)
  if (`{${written.join(",")}}` !== text) return parse(text)
  nativeRows.set(rows, texts)
  for (const key of keys) if (key !== "fills") value[key] = exact(value[key])
  return value
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

/**
 * The amounts of one page, by their text. Amounts repeat within a page (an order's
 * fills at one price, one fee rate, one lot size), and a Decimal is immutable, so
 * fills may share one: each text is read once per page.
 */
type Amounts = Map<string, Decimal>

/** How one page's rows are read: natively (numbers are exact doubles, `raw` is kept) or by `Json.parse`. */
interface Page {
  readonly rows: ReadonlyArray<unknown>
  readonly texts: ReadonlyArray<string> | undefined
  readonly amounts: Amounts
}

/** A JSON number's exact token: a LosslessNumber's, or a native row's double's. */
const tokenOf = (page: Page, value: unknown): string | undefined =>
  isLosslessNumber(value) ? value.value : page.texts !== undefined && typeof value === "number" ? String(value) : undefined

/** An amount as a decimal string or a JSON number, read digit for digit. */
const amount = (page: Page, row: Row, key: string, value: unknown): Decimal | Refusal => {
  const digits = typeof value === "string" ? value : tokenOf(page, value)
  if (digits === undefined) return wrong(row, key, "a decimal string or a JSON number")
  const amounts = page.amounts
  const known = amounts.get(digits)
  if (known !== undefined) return known
  try {
    const read = fromString(digits)
    amounts.set(digits, read)
    return read
  } catch (error) {
    return new Refusal(key, error instanceof InvalidDecimal ? error.problem : "not a decimal")
  }
}

/** A price or quantity, as FillRow's PositiveAmount reads it. */
const positiveAmount = (page: Page, row: Row, key: string, value: unknown): Decimal | Refusal => {
  const read = amount(page, row, key, value)
  return read instanceof Refusal || sign(read) > 0 ? read : new Refusal(key, "must be greater than 0")
}

/** JsonInteger's rule: digits only, so `1.0` and `1e3` are refused although they are whole. */
const WHOLE_NUMBER = /^-?\d+$/

const FIELDS: ReadonlySet<string> = new Set(["fillId", "clientOrderId", "symbol", "side", "liquidity", "price", "baseQty", "quoteQty", "fee", "feeAsset", "time"])

/** Checks the fields in FillRow's order: the first problem is the one the Schema reports. */
const decodeRow = (page: Page, index: number): Fill | Refusal => {
  const row = page.rows[index]
  // A number is no fill, whether the parse gave it natively or as a LosslessNumber object.
  if (!isRecord(row) || isLosslessNumber(row)) return new Refusal("", `Expected a fill object, actual ${shown(row)}`)
  const { fillId, clientOrderId, symbol, side, liquidity, feeAsset, time } = row
  if (typeof fillId !== "string") return wrong(row, "fillId", "string")
  if (fillId.length === 0) return new Refusal("fillId", "must not be empty")
  if (clientOrderId !== null && typeof clientOrderId !== "string") return wrong(row, "clientOrderId", "string or null")
  if (typeof symbol !== "string") return wrong(row, "symbol", "string")
  if (!SIDE.allows(side)) return wrong(row, "side", SIDE.names)
  if (!LIQUIDITY.allows(liquidity)) return wrong(row, "liquidity", LIQUIDITY.names)
  const price = positiveAmount(page, row, "price", row.price)
  if (price instanceof Refusal) return price
  const baseQty = positiveAmount(page, row, "baseQty", row.baseQty)
  if (baseQty instanceof Refusal) return baseQty
  const quoteQty = positiveAmount(page, row, "quoteQty", row.quoteQty)
  if (quoteQty instanceof Refusal) return quoteQty
  const fee = amount(page, row, "fee", row.fee)
  if (fee instanceof Refusal) return fee
  if (typeof feeAsset !== "string") return wrong(row, "feeAsset", "string")
  const token = tokenOf(page, time)
  if (token === undefined) return wrong(row, "time", "JsonNumber")
  const millis = Number(token)
  if (!WHOLE_NUMBER.test(token) || !Number.isSafeInteger(millis)) return new Refusal("time", `expected a whole number, got ${token}`)
  if (millis < 0) return new Refusal("time", "must not be negative")
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
    raw: page.texts?.[index] ?? stringify(row)
  }
  // Fields the Dialect does not name are kept, as the other answers keep them.
  const keys = Object.keys(row)
  if (keys.length > FIELDS.size) {
    for (const key of keys) if (!FIELDS.has(key) && key !== "raw" && key !== "__proto__") fill[key] = page.texts === undefined ? row[key] : exact(row[key])
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
    const page: Page = { rows, texts: nativeRows.get(rows), amounts: new Map() }
    const fills: Array<Fill> = new Array(rows.length)
    for (let index = 0; index < rows.length; index++) {
      const fill = decodeRow(page, index)
      if (fill instanceof Refusal) return refuse(`fills[${index}]${fill.field === "" ? "" : `.${fill.field}`}`, fill.detail)
      fills[index] = fill
    }
    return Either.right({ fills, nextCursor })
  }
