/**
 * `svcbot data download` and `svcbot data record`: candles from the venue's public candles
 * endpoint into the CSV file `svcbot backtest --data` reads. Both continue a file from its
 * last complete row, so an interrupted run is finished by running the same command again.
 * Public reads need no API key. Progress goes to stderr, the summary to stdout.
 */
import { Command, Options } from "@effect/cli"
import { Clock, Console, Effect, Either, Option, Redacted } from "effect"
import { CandleFileInvalid, openCandleFile } from "../data/CandleFile.js"
import { intervalMs, nextOpenTime } from "../data/Interval.js"
import {
  checkMarket,
  fetchInto,
  type Market,
  MarketDataRefused,
  MAX_PAGE_SIZE,
  newTally,
  type Paging,
  record,
  settledBefore,
  type Tally,
  venueNowMs
} from "../data/MarketData.js"
import * as Log from "../log/Logger.js"
import { defaultDialect } from "../svc/Dialect.js"
import type { SvcError } from "../svc/Errors.js"
import { SvcClient } from "../svc/SvcClient.js"
import { parseTime } from "./Times.js"
import { baseUrlOf } from "./client.js"
import { CliError, usageError } from "./errors.js"
import { described } from "./Help.js"

const iso = (ms: number): string => new Date(ms).toISOString()

const counted = (n: number, noun: string): string => `${n} ${noun}${n === 1 ? "" : "s"}`

const fromEither = <A>(either: Either.Either<A, string | CliError>): Effect.Effect<A, CliError> =>
  Either.match(either, { onLeft: (e) => Effect.fail(typeof e === "string" ? usageError(e) : e), onRight: Effect.succeed })


/**
 * A client for public reads only. It signs nothing, so it holds no key: an empty key and
 * secret stand in for the ones SvcClient would sign key requests with.
 */
const publicClient = (baseUrl: string) =>
  SvcClient.layerWith({ baseUrl, apiKey: Redacted.make(""), apiSecret: Redacted.make(""), dialect: defaultDialect, requestTimeoutMs: 10_000 })

/** Client events (retries) go to stderr with the progress, so that stdout holds only the summary. */
const stderrLog = Log.layer({ destination: process.stderr, level: "warn" })

const refusal = (error: MarketDataRefused | CandleFileInvalid): CliError => usageError(error.message)

const common = {
  symbol: Options.text("symbol").pipe(Options.withPseudoName("SYMBOL"), Options.withDescription("the pair, one word as the venue lists it, e.g. BTCUSDT")),
  interval: Options.text("interval").pipe(Options.withPseudoName("INTERVAL"), Options.withDefault("1m"), Options.withDescription("candle interval: 1m, 5m, 15m, 1h, 4h or 1d (what the venue serves)")),
  out: Options.text("out").pipe(Options.withPseudoName("FILE"), Options.withDescription("the CSV file to write or continue (open_time_ms,open,high,low,close,volume), one per symbol and interval")),
  baseUrl: Options.text("base-url").pipe(Options.withPseudoName("URL"), Options.optional, Options.withDescription("the exchange, e.g. https://exchange.example (else SVC_BASE_URL)")),
  json: Options.boolean("json").pipe(Options.withDescription("print the summary as one JSON object")),
  pageSize: Options.integer("page-size").pipe(
    Options.withPseudoName("N"),
    Options.withDefault(MAX_PAGE_SIZE),
    Options.withDescription(`candles asked per request, 1 to ${MAX_PAGE_SIZE} (lower it for a venue that serves smaller pages)`)
  )
}

interface Checked {
  readonly baseUrl: string
  readonly market: Market
  readonly pageSize: number
}

const checkCommon = (args: { readonly symbol: string; readonly interval: string; readonly baseUrl: Option.Option<string>; readonly pageSize: number }): Effect.Effect<Checked, CliError> =>
  Effect.gen(function* () {
    const baseUrl = yield* fromEither(baseUrlOf(args.baseUrl))
    if (!/^[A-Z0-9]{2,30}$/.test(args.symbol)) return yield* Effect.fail(usageError(`--symbol must be the pair as one upper-case word such as BTCUSDT, got "${args.symbol}"`))
    const stepMs = yield* fromEither(intervalMs(args.interval))
    if (args.pageSize < 1 || args.pageSize > MAX_PAGE_SIZE) return yield* Effect.fail(usageError(`--page-size must be from 1 to ${MAX_PAGE_SIZE}, got ${args.pageSize}`))
    return { baseUrl, market: { symbol: args.symbol, interval: args.interval, stepMs }, pageSize: args.pageSize }
  })

/** A failed request ends the run; what was written stays, and the same command continues it. */
const stopped = (what: string, out: string) => (error: SvcError): CliError =>
  new CliError({ message: `${what} stopped: ${error.message}. The candles written so far stay in ${out}; run the same command again to continue from there`, exitCode: 1 })

/** Progress lines at most once a second, and the last one always. */
const progressPrinter = (label: string, fromMs: number, toMs: number, file: { readonly written: number }) => {
  let printedAtMs = Number.NEGATIVE_INFINITY
  return (cursorMs: number, requests: number): Effect.Effect<void> =>
    Effect.flatMap(Clock.currentTimeMillis, (nowMs) => {
      if (nowMs - printedAtMs < 1000 && cursorMs < toMs) return Effect.void
      printedAtMs = nowMs
      const percent = toMs > fromMs ? Math.floor((100 * (cursorMs - fromMs)) / (toMs - fromMs)) : 100
      return Console.error(`svcbot data: ${label} ${percent}% (through ${iso(cursorMs)}; ${counted(file.written, "candle")} written, ${counted(requests, "request")})`)
    })
}

const rateLimitedLine = (label: string) => (retryAfterSeconds: number) =>
  Console.error(`svcbot data: ${label}: the venue answered 429; waiting ${retryAfterSeconds} s as its Retry-After asks`)

const gapLines = (label: string, tally: Tally): Effect.Effect<void> =>
  tally.gaps.length === 0
    ? Effect.void
    : Console.error(
        `svcbot data: ${label}: the venue has no candles for ${tally.gaps.reduce((n, gap) => n + gap.missing, 0)} interval(s) in ${tally.gaps.length} place(s), ` +
          `first after ${iso(tally.gaps[0]!.afterMs)}; svcbot backtest refuses a file with gaps: give it --from/--to around them`
      )

const gapsJson = (tally: Tally) => tally.gaps.map((gap) => ({ afterMs: gap.afterMs, beforeMs: gap.beforeMs, missing: gap.missing }))

export const downloadCommand = Command.make(
  "download",
  {
    ...common,
    from: Options.text("from").pipe(Options.withPseudoName("TIME"), Options.withDescription("first candle open time (inclusive): epoch ms or a UTC date such as 2024-03-01")),
    to: Options.text("to").pipe(Options.withPseudoName("TIME"), Options.optional, Options.withDescription("end (exclusive): epoch ms or UTC date; default and latest: the last closed candle"))
  },
  (args) =>
    Effect.gen(function* () {
      const { baseUrl, market, pageSize } = yield* checkCommon(args)
      const fromMs = yield* fromEither(parseTime(args.from, "--from"))
      const toMs = Option.isSome(args.to) ? yield* fromEither(parseTime(args.to.value, "--to")) : undefined
      if (toMs !== undefined && fromMs >= toMs) return yield* Effect.fail(usageError(`--from ${iso(fromMs)} must be before --to ${iso(toMs)}`))
      const label = `${market.symbol} ${market.interval}`
      yield* Effect.gen(function* () {
        yield* Effect.mapError(checkMarket(market, baseUrl), (error) => (error._tag === "MarketDataRefused" ? refusal(error) : stopped("the download", args.out)(error)))
        const settledEnd = settledBefore(yield* Effect.mapError(venueNowMs(market.symbol), stopped("the download", args.out)), market.stepMs)
        const firstMs = nextOpenTime(fromMs, market.stepMs)
        if (firstMs >= settledEnd) {
          return yield* Effect.fail(usageError(`--from ${iso(fromMs)} is not before the last closed candle (${iso(settledEnd - market.stepMs)} by the venue's clock): there is nothing to download yet`))
        }
        const endMs = Math.min(toMs ?? settledEnd, settledEnd)
        const file = yield* Effect.mapError(openCandleFile(args.out, market.stepMs), refusal)
        const resumeAfterMs = file.lastOpenTimeMs
        if (resumeAfterMs !== undefined && resumeAfterMs + market.stepMs < firstMs) {
          return yield* Effect.fail(
            usageError(`${args.out} ends with the candle of ${iso(resumeAfterMs)}; --from ${iso(fromMs)} would leave a gap after it. Give --from ${iso(resumeAfterMs + market.stepMs)} or earlier, or --out a new file`)
          )
        }
        const startMs = resumeAfterMs === undefined ? firstMs : Math.max(firstMs, resumeAfterMs + market.stepMs)
        const tally = newTally()
        const progress = progressPrinter(label, startMs, endMs, file)
        const paging: Paging = { pageSize, onPage: (p) => progress(p.cursorMs, p.requests), onRateLimited: rateLimitedLine(label) }
        yield* Effect.mapError(fetchInto(file, market, startMs, endMs, paging, tally), stopped("the download", args.out))
        yield* gapLines(label, tally)
        const summary = {
          symbol: market.symbol,
          interval: market.interval,
          out: args.out,
          fromMs: firstMs,
          toMs: endMs,
          written: file.written,
          resumedAfterMs: resumeAfterMs ?? null,
          droppedPartialLine: file.droppedBytes > 0,
          firstOpenTimeMs: file.firstOpenTimeMs ?? null,
          lastOpenTimeMs: file.lastOpenTimeMs ?? null,
          requests: tally.requests,
          rateLimitedWaits: tally.rateLimitedWaits,
          gaps: gapsJson(tally)
        }
        if (args.json) return yield* Console.log(JSON.stringify(summary))
        const holds = file.firstOpenTimeMs === undefined || file.lastOpenTimeMs === undefined ? "it holds no candles" : `it holds ${iso(file.firstOpenTimeMs)} to ${iso(file.lastOpenTimeMs)}`
        const resumed = resumeAfterMs === undefined ? "" : `, continued after ${iso(resumeAfterMs)}${file.droppedBytes > 0 ? " (a partial last line was cut off and fetched again)" : ""}`
        yield* Console.log(`${label}: wrote ${counted(file.written, "candle")} to ${args.out}${resumed}; ${holds}; ${counted(tally.requests, "request")}`)
      }).pipe(Effect.scoped, Effect.provide(publicClient(baseUrl)))
    }).pipe(Effect.provide(stderrLog))
).pipe(
  Command.withDescription(
    described("Download closed candles of a pair into a CSV for backtests; run it again to continue an interrupted download", {
      details: [
        "Pages the venue's public candles endpoint (no API key), writing each page as it arrives. Run again, it continues after the file's last complete row; a partial last line left by a kill is fetched again.",
        "Progress on stderr, one summary line on stdout. Exit 2 for bad input (unknown symbol, interval, time range, a file of another layout or interval), 1 when the venue stops answering."
      ],
      examples: [
        "svcbot data download --symbol BTCUSDT --from 2026-11-01 --to 2026-11-08 --out data/btcusdt-1m.csv --base-url http://127.0.0.1:8080",
        "svcbot data download --symbol ETHUSDT --interval 1h --from 1761955200000 --out data/ethusdt-1h.csv --json"
      ]
    })
  )
)

export const recordCommand = Command.make(
  "record",
  {
    ...common,
    pollMs: Options.integer("poll-ms").pipe(Options.withPseudoName("MS"), Options.withDefault(5000), Options.withDescription("milliseconds between polls of the venue (100 to 60000)"))
  },
  (args) =>
    Effect.gen(function* () {
      const { baseUrl, market, pageSize } = yield* checkCommon(args)
      if (args.pollMs < 100 || args.pollMs > 60_000) return yield* Effect.fail(usageError(`--poll-ms must be from 100 to 60000, got ${args.pollMs}`))
      const label = `${market.symbol} ${market.interval}`
      yield* Effect.gen(function* () {
        yield* Effect.mapError(checkMarket(market, baseUrl), (error) => (error._tag === "MarketDataRefused" ? refusal(error) : stopped("recording", args.out)(error)))
        const file = yield* Effect.mapError(openCandleFile(args.out, market.stepMs), refusal)
        const resumeAfterMs = file.lastOpenTimeMs
        const tally = newTally()
        let reported = 0
        const paging: Paging = {
          pageSize,
          onPage: () => {
            if (file.written === reported) return Effect.void
            reported = file.written
            return Console.error(`svcbot data: ${label}: ${counted(file.written, "candle")} recorded, the last of ${iso(file.lastOpenTimeMs!)}`)
          },
          onRateLimited: rateLimitedLine(label)
        }
        let unreachable = false
        /** One line when the venue stops answering, one when it answers again. */
        const afterPoll = (transient: SvcError | undefined): Effect.Effect<void> => {
          if ((transient !== undefined) === unreachable) return Effect.void
          unreachable = transient !== undefined
          return Console.error(
            transient === undefined ? `svcbot data: ${label}: the venue answers again` : `svcbot data: ${label}: the venue does not answer (${transient.message}); polling on`
          )
        }
        const summary = Effect.suspend(() => {
          const line = {
            symbol: market.symbol,
            interval: market.interval,
            out: args.out,
            recorded: file.written,
            resumedAfterMs: resumeAfterMs ?? null,
            lastOpenTimeMs: file.lastOpenTimeMs ?? null,
            requests: tally.requests,
            gaps: gapsJson(tally)
          }
          return args.json
            ? Console.log(JSON.stringify(line))
            : Console.log(`${label}: recorded ${counted(file.written, "candle")} to ${args.out}${file.lastOpenTimeMs === undefined ? "" : `; the last opened ${iso(file.lastOpenTimeMs)}`}`)
        })
        yield* Console.error(
          `svcbot data: recording ${label} into ${args.out}${resumeAfterMs === undefined ? "" : ` after its last candle (${iso(resumeAfterMs)})`}; stop with Ctrl-C or SIGTERM`
        )
        yield* record(file, market, args.pollMs, paging, tally, afterPoll).pipe(
          Effect.mapError(stopped("recording", args.out)),
          Effect.onExit(() => Effect.zipRight(gapLines(label, tally), summary))
        )
      }).pipe(Effect.scoped, Effect.provide(publicClient(baseUrl)))
    }).pipe(Effect.provide(stderrLog))
).pipe(
  Command.withDescription(
    described("Append each candle of a pair to a CSV once it has closed, until stopped (SIGTERM, Ctrl-C)", {
      details: [
        "Runs beside the daemon; needs no API key. On a file that holds candles it first catches up from the file's last row; on a new file it starts with the candle that closed last. A stop leaves whole lines only."
      ],
      examples: [
        "svcbot data record --symbol BTCUSDT --out data/btcusdt-1m.csv --base-url http://127.0.0.1:8080",
        "svcbot data record --symbol ETHUSDT --interval 5m --out data/ethusdt-5m.csv --poll-ms 10000"
      ]
    })
  )
)

export const dataCommand = Command.make("data").pipe(
  Command.withDescription(
    described("Market data for backtests: download candle history, record live candles", {
      examples: ["svcbot data download --help", "svcbot data record --help"]
    })
  ),
  Command.withSubcommands([downloadCommand, recordCommand])
)
