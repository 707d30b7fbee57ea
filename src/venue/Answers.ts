/**
 * How svc-venue answers: the answer type, JSON error bodies `{ok: false, code, msg, ...}`,
 * the error codes of its own that the spec does not name, and the order and fill rows
 * shared by the API and the admin routes.
 */
import { toJsonNumber, type Decimal } from "../domain/Decimal.js"
import { stringify } from "../domain/Json.js"
import type { VenueFill, OrderView } from "./Orders.js"

/** Error codes of svc-venue that the spec does not name (docs/venue.md lists them). */
export const VenueCode = {
  invalidJson: "INVALID_JSON",
  invalidParameter: "INVALID_PARAMETER",
  payloadTooLarge: "PAYLOAD_TOO_LARGE",
  notFound: "NOT_FOUND",
  serviceUnavailable: "SERVICE_UNAVAILABLE",
  adminLoopbackOnly: "ADMIN_LOOPBACK_ONLY"
} as const

export interface VenueAnswer {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
  /** Close the connection instead of answering (the drop-response fault). */
  readonly dropResponse?: boolean
  /** A catalog event for the server to log. */
  readonly event?: { readonly name: "venue.fault"; readonly fields: Record<string, unknown> }
}

export const JSON_HEADERS = (): Record<string, string> => ({ "content-type": "application/json" })

export const answer = (status: number, value: unknown, headers: Record<string, string> = JSON_HEADERS()): VenueAnswer => ({
  status,
  headers,
  body: stringify(value)
})

/**
 * An answer whose value holds only strings, safe integers, booleans and null (amounts already
 * written as decimal strings, as orders and fills are): the runtime's JSON writer gives the same
 * text as `stringify` for such values, without the exact-number machinery. Fills and open
 * orders are the venue's largest answers.
 */
export const plainAnswer = (status: number, value: unknown): VenueAnswer => ({ status, headers: JSON_HEADERS(), body: JSON.stringify(value) })

export const failure = (status: number, code: string, msg: string, extra: Record<string, unknown> = {}): VenueAnswer =>
  answer(status, { ok: false, code, msg, ...extra })

export const amountText = (value: Decimal): string => toJsonNumber(value)
const nullableAmount = (value: Decimal | null): string | null => (value === null ? null : toJsonNumber(value))

export const isAnswer = (value: unknown): value is VenueAnswer => value !== null && typeof value === "object" && "status" in value && "body" in value

export const orderJson = (o: OrderView) => ({
  clientOrderId: o.clientOrderId,
  kind: o.kind,
  ...(o.code === null ? {} : { code: o.code }),
  symbol: o.symbol,
  side: o.side,
  type: o.type,
  baseQty: nullableAmount(o.baseQty),
  quoteOrderQty: nullableAmount(o.quoteOrderQty),
  limitPrice: nullableAmount(o.limitPrice),
  stopPrice: nullableAmount(o.stopPrice),
  maxSlippageBps: o.maxSlippageBps,
  filledBaseQty: amountText(o.filledBaseQty),
  filledQuoteQty: amountText(o.filledQuoteQty),
  avgPrice: nullableAmount(o.avgPrice),
  createdAt: o.createdAt,
  updatedAt: o.updatedAt
})

export const fillJson = (f: VenueFill) => ({
  fillId: f.fillId,
  clientOrderId: f.clientOrderId,
  symbol: f.symbol,
  side: f.side,
  liquidity: f.liquidity,
  price: amountText(f.price),
  baseQty: amountText(f.baseQty),
  quoteQty: amountText(f.quoteQty),
  fee: amountText(f.fee),
  feeAsset: f.feeAsset,
  time: f.time
})

/** Each fill's row as a fills page writes it, written the first time a page holds it: a fill never changes. */
const fillTexts = new WeakMap<VenueFill, string>()

const fillText = (f: VenueFill): string => {
  let text = fillTexts.get(f)
  if (text === undefined) {
    text = JSON.stringify(fillJson(f))
    fillTexts.set(f, text)
  }
  return text
}

/** A fills page: what `plainAnswer` writes for `{ fills, nextCursor }`, from the fills' rows as first written. */
export const fillsPageAnswer = (fills: ReadonlyArray<VenueFill>, nextCursor: string | null): VenueAnswer => ({
  status: 200,
  headers: JSON_HEADERS(),
  body: `{"fills":[${fills.map(fillText).join(",")}],"nextCursor":${JSON.stringify(nextCursor)}}`
})
