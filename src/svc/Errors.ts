/**
 * What can go wrong when svcbot talks to the SVC API, one tagged error per
 * documented code. Callers branch on `_tag` (the client branched on `ok`, `code`
 * and the HTTP status to build it); message text from the server is never read.
 */
import { Data, Effect, Schema } from "effect"
import type { Decimal } from "../domain/Decimal.js"
import { isLosslessNumber } from "../domain/Json.js"
import type { OrderType, Side } from "../domain/OrderTerms.js"
import { logEvent } from "../log/Logger.js"
import { ErrorCode } from "./ErrorCodes.js"

/** Every error carries the endpoint (the Dialect path) it came from. */
const Endpoint = { endpoint: Schema.String }

/** 400: the request carried `Authorization` together with the key headers. */
export class ApiKeyMalformed extends Schema.TaggedError<ApiKeyMalformed>()("ApiKeyMalformed", Endpoint) {
  override get message(): string {
    return `${this.endpoint}: API_KEY_MALFORMED (an Authorization header was sent together with the key headers)`
  }
}

/** 401: the timestamp was outside the receive window even after one correction from `server_time_ms`. */
export class ApiKeyTimestampInvalid extends Schema.TaggedError<ApiKeyTimestampInvalid>()("ApiKeyTimestampInvalid", {
  ...Endpoint,
  serverTimeMs: Schema.NullOr(Schema.Number),
  reason: Schema.NullOr(Schema.String)
}) {
  override get message(): string {
    return `${this.endpoint}: API_KEY_TIMESTAMP_INVALID (${this.reason ?? "timestamp outside the receive window"})`
  }
}

/** 401: a non-GET request was sent again with the same signature. */
export class ApiKeyReplayed extends Schema.TaggedError<ApiKeyReplayed>()("ApiKeyReplayed", Endpoint) {
  override get message(): string {
    return `${this.endpoint}: API_KEY_REPLAYED (the same signature was sent twice)`
  }
}

/** 401: wrong key, secret or signature, or a revoked or expired key. */
export class ApiKeyInvalid extends Schema.TaggedError<ApiKeyInvalid>()("ApiKeyInvalid", Endpoint) {
  override get message(): string {
    return `${this.endpoint}: API_KEY_INVALID (the key is wrong, revoked or expired, or the secret does not match it)`
  }
}

/** 403: the endpoint is outside the key's permissions; `requiredScope` names the missing scope. */
export class ApiKeyNotPermitted extends Schema.TaggedError<ApiKeyNotPermitted>()("ApiKeyNotPermitted", {
  ...Endpoint,
  requiredScope: Schema.NullOr(Schema.String)
}) {
  override get message(): string {
    return `${this.endpoint}: API_KEY_NOT_PERMITTED (missing scope ${this.requiredScope ?? "not named"})`
  }
}

/** 403 on order endpoints: resolved on the website. */
export class AccountFrozen extends Schema.TaggedError<AccountFrozen>()("AccountFrozen", Endpoint) {
  override get message(): string {
    return `${this.endpoint}: ACCOUNT_FROZEN (resolve it on the website)`
  }
}

export class GeoRestrictedIp extends Schema.TaggedError<GeoRestrictedIp>()("GeoRestrictedIp", Endpoint) {
  override get message(): string {
    return `${this.endpoint}: GEO_RESTRICTED_IP (this address may not trade; resolve it on the website)`
  }
}

export class LegalAcceptanceRequired extends Schema.TaggedError<LegalAcceptanceRequired>()("LegalAcceptanceRequired", Endpoint) {
  override get message(): string {
    return `${this.endpoint}: LEGAL_ACCEPTANCE_REQUIRED (accept the terms on the website)`
  }
}

/**
 * 429 RATE_LIMITED: `bucket` was used up; `retryAfter` is in seconds. The budget
 * governor also raises it without sending anything when a placement would exceed
 * the daily order budget, since waiting for the next day is never what a caller wants.
 */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  ...Endpoint,
  bucket: Schema.String,
  retryAfter: Schema.Number
}) {
  override get message(): string {
    return `${this.endpoint}: RATE_LIMITED (bucket ${this.bucket}, retry after ${this.retryAfter} s)`
  }
}

/**
 * A 429 that is not RATE_LIMITED with a bucket: repeated failed authentication
 * blocked the key or this address. All key traffic pauses for `retryAfter` seconds.
 */
export class AuthBlocked extends Schema.TaggedError<AuthBlocked>()("AuthBlocked", {
  ...Endpoint,
  code: Schema.NullOr(Schema.String),
  retryAfter: Schema.Number
}) {
  override get message(): string {
    return `${this.endpoint}: key traffic blocked after failed authentication (retry after ${this.retryAfter} s)`
  }
}

/** An unknown code with a 4xx status: the request must be fixed; never retried. */
export class RequestInvalid extends Schema.TaggedError<RequestInvalid>()("RequestInvalid", {
  ...Endpoint,
  status: Schema.Number,
  code: Schema.NullOr(Schema.String)
}) {
  override get message(): string {
    return `${this.endpoint}: HTTP ${this.status} ${this.code ?? "(no code)"}`
  }
}

/** A 5xx: the server could not answer; GETs and cancels were already retried. */
export class ServerUnavailable extends Schema.TaggedError<ServerUnavailable>()("ServerUnavailable", {
  ...Endpoint,
  status: Schema.Number
}) {
  override get message(): string {
    return `${this.endpoint}: HTTP ${this.status} (server unavailable)`
  }
}

/** No answer: connection refused or reset, or the per-request timeout passed. */
export class NetworkError extends Data.TaggedError("NetworkError")<{
  readonly endpoint: string
  readonly reason: "timeout" | "connection"
  readonly detail: string
}> {
  override get message(): string {
    return `${this.endpoint}: no answer (${this.reason}: ${this.detail})`
  }
}

/** An answer that is not the shape the Dialect describes: `field` is the path of the first problem. */
export class DecodeError extends Data.TaggedError("DecodeError")<{
  readonly endpoint: string
  readonly field: string
  readonly detail: string
}> {
  override get message(): string {
    return `${this.endpoint}: cannot read the answer at ${this.field === "" ? "(top level)" : this.field}: ${this.detail}`
  }
}

/**
 * An answer whose body ran past the client's limit (`maxAnswerBytes`): the client stopped
 * reading it and closed the connection, so nothing of it was parsed.
 */
export class AnswerTooLarge extends Data.TaggedError("AnswerTooLarge")<{
  readonly endpoint: string
  readonly limitBytes: number
}> {
  override get message(): string {
    return `${this.endpoint}: the answer is larger than ${this.limitBytes} bytes (client.maxAnswerBytes); it was not read`
  }
}

/** An answer the client refused as it came (malformed or too large): the request failed, and nothing of the answer was used. */
export type RefusedAnswer = DecodeError | AnswerTooLarge

export const isRefusedAnswer = (error: SvcError): error is RefusedAnswer => error._tag === "DecodeError" || error._tag === "AnswerTooLarge"

/** Logs a failed request as `request.failed` with `fields`, but not a refused answer: the client logged that one, naming the endpoint and the field. */
export const logRequestFailed = (error: SvcError, fields: Readonly<Record<string, unknown>>): Effect.Effect<void> =>
  isRefusedAnswer(error) ? Effect.void : logEvent("request.failed", { ...fields, error: error.message })

/** Key traffic is stopped after API_KEY_INVALID; the next probe is allowed after `retryAfterMs`. */
export class CircuitOpen extends Data.TaggedError("CircuitOpen")<{
  readonly endpoint: string
  readonly retryAfterMs: number
}> {
  override get message(): string {
    return `${this.endpoint}: not sent, key traffic is stopped after API_KEY_INVALID (next probe in ${Math.ceil(this.retryAfterMs / 1000)} s)`
  }
}

export type SvcError =
  | ApiKeyMalformed
  | ApiKeyTimestampInvalid
  | ApiKeyReplayed
  | ApiKeyInvalid
  | ApiKeyNotPermitted
  | AccountFrozen
  | GeoRestrictedIp
  | LegalAcceptanceRequired
  | RateLimited
  | AuthBlocked
  | RequestInvalid
  | ServerUnavailable
  | NetworkError
  | DecodeError
  | AnswerTooLarge
  | CircuitOpen

/** A placement exactly as it was sent, so that reconciliation can find it among open orders and fills. */
export interface PlacementRequest {
  readonly type: OrderType
  readonly symbol: string
  readonly side: Side
  readonly baseQty?: Decimal
  readonly quoteOrderQty?: Decimal
  readonly limitPrice?: Decimal
  readonly stopPrice?: Decimal
  readonly maxSlippageBps?: number
}

/**
 * The placement may have reached the server (timeout, reset, 5xx, unreadable 202),
 * so it may or may not be an order now. Never re-send it blindly: reconcile.
 */
export class PlacementOutcomeUnknown extends Data.TaggedError("PlacementOutcomeUnknown")<{
  readonly endpoint: string
  readonly request: PlacementRequest
  /** Server-clock time the request was signed and sent, for reconciliation's time window. */
  readonly sentAtMs: number
  readonly reason: "timeout" | "connection" | "server-error" | "unreadable-answer"
  readonly detail: string
}> {
  override get message(): string {
    return `${this.endpoint}: ${this.request.type} ${this.request.side} ${this.request.symbol} outcome unknown (${this.reason}: ${this.detail})`
  }
}

/** The fields of a failed answer that the client may branch on. */
export interface FailedAnswer {
  readonly endpoint: string
  readonly status: number
  /** The parsed body (lossless), or undefined when it was not JSON. */
  readonly body: unknown
  /** `Retry-After` in seconds, when the header was present and numeric. */
  readonly retryAfter: number | undefined
}

const field = (body: unknown, name: string): unknown =>
  body !== null && typeof body === "object" && !Array.isArray(body) ? (body as Record<string, unknown>)[name] : undefined

const stringField = (body: unknown, name: string): string | null => {
  const value = field(body, name)
  return typeof value === "string" ? value : null
}

const integerField = (body: unknown, name: string): number | null => {
  const value = field(body, name)
  const text = isLosslessNumber(value) ? value.value : typeof value === "number" ? String(value) : undefined
  if (text === undefined || !/^-?\d+$/.test(text)) return null
  const n = Number(text)
  return Number.isSafeInteger(n) ? n : null
}

/** Without a Retry-After the block length is not shown; one minute keeps a blocked key quiet without stalling for long. */
const DEFAULT_RETRY_AFTER_S = 60

/**
 * The tagged error for a failed answer: by `code` when it is documented, else by
 * HTTP status (unknown 4xx: fix the request; 5xx: try again later). A 429 without
 * RATE_LIMITED and a bucket is the failed-authentication block.
 */
export const fromFailedAnswer = (answer: FailedAnswer): SvcError => {
  const { body, endpoint, status } = answer
  const code = stringField(body, "code")
  if (status === 429) {
    const bucket = stringField(body, "bucket")
    const retryAfter = answer.retryAfter ?? DEFAULT_RETRY_AFTER_S
    return code === ErrorCode.rateLimited && bucket !== null
      ? new RateLimited({ endpoint, bucket, retryAfter })
      : new AuthBlocked({ endpoint, code, retryAfter })
  }
  switch (code) {
    case ErrorCode.apiKeyMalformed:
      return new ApiKeyMalformed({ endpoint })
    case ErrorCode.apiKeyTimestampInvalid:
      return new ApiKeyTimestampInvalid({ endpoint, serverTimeMs: integerField(body, "server_time_ms"), reason: stringField(body, "reason") })
    case ErrorCode.apiKeyReplayed:
      return new ApiKeyReplayed({ endpoint })
    case ErrorCode.apiKeyInvalid:
      return new ApiKeyInvalid({ endpoint })
    case ErrorCode.apiKeyNotPermitted:
      return new ApiKeyNotPermitted({ endpoint, requiredScope: stringField(body, "requiredScope") })
    case ErrorCode.accountFrozen:
      return new AccountFrozen({ endpoint })
    case ErrorCode.geoRestrictedIp:
      return new GeoRestrictedIp({ endpoint })
    case ErrorCode.legalAcceptanceRequired:
      return new LegalAcceptanceRequired({ endpoint })
  }
  return status >= 500 ? new ServerUnavailable({ endpoint, status }) : new RequestInvalid({ endpoint, status, code })
}

/**
 * A cancel answered 409 ORDER_NOT_OPEN: the order had already filled or been rejected when the
 * cancel reached it (or it is a market order, which is never open to a cancel). The outcome
 * is settled; only the order's status says which it was.
 */
export const isOrderNotOpen = (error: SvcError): error is RequestInvalid => error._tag === "RequestInvalid" && error.code === ErrorCode.orderNotOpen

/** Errors that say something about the account or key rather than the one request. */
export const isAccountBlock = (error: SvcError): error is AccountFrozen | GeoRestrictedIp | LegalAcceptanceRequired =>
  error._tag === "AccountFrozen" || error._tag === "GeoRestrictedIp" || error._tag === "LegalAcceptanceRequired"

/**
 * Errors that can pass without anyone changing the configuration: the venue is down or
 * overloaded, the clock is off, the budget or an auth block is in the way, or the key is
 * refused (it may be replaced behind the process, through its secret files). Start-up waits
 * these out instead of exiting into a restart loop.
 */
export const isTransient = (error: SvcError): boolean => {
  switch (error._tag) {
    case "NetworkError":
    case "ServerUnavailable":
    case "RateLimited":
    case "AuthBlocked":
    case "ApiKeyInvalid":
    case "CircuitOpen":
    case "ApiKeyTimestampInvalid":
    case "ApiKeyReplayed":
      return true
    default:
      return false
  }
}

/** The system error code (ECONNREFUSED, ETIMEDOUT…) somewhere down an error's cause chain. */
export const errorCodeOf = (cause: unknown): string | undefined => {
  for (let current = cause, depth = 0; current !== null && typeof current === "object" && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === "string") return code
    current = (current as { cause?: unknown }).cause
  }
  return undefined
}
