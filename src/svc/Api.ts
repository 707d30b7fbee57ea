/**
 * The answers of the SVC API as Effect Schemas, decoded from `Json.parse` output
 * (numbers arrive as exact LosslessNumber tokens). Every amount becomes a
 * `Decimal`, whether the server wrote it as a string or as a JSON number. Fields
 * the Dialect does not name are kept on the decoded objects; a missing required
 * field is a DecodeError naming the endpoint and the field's path.
 *
 * What would be wrong to store is refused here too, so that an answer is taken whole or
 * not at all: amounts beyond the bounds of `fromString` (significant digits, exponent),
 * prices and quantities that are not above zero, balances below zero, empty ids.
 */
import { Either, ParseResult, Schema } from "effect"
import { type Decimal, fromNumberToken, InvalidDecimal, sign } from "../domain/Decimal.js"
import { DecimalFromString } from "../domain/DecimalSchema.js"
import { isLosslessNumber, LosslessNumber } from "../domain/Json.js"
import { OrderType, Side } from "../domain/OrderTerms.js"
import { Liquidity } from "./Dialect.js"
import { DecodeError } from "./Errors.js"

const AmountSpelling = Schema.declare((u: unknown): u is string | LosslessNumber => typeof u === "string" || isLosslessNumber(u), {
  identifier: "Amount",
  description: "a decimal string or a JSON number"
})

/**
 * An amount: a decimal string or a JSON number, read digit for digit. One step from
 * either spelling rather than a union of the two Schemas, which tries them in turn
 * for every amount of every answer.
 */
export const Amount = Schema.transformOrFail(AmountSpelling, Schema.typeSchema(DecimalFromString), {
  strict: true,
  decode: (spelling, _, ast) => {
    try {
      return ParseResult.succeed(fromNumberToken(spelling))
    } catch (error) {
      return ParseResult.fail(new ParseResult.Type(ast, spelling, error instanceof InvalidDecimal ? error.problem : "not a decimal"))
    }
  },
  encode: (value) => ParseResult.succeed(value.toFixed())
})

/** A price or quantity: above zero. */
const PositiveAmount = Amount.pipe(Schema.filter((value) => sign(value) > 0 || "must be greater than 0"))

/** A balance or a filled quantity: zero or more. */
const NonNegativeAmount = Amount.pipe(Schema.filter((value) => sign(value) >= 0 || "must not be negative"))

/** An id the service hands out (fillId, clientOrderId): a string that says something. */
const Id = Schema.String.pipe(Schema.filter((id) => id.length > 0 || "must not be empty"))

const JsonNumber = Schema.declare((u: unknown): u is LosslessNumber => isLosslessNumber(u), { identifier: "JsonNumber" })

/** A JSON integer such as a time in epoch milliseconds. */
export const JsonInteger = Schema.transformOrFail(JsonNumber, Schema.Int, {
  strict: true,
  decode: (token, _, ast) => {
    const n = Number(token.value)
    return /^-?\d+$/.test(token.value) && Number.isSafeInteger(n)
      ? ParseResult.succeed(n)
      : ParseResult.fail(new ParseResult.Type(ast, token, `expected a whole number, got ${token.value}`))
  },
  encode: (n) => ParseResult.succeed(new LosslessNumber(String(n)))
})

/** When something happened, in epoch milliseconds: never before 1970. */
const EpochMillis = JsonInteger.pipe(Schema.filter((ms) => ms >= 0 || "must not be negative"))

const OptionalPositiveAmount = Schema.optionalWith(PositiveAmount, { nullable: true, exact: true })
const OptionalNonNegativeAmount = Schema.optionalWith(NonNegativeAmount, { nullable: true, exact: true })

export const Pair = Schema.Struct({
  symbol: Schema.String,
  base: Schema.String,
  quote: Schema.String,
  /** `trading` or `halted`; other statuses are passed through. */
  status: Schema.String,
  tickSize: PositiveAmount,
  stepSize: PositiveAmount,
  minBaseQty: NonNegativeAmount,
  minNotional: NonNegativeAmount
})
export type Pair = typeof Pair.Type

export const ExchangeInfo = Schema.Struct({ pairs: Schema.Array(Pair) })

/** A spot wallet row: `balance` (a JSON number) is free to trade, `locked` (a string) is held by open orders. */
export const WalletRow = Schema.Struct({
  asset: Schema.String,
  balance: NonNegativeAmount,
  locked: NonNegativeAmount
})
export type WalletRow = typeof WalletRow.Type

/** A funding wallet row: only `asset` is shown by the spec; amounts are read when present. */
export const FundingRow = Schema.Struct({
  asset: Schema.String,
  balance: OptionalNonNegativeAmount,
  locked: OptionalNonNegativeAmount
})
export type FundingRow = typeof FundingRow.Type

/** An open-order row of `GET /api/spot/open-orders` as the exchange lists it (the strategy's OpenOrder is its own view of its orders). */
export const OpenOrderRow = Schema.Struct({
  clientOrderId: Id,
  symbol: Schema.String,
  side: Side,
  type: OrderType,
  /** Absent for a market buy until it settles: it names a quote amount instead. */
  baseQty: OptionalPositiveAmount,
  quoteOrderQty: OptionalPositiveAmount,
  filledBaseQty: NonNegativeAmount,
  limitPrice: OptionalPositiveAmount,
  stopPrice: OptionalPositiveAmount,
  /** Passed through as sent: a kind svcbot does not know is not an error. */
  kind: Schema.String,
  createdAt: JsonInteger
})
export type OpenOrderRow = typeof OpenOrderRow.Type

/** A fill row, as FillsDecoder.ts reads it field by field (this Schema is the reference its tests hold it to). */
export const FillRow = Schema.Struct({
  fillId: Id,
  clientOrderId: Schema.NullOr(Schema.String),
  symbol: Schema.String,
  side: Side,
  liquidity: Liquidity,
  price: PositiveAmount,
  baseQty: PositiveAmount,
  quoteQty: PositiveAmount,
  /** Either sign: a maker rebate is a negative fee. */
  fee: Amount,
  feeAsset: Schema.String,
  time: EpochMillis
})

/** A fill, with `raw`: the row as exact JSON text (numbers digit for digit), for the ledger. */
export type Fill = typeof FillRow.Type & { readonly raw: string }

/** `{"fills": [...], "nextCursor": ...}`: each row is then read as a FillRow. */
export const FillsAnswer = Schema.Struct({
  fills: Schema.Array(Schema.Unknown),
  nextCursor: Schema.NullOr(Schema.String)
})

export interface FillsPage {
  /** Newest first. */
  readonly fills: ReadonlyArray<Fill>
  /** Pass as `before` for the next older page; null when there is none. */
  readonly nextCursor: string | null
}

export const OrderStatus = Schema.Struct({
  clientOrderId: Id,
  /** pending, resting, fill, rejected, cancelled, or a kind svcbot does not know (passed through). */
  kind: Schema.String,
  /** The reject code when kind is `rejected`. */
  code: Schema.optionalWith(Schema.String, { nullable: true, exact: true }),
  symbol: Schema.String,
  side: Side,
  type: OrderType,
  /** Absent for a market buy until it settles: it names a quote amount instead. */
  baseQty: OptionalPositiveAmount,
  quoteOrderQty: OptionalPositiveAmount,
  filledBaseQty: NonNegativeAmount,
  avgPrice: OptionalPositiveAmount,
  /** The order's terms, as the open-order rows give them: reconciliation matches a lost placement on them. */
  limitPrice: OptionalPositiveAmount,
  stopPrice: OptionalPositiveAmount,
  /** svc-venue (and many exchanges) say when they created the order; the spec does not promise it. */
  createdAt: Schema.optionalWith(JsonInteger, { exact: true }),
  /** svc-venue also says when the order last changed: for a cancelled order, when the cancel took effect. */
  updatedAt: Schema.optionalWith(JsonInteger, { exact: true })
})
export type OrderStatus = typeof OrderStatus.Type

export const PlacementAnswer = Schema.Struct({
  clientOrderId: Id,
  status: Schema.Literal("accepted")
})

/** A placement the server accepted (HTTP 202); it settles afterwards. */
export interface Accepted {
  readonly clientOrderId: string
  readonly status: "accepted"
  /** Server-clock time the accepted request was signed and sent. */
  readonly sentAtMs: number
}

export const CancelAnswer = Schema.Struct({
  clientOrderId: Schema.String,
  /** The order's kind after the cancel, when the server tells it. */
  kind: Schema.optionalWith(Schema.String, { nullable: true, exact: true })
})
export type CancelAnswer = typeof CancelAnswer.Type

export const Ticker = Schema.Struct({
  symbol: Schema.String,
  price: PositiveAmount,
  bid: OptionalPositiveAmount,
  ask: OptionalPositiveAmount,
  time: Schema.optionalWith(JsonInteger, { exact: true })
})
export type Ticker = typeof Ticker.Type

/** svc-venue's price steps (`VENUE_STEPS_PATH`): `[seq, timeMs, price]` each, oldest first. */
export const VenueSteps = Schema.Struct({
  symbol: Schema.String,
  /** The venue process the sequence numbers belong to. */
  epoch: JsonInteger,
  oldestSeq: JsonInteger,
  steps: Schema.Array(Schema.Tuple(JsonInteger, JsonInteger, PositiveAmount))
})
export type VenueSteps = typeof VenueSteps.Type

export const Candle = Schema.Struct({
  /** Epoch milliseconds of the candle's start. */
  openTime: JsonInteger,
  open: PositiveAmount,
  high: PositiveAmount,
  low: PositiveAmount,
  close: PositiveAmount,
  volume: NonNegativeAmount
})
export type Candle = typeof Candle.Type

/** `{symbol, interval, candles: [...]}`, oldest first. */
export const CandlesAnswer = Schema.Struct({ candles: Schema.Array(Candle) })

const Level = Schema.Tuple(PositiveAmount, PositiveAmount)

/** Price levels, best first, each `[price, baseQty]`. */
export const Depth = Schema.Struct({
  symbol: Schema.String,
  bids: Schema.Array(Level),
  asks: Schema.Array(Level)
})
export type Depth = typeof Depth.Type

export type DepthLevel = readonly [price: Decimal, baseQty: Decimal]

const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>((out, key) => (typeof key === "number" ? `${out}[${key}]` : out === "" ? String(key) : `${out}.${String(key)}`), "")

/** Turns a schema failure into a DecodeError naming the endpoint and the first offending field. */
export const decodeErrorOf = (endpoint: string, error: ParseResult.ParseError): DecodeError => {
  const [first] = ParseResult.ArrayFormatter.formatErrorSync(error)
  return new DecodeError({ endpoint, field: first === undefined ? "" : formatPath(first.path), detail: first?.message ?? error.message })
}

/** A decoder for one endpoint's answer; unknown fields are kept. */
export const decoderFor = <A, I>(schema: Schema.Schema<A, I>, endpoint: string) => {
  const decode = Schema.decodeUnknownEither(schema, { onExcessProperty: "preserve" })
  return (json: unknown): Either.Either<A, DecodeError> => Either.mapLeft(decode(json), (error) => decodeErrorOf(endpoint, error))
}
