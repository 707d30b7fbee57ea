/**
 * SvcClient: the only way svcbot talks to the exchange. One typed method per
 * endpoint of the spec and the Dialect.
 *
 * Request pipeline: the body is serialized once (Decimal amounts as JSON number
 * literals), those exact bytes are signed and sent (Transport.ts). Answers are read up to
 * `maxAnswerBytes` (a longer one is cut off and fails with AnswerTooLarge) as UTF-8 (a
 * body that is not, or that nests deeper than MAX_ANSWER_DEPTH, fails with DecodeError)
 * and parsed losslessly. The answers read on every poll (wallets, funding, open orders,
 * order status, placements, cancels, tickers) are decoded by the plain readers of
 * PlainDecoder.ts, which leave anything irregular to the Schemas of Api.ts; fills by
 * FillsDecoder.ts; exchange info, candles, depth and venue steps by the Schemas alone.
 * Failed answers become the tagged errors of Errors.ts by `code`, else by HTTP status. An
 * answer refused as malformed or too large fails its request whole and is kept as a
 * refused answer of its endpoint until the endpoint answers readably again (health).
 *
 * What follows a failed attempt (a retry, a clock correction, reconciliation or the
 * failure) is decided by `decideRetry` of Retry.ts; admission by the Budget.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { type Clock, Effect, Either, Layer, Option, Random, Redacted, Schema, Stream } from "effect"
import type { Decimal } from "../domain/Decimal.js"
import { stringify } from "../domain/Json.js"
import { logEvent } from "../log/Logger.js"
import { registerSecret } from "../log/Redaction.js"
import {
  type Accepted,
  type Candle,
  CandlesAnswer,
  CancelAnswer,
  decoderFor,
  type Depth,
  Depth as DepthSchema,
  ExchangeInfo,
  type FillsPage,
  type Fill,
  FundingRow,
  OpenOrderRow,
  OrderStatus,
  type Pair,
  PlacementAnswer,
  Ticker,
  VenueSteps,
  WalletRow
} from "./Api.js"
import { Budget } from "./Budget.js"
import type { BudgetOptions, Demand, Outcome, Priority, Ticket } from "./Governor.js"
import type { Side } from "../domain/OrderTerms.js"
import type { Dialect } from "./Dialect.js"
import {
  AnswerTooLarge,
  DecodeError,
  fromFailedAnswer,
  isAccountBlock,
  isOrderNotOpen,
  isRefusedAnswer,
  type PlacementOutcomeUnknown,
  type PlacementRequest,
  type RefusedAnswer,
  type SvcError
} from "./Errors.js"
import { MAX_ANSWER_DEPTH, nestedDeeperThan, parseAnswer } from "./AnswerJson.js"
import { plainDecoderFor, Shapes } from "./PlainDecoder.js"
import { decodeFillsPage, parseFillsAnswer } from "./FillsDecoder.js"
import { VENUE_IMPLEMENTATION_HEADER, VENUE_STEPS_PATH } from "./VenueIdentity.js"
import { Scope as KeyScope } from "./ErrorCodes.js"
import {
  afterDecision,
  decideRetry,
  defaultRetryOptions,
  type FailedAttempt,
  initialRetryState,
  jitteredDelayMs,
  type RetriedRequest,
  type RetryOptions
} from "./Retry.js"
import { ServerClock } from "./ServerClock.js"
import { keySigner } from "./Signer.js"
import { headerOf, makeTransport, noAnswerReason, type Reply } from "./Transport.js"

const WalletRowList = Schema.Array(WalletRow)
const FundingRowList = Schema.Array(FundingRow)
const OpenOrderRowList = Schema.Array(OpenOrderRow)

/**
 * The default bound on an answer's body. The largest legitimate answer is a fills page:
 * svc-venue serves at most 500 fills a page (MAX_FILLS_LIMIT of src/venue/Venue.ts), and a
 * fill at its largest (ids of 64 characters, amounts of 40 digits at the smallest exponent) is
 * about 650 bytes, so about 325 KB a page (test/unit/client-answer-limit.test.ts works it out).
 * 4 MiB is over twelve times that, room for an exchange that adds fields, and what a peer that
 * streams without end can cost in memory.
 */
export const DEFAULT_MAX_ANSWER_BYTES = 4 * 1024 * 1024

export interface SvcClientOptions {
  /** Scheme, host and port (and any prefix before `/api`), e.g. `https://exchange.example`. */
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string>
  readonly apiSecret: Redacted.Redacted<string>
  readonly dialect: Dialect
  readonly requestTimeoutMs: number
  /** Longest answer body read (default DEFAULT_MAX_ANSWER_BYTES); a longer one fails with AnswerTooLarge. */
  readonly maxAnswerBytes?: number
  readonly budget?: Partial<BudgetOptions>
  readonly retry?: Partial<RetryOptions>
}

export interface LimitOrder {
  readonly symbol: string
  readonly side: Side
  readonly baseQty: Decimal
  readonly limitPrice: Decimal
}

/** A market buy spends `quoteOrderQty`; a market sell sells `baseQty`. */
export type MarketOrder = {
  readonly symbol: string
  readonly maxSlippageBps: number
} & ({ readonly side: "buy"; readonly quoteOrderQty: Decimal } | { readonly side: "sell"; readonly baseQty: Decimal })

export interface StopLimitOrder {
  readonly symbol: string
  readonly side: Side
  readonly baseQty: Decimal
  readonly limitPrice: Decimal
  readonly stopPrice: Decimal
}

export interface FillsQuery {
  readonly symbol?: string
  readonly limit?: number
  readonly before?: string
}

export interface FillsFollow {
  readonly symbol?: string
  readonly limit?: number
  /** Stop after the page holding a fill for which this is true (typically: a fill already stored). */
  readonly stopWhen?: (fill: Fill) => boolean
}

export interface CandlesQuery {
  readonly symbol: string
  readonly interval: string
  readonly limit?: number
  /** Only candles that opened before this time (epoch ms). */
  readonly before?: number
}

interface Call<A> extends RetriedRequest {
  readonly query?: ReadonlyArray<readonly [string, string | number | undefined]>
  readonly priority: Priority
  /** Reads the answer's JSON text (default `parseAnswer`: what `Json.parse` gives). */
  readonly parse?: (text: string) => unknown
  /** Reads a successful answer; `sentAtMs` is the server-clock time the answered attempt was sent. */
  readonly decode: (json: unknown, sentAtMs: number, header: (name: string) => string | undefined) => Either.Either<A, DecodeError>
  /** A failure the caller asked for (a probe's answer): returned without a `request.failed` line. */
  readonly expected?: (error: SvcError) => boolean
}

/** How one attempt ended: its answer decoded, or what the retry decision needs. */
type Attempt<A> = { readonly _tag: "Decoded"; readonly value: A } | FailedAttempt

const retryAfterSeconds = (text: string | undefined): number | undefined => {
  if (text === undefined || !/^\s*\d+\s*$/.test(text)) return undefined
  return Number(text)
}

const queryString = (query: Call<unknown>["query"]): string => {
  if (query === undefined) return ""
  const params = new URLSearchParams()
  for (const [name, value] of query) if (value !== undefined) params.append(name, String(value))
  const text = params.toString()
  return text === "" ? "" : `?${text}`
}

/** What one call puts on the wire, prepared once and sent by every attempt. */
interface Wire {
  /** Path and query exactly as on the request line: what is signed. */
  readonly target: string
  /** The body bytes hashed into the signature and sent. */
  readonly body: Uint8Array | undefined
  readonly demand: Demand
}

const LOST: Outcome = { _tag: "Lost" }

/** Public reads carry no key headers (and, being GETs, no body). */
const UNSIGNED_HEADERS: Readonly<Record<string, string>> = {}

/** Why an answer's text is not read at all (it is refused whole), or undefined when it is read. */
const whyUnreadable = (text: string | undefined): string | undefined => {
  if (text === undefined) return "the answer is not UTF-8 text"
  return nestedDeeperThan(text, MAX_ANSWER_DEPTH) ? `the answer nests arrays and objects deeper than ${MAX_ANSWER_DEPTH} levels` : undefined
}


export class SvcClient extends Effect.Service<SvcClient>()("svcbot/SvcClient", {
  scoped: (options: SvcClientOptions) =>
    Effect.gen(function* () {
      const dispatcher = yield* NodeHttpClient.Dispatcher
      const budget = yield* Budget
      const clock = yield* ServerClock
      const apiKey = Redacted.value(options.apiKey)
      const apiSecret = Redacted.value(options.apiSecret)
      registerSecret(apiSecret)
      const { dialect, requestTimeoutMs } = options
      const maxAnswerBytes = options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES
      /** The last answer each endpoint had refused, until it answers readably again. */
      const refused = new Map<string, RefusedAnswer>()
      const retry: RetryOptions = { ...defaultRetryOptions, ...options.retry }
      const baseUrl = options.baseUrl.replace(/\/+$/, "")
      const transport = yield* makeTransport(dispatcher, { origin: new URL(baseUrl).origin, requestTimeoutMs, maxAnswerBytes })

      const sign = keySigner(apiKey, apiSecret)

      /**
       * One request on the wire: admitted by the budget, signed with a fresh timestamp, sent,
       * booked and decoded. A request the budget admits at once (the common case) takes two
       * steps of its fiber: the admission and the request.
       */
      const attempt = <A>(call: Call<A>, wire: Wire): Effect.Effect<Attempt<A>, SvcError> =>
        Effect.clockWith((local) => {
          if (call.kind === "public") return send(call, wire, undefined, local)
          const ticket = budget.tryAdmit(wire.demand, local.unsafeCurrentTimeMillis())
          if (ticket !== undefined) return send(call, wire, ticket, local)
          return Effect.flatMap(budget.admit(wire.demand), (admitted) => Effect.clockWith((later) => send(call, wire, admitted, later)))
        })

      /**
       * Sends one request, signed when the budget admitted it with a ticket (public reads
       * need neither). Its end is read, booked and decoded as it arrives, and the fiber
       * resumed once with the result.
       */
      const send = <A>(call: Call<A>, wire: Wire, ticket: Ticket | undefined, local: Clock.Clock): Effect.Effect<Attempt<A>> => {
        const sentAtLocalMs = local.unsafeCurrentTimeMillis()
        const sentAtMs = clock.timestampAt(call.method, sentAtLocalMs)
        const headers =
          ticket === undefined
            ? UNSIGNED_HEADERS
            : sign({ method: call.method, target: wire.target, timestamp: sentAtMs, recvWindow: dialect.recvWindowMs, body: wire.body }).headers
        return transport.send({ method: call.method, target: wire.target, headers, body: wire.body }, local, (reply, timedOut) =>
          conclude(call, ticket, reply, timedOut, sentAtMs, sentAtLocalMs, local.unsafeCurrentTimeMillis())
        )
      }

      /** Reads, books and decodes how one request ended; the effect logs what the budget has to say about it. */
      const conclude = <A>(
        call: Call<A>,
        ticket: Ticket | undefined,
        reply: Reply,
        timedOut: boolean,
        sentAtMs: number,
        sentAtLocalMs: number,
        receivedAtLocalMs: number
      ): Effect.Effect<Attempt<A>> => {
        if (reply._tag === "NoAnswer") {
          const lost: Attempt<A> = { _tag: "Lost", ...noAnswerReason(reply, timedOut, requestTimeoutMs), sentAtMs }
          return ticket === undefined ? Effect.succeed(lost) : Effect.as(budget.settleAt(ticket, LOST, receivedAtLocalMs), lost)
        }
        const { status } = reply
        const header = headerOf(reply.headers)
        const unreadableText = reply._tag === "Answer" ? whyUnreadable(reply.text) : undefined
        const text = reply._tag === "Answer" && unreadableText === undefined ? reply.text : undefined
        let json: unknown
        if (text !== undefined && text !== "") {
          try {
            json = (call.parse ?? parseAnswer)(text)
          } catch {
            json = undefined
          }
        }
        const notOk = json !== null && typeof json === "object" && (json as { ok?: unknown }).ok === false
        // A failed status is its error whatever its body; a body cut off counts as none.
        const error =
          status >= 400 || notOk ? fromFailedAnswer({ endpoint: call.path, status, body: json, retryAfter: retryAfterSeconds(header("retry-after")) }) : undefined
        const logged = ticket === undefined ? Effect.void : budget.settleAt(ticket, { _tag: "Answered", status, header, error }, receivedAtLocalMs)
        let unreadable: RefusedAnswer | undefined
        if (error === undefined) {
          const decoded: Either.Either<A, RefusedAnswer> =
            reply._tag === "TooLarge"
              ? Either.left(new AnswerTooLarge({ endpoint: call.path, limitBytes: maxAnswerBytes }))
              : unreadableText !== undefined
                ? Either.left(new DecodeError({ endpoint: call.path, field: "", detail: unreadableText }))
                : call.decode(json, sentAtMs, header)
          if (Either.isRight(decoded)) {
            if (refused.size !== 0) refused.delete(call.path)
            const value: Attempt<A> = { _tag: "Decoded", value: decoded.right }
            return logged === Effect.void ? Effect.succeed(value) : Effect.as(logged, value)
          }
          unreadable = decoded.left
        }
        const answered: Attempt<A> = { _tag: "Answered", status, error, unreadable, sentAtMs, sentAtLocalMs, receivedAtLocalMs }
        return logged === Effect.void ? Effect.succeed(answered) : Effect.as(logged, answered)
      }

      /** Request targets of the paths sent without a query, read once: most reads have none. */
      const plainTargets = new Map<string, string>()
      /** Path and query as on the request line, as the URL parser writes them. */
      const targetOf = (path: string, query: string): string => {
        const known = query === "" ? plainTargets.get(path) : undefined
        if (known !== undefined) return known
        const url = new URL(baseUrl + path + query)
        const target = url.pathname + url.search
        if (query === "") plainTargets.set(path, target)
        return target
      }

      /** Sends a call; the first attempt's success returns straight away, anything else goes through `retryPolicy`. */
      const run = <A>(call: Call<A>): Effect.Effect<A, SvcError | PlacementOutcomeUnknown> =>
        Effect.suspend(() => {
          const wire: Wire = {
            target: targetOf(call.path, queryString(call.query)),
            // Serialized once: these exact bytes are hashed into every signature and sent.
            body: call.body === undefined ? undefined : Buffer.from(stringify(call.body), "utf8"),
            demand: { endpoint: `${call.method} ${call.path}`, priority: call.priority, placement: call.kind === "placement" }
          }
          return Effect.flatMap(attempt(call, wire), (first) => (first._tag === "Decoded" ? Effect.succeed(first.value) : retryPolicy(call, wire, first)))
        })

      /** What follows an attempt that did not end in a decoded answer: a retry, a clock correction, or the failure. */
      const retryPolicy = <A>(call: Call<A>, wire: Wire, first: FailedAttempt): Effect.Effect<A, SvcError | PlacementOutcomeUnknown> =>
        Effect.gen(function* () {
          let tried = initialRetryState
          for (let outcome: Attempt<A> = first; ; outcome = yield* attempt(call, wire)) {
            if (outcome._tag === "Decoded") return outcome.value
            if (outcome._tag === "Answered" && outcome.unreadable !== undefined) refused.set(call.path, outcome.unreadable)
            const decision = decideRetry(call, outcome, tried, yield* clock.offsetMs, retry)
            tried = afterDecision(tried, decision)
            switch (decision._tag) {
              case "CorrectClock":
                yield* clock.learn(decision.serverTimeMs, decision.sentAtLocalMs, decision.receivedAtLocalMs, decision.reason)
                continue
              case "Retry": {
                const delayMs = jitteredDelayMs(decision.ceilingMs, yield* Random.next)
                yield* logEvent("request.retry", { endpoint: call.path, method: call.method, retry: decision.retry, delayMs, error: decision.error._tag })
                yield* Effect.sleep(delayMs)
                continue
              }
              case "Reconcile":
                return yield* Effect.fail(decision.error)
              case "GiveUp": {
                const failure = decision.error
                if (isRefusedAnswer(failure)) {
                  // The one line of a refused answer: callers that catch it do not log it again (isRefusedAnswer).
                  yield* logEvent(
                    "request.failed",
                    failure._tag === "DecodeError"
                      ? { endpoint: call.path, target: wire.target, error: failure._tag, field: failure.field, detail: failure.detail }
                      : { endpoint: call.path, target: wire.target, error: failure._tag, limitBytes: failure.limitBytes, detail: failure.message }
                  )
                } else if (call.expected?.(failure) !== true) yield* logFailure(failure)
                return yield* Effect.fail(failure)
              }
            }
          }
        })

      const logFailure = (error: SvcError): Effect.Effect<void> => {
        switch (error._tag) {
          // Logged by the budget governor as rate.limited, auth.blocked and auth.invalid; CircuitOpen is a local refusal.
          case "RateLimited":
          case "AuthBlocked":
          case "ApiKeyInvalid":
          case "CircuitOpen":
            return Effect.void
          case "ApiKeyNotPermitted":
            return logEvent("auth.not-permitted", { endpoint: error.endpoint, requiredScope: error.requiredScope })
          default:
            return isAccountBlock(error)
              ? logEvent("account.blocked", { endpoint: error.endpoint, code: error._tag })
              : logEvent("request.failed", { endpoint: error.endpoint, error: error._tag, detail: error.message })
        }
      }

      /** Only placements can end in PlacementOutcomeUnknown. */
      const notPlacement = <A>(effect: Effect.Effect<A, SvcError | PlacementOutcomeUnknown>) => effect as Effect.Effect<A, SvcError>

      const read = <A>(path: string, priority: Priority, decode: Call<A>["decode"], query?: Call<A>["query"], parseText?: Call<A>["parse"]): Effect.Effect<A, SvcError> =>
        notPlacement(run({ method: "GET", path, kind: "read", priority, decode, ...(query === undefined ? {} : { query }), ...(parseText === undefined ? {} : { parse: parseText }) }))

      const publicRead = <A>(path: string, decode: Call<A>["decode"], query: NonNullable<Call<A>["query"]>): Effect.Effect<A, SvcError> =>
        notPlacement(run({ method: "GET", path, kind: "public", priority: "marketData", decode, query }))

      const paths = dialect.paths
      const placementDecoders = {
        limit: plainDecoderFor(PlacementAnswer, paths.limitOrder, Shapes.PlacementAnswer, false),
        market: plainDecoderFor(PlacementAnswer, paths.marketOrder, Shapes.PlacementAnswer, false),
        "stop-limit": plainDecoderFor(PlacementAnswer, paths.stopLimitOrder, Shapes.PlacementAnswer, false)
      } as const

      const place = (
        orderType: PlacementRequest["type"],
        path: string,
        body: Readonly<Record<string, unknown>>
      ): Effect.Effect<Accepted, SvcError | PlacementOutcomeUnknown> => {
        const decode = placementDecoders[orderType]
        return run({
          method: "POST",
          path,
          body,
          kind: "placement",
          orderType,
          priority: "place",
          decode: (json, sentAtMs) => Either.map(decode(json), (answer): Accepted => ({ clientOrderId: answer.clientOrderId, status: answer.status, sentAtMs }))
        })
      }

      const decodeSpot = plainDecoderFor(WalletRowList, paths.walletsSpot, Shapes.WalletRow, true)
      const decodeFunding = plainDecoderFor(FundingRowList, paths.walletsFunding, Shapes.FundingRow, true)
      const decodeOpenOrders = plainDecoderFor(OpenOrderRowList, paths.openOrders, Shapes.OpenOrderRow, true)
      const decodeFills = decodeFillsPage(paths.fills)
      const decodeStatus = plainDecoderFor(OrderStatus, paths.orderStatus, Shapes.OrderStatus, false)
      const decodeCancel = plainDecoderFor(CancelAnswer, paths.cancelOrder, Shapes.CancelAnswer, false)
      const decodeExchangeInfo = decoderFor(ExchangeInfo, paths.exchangeInfo)
      const decodeTicker = plainDecoderFor(Ticker, paths.ticker, Shapes.Ticker, false)
      const decodeSteps = decoderFor(VenueSteps, VENUE_STEPS_PATH)
      const decodeCandles = decoderFor(CandlesAnswer, paths.candles)
      const decodeDepth = decoderFor(DepthSchema, paths.depth)

      const fillsPage = (query: FillsQuery = {}): Effect.Effect<FillsPage, SvcError> =>
        read(
          paths.fills,
          "fills",
          decodeFills,
          [
            ["symbol", query.symbol],
            ["limit", query.limit],
            ["before", query.before]
          ],
          parseFillsAnswer
        )

      return {
        /**
         * What implementation answers at the base URL, from the header svc-venue puts on every
         * answer (undefined for any other server). A public read: nothing signed is sent.
         */
        venueImplementation: (): Effect.Effect<string | undefined, SvcError> =>
          publicRead(paths.exchangeInfo, (json, _sentAtMs, header) => Either.map(decodeExchangeInfo(json), () => header(VENUE_IMPLEMENTATION_HEADER)), [["symbol", undefined]]),
        exchangeInfo: (symbol?: string): Effect.Effect<ReadonlyArray<Pair>, SvcError> =>
          Effect.map(publicRead(paths.exchangeInfo, decodeExchangeInfo, [["symbol", symbol]]), (answer) => answer.pairs),
        ticker: (symbol: string): Effect.Effect<Ticker, SvcError> => publicRead(paths.ticker, decodeTicker, [["symbol", symbol]]),
        /** svc-venue only: the price steps its matching saw after `afterSeq`. */
        venueSteps: (symbol: string, afterSeq: number, limit: number): Effect.Effect<VenueSteps, SvcError> =>
          publicRead(VENUE_STEPS_PATH, decodeSteps, [["symbol", symbol], ["after", afterSeq], ["limit", limit]]),
        candles: (query: CandlesQuery): Effect.Effect<ReadonlyArray<Candle>, SvcError> =>
          Effect.map(
            publicRead(paths.candles, decodeCandles, [
              ["symbol", query.symbol],
              ["interval", query.interval],
              ["limit", query.limit],
              ["before", query.before]
            ]),
            (answer) => answer.candles
          ),
        depth: (query: { readonly symbol: string; readonly limit?: number }): Effect.Effect<Depth, SvcError> =>
          publicRead(paths.depth, decodeDepth, [
            ["symbol", query.symbol],
            ["limit", query.limit]
          ]),

        spotWallet: (): Effect.Effect<ReadonlyArray<WalletRow>, SvcError> => read(paths.walletsSpot, "reconcile", decodeSpot),
        fundingWallet: (): Effect.Effect<ReadonlyArray<FundingRow>, SvcError> => read(paths.walletsFunding, "reconcile", decodeFunding),
        openOrders: (symbol?: string): Effect.Effect<ReadonlyArray<OpenOrderRow>, SvcError> =>
          read(paths.openOrders, "reconcile", decodeOpenOrders, [["symbol", symbol]]),
        fillsPage,
        /** Pages newest first, following `nextCursor` via `before` until it is null or `stopWhen` holds for a fill of a page. */
        fills: (follow: FillsFollow = {}): Stream.Stream<FillsPage, SvcError> =>
          Stream.paginateEffect(undefined as string | undefined, (before) =>
            Effect.map(
              fillsPage({
                ...(follow.symbol === undefined ? {} : { symbol: follow.symbol }),
                ...(follow.limit === undefined ? {} : { limit: follow.limit }),
                ...(before === undefined ? {} : { before })
              }),
              (page) => {
                const stop = page.nextCursor === null || (follow.stopWhen !== undefined && page.fills.some(follow.stopWhen))
                return [page, stop ? Option.none() : Option.some(page.nextCursor ?? undefined)] as const
              }
            )
          ),
        orderStatus: (clientOrderId: string): Effect.Effect<OrderStatus, SvcError> =>
          read(paths.orderStatus, "status", decodeStatus, [["clientOrderId", clientOrderId]]),

        placeLimit: (order: LimitOrder) =>
          place("limit", paths.limitOrder, { symbol: order.symbol, side: order.side, baseQty: order.baseQty, limitPrice: order.limitPrice }),
        placeMarket: (order: MarketOrder) =>
          place(
            "market",
            paths.marketOrder,
            order.side === "buy"
              ? { symbol: order.symbol, side: order.side, quoteOrderQty: order.quoteOrderQty, maxSlippageBps: order.maxSlippageBps }
              : { symbol: order.symbol, side: order.side, baseQty: order.baseQty, maxSlippageBps: order.maxSlippageBps }
          ),
        placeStopLimit: (order: StopLimitOrder) =>
          place("stop-limit", paths.stopLimitOrder, {
            symbol: order.symbol,
            side: order.side,
            baseQty: order.baseQty,
            limitPrice: order.limitPrice,
            stopPrice: order.stopPrice
          }),
        /**
         * Never held back by the budget; retried on 5xx and network errors (cancelling is idempotent
         * by clientOrderId). ORDER_NOT_OPEN is returned without a line: a cancel that came too late
         * is the caller's outcome to report, as only the caller knows the order it raced.
         */
        cancel: (clientOrderId: string): Effect.Effect<CancelAnswer, SvcError> =>
          notPlacement(
            run({ method: "POST", path: paths.cancelOrder, body: { clientOrderId }, kind: "cancel", priority: "cancel", decode: decodeCancel, expected: isOrderNotOpen })
          ),

        /**
         * Whether the key may trade, found without trading: a cancel of a clientOrderId no order
         * has answers ORDER_NOT_FOUND to a key with Trade, and API_KEY_NOT_PERMITTED (naming the
         * scope) to a key without. Succeeds with the missing scope, or undefined when it may trade.
         */
        missingTradeScope: (probeOrderId: string): Effect.Effect<string | undefined, SvcError> =>
          notPlacement(
            run({
              method: "POST",
              path: paths.cancelOrder,
              body: { clientOrderId: probeOrderId },
              kind: "cancel",
              priority: "cancel",
              decode: decodeCancel,
              expected: (error) => error._tag === "ApiKeyNotPermitted" || (error._tag === "RequestInvalid" && error.status === 404)
            })
          ).pipe(
            Effect.as(undefined),
            Effect.catchIf(
              (error) => error._tag === "ApiKeyNotPermitted" || (error._tag === "RequestInvalid" && error.status === 404),
              (error) => Effect.succeed(error._tag === "ApiKeyNotPermitted" ? (error.requiredScope ?? KeyScope.spotTrade) : undefined)
            )
          ),
        budgetSnapshot: budget.snapshot,
        /** The engine stops: fills and market data may use the budget's reserve, kept for work that no longer follows. */
        releaseReserve: budget.releaseReserve,
        /** Whether the key works and the venue answers, as the last answers showed (for health). */
        keyHealth: budget.keyHealth,
        /** The endpoint weights learned so far, to hand to the next run (`BudgetOptions.learnedWeights`). */
        learnedWeights: budget.learnedWeights,
        /** The learned offset of the server's clock (server minus local), in ms. */
        clockOffsetMs: clock.offsetMs,
        /**
         * The endpoints whose last answer was refused (malformed or too large), each with why; an
         * endpoint leaves the list at its next readable answer (for health).
         */
        refusedAnswers: Effect.sync((): ReadonlyArray<RefusedAnswer> => [...refused.values()])
      } as const
    })
}) {
  /**
   * The client with its own budget governor and server clock, over a keep-alive
   * undici connection pool that closes with the layer. One per API key. TLS trust
   * is Node's (its CA store, NODE_EXTRA_CA_CERTS) unless another Dispatcher is
   * given, such as an undici Agent with its own `connect` TLS options.
   */
  static layerWith(options: SvcClientOptions, dispatcher: Layer.Layer<NodeHttpClient.Dispatcher> = NodeHttpClient.dispatcherLayer) {
    return SvcClient.Default(options).pipe(
      Layer.provideMerge(Budget.Default(options.budget ?? {})),
      Layer.provideMerge(ServerClock.Default),
      Layer.provide(dispatcher)
    )
  }
}
