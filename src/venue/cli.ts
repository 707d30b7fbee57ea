/**
 * The `svc-venue` command (also `svcbot venue`): flags, file loading, the dev-key
 * banner, and serving until SIGINT/SIGTERM interrupts the program.
 */
import { Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { readFileSync } from "node:fs"
import { usageError } from "../cli/errors.js"
import { layer as loggerLayer, logEvent } from "../log/Logger.js"
import { devAccounts, type AccountsFile } from "./Accounts.js"
import { DEFAULT_FOLLOW_POLL_MS, MAX_FOLLOW_POLL_MS, MIN_FOLLOW_POLL_MS } from "./Follow.js"
import { serveVenue, VenueStartError } from "./Server.js"
import { parseOhlcvCsv, type TapeSource } from "./Tape.js"
import { DEFAULT_RETENTION } from "./VenueState.js"

const readText = (path: string, what: string): Effect.Effect<string, VenueStartError> =>
  Effect.try({
    try: () => readFileSync(path, "utf8"),
    catch: (cause) => new VenueStartError({ message: `cannot read the ${what} ${path}: ${cause instanceof Error ? cause.message : String(cause)}`, cause })
  })

/** `synthetic:SEED`, `manual`, or the path of an OHLCV CSV file. */
export const parseTapeFlag = (flag: string): Effect.Effect<TapeSource, VenueStartError> => {
  if (flag === "manual") return Effect.succeed({ kind: "manual" })
  const synthetic = /^synthetic:(\d{1,10})$/.exec(flag)
  if (synthetic !== null) return Effect.succeed({ kind: "synthetic", seed: Number(synthetic[1]) })
  if (flag.startsWith("synthetic")) return Effect.fail(new VenueStartError({ message: `--tape ${flag}: write synthetic:SEED with an integer seed, e.g. synthetic:42` }))
  return readText(flag, "tape CSV").pipe(
    Effect.flatMap((text) =>
      Effect.try({
        try: (): TapeSource => ({ kind: "csv", candles: parseOhlcvCsv(text) }),
        catch: (cause) => new VenueStartError({ message: `--tape ${flag}: ${cause instanceof Error ? cause.message : String(cause)}`, cause })
      })
    )
  )
}

/** Where prices come from: `--follow URL` (with `--follow-poll-ms`), or `--tape`. */
const tapeOf = (flags: {
  readonly tape: Option.Option<string>
  readonly follow: Option.Option<string>
  readonly followPollMs: Option.Option<number>
}): Effect.Effect<TapeSource, VenueStartError> => {
  if (Option.isSome(flags.follow)) {
    if (Option.isSome(flags.tape)) return Effect.fail(new VenueStartError({ message: "--follow and --tape both say where prices come from: give one of them" }))
    return Effect.succeed({ kind: "follow", baseUrl: flags.follow.value, ...(Option.isSome(flags.followPollMs) ? { pollMs: flags.followPollMs.value } : {}) })
  }
  if (Option.isSome(flags.followPollMs)) return Effect.fail(new VenueStartError({ message: "--follow-poll-ms goes with --follow URL" }))
  return parseTapeFlag(Option.getOrElse(flags.tape, () => "synthetic:1"))
}

const loadAccounts = (path: string): Effect.Effect<AccountsFile, VenueStartError> =>
  readText(path, "accounts file").pipe(
    Effect.flatMap((text) =>
      Effect.try({
        try: () => JSON.parse(text) as AccountsFile,
        catch: (cause) => new VenueStartError({ message: `the accounts file ${path} is not valid JSON: ${cause instanceof Error ? cause.message : String(cause)}`, cause })
      })
    )
  )

/** The system's code for a listen that failed (EADDRINUSE, EACCES...), under the server's error. */
const listenCodeOf = (error: VenueStartError): unknown => (error.cause as { readonly cause?: { readonly code?: unknown } } | undefined)?.cause?.code

const options = {
  host: Options.text("host").pipe(Options.withDefault("127.0.0.1"), Options.withDescription("interface to listen on")),
  port: Options.integer("port").pipe(Options.withDefault(0), Options.withDescription("port to listen on; 0 picks a free port")),
  accounts: Options.file("accounts").pipe(Options.optional, Options.withDescription("accounts, keys, pairs, limits and fees (JSON); the built-in dev accounts when absent")),
  tape: Options.text("tape").pipe(Options.optional, Options.withDescription("synthetic:SEED, manual, or an OHLCV CSV file (open_time_ms,open,high,low,close,volume); default synthetic:1")),
  follow: Options.text("follow").pipe(
    Options.optional,
    Options.withDescription("paper trading on real prices: follow the public ticker and candles of the venue at this base URL (no key needed) instead of a tape")
  ),
  followPollMs: Options.integer("follow-poll-ms").pipe(
    Options.optional,
    Options.withDescription(`milliseconds between polls of the followed venue's ticker, ${MIN_FOLLOW_POLL_MS} to ${MAX_FOLLOW_POLL_MS}; default ${DEFAULT_FOLLOW_POLL_MS}`)
  ),
  tickMs: Options.integer("tick-ms").pipe(Options.withDefault(1000), Options.withDescription("milliseconds between tape steps; 0 moves the tape only through /_venue/tape")),
  settleMs: Options.integer("settle-ms").pipe(Options.withDefault(50), Options.withDescription("milliseconds between acceptance and settlement of an order")),
  retainTerminalMs: Options.integer("retain-terminal-ms").pipe(
    Options.withDefault(DEFAULT_RETENTION.terminalMs),
    Options.withDescription("milliseconds an ended order (filled, rejected, cancelled) and a fill stay readable; then they answer as unknown (ORDER_NOT_FOUND)")
  ),
  retainTerminalCount: Options.integer("retain-terminal-count").pipe(
    Options.withDefault(DEFAULT_RETENTION.terminalCount),
    Options.withDescription("ended orders, and fills, kept per account at most; the oldest are forgotten first")
  ),
  tlsCert: Options.file("tls-cert").pipe(Options.optional, Options.withDescription("PEM certificate: serve https")),
  tlsKey: Options.file("tls-key").pipe(Options.optional, Options.withDescription("PEM private key of --tls-cert"))
}

export const venueCommand = Command.make("venue", options, (flags) =>
  Effect.scoped(
    Effect.gen(function* () {
      // What the flags name is read first: a flag or file that is wrong is the command line's to fix (exit 2).
      const fromFlags = Effect.gen(function* () {
        const accounts = Option.isSome(flags.accounts) ? yield* loadAccounts(flags.accounts.value) : devAccounts
        const tape = yield* tapeOf(flags)
        if (Option.isSome(flags.tlsCert) !== Option.isSome(flags.tlsKey)) return yield* new VenueStartError({ message: "--tls-cert and --tls-key go together" })
        const tls =
          Option.isSome(flags.tlsCert) && Option.isSome(flags.tlsKey)
            ? { cert: yield* readText(flags.tlsCert.value, "TLS certificate"), key: yield* readText(flags.tlsKey.value, "TLS key") }
            : undefined
        return { accounts, tape, tls }
      })
      const { accounts, tape, tls } = yield* Effect.mapError(fromFlags, (error) => usageError(error.message))
      if (Option.isNone(flags.accounts)) {
        // Deliberate CLI output: the dev keys are well-known test keys of this venue only.
        yield* Console.error(`svc-venue: no --accounts given; built-in dev accounts and keys:\n${JSON.stringify(devAccounts, null, 2)}`)
        yield* logEvent("venue.dev-keys", { keyIds: devAccounts.accounts.flatMap((a) => (a.keys ?? []).map((k) => k.id)) })
      }
      const running = yield* serveVenue({
        host: flags.host,
        port: flags.port,
        accounts,
        tape,
        tickMs: flags.tickMs,
        settleMs: flags.settleMs,
        retention: { terminalMs: flags.retainTerminalMs, terminalCount: flags.retainTerminalCount },
        ...(tls === undefined ? {} : { tls })
      }).pipe(
        Effect.mapError((error) =>
          listenCodeOf(error) === "EADDRINUSE" ? usageError(`--port ${flags.port} is in use on ${flags.host}: give a free --port, or --port 0 for any free one`) : error
        )
      )
      yield* logEvent("venue.listening", { url: running.url, ...(tape.kind === "follow" ? { follow: tape.baseUrl } : {}) })
      return yield* Effect.never
    })
  ).pipe(Effect.provide(loggerLayer()))
).pipe(Command.withDescription("svc-venue: a faithful implementation of the SVC API on this machine"))
