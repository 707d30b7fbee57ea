/**
 * Reading svc-venue's request fields: placement and cancel bodies and integer query
 * parameters, each refused with a 400 that names the field and the reason.
 */
import { type Decimal, fromString, MAX_SIGNIFICANT_DIGITS } from "../domain/Decimal.js"
import { isLosslessNumber } from "../domain/Json.js"
import type { Side } from "../svc/Dialect.js"
import { failure, isAnswer, VenueCode, type VenueAnswer } from "./Answers.js"
import type { PlaceRequest } from "./Orders.js"

export const invalid = (field: string, reason: string, msg: string): VenueAnswer => failure(400, VenueCode.invalidParameter, msg, { field, reason })

/**
 * Most decimals an amount may have. With no exponent and at most MAX_SIGNIFICANT_DIGITS digits
 * in all (leading zeros counted, a stricter reading than `fromString`'s), every amount the
 * venue takes is within the bounds svcbot reads amounts with; longer is refused, never rounded.
 */
const MAX_DECIMALS = 18

type Field<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly answer: VenueAnswer }

const fieldOf = (body: Record<string, unknown>, name: string): unknown => (Object.hasOwn(body, name) ? body[name] : undefined)

const amountField = (body: Record<string, unknown>, name: string): Field<Decimal> => {
  const raw = fieldOf(body, name)
  if (raw === undefined || raw === null) return { ok: false, answer: invalid(name, "missing", `${name} is required`) }
  if (!isLosslessNumber(raw)) return { ok: false, answer: invalid(name, "not-a-json-number", `${name} must be a JSON number such as 0.01`) }
  const text = raw.value
  if (/[eE]/.test(text)) return { ok: false, answer: invalid(name, "exponent", `${name} must be written in plain digits, without an exponent`) }
  if (text.startsWith("-")) return { ok: false, answer: invalid(name, "negative", `${name} must be greater than 0`) }
  const [whole = "", fraction = ""] = text.split(".")
  if (whole.length + fraction.length > MAX_SIGNIFICANT_DIGITS || fraction.length > MAX_DECIMALS) {
    return { ok: false, answer: invalid(name, "too-many-digits", `${name} has more than ${MAX_SIGNIFICANT_DIGITS} digits or ${MAX_DECIMALS} decimals`) }
  }
  const value = fromString(text)
  if (value.lte(0)) return { ok: false, answer: invalid(name, "not-positive", `${name} must be greater than 0`) }
  return { ok: true, value }
}

export const stringField = (body: Record<string, unknown>, name: string, maxLength = 64): Field<string> => {
  const raw = fieldOf(body, name)
  if (raw === undefined || raw === null) return { ok: false, answer: invalid(name, "missing", `${name} is required`) }
  if (typeof raw !== "string") return { ok: false, answer: invalid(name, "not-a-string", `${name} must be a string`) }
  if (raw.length === 0 || raw.length > maxLength) return { ok: false, answer: invalid(name, "bad-length", `${name} must have 1 to ${maxLength} characters`) }
  return { ok: true, value: raw }
}

const sideField = (body: Record<string, unknown>): Field<Side> => {
  const side = stringField(body, "side")
  if (!side.ok) return side
  return side.value === "buy" || side.value === "sell" ? { ok: true, value: side.value } : { ok: false, answer: invalid("side", "not-buy-or-sell", "side must be buy or sell") }
}

const slippageField = (body: Record<string, unknown>): Field<number> => {
  const raw = fieldOf(body, "maxSlippageBps")
  if (raw === undefined || raw === null) return { ok: false, answer: invalid("maxSlippageBps", "missing", "maxSlippageBps is required for a market order") }
  if (!isLosslessNumber(raw) || !/^\d{1,4}$/.test(raw.value)) {
    return { ok: false, answer: invalid("maxSlippageBps", "not-an-integer", "maxSlippageBps must be an integer from 1 to 1000") }
  }
  const bps = Number(raw.value)
  if (bps < 1 || bps > 1000) return { ok: false, answer: invalid("maxSlippageBps", "out-of-range", "maxSlippageBps must be an integer from 1 to 1000") }
  return { ok: true, value: bps }
}

export const asObject = (body: unknown): Record<string, unknown> | VenueAnswer =>
  body !== null && typeof body === "object" && !Array.isArray(body)
    ? (body as Record<string, unknown>)
    : failure(400, VenueCode.invalidJson, "the body must be a JSON object", { reason: "not-an-object" })

/** Reads a placement body into a request for the engine, or the 400 answer naming the bad field. */
export const placeRequest = (type: PlaceRequest["type"], raw: unknown): PlaceRequest | VenueAnswer => {
  const body = asObject(raw)
  if (isAnswer(body)) return body
  const symbol = stringField(body, "symbol", 20)
  if (!symbol.ok) return symbol.answer
  const side = sideField(body)
  if (!side.ok) return side.answer
  if (type === "market") {
    const bps = slippageField(body)
    if (!bps.ok) return bps.answer
    if (side.value === "buy") {
      const quote = amountField(body, "quoteOrderQty")
      if (!quote.ok) return quote.answer
      return { type, symbol: symbol.value, side: "buy", quoteOrderQty: quote.value, maxSlippageBps: bps.value }
    }
    const base = amountField(body, "baseQty")
    if (!base.ok) return base.answer
    return { type, symbol: symbol.value, side: "sell", baseQty: base.value, maxSlippageBps: bps.value }
  }
  const baseQty = amountField(body, "baseQty")
  if (!baseQty.ok) return baseQty.answer
  const limitPrice = amountField(body, "limitPrice")
  if (!limitPrice.ok) return limitPrice.answer
  if (type === "limit") return { type, symbol: symbol.value, side: side.value, baseQty: baseQty.value, limitPrice: limitPrice.value }
  const stopPrice = amountField(body, "stopPrice")
  if (!stopPrice.ok) return stopPrice.answer
  return { type, symbol: symbol.value, side: side.value, baseQty: baseQty.value, limitPrice: limitPrice.value, stopPrice: stopPrice.value }
}

export const intParam = (query: URLSearchParams, name: string, fallback: number, min: number, max: number): number | VenueAnswer => {
  const raw = query.get(name)
  if (raw === null || raw === "") return fallback
  if (!/^\d{1,9}$/.test(raw)) return invalid(name, "not-an-integer", `${name} must be an integer from ${min} to ${max}`)
  const n = Number(raw)
  return n < min || n > max ? invalid(name, "out-of-range", `${name} must be an integer from ${min} to ${max}`) : n
}
