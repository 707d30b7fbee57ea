/**
 * JSON that keeps numbers exact. `parse` keeps every number token as a
 * `LosslessNumber` (its exact text); `stringify` writes Decimal values as JSON
 * number literals digit for digit. The text `stringify` returns is the text that
 * is hashed and sent, so it is produced once per request.
 */
import { isLosslessNumber, LosslessNumber, parse as losslessParse, stringify as losslessStringify } from "lossless-json"
import { Decimal, toJsonNumber } from "./Decimal.js"

export { isLosslessNumber, LosslessNumber }

export class InvalidJson extends Error {
  override readonly name = "InvalidJson"
}

/** Parses JSON text; every number becomes a `LosslessNumber` carrying its exact token. */
export const parse = (text: string): unknown => {
  try {
    return losslessParse(text, null, (token) => new LosslessNumber(token))
  } catch (cause) {
    throw new InvalidJson(cause instanceof Error ? cause.message : String(cause))
  }
}

const isDecimal = (value: unknown): value is Decimal => Decimal.isDecimal(value)

const numberStringifiers = [
  { test: isDecimal, stringify: (value: unknown) => toJsonNumber(value as Decimal) },
  {
    test: (value: unknown) => typeof value === "number",
    stringify: (value: unknown) => {
      const n = value as number
      if (!Number.isFinite(n)) throw new InvalidJson(`${n} cannot be written as a JSON number`)
      return toJsonNumber(new Decimal(String(n)))
    }
  }
]

/** Serializes a value; Decimal and LosslessNumber values become exact number literals. */
export const stringify = (value: unknown): string => {
  const text = losslessStringify(value, undefined, undefined, numberStringifiers)
  if (text === undefined) throw new InvalidJson("value cannot be represented as JSON")
  return text
}
