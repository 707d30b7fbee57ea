/**
 * Following another venue: svc-venue as a paper venue on real prices, with no API key
 * (Freqtrade's dry-run, on this API). At each poll of the followed venue's public ticker
 * a pair whose last price changed moves there, one price step that the matching engine
 * sees exactly like a synthetic step; the followed one-minute candles are the pair's
 * candle history, so strategies warm up on real history.
 *
 * Budget: the spec shows a weight budget per key only, and public requests carry no key;
 * svc-venue charges them nothing. An exchange may still count them per address, so the
 * follower reads `X-SVC-USED-WEIGHT-1M` / `X-SVC-WEIGHT-LIMIT-1M` whenever an answer
 * carries them and spreads its polls so that the weight left in the window lasts until
 * the window ends, short of a reserve; a 429 waits its Retry-After. Without the headers
 * it costs one ticker request per pair per poll and one candles request per pair per minute.
 *
 * A followed venue that is down or answers errors leaves the prices where they are: one
 * `venue.follow-lost` line per outage, polls backing off meanwhile, `venue.follow-resumed`
 * when it answers again, and the candles of the minutes missed fetched then.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Context, Data, Duration, Effect, Either, Layer, type Scope } from "effect"
import { compact, sign, type Decimal } from "../domain/Decimal.js"
import { parse } from "../domain/Json.js"
import { logEvent } from "../log/Logger.js"
import { type Candle, CandlesAnswer, decoderFor, ExchangeInfo, Ticker } from "../svc/Api.js"
import { defaultDialect } from "../svc/Dialect.js"
import { type DecodeError, errorCodeOf } from "../svc/Errors.js"
import type { VenueCandle } from "./PricePath.js"
import { type FollowSource, MINUTE_MS } from "./Tape.js"
import type { Venue } from "./Venue.js"

export const DEFAULT_FOLLOW_POLL_MS = 1000
/** Faster is a flood for one price a second; slower is no longer following. */
export const MIN_FOLLOW_POLL_MS = 100
export const MAX_FOLLOW_POLL_MS = 60_000

/** One-minute candles of history fetched per pair at start: the largest page svc-venue serves. */
const FOLLOW_HISTORY_CANDLES = 1000
const REQUEST_TIMEOUT = Duration.seconds(5)
/** Share of the followed venue's weight limit left unused: other programs on this address count too. */
const WEIGHT_RESERVE = 0.1
/** A window is taken to start this much late: the two clocks are never exactly aligned. */
const WINDOW_GUARD_MS = 250
/** Longest pause between polls of a followed venue that is down. */
const MAX_OUTAGE_PAUSE_MS = 10_000
/** Pair names listed in a refusal before the rest are counted. */
const LISTED_PAIRS = 20

/** The follower cannot start: the followed venue is unreachable, or lacks a pair. */
export class FollowRefused extends Data.TaggedError("FollowRefused")<{ readonly message: string }> {}

/** The followed venue did not answer, answered an error, or an answer that cannot be read. */
class FollowedUnavailable extends Data.TaggedError("FollowedUnavailable")<{ readonly endpoint: string; readonly detail: string }> {}

/** The followed venue answered 429. */
class FollowedRateLimited extends Data.TaggedError("FollowedRateLimited")<{
  readonly endpoint: string
  readonly retryAfterSeconds: number | undefined
  readonly bucket: string | undefined
}> {}

type FollowError = FollowedUnavailable | FollowedRateLimited

const wholeNumber = (text: string | undefined): number | undefined => (text !== undefined && /^\s*\d{1,15}\s*$/.test(text) ? Number(text) : undefined)

/**
 * The weight budget the followed venue reports, by fixed window on its clock. The
 * follower sends one request at a time, so the rise of the used weight since its
 * previous answer is what a request cost (more when others share the address, which
 * errs on the safe side); an endpoint not seen yet is taken to cost 1.
 */
class WeightPacing {
  private report: { readonly window: number; readonly used: number; readonly limit: number } | undefined
  private readonly weights = new Map<string, number>()

  constructor(private readonly windowMs: number) {}

  private windowOf(nowMs: number): number {
    return Math.floor((nowMs - WINDOW_GUARD_MS) / this.windowMs)
  }

  msUntilNextWindow(nowMs: number): number {
    return (this.windowOf(nowMs) + 1) * this.windowMs + WINDOW_GUARD_MS - nowMs
  }

  /** The report of the window running now; undefined before the first answer in it. */
  current(nowMs: number): { readonly used: number; readonly limit: number } | undefined {
    return this.report !== undefined && this.report.window === this.windowOf(nowMs) ? this.report : undefined
  }

  /** Reads the budget headers of an answer; an answer without them changes nothing. */
  observe(endpoint: string, usedHeader: string | undefined, limitHeader: string | undefined, nowMs: number): void {
    const used = wholeNumber(usedHeader)
    const limit = wholeNumber(limitHeader)
    if (used === undefined || limit === undefined) return
    const window = this.windowOf(nowMs)
    const previous = this.report
    if (previous !== undefined && previous.window === window && used > previous.used) this.weights.set(endpoint, used - previous.used)
    this.report = { window, used, limit }
  }

  weightOf(endpoint: string): number {
    return this.weights.get(endpoint) ?? 1
  }

  /** Milliseconds to wait before a request of `weight` so that it stays within the budget: 0 when it fits. */
  waitBefore(weight: number, nowMs: number): number {
    const report = this.current(nowMs)
    return report !== undefined && report.used + weight > usable(report.limit) ? this.msUntilNextWindow(nowMs) : 0
  }

  /** The pause before the next poll: `pollMs`, or longer so that the weight left lasts until the window ends. */
  pause(pollMs: number, pollWeight: number, nowMs: number): number {
    const report = this.current(nowMs)
    if (report === undefined) return pollMs
    const polls = Math.floor((usable(report.limit) - report.used) / pollWeight)
    const msLeft = this.msUntilNextWindow(nowMs)
    return Math.max(pollMs, polls <= 0 ? msLeft : Math.ceil(msLeft / polls))
  }

  /** The window running now, to log a slowdown once per window. */
  windowAt(nowMs: number): number {
    return this.windowOf(nowMs)
  }
}

const usable = (limit: number): number => Math.floor(limit * (1 - WEIGHT_RESERVE))

/** The code a failed answer names, for the log; never branched on beyond 429. */
const codeOf = (json: unknown): string | undefined => {
  const code = json !== null && typeof json === "object" ? (json as { code?: unknown }).code : undefined
  return typeof code === "string" ? code : undefined
}

const toCandle = (row: Candle): VenueCandle => ({
  openTimeMs: row.openTime,
  open: compact(row.open),
  high: compact(row.high),
  low: compact(row.low),
  close: compact(row.close),
  volume: compact(row.volume)
})

const listed = (symbols: ReadonlyArray<string>): string =>
  symbols.length <= LISTED_PAIRS ? symbols.join(", ") : `${symbols.slice(0, LISTED_PAIRS).join(", ")} and ${symbols.length - LISTED_PAIRS} more`

/** Checks a follow source before anything is sent: the fix for each problem is named. */
const checkSource = (source: FollowSource): Either.Either<{ readonly baseUrl: string; readonly pollMs: number; readonly weightWindowMs: number }, FollowRefused> => {
  const baseUrl = source.baseUrl.replace(/\/+$/, "")
  let url: URL | undefined
  try {
    url = new URL(baseUrl)
  } catch {
    url = undefined
  }
  if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:") || url.search !== "" || url.hash !== "") {
    return Either.left(new FollowRefused({ message: `cannot follow ${JSON.stringify(source.baseUrl)}: give the venue's base URL, http(s) with no query, e.g. https://exchange.example` }))
  }
  const pollMs = source.pollMs ?? DEFAULT_FOLLOW_POLL_MS
  if (!Number.isInteger(pollMs) || pollMs < MIN_FOLLOW_POLL_MS || pollMs > MAX_FOLLOW_POLL_MS) {
    return Either.left(new FollowRefused({ message: `the follow poll interval must be an integer from ${MIN_FOLLOW_POLL_MS} to ${MAX_FOLLOW_POLL_MS} milliseconds, got ${pollMs}` }))
  }
  const weightWindowMs = source.weightWindowMs ?? MINUTE_MS
  if (!Number.isInteger(weightWindowMs) || weightWindowMs <= 0) {
    return Either.left(new FollowRefused({ message: `the followed venue's weight window must be a positive integer of milliseconds, got ${weightWindowMs}` }))
  }
  return Either.right({ baseUrl, pollMs, weightWindowMs })
}

/**
 * Starts following: checks that the followed venue lists every pair of `venue`, moves
 * each pair to its last price and loads its candle history, then polls in the scope.
 * Fails, with the venue left as it was, when the followed venue cannot be read or
 * lacks a pair.
 */
export const followVenue = (venue: Venue, source: FollowSource): Effect.Effect<void, FollowRefused, Scope.Scope> =>
  Effect.gen(function* () {
    const { baseUrl, pollMs, weightWindowMs } = yield* checkSource(source)
    const context = yield* Layer.build(NodeHttpClient.layerUndici)
    const http = Context.get(context, HttpClient.HttpClient).pipe(HttpClient.withTracerDisabledWhen(() => true))
    const paths = defaultDialect.paths
    const headers = defaultDialect.budgetHeaders
    const pacing = new WeightPacing(weightWindowMs)
    const symbols = [...venue.tapes.keys()]
    let slowedWindow: number | undefined

    const noteSlowed = (fields: Record<string, unknown>, nowMs: number): Effect.Effect<void> => {
      const window = pacing.windowAt(nowMs)
      if (window === slowedWindow) return Effect.void
      slowedWindow = window
      return logEvent("venue.follow-slowed", { followed: baseUrl, ...fields })
    }

    /** One public GET, within the budget; the answer decoded, or why there is none. */
    const get = <A>(path: string, query: Record<string, string>, decode: (json: unknown) => Either.Either<A, DecodeError>): Effect.Effect<A, FollowError> =>
      Effect.gen(function* () {
        const endpoint = `GET ${path}`
        const nowMs = venue.now()
        const waitMs = pacing.waitBefore(pacing.weightOf(endpoint), nowMs)
        if (waitMs > 0) {
          const report = pacing.current(nowMs)
          yield* noteSlowed({ reason: "weight-near-limit", usedWeight1m: report?.used, weightLimit1m: report?.limit, waitMs }, nowMs)
          yield* Effect.sleep(Duration.millis(waitMs))
        }
        const search = new URLSearchParams(query).toString()
        const answer = yield* http.get(`${baseUrl}${path}${search === "" ? "" : `?${search}`}`).pipe(
          Effect.flatMap((response) => Effect.map(response.text, (text) => ({ status: response.status, headers: response.headers, text }))),
          // A kept-alive connection that the followed venue closed as idle just as this request
          // went out on it fails at once; a GET may go again, and one failure is no outage.
          Effect.retry({ times: 1 }),
          Effect.mapError((error) => new FollowedUnavailable({ endpoint: path, detail: errorCodeOf(error.cause) ?? error.message })),
          Effect.timeoutFail({ duration: REQUEST_TIMEOUT, onTimeout: () => new FollowedUnavailable({ endpoint: path, detail: `no answer within ${Duration.format(REQUEST_TIMEOUT)}` }) })
        )
        pacing.observe(endpoint, answer.headers[headers.usedWeight1m.toLowerCase()], answer.headers[headers.weightLimit1m.toLowerCase()], venue.now())
        let json: unknown
        try {
          json = parse(answer.text)
        } catch {
          json = undefined
        }
        if (answer.status === 429) {
          const bucket = json !== null && typeof json === "object" ? (json as { bucket?: unknown }).bucket : undefined
          return yield* new FollowedRateLimited({ endpoint: path, retryAfterSeconds: wholeNumber(answer.headers["retry-after"]), bucket: typeof bucket === "string" ? bucket : undefined })
        }
        if (answer.status >= 400) return yield* new FollowedUnavailable({ endpoint: path, detail: `HTTP ${answer.status}${codeOf(json) === undefined ? "" : ` ${codeOf(json)}`}` })
        if (json === undefined) return yield* new FollowedUnavailable({ endpoint: path, detail: `HTTP ${answer.status}: the answer is not JSON` })
        const decoded = decode(json)
        if (Either.isLeft(decoded)) return yield* new FollowedUnavailable({ endpoint: path, detail: decoded.left.message })
        return decoded.right
      })

    const decodeExchangeInfo = decoderFor(ExchangeInfo, paths.exchangeInfo)
    const decodeTicker = decoderFor(Ticker, paths.ticker)
    const decodeCandles = decoderFor(CandlesAnswer, paths.candles)

    /** The followed venue's last price of a pair; a price that is not positive is no price. */
    const lastPrice = (symbol: string): Effect.Effect<Decimal, FollowError> =>
      Effect.filterOrFail(
        Effect.map(get(paths.ticker, { symbol }, decodeTicker), (ticker) => ticker.price),
        (price) => sign(price) > 0,
        (price) => new FollowedUnavailable({ endpoint: paths.ticker, detail: `${symbol}: the last price ${price.toFixed()} is not positive` })
      )

    const fetchCandles = (symbol: string, limit: number): Effect.Effect<ReadonlyArray<Candle>, FollowError> =>
      Effect.map(get(paths.candles, { symbol, interval: "1m", limit: String(limit) }, decodeCandles), (answer) => answer.candles)

    /** The followed venue's candles in place of the ones recorded here; the one still open stays open. */
    const adopt = (symbol: string, rows: ReadonlyArray<Candle>): void => {
      const recorder = venue.tapes.get(symbol)?.recorder
      const nowMs = venue.now()
      for (const row of rows) recorder?.adopt(toCandle(row), row.openTime + MINUTE_MS > nowMs)
    }

    const refuse = (error: FollowError): FollowRefused =>
      new FollowRefused({
        message:
          error._tag === "FollowedRateLimited"
            ? `cannot follow ${baseUrl}: it answered 429 to GET ${error.endpoint}; start again after ${error.retryAfterSeconds ?? 60} s`
            : `cannot follow ${baseUrl}: GET ${error.endpoint}: ${error.detail}; check the followed venue's URL (--follow, venue.follow.baseUrl) and that it answers`
      })

    const listedPairs = yield* Effect.mapError(get(paths.exchangeInfo, {}, decodeExchangeInfo), refuse)
    const offered = listedPairs.pairs.map((pair) => pair.symbol)
    const missing = symbols.filter((symbol) => !offered.includes(symbol))
    if (missing.length > 0) {
      const them = missing.length === 1 ? "it" : "them"
      return yield* new FollowRefused({
        message:
          `cannot follow ${baseUrl}: ${missing.join(", ")} ${missing.length === 1 ? "is not a pair" : "are not pairs"} there (it lists ${listed(offered)}); ` +
          `remove ${them} from the venue's pairs (the pairs of its accounts file, --accounts), or follow a venue that lists ${them}`
      })
    }
    const starts = yield* Effect.forEach(symbols, (symbol) =>
      Effect.mapError(Effect.zip(lastPrice(symbol), fetchCandles(symbol, FOLLOW_HISTORY_CANDLES)), refuse)
    )
    const candlesPolledAt = new Map<string, number>()
    symbols.forEach((symbol, index) => {
      const [price, history] = starts[index]!
      venue.setPrice(symbol, price)
      adopt(symbol, history)
      candlesPolledAt.set(symbol, venue.now())
    })

    /**
     * One poll: each pair's last price, a step when it moved; a pair's candles once its
     * minute has passed, as many as were missed. Stops at the first failure.
     */
    const poll = Effect.forEach(
      symbols,
      (symbol) =>
        Effect.gen(function* () {
          const price = yield* lastPrice(symbol)
          if (!price.eq(venue.tapes.get(symbol)?.price ?? price)) venue.setPrice(symbol, price)
          const polledAt = candlesPolledAt.get(symbol) ?? 0
          const nowMs = venue.now()
          const minutesMissed = Math.floor(nowMs / MINUTE_MS) - Math.floor(polledAt / MINUTE_MS)
          if (minutesMissed > 0) {
            // The candle closed since the last poll and the one now open, at least.
            adopt(symbol, yield* fetchCandles(symbol, Math.min(FOLLOW_HISTORY_CANDLES, minutesMissed + 1)))
            candlesPolledAt.set(symbol, nowMs)
          }
        }),
      { discard: true }
    )

    const pollWeight = () => symbols.length * pacing.weightOf(`GET ${paths.ticker}`)

    const following = Effect.gen(function* () {
      let lostAtMs: number | undefined
      let failures = 0
      for (;;) {
        const outcome = yield* Effect.either(poll)
        const nowMs = venue.now()
        let pauseMs = pollMs
        if (Either.isRight(outcome)) {
          if (lostAtMs !== undefined) yield* logEvent("venue.follow-resumed", { followed: baseUrl, lostForMs: nowMs - lostAtMs })
          lostAtMs = undefined
          failures = 0
          pauseMs = pacing.pause(pollMs, pollWeight(), nowMs)
          if (pauseMs > pollMs) {
            const report = pacing.current(nowMs)
            yield* noteSlowed({ reason: "weight-near-limit", usedWeight1m: report?.used, weightLimit1m: report?.limit, waitMs: pauseMs }, nowMs)
          }
        } else if (outcome.left._tag === "FollowedRateLimited") {
          const error = outcome.left
          pauseMs = error.retryAfterSeconds === undefined ? pacing.msUntilNextWindow(nowMs) : error.retryAfterSeconds * 1000
          yield* logEvent("venue.follow-slowed", { followed: baseUrl, reason: "rate-limited", endpoint: error.endpoint, bucket: error.bucket, retryAfterSeconds: error.retryAfterSeconds, waitMs: pauseMs })
        } else {
          if (lostAtMs === undefined) {
            lostAtMs = nowMs
            yield* logEvent("venue.follow-lost", { followed: baseUrl, endpoint: outcome.left.endpoint, error: outcome.left.detail })
          }
          failures += 1
          pauseMs = Math.min(Math.max(pollMs, MAX_OUTAGE_PAUSE_MS), pollMs * 2 ** Math.min(failures, 16))
        }
        yield* Effect.sleep(Duration.millis(pauseMs))
      }
    })
    yield* Effect.forkScoped(following)
  })
