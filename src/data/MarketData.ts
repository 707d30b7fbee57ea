/**
 * Candles from the venue's public candles endpoint into a candle file: a range of history
 * (`svcbot data download`), or the candles that close while it runs (`svcbot data record`).
 *
 * Paging: the endpoint answers the last `limit` candles that open before `before`, oldest
 * first, so a range is read forwards in windows of `pageSize` intervals, each asked with
 * `before` at the window's end; candles of an earlier window that come along (when the
 * venue has gaps) are already in the file and skipped. Every window is written as it
 * arrives, so an interrupted download continues from the file's last row.
 *
 * Budget: the spec shows a weight budget per key, and public requests carry no key, so
 * these reads spend nothing of the key a daemon trades with (svc-venue charges public
 * requests nothing). SvcClient sends them outside its budget governor; they go one at a
 * time, a page as large as the venue serves, and a 429 waits out its Retry-After before
 * the same page is asked again.
 *
 * Closed candles only: a candle is written once the venue's clock (the ticker's `time`,
 * else this machine's) is SETTLED_AFTER_CLOSE_MS past its close.
 */
import { Clock, Data, Duration, Effect } from "effect"
import type { Candle } from "../svc/Api.js"
import { defaultDialect } from "../svc/Dialect.js"
import { type AuthBlocked, DecodeError, type RateLimited, type SvcError } from "../svc/Errors.js"
import { SvcClient } from "../svc/SvcClient.js"
import type { CandleFile, Gap } from "./CandleFile.js"
import { openTimeOf } from "./Interval.js"

/**
 * How long after a candle's close it is taken as final. A venue that follows another one
 * (svc-venue's follow tape) puts the followed candle in place within a poll of the close.
 */
export const SETTLED_AFTER_CLOSE_MS = 2_000

/** The largest page svc-venue serves; a venue that serves fewer is asked with --page-size. */
export const MAX_PAGE_SIZE = 1000

/** 429s in a row on one page before the download gives up. */
const MAX_RATE_LIMITED_WAITS = 5

/** What the user asked for cannot be served: an unknown symbol or an interval the venue refuses. */
export class MarketDataRefused extends Data.TaggedError("MarketDataRefused")<{ readonly message: string }> {}

export interface Market {
  readonly symbol: string
  readonly interval: string
  readonly stepMs: number
}

export interface Paging {
  readonly pageSize: number
  /** Called after each page is written. */
  readonly onPage: (progress: Progress) => Effect.Effect<void>
  /** Called before a 429's Retry-After is waited out. */
  readonly onRateLimited: (retryAfterSeconds: number) => Effect.Effect<void>
}

export interface Progress {
  /** Everything before this open time has been asked for. */
  readonly cursorMs: number
  readonly requests: number
}

/** Counts of the requests a run made, for its summary. */
export interface Tally {
  requests: number
  rateLimitedWaits: number
  readonly gaps: Array<Gap>
}

export const newTally = (): Tally => ({ requests: 0, rateLimitedWaits: 0, gaps: [] })

const isRateLimit = (error: SvcError): error is RateLimited | AuthBlocked => error._tag === "RateLimited" || error._tag === "AuthBlocked"

const iso = (ms: number): string => new Date(ms).toISOString()

/**
 * Checks that the venue lists the symbol and serves the interval, before a file is touched:
 * one pair list and one single-candle page.
 */
export const checkMarket = (market: Market, baseUrl: string): Effect.Effect<void, MarketDataRefused | SvcError, SvcClient> =>
  Effect.gen(function* () {
    const client = yield* SvcClient
    const pairs = yield* client.exchangeInfo()
    if (!pairs.some((pair) => pair.symbol === market.symbol)) {
      const listed = pairs.map((pair) => pair.symbol)
      return yield* new MarketDataRefused({
        message: `${baseUrl} has no pair ${market.symbol}; pass one it lists to --symbol: ${listed.slice(0, 20).join(", ")}${listed.length > 20 ? `, ... (${listed.length} in all)` : ""}`
      })
    }
    yield* client.candles({ symbol: market.symbol, interval: market.interval, limit: 1 }).pipe(
      Effect.catchIf(
        (error) => error._tag === "RequestInvalid",
        (error) =>
          new MarketDataRefused({
            message: `${baseUrl} refuses candles of interval ${market.interval} (${error.message}); pass an --interval it serves (svc-venue serves 1m, 5m, 15m, 1h, 4h and 1d)`
          })
      )
    )
  })

/** The venue's clock: the ticker's time when it tells one, else this machine's. */
export const venueNowMs = (symbol: string): Effect.Effect<number, SvcError, SvcClient> =>
  Effect.gen(function* () {
    const ticker = yield* Effect.flatMap(SvcClient, (client) => client.ticker(symbol))
    return ticker.time ?? (yield* Clock.currentTimeMillis)
  })

/** Candles that open before this time have closed and settled at `nowMs`. */
export const settledBefore = (nowMs: number, stepMs: number): number => openTimeOf(nowMs - SETTLED_AFTER_CLOSE_MS, stepMs)

/** One page; a 429 is waited out (its Retry-After) and the page asked again. */
const pageOf = (market: Market, limit: number, beforeMs: number, paging: Paging, tally: Tally): Effect.Effect<ReadonlyArray<Candle>, SvcError, SvcClient> =>
  Effect.flatMap(SvcClient, (client) => {
    const ask = (waits: number): Effect.Effect<ReadonlyArray<Candle>, SvcError> =>
      Effect.zipRight(
        Effect.sync(() => void (tally.requests += 1)),
        client.candles({ symbol: market.symbol, interval: market.interval, limit, before: beforeMs })
      ).pipe(
        Effect.catchIf(
          (error): error is RateLimited | AuthBlocked => isRateLimit(error) && waits < MAX_RATE_LIMITED_WAITS,
          (error) =>
            Effect.gen(function* () {
              tally.rateLimitedWaits += 1
              yield* paging.onRateLimited(error.retryAfter)
              yield* Effect.sleep(Duration.seconds(error.retryAfter))
              return yield* ask(waits + 1)
            })
        )
      )
    return ask(0)
  })

/**
 * Where the venue's candles start in [fromMs, toMs) when it has none before `fromMs`: an open
 * time at most a page before its first candle there, found by halving the range with
 * single-candle pages; undefined when it has none in the range. A venue keeps a limited
 * history, and a `--from` years before it would otherwise cost a request per empty page.
 */
const historyStart = (market: Market, fromMs: number, toMs: number, paging: Paging, tally: Tally): Effect.Effect<number | undefined, SvcError, SvcClient> =>
  Effect.gen(function* () {
    const [newest] = yield* pageOf(market, 1, toMs, paging, tally)
    if (newest === undefined) return undefined
    // Nothing opens before `lo`; a candle opens at `hi`.
    let lo = fromMs
    let hi = Math.max(fromMs, newest.openTime)
    while (hi - lo > paging.pageSize * market.stepMs) {
      const mid = lo + Math.max(1, Math.floor((hi - lo) / 2 / market.stepMs)) * market.stepMs
      const [before] = yield* pageOf(market, 1, mid, paging, tally)
      if (before === undefined) lo = mid
      else hi = Math.max(lo, before.openTime)
    }
    return lo
  })

/**
 * Appends to `file` every candle the venue has that opens in [fromMs, toMs), page by page
 * in time order. Where the venue has no candles the file has a gap, noted in the tally.
 */
export const fetchInto = (
  file: CandleFile,
  market: Market,
  fromMs: number,
  toMs: number,
  paging: Paging,
  tally: Tally
): Effect.Effect<void, SvcError, SvcClient> =>
  Effect.gen(function* () {
    let cursor = fromMs
    while (cursor < toMs) {
      const windowEnd = Math.min(toMs, cursor + paging.pageSize * market.stepMs)
      const limit = Math.ceil((windowEnd - cursor) / market.stepMs)
      const page = yield* pageOf(market, limit, windowEnd, paging, tally)
      const rows = page.filter((candle) => candle.openTime >= cursor && candle.openTime < windowEnd)
      for (let i = 1; i < rows.length; i++) {
        if (rows[i]!.openTime <= rows[i - 1]!.openTime) {
          return yield* new DecodeError({
            endpoint: defaultDialect.paths.candles,
            field: "candles",
            detail: `candles out of order (${iso(rows[i]!.openTime)} after ${iso(rows[i - 1]!.openTime)}); the answer should be oldest first`
          })
        }
      }
      tally.gaps.push(...file.append(rows))
      // An empty answer: the venue has nothing before the window's end, so its history starts later.
      cursor = page.length === 0 && windowEnd < toMs ? ((yield* historyStart(market, windowEnd, toMs, paging, tally)) ?? toMs) : windowEnd
      yield* paging.onPage({ cursorMs: cursor, requests: tally.requests })
    }
  })

/** Failures that pass when the venue answers again: a recorder keeps polling through them. */
const isTransient = (error: SvcError): boolean => error._tag === "NetworkError" || error._tag === "ServerUnavailable"

/**
 * Appends each candle as it settles, polling every `pollMs`, until interrupted. Starts after
 * the file's last row (catching up on what closed since, as far back as the venue keeps
 * candles), or with the last settled candle for a file that holds none. `afterPoll` hears how
 * each poll went: undefined, or why the venue did not answer (polling goes on through that).
 */
export const record = (
  file: CandleFile,
  market: Market,
  pollMs: number,
  paging: Paging,
  tally: Tally,
  afterPoll: (transient: SvcError | undefined) => Effect.Effect<void>
): Effect.Effect<never, SvcError, SvcClient> =>
  Effect.gen(function* () {
    let cursor = file.lastOpenTimeMs === undefined ? undefined : file.lastOpenTimeMs + market.stepMs
    for (;;) {
      const polled = yield* Effect.either(
        Effect.gen(function* () {
          const end = settledBefore(yield* venueNowMs(market.symbol), market.stepMs)
          const from = cursor ?? end - market.stepMs
          cursor = from
          if (end <= from) return
          yield* fetchInto(file, market, from, end, paging, tally)
          cursor = end
        })
      )
      if (polled._tag === "Left" && !isTransient(polled.left)) return yield* Effect.fail(polled.left)
      yield* afterPoll(polled._tag === "Left" ? polled.left : undefined)
      yield* Effect.sleep(Duration.millis(pollMs))
    }
  })
