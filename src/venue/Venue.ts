/**
 * svc-venue's request handling as one synchronous function from a request (raw
 * target, headers, body bytes, peer address) to an answer. The HTTP server in
 * Server.ts only moves bytes; every rule of the spec is applied here, in order:
 * size limit, public routes, endpoints closed to keys, authentication, scope,
 * account status, budgets, the endpoint itself. The state it works on is VenueState's.
 */
import type { Decimal } from "../domain/Decimal.js"
import { parse as parseJson, InvalidJson } from "../domain/Json.js"
import { type Dialect, RECV_WINDOW_MAX_MS } from "../svc/Dialect.js"
import { ErrorCode } from "../svc/ErrorCodes.js"
import { Header, verifySignature } from "../svc/Signer.js"
import { VENUE_STEPS_PATH } from "../svc/VenueIdentity.js"
import { accountStatusCode, type ApiKey } from "./Accounts.js"
import { handleAdmin } from "./Admin.js"
import { amountText, answer, failure, JSON_HEADERS, VenueCode, type VenueAnswer } from "./Answers.js"
import { intParam, invalid } from "./Fields.js"
import { type KeyRoute, keyRoutes } from "./KeyRoutes.js"
import type { BudgetReport } from "./Limits.js"
import { MINUTE_MS } from "./Tape.js"
import { VenueState, type VenueOptions } from "./VenueState.js"

/** Largest request body accepted; a larger one is answered 413 without being parsed. */
export const MAX_BODY_BYTES = 64 * 1024
const STEPS_PAGE_MAX = 5000

export interface VenueRequest {
  readonly method: string
  /** Path and query exactly as on the request line. */
  readonly target: string
  /** Lower-case header names, as node gives them. */
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  /** The raw body; undefined when it was larger than MAX_BODY_BYTES and not kept. */
  readonly body: Uint8Array | undefined
  readonly remoteAddress: string
}

const isLoopback = (address: string): boolean => address === "::1" || address.startsWith("127.")

/** IPv4 peers arrive as `::ffff:a.b.c.d` on a dual-stack socket; the whitelist holds plain addresses. */
export const normalizeAddress = (address: string): string => (address.startsWith("::ffff:") ? address.slice(7) : address)

const header = (request: VenueRequest, name: string): string | undefined => {
  const value = request.headers[name]
  return typeof value === "string" ? value : value === undefined ? undefined : value.join(",")
}

type AuthResult =
  | { readonly ok: true; readonly key: ApiKey; readonly signature: string; readonly timestampMs: number }
  | { readonly ok: false; readonly answer: VenueAnswer; readonly failed: boolean }

const INTEGER = /^\d{1,16}$/

// Defined once here rather than as closures in `authenticate`: it runs for every key request.
const invalidKey = (): AuthResult => ({ ok: false, failed: true, answer: failure(401, ErrorCode.apiKeyInvalid, "the API key, its signature or the request body is not valid") })

const stale = (nowMs: number, reason: string, msg: string): AuthResult => ({
  ok: false,
  failed: false,
  answer: failure(401, ErrorCode.apiKeyTimestampInvalid, msg, { reason, server_time_ms: nowMs })
})

export class Venue extends VenueState {
  private readonly routes: ReadonlyMap<string, KeyRoute>
  private readonly publicPaths: ReadonlySet<string>
  /** The Dialect's budget header names in node's lower case. */
  private readonly budgetHeaders: Dialect["budgetHeaders"]

  constructor(options: VenueOptions) {
    super(options)
    this.routes = keyRoutes(this.dialect)
    const paths = this.dialect.paths
    this.publicPaths = new Set([paths.exchangeInfo, paths.ticker, paths.candles, paths.depth, VENUE_STEPS_PATH])
    const h = this.dialect.budgetHeaders
    this.budgetHeaders = {
      usedWeight1m: h.usedWeight1m.toLowerCase(),
      weightLimit1m: h.weightLimit1m.toLowerCase(),
      ordersUsed10s: h.ordersUsed10s.toLowerCase(),
      ordersLimit10s: h.ordersLimit10s.toLowerCase(),
      ordersUsed1d: h.ordersUsed1d.toLowerCase(),
      ordersLimit1d: h.ordersLimit1d.toLowerCase()
    }
  }

  handle(request: VenueRequest): VenueAnswer {
    const nowMs = this.now()
    this.engine.settleDue(nowMs)
    const at = request.target.indexOf("?")
    const path = at === -1 ? request.target : request.target.slice(0, at)
    if (path.startsWith("/_venue/") || path === "/_venue") {
      if (!isLoopback(normalizeAddress(request.remoteAddress))) return failure(403, VenueCode.adminLoopbackOnly, "admin routes answer loopback addresses only")
      if (request.body === undefined) return failure(413, VenueCode.payloadTooLarge, `the body exceeds ${MAX_BODY_BYTES} bytes`)
      return handleAdmin(this, request.method, path, at === -1 ? "" : request.target.slice(at + 1), request.body, nowMs)
    }
    if (!path.startsWith("/api/") && path !== "/api") return failure(404, VenueCode.notFound, "no such route; every endpoint starts with /api/")
    const fault = this.faults.serverError()
    if (fault !== undefined) return failure(fault, VenueCode.serviceUnavailable, "the service is temporarily unavailable; try again later")
    if (request.body === undefined) return failure(413, VenueCode.payloadTooLarge, `the body exceeds ${MAX_BODY_BYTES} bytes`)
    const query = at === -1 ? "" : request.target.slice(at + 1)
    if (request.method === "GET" && this.publicPaths.has(path)) return this.publicRoute(path, new URLSearchParams(query))
    const route = this.routes.get(`${request.method} ${path}`)
    if (route === undefined) return this.withBudget(this.notPermitted("website"), header(request, "x-svc-apikey"), nowMs)
    return this.keyRequest(request, route, query, nowMs)
  }

  private notPermitted(requiredScope: string): VenueAnswer {
    return failure(403, ErrorCode.apiKeyNotPermitted, "this endpoint is not available to this API key", { requiredScope })
  }

  private keyRequest(request: VenueRequest, route: KeyRoute, query: string, nowMs: number): VenueAnswer {
    const keyId = header(request, "x-svc-apikey")
    if (header(request, "authorization") !== undefined && keyId !== undefined) {
      return this.withBudget(failure(400, ErrorCode.apiKeyMalformed, "send either an Authorization header or the X-SVC key headers, not both"), keyId, nowMs)
    }
    const address = normalizeAddress(request.remoteAddress)
    const subjects = keyId === undefined ? [`ip:${address}`] : [`ip:${address}`, `key:${keyId}`]
    const auth = this.authenticate(request, keyId, address, nowMs)
    // A failed try counts (and extends a running block); a blocked address or key gets 429 even when this try was valid.
    if (!auth.ok && auth.failed) this.guard.fail(subjects, nowMs)
    const retryAfter = this.guard.blockedFor(subjects, nowMs)
    if (retryAfter !== undefined) {
      return this.withBudget(
        answer(429, { code: ErrorCode.authBlocked, msg: "too many failed authentication attempts; key requests are blocked" }, { ...JSON_HEADERS(), "retry-after": String(retryAfter) }),
        keyId,
        nowMs
      )
    }
    if (!auth.ok) return this.withBudget(auth.answer, keyId, nowMs)
    const key = auth.key
    // Remembered only once the request is let through, so a blocked request does not use up its signature.
    if (request.method !== "GET" && !this.replay.remember(auth.signature, auth.timestampMs, nowMs)) {
      return this.withBudget(failure(401, ErrorCode.apiKeyReplayed, "this signature was used before; sign the retry with a new timestamp"), key.id, nowMs)
    }
    if (!key.scopes.has(route.scope)) return this.withBudget(this.notPermitted(route.scope), key.id, nowMs)
    if (route.kind === "placement") {
      const status = this.accounts.account(key.uid)?.status ?? "active"
      if (status !== "active") return this.withBudget(failure(403, accountStatusCode[status], `the account is ${status}; this is resolved on the website`), key.id, nowMs)
    }
    const refused = this.limits.charge(key.id, this.weights[route.weight], route.kind === "placement", route.kind === "cancel", nowMs)
    if (refused !== undefined) {
      return this.withBudget(
        answer(429, { code: ErrorCode.rateLimited, bucket: refused.bucket, msg: `the ${refused.bucket} budget is used up` }, { ...JSON_HEADERS(), "retry-after": String(refused.retryAfterSeconds) }),
        key.id,
        nowMs
      )
    }
    let body: unknown = undefined
    if (request.body !== undefined && request.body.length > 0) {
      try {
        body = parseJson(utf8.decode(request.body))
      } catch (cause) {
        if (route.kind === "placement") this.limits.refundPlacement(key.id, nowMs)
        return this.withBudget(failure(400, VenueCode.invalidJson, cause instanceof InvalidJson ? `the body is not valid JSON: ${cause.message}` : "the body is not valid JSON"), key.id, nowMs)
      }
    }
    const result = route.run(this, key, new URLSearchParams(query), body, nowMs)
    if (route.kind === "placement" && result.status !== 202) this.limits.refundPlacement(key.id, nowMs)
    return this.withBudget(result, key.id, nowMs)
  }

  private authenticate(request: VenueRequest, keyId: string | undefined, address: string, nowMs: number): AuthResult {
    const timestamp = header(request, "x-svc-timestamp")
    const recvWindow = header(request, "x-svc-recv-window")
    const presented = header(request, "x-svc-signature")
    if (keyId === undefined || timestamp === undefined || recvWindow === undefined || presented === undefined) return invalidKey()
    const body = request.body ?? new Uint8Array(0)
    if (body.length > 0 && !isJsonUtf8(header(request, "content-type"))) return invalidKey()
    if (body.length > 0 && !isUtf8(body)) return invalidKey()
    const key = this.accounts.key(keyId)
    if (key === undefined || key.revoked) return invalidKey()
    if (key.expiresAtMs !== undefined && nowMs >= key.expiresAtMs) return invalidKey()
    if (key.whitelist.size > 0 && !key.whitelist.has(address)) return invalidKey()
    const canonical = { method: request.method, target: request.target, timestamp, recvWindow, body }
    if (!verifySignature(key.secret, canonical, presented)) return invalidKey()
    if (!INTEGER.test(timestamp)) return stale(nowMs, "timestamp-malformed", `${Header.timestamp} must be integer milliseconds since the epoch`)
    if (!INTEGER.test(recvWindow) || Number(recvWindow) < 1 || Number(recvWindow) > RECV_WINDOW_MAX_MS) {
      return stale(nowMs, "recv-window-out-of-range", `${Header.recvWindow} must be an integer from 1 to ${RECV_WINDOW_MAX_MS}`)
    }
    const ts = Number(timestamp)
    const window = Number(recvWindow)
    if (nowMs - ts > window) return stale(nowMs, "timestamp-too-old", "the request timestamp is older than the receive window allows")
    if (ts - nowMs > window) return stale(nowMs, "timestamp-in-future", "the request timestamp is ahead of the server clock by more than the receive window")
    return { ok: true, key, signature: presented, timestampMs: ts }
  }

  /** Every answer to a request carrying a key id reports the key's budgets (zeros for an unknown key). */
  private withBudget(result: VenueAnswer, keyId: string | undefined, nowMs: number): VenueAnswer {
    if (keyId === undefined) return result
    const known = keyId !== undefined && this.accounts.key(keyId) !== undefined ? keyId : undefined
    const report: BudgetReport = this.limits.report(known, nowMs)
    const h = this.budgetHeaders
    result.headers[h.usedWeight1m] = String(report.usedWeight)
    result.headers[h.weightLimit1m] = String(report.weightLimit)
    result.headers[h.ordersUsed10s] = String(report.ordersUsed10s)
    result.headers[h.ordersLimit10s] = String(report.ordersLimit10s)
    result.headers[h.ordersUsed1d] = String(report.ordersUsed1d)
    result.headers[h.ordersLimit1d] = String(report.ordersLimit1d)
    return result
  }

  private publicRoute(path: string, query: URLSearchParams): VenueAnswer {
    const p = this.dialect.paths
    const symbol = query.get("symbol")
    if (path === p.exchangeInfo) {
      const pairs = this.engine.pairs().filter((pair) => symbol === null || symbol === "" || pair.symbol === symbol)
      if (pairs.length === 0) return failure(400, "UNKNOWN_SYMBOL", `unknown symbol ${symbol}`, { field: "symbol", reason: "unknown-symbol" })
      return answer(200, {
        pairs: pairs.map((pair) => ({
          symbol: pair.symbol,
          base: pair.base,
          quote: pair.quote,
          status: pair.status,
          tickSize: amountText(pair.tickSize),
          stepSize: amountText(pair.stepSize),
          minBaseQty: amountText(pair.minBaseQty),
          minNotional: amountText(pair.minNotional)
        }))
      })
    }
    if (symbol === null || symbol === "") return invalid("symbol", "missing", "symbol is required")
    const tape = this.tapes.get(symbol)
    if (tape === undefined) return failure(400, "UNKNOWN_SYMBOL", `unknown symbol ${symbol}`, { field: "symbol", reason: "unknown-symbol" })
    if (path === p.ticker) return answer(200, { symbol, price: amountText(tape.price), time: this.now() })
    if (path === VENUE_STEPS_PATH) {
      const after = query.get("after")
      if (after !== null && !/^\d{1,16}$/.test(after)) return invalid("after", "not-an-integer", "after must be a step sequence number")
      const limit = intParam(query, "limit", 1000, 1, STEPS_PAGE_MAX)
      if (typeof limit !== "number") return limit
      const log = this.steps.get(symbol)!
      return answer(200, {
        symbol,
        epoch: this.startedAtMs,
        oldestSeq: log.oldestSeq,
        steps: log.after(after === null ? 0 : Number(after), limit).map((step) => [step.seq, step.timeMs, amountText(step.price)])
      })
    }
    if (path === p.depth) {
      const limit = intParam(query, "limit", 20, 1, 100)
      if (typeof limit !== "number") return limit
      const book = tape.depth(limit)
      const level = (l: { readonly price: Decimal; readonly baseQty: Decimal }) => [amountText(l.price), amountText(l.baseQty)]
      return answer(200, { symbol, bids: book.bids.map(level), asks: book.asks.map(level), time: this.now() })
    }
    const interval = INTERVALS[query.get("interval") ?? "1m"]
    if (interval === undefined) return invalid("interval", "unknown-interval", `interval must be one of ${Object.keys(INTERVALS).join(", ")}`)
    const limit = intParam(query, "limit", 100, 1, 1000)
    if (typeof limit !== "number") return limit
    const before = query.get("before")
    if (before !== null && !/^\d{1,16}$/.test(before)) return invalid("before", "not-an-integer", "before must be an open time in milliseconds")
    const candles = tape.recorder.candles(interval, limit, before === null ? undefined : Number(before))
    return answer(200, {
      symbol,
      interval: query.get("interval") ?? "1m",
      candles: candles.map((c) => ({
        openTime: c.openTimeMs,
        open: amountText(c.open),
        high: amountText(c.high),
        low: amountText(c.low),
        close: amountText(c.close),
        volume: amountText(c.volume)
      }))
    })
  }
}

const INTERVALS: Readonly<Record<string, number>> = { "1m": MINUTE_MS, "5m": 5 * MINUTE_MS, "15m": 15 * MINUTE_MS, "1h": 60 * MINUTE_MS, "4h": 240 * MINUTE_MS, "1d": 1440 * MINUTE_MS }

const isJsonUtf8 = (contentType: string | undefined): boolean => {
  if (contentType === undefined) return false
  const [type = "", ...params] = contentType.split(";").map((part) => part.trim().toLowerCase())
  if (type !== "application/json") return false
  return params.every((param) => !param.startsWith("charset=") || param === "charset=utf-8" || param === 'charset="utf-8"')
}

const utf8 = new TextDecoder("utf-8", { fatal: true })
const isUtf8 = (bytes: Uint8Array): boolean => {
  try {
    utf8.decode(bytes)
    return true
  } catch {
    return false
  }
}
