/**
 * svc-venue's request handling as one synchronous function from a request (raw
 * target, headers, body bytes, peer address) to an answer. The HTTP server in
 * Server.ts only moves bytes; every rule of the spec is applied here, in order:
 * size limit, public routes, endpoints closed to keys, authentication, scope,
 * account status, budgets, the endpoint itself.
 */
import { type Decimal, fromString, MAX_SIGNIFICANT_DIGITS, toJsonNumber } from "../domain/Decimal.js"
import { isLosslessNumber, parse as parseJson, InvalidJson } from "../domain/Json.js"
import { defaultDialect, type Dialect, RECV_WINDOW_MAX_MS, type Side } from "../svc/Dialect.js"
import { ErrorCode, Scope } from "../svc/ErrorCodes.js"
import { Header, verifySignature } from "../svc/Signer.js"
import { VENUE_STEPS_PATH } from "../svc/VenueIdentity.js"
import {
  AccountBook,
  accountStatusCode,
  type AccountsFile,
  decodeAccounts,
  defaultWeights,
  toFees,
  toPairSpec,
  type ApiKey,
  type Weights
} from "./Accounts.js"
import { handleAdmin } from "./Admin.js"
import {
  amountText,
  answer,
  failure,
  fillJson,
  isAnswer,
  JSON_HEADERS,
  orderJson,
  plainAnswer,
  VenueCode,
  type VenueAnswer
} from "./Answers.js"
import { Faults } from "./Faults.js"
import { AuthGuard, RateLimits, ReplayCache, type BudgetReport } from "./Limits.js"
import { MatchingEngine, type BalanceRow, type PlaceRequest, type Refusal, type Retention } from "./Matching.js"
import { StepLog } from "./StepLog.js"
import { MINUTE_MS, Tape, type TapeSource } from "./Tape.js"

/** Largest request body accepted; a larger one is answered 413 without being parsed. */
export const MAX_BODY_BYTES = 64 * 1024
/** Price steps kept per pair: about 5.5 hours at one step a second, far more than a paper run lets pass between reads. */
const STEPS_KEPT = 20_000
const STEPS_PAGE_MAX = 5000

/**
 * History svc-venue keeps by default: a day of ended orders and fills, and at most
 * 100,000 of each per account (about 0.2 GB for an account that trades all the time).
 * A bot away for longer than this finds its ended orders answered ORDER_NOT_FOUND.
 */
export const DEFAULT_RETENTION: Retention = { terminalMs: 24 * 60 * 60 * 1000, terminalCount: 100_000 }

/** The retention with the defaults filled in; throws naming a field that is not a whole number of at least 1. */
const retentionOf = (given: Partial<Retention> = {}): Retention => {
  const retention = { ...DEFAULT_RETENTION, ...given }
  if (!Number.isSafeInteger(retention.terminalMs) || retention.terminalMs < 1) {
    throw new Error(`retention: terminalMs (--retain-terminal-ms) must be a whole number of milliseconds, at least 1; got ${retention.terminalMs}`)
  }
  if (!Number.isSafeInteger(retention.terminalCount) || retention.terminalCount < 1) {
    throw new Error(`retention: terminalCount (--retain-terminal-count) must be a whole number, at least 1; got ${retention.terminalCount}`)
  }
  return retention
}

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

export interface VenueOptions {
  readonly accounts: AccountsFile
  /** Delay between acceptance and settlement (default 50 ms). */
  readonly settleMs?: number
  readonly tape?: TapeSource
  /** The venue's clock before any skew fault (default Date.now). */
  readonly clock?: () => number
  readonly dialect?: Dialect
  /** Random bytes for key material created through the admin route. */
  readonly randomBytes?: (size: number) => Uint8Array
  /** Ended orders and fills kept; DEFAULT_RETENTION for what is not given. */
  readonly retention?: Partial<Retention>
}

type Kind = "read" | "placement" | "cancel"

interface KeyRoute {
  readonly scope: Scope
  readonly weight: keyof Weights
  readonly kind: Kind
  readonly run: (venue: Venue, key: ApiKey, query: URLSearchParams, body: unknown, nowMs: number) => VenueAnswer
}

const refusalAnswer = (r: Refusal): VenueAnswer =>
  failure(r.status, r.code, r.msg, { ...(r.field === undefined ? {} : { field: r.field }), ...(r.reason === undefined ? {} : { reason: r.reason }) })

const invalid = (field: string, reason: string, msg: string): VenueAnswer => failure(400, VenueCode.invalidParameter, msg, { field, reason })

const isLoopback = (address: string): boolean => address === "::1" || address.startsWith("127.")

/** IPv4 peers arrive as `::ffff:a.b.c.d` on a dual-stack socket; the whitelist holds plain addresses. */
export const normalizeAddress = (address: string): string => (address.startsWith("::ffff:") ? address.slice(7) : address)

const header = (request: VenueRequest, name: string): string | undefined => {
  const value = request.headers[name]
  return typeof value === "string" ? value : value === undefined ? undefined : value.join(",")
}

// ---- request body fields ---------------------------------------------------------

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

const stringField = (body: Record<string, unknown>, name: string, maxLength = 64): Field<string> => {
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

const asObject = (body: unknown): Record<string, unknown> | VenueAnswer =>
  body !== null && typeof body === "object" && !Array.isArray(body)
    ? (body as Record<string, unknown>)
    : failure(400, VenueCode.invalidJson, "the body must be a JSON object", { reason: "not-an-object" })

/** Reads a placement body into a request for the engine, or the 400 answer naming the bad field. */
const placeRequest = (type: PlaceRequest["type"], raw: unknown): PlaceRequest | VenueAnswer => {
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

// ---- answers -------------------------------------------------------------------

/**
 * The spot wallet answer, written directly: it is the most frequent read, and each row
 * is three known fields (`balance` a JSON number, `locked` a string).
 */
const walletsJson = (rows: ReadonlyArray<BalanceRow>): string => {
  let out = "["
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!
    out += `${i === 0 ? "" : ","}{"asset":${JSON.stringify(row.asset)},"balance":${toJsonNumber(row.free)},"locked":"${toJsonNumber(row.locked)}"}`
  }
  return `${out}]`
}

const encodeCursor = (seq: number): string => Buffer.from(`fills:${seq}`, "utf8").toString("base64url")
const decodeCursor = (cursor: string): number | undefined => {
  const text = Buffer.from(cursor, "base64url").toString("utf8")
  const match = /^fills:(\d{1,15})$/.exec(text)
  return match === null ? undefined : Number(match[1])
}

const DEFAULT_FILLS_LIMIT = 50
/** The most fills one page holds: the largest legitimate answer, which the client's answer size bound is set from. */
export const MAX_FILLS_LIMIT = 500

const intParam = (query: URLSearchParams, name: string, fallback: number, min: number, max: number): number | VenueAnswer => {
  const raw = query.get(name)
  if (raw === null || raw === "") return fallback
  if (!/^\d{1,9}$/.test(raw)) return invalid(name, "not-an-integer", `${name} must be an integer from ${min} to ${max}`)
  const n = Number(raw)
  return n < min || n > max ? invalid(name, "out-of-range", `${name} must be an integer from ${min} to ${max}`) : n
}

const placement =
  (type: PlaceRequest["type"]) =>
  (venue: Venue, key: ApiKey, _query: URLSearchParams, body: unknown, nowMs: number): VenueAnswer => {
    const request = placeRequest(type, body)
    if (isAnswer(request)) return request
    const result = venue.engine.place(key.uid, request, nowMs)
    if (!result.ok) return refusalAnswer(result)
    return { ...answer(202, { clientOrderId: result.clientOrderId, status: "accepted" }), dropResponse: venue.faults.dropAccepted() }
  }

const keyRoutes = (dialect: Dialect): ReadonlyMap<string, KeyRoute> => {
  const p = dialect.paths
  const routes: Array<[string, KeyRoute]> = [
    [
      `GET ${p.walletsSpot}`,
      {
        scope: Scope.walletRead,
        weight: "walletsSpot",
        kind: "read",
        run: (venue, key) => ({ status: 200, headers: JSON_HEADERS(), body: walletsJson(venue.engine.balances(key.uid)) })
      }
    ],
    [
      `GET ${p.walletsFunding}`,
      {
        scope: Scope.walletRead,
        weight: "walletsFunding",
        kind: "read",
        run: (venue, key) =>
          answer(
            200,
            [...(venue.accounts.account(key.uid)?.funding ?? new Map<string, Decimal>())].map(([asset, balance]) => ({ asset, balance: amountText(balance) }))
          )
      }
    ],
    [
      `GET ${p.openOrders}`,
      {
        scope: Scope.spotRead,
        weight: "openOrders",
        kind: "read",
        run: (venue, key, query) => {
          const symbol = query.get("symbol")
          return plainAnswer(200, venue.engine.openOrders(key.uid, symbol === null || symbol === "" ? undefined : symbol).map(orderJson))
        }
      }
    ],
    [
      `GET ${p.fills}`,
      {
        scope: Scope.spotRead,
        weight: "fills",
        kind: "read",
        run: (venue, key, query) => {
          const limit = intParam(query, "limit", DEFAULT_FILLS_LIMIT, 1, MAX_FILLS_LIMIT)
          if (typeof limit !== "number") return limit
          const before = query.get("before")
          const beforeSeq = before === null || before === "" ? undefined : decodeCursor(before)
          if (before !== null && before !== "" && beforeSeq === undefined) return invalid("before", "bad-cursor", "before must be a nextCursor value of an earlier answer")
          const symbol = query.get("symbol")
          const page = venue.engine.fills(key.uid, {
            limit,
            ...(beforeSeq === undefined ? {} : { beforeSeq }),
            ...(symbol === null || symbol === "" ? {} : { symbol })
          })
          const last = page.fills[page.fills.length - 1]
          return plainAnswer(200, { fills: page.fills.map(fillJson), nextCursor: page.hasOlder && last !== undefined ? encodeCursor(last.seq) : null })
        }
      }
    ],
    [
      `GET ${p.orderStatus}`,
      {
        scope: Scope.spotRead,
        weight: "orderStatus",
        kind: "read",
        run: (venue, key, query) => {
          const id = query.get("clientOrderId")
          if (id === null || id === "") return invalid("clientOrderId", "missing", "clientOrderId is required")
          const order = venue.engine.order(key.uid, id)
          return order === undefined ? failure(404, ErrorCode.orderNotFound, "no order with this clientOrderId", { field: "clientOrderId", reason: "not-found" }) : answer(200, orderJson(order))
        }
      }
    ],
    [`POST ${p.limitOrder}`, { scope: Scope.spotTrade, weight: "limitOrder", kind: "placement", run: placement("limit") }],
    [`POST ${p.marketOrder}`, { scope: Scope.spotTrade, weight: "marketOrder", kind: "placement", run: placement("market") }],
    [`POST ${p.stopLimitOrder}`, { scope: Scope.spotTrade, weight: "stopLimitOrder", kind: "placement", run: placement("stop-limit") }],
    [
      `POST ${p.cancelOrder}`,
      {
        scope: Scope.spotTrade,
        weight: "cancelOrder",
        kind: "cancel",
        run: (venue, key, _query, raw, nowMs) => {
          const body = asObject(raw)
          if (isAnswer(body)) return body
          const id = stringField(body, "clientOrderId")
          if (!id.ok) return id.answer
          const result = venue.engine.cancel(key.uid, id.value, venue.cancelStamp(nowMs))
          return result.ok ? answer(200, { ok: true, clientOrderId: result.clientOrderId, kind: result.kind }) : refusalAnswer(result)
        }
      }
    ]
  ]
  return new Map(routes)
}

// ---- the venue -------------------------------------------------------------------

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

export class Venue {
  readonly engine: MatchingEngine
  readonly accounts = new AccountBook()
  readonly faults = new Faults()
  readonly tapes = new Map<string, Tape>()
  /** Every price the matching engine saw, per symbol: what a paper run's parity replay plays back. */
  readonly steps = new Map<string, StepLog>()
  /**
   * The stamps of the last cancel and the last price step. svc-venue's record orders the two
   * by time alone, so that whoever replays it (a paper run's parity replay) needs nothing else:
   * a step comes after every cancel stamped earlier than it, and a cancel stamped the same
   * millisecond as a step came after that step.
   */
  private lastCancelMs = Number.NEGATIVE_INFINITY
  private lastStepMs = Number.NEGATIVE_INFINITY
  readonly limits: RateLimits
  readonly guard: AuthGuard
  readonly replay = new ReplayCache(RECV_WINDOW_MAX_MS)
  readonly dialect: Dialect
  readonly weights: Weights
  readonly randomBytes: (size: number) => Uint8Array
  private readonly configuredLimits: { weightPerMinute: number; ordersPer10s: number; ordersPerDay: number }
  private readonly clock: () => number
  /** Names this process's step sequence: a venue restarted empty numbers its steps from 1 again. */
  private readonly startedAtMs: number
  private readonly routes: ReadonlyMap<string, KeyRoute>
  private readonly publicPaths: ReadonlySet<string>
  /** The Dialect's budget header names in node's lower case. */
  private readonly budgetHeaders: Dialect["budgetHeaders"]

  constructor(options: VenueOptions) {
    const file = decodeAccounts(options.accounts)
    this.clock = options.clock ?? Date.now
    this.dialect = options.dialect ?? defaultDialect
    this.randomBytes = options.randomBytes ?? ((size) => crypto.getRandomValues(new Uint8Array(size)))
    const startMs = this.clock()
    this.startedAtMs = startMs
    const pairs = file.pairs.map(toPairSpec)
    // The start time names this process's ids: a venue restarted empty hands out new ones.
    this.engine = new MatchingEngine({
      pairs,
      fees: toFees(file.fees),
      settleDelayMs: options.settleMs ?? 50,
      idPrefix: `${startMs.toString(36)}_`,
      retention: retentionOf(options.retention)
    })
    const source = options.tape ?? { kind: "manual" }
    for (const entry of file.pairs) {
      const pair = toPairSpec(entry)
      const tape = new Tape(pair.symbol, pair, fromString(entry.price), source, startMs)
      this.tapes.set(pair.symbol, tape)
      this.steps.set(pair.symbol, new StepLog(STEPS_KEPT))
      this.feed(pair.symbol, tape.price, startMs)
    }
    for (const account of file.accounts) {
      const record = this.accounts.createAccount(account.uid)
      this.engine.openAccount(account.uid)
      for (const [asset, amount] of Object.entries(account.balances)) this.engine.setBalance(account.uid, asset, fromString(amount))
      for (const [asset, amount] of Object.entries(account.funding)) record.funding.set(asset, fromString(amount))
      for (const key of account.keys) {
        const added = this.accounts.addKey(account.uid, {
          id: key.id,
          secret: key.secret,
          label: key.label,
          permissions: key.permissions,
          whitelist: key.whitelist,
          createdAtMs: key.createdAt === undefined ? startMs : Date.parse(key.createdAt)
        })
        if (typeof added === "string") throw new Error(`accounts file: ${added}`)
      }
    }
    this.configuredLimits = { weightPerMinute: file.limits.weightPerMinute, ordersPer10s: file.limits.ordersPer10s, ordersPerDay: file.limits.ordersPerDay }
    this.limits = new RateLimits(this.configuredLimits, file.limits.weightWindowMs)
    this.guard = new AuthGuard(file.limits.authFailuresBeforeBlock, file.limits.authBlockSeconds)
    this.weights = { ...defaultWeights, ...file.limits.weights }
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

  /** The venue's clock: real time plus any clock-skew fault. */
  now(): number {
    return this.clock() + this.faults.clockSkewMs
  }

  /** Applies a fault profile, including a limit squeeze. */
  applyFaults(profile: Parameters<Faults["set"]>[0]): void {
    this.faults.set(profile)
    this.limits.limits = this.faults.limits(this.configuredLimits)
  }

  /** Settles due orders; the server also calls this on a timer so settlement never waits for a request. */
  settle(): void {
    this.engine.settleDue(this.now())
  }

  /** One step of every tape, fed to the matching engine. */
  stepTapes(): void {
    const nowMs = this.now()
    this.engine.settleDue(nowMs)
    for (const [symbol, tape] of this.tapes) {
      for (const price of tape.step(nowMs)) this.feed(symbol, price, nowMs)
    }
  }

  /** One price step to the matching engine, logged as the matching saw it (stamped after the last cancel). */
  private feed(symbol: string, price: Decimal, nowMs: number): void {
    const stampMs = Math.max(nowMs, this.lastCancelMs + 1)
    this.lastStepMs = stampMs
    this.steps.get(symbol)?.push(stampMs, price)
    this.engine.onPrice(symbol, price, stampMs)
  }

  /** The stamp of a cancel taking effect now: never before the last price step. */
  cancelStamp(nowMs: number): number {
    this.lastCancelMs = Math.max(nowMs, this.lastStepMs)
    return this.lastCancelMs
  }

  /** Moves one pair's price (manual tape, admin route). */
  setPrice(symbol: string, price: Decimal): boolean {
    const tape = this.tapes.get(symbol)
    if (tape === undefined) return false
    const nowMs = this.now()
    this.engine.settleDue(nowMs)
    tape.set(price, nowMs)
    this.feed(symbol, price, nowMs)
    return true
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
