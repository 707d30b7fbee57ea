/** Effect Schemas that read amounts exactly into `Decimal`. */
import { ParseResult, Schema } from "effect"
import { isLosslessNumber, type LosslessNumber } from "lossless-json"
import { Decimal, fromString, InvalidDecimal, toBounds } from "./Decimal.js"

const DecimalInstance = Schema.declare((u: unknown): u is Decimal => Decimal.isDecimal(u), {
  identifier: "Decimal"
})

const decodeText = (text: string, ast: Schema.Schema.AnyNoContext["ast"]) => {
  try {
    return ParseResult.succeed(fromString(text))
  } catch (error) {
    return ParseResult.fail(
      new ParseResult.Type(ast, text, error instanceof InvalidDecimal ? error.problem : "not a decimal")
    )
  }
}

/**
 * A decimal written as a string, e.g. `"0.00001"` (fills, open orders, `locked`, config amounts,
 * strategy state). Read within the bounds of `fromString`, and written rounded into them
 * (`toBounds`), so that a figure worked out at full precision (an average kept in a strategy's
 * state) reads back instead of being refused.
 */
export const DecimalFromString = Schema.transformOrFail(Schema.String, DecimalInstance, {
  strict: true,
  decode: (text, _, ast) => decodeText(text, ast),
  encode: (value) => ParseResult.succeed(toBounds(value).toFixed())
}).annotations({ identifier: "DecimalString", description: "a decimal written as a string, such as \"0.01\"" })

const LosslessNumberSchema = Schema.declare((u: unknown): u is LosslessNumber => isLosslessNumber(u), {
  identifier: "JsonNumber"
})

/** A JSON number token kept exact by `Json.parse`, e.g. the spot wallet's `balance`. */
export const DecimalFromJsonNumber = Schema.transformOrFail(LosslessNumberSchema, DecimalInstance, {
  strict: true,
  decode: (token, _, ast) => decodeText(token.value, ast),
  encode: (value, _, ast) =>
    ParseResult.fail(new ParseResult.Forbidden(ast, value, "encode Decimal with Json.stringify instead"))
}).annotations({ identifier: "DecimalNumber", description: "a JSON number" })

/** A positive decimal string (tick sizes, caps, amounts that must be above zero). */
export const PositiveDecimalFromString = DecimalFromString.pipe(
  Schema.filter((d) => d.gt(0) || "must be greater than 0")
)
