/**
 * `svcbot balances`, `svcbot orders`, `svcbot fills` and `svcbot doctor`: the
 * account as the exchange sees it, through SvcClient. The exchange comes from
 * `--base-url` (or SVC_BASE_URL); the key from SVC_API_KEY / SVC_API_SECRET or
 * their `_FILE` forms. Tables by default, one JSON document with `--json`.
 */
import { Command, Options } from "@effect/cli"
import { Console, Effect, Either, Layer, Option, type Redacted } from "effect"
import { loadCredentials } from "../config/Load.js"
import { stringify } from "../domain/Json.js"
import * as Log from "../log/Logger.js"
import { defaultDialect, type Dialect } from "../svc/Dialect.js"
import type { SvcError } from "../svc/Errors.js"
import { SvcClient } from "../svc/SvcClient.js"
import { CliError, usageError } from "./errors.js"
import { described } from "./Help.js"

type Env = Readonly<Record<string, string | undefined>>

export interface Connection {
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string>
  readonly apiSecret: Redacted.Redacted<string>
  readonly dialect: Dialect
  readonly requestTimeoutMs: number
}

/** The exchange's address from `--base-url` or SVC_BASE_URL, or what is wrong with it. */
export const baseUrlOf = (flag: Option.Option<string>, env: Env = process.env): Either.Either<string, string> => {
  const url = Option.getOrUndefined(flag) ?? env.SVC_BASE_URL
  if (url === undefined || url === "") return Either.left("no exchange address: pass --base-url https://exchange.example (or set SVC_BASE_URL)")
  if (!/^https?:\/\/[^/\s]+(\/[^\s]*)?$/.test(url)) return Either.left(`--base-url "${url}" is not an http(s) URL such as https://exchange.example`)
  return Either.right(url)
}

/** The exchange and key a command talks with, or the usage error saying what is missing. */
export const connectionFrom = (flag: Option.Option<string>, env: Env = process.env): Either.Either<Connection, CliError> => {
  const baseUrl = baseUrlOf(flag, env)
  if (Either.isLeft(baseUrl)) return Either.left(usageError(baseUrl.left))
  const credentials = loadCredentials(env)
  if (Either.isLeft(credentials)) return Either.left(usageError(credentials.left.problems.join("; ")))
  if (Option.isNone(credentials.right)) {
    return Either.left(usageError("no API key: set SVC_API_KEY and SVC_API_SECRET (or SVC_API_KEY_FILE and SVC_API_SECRET_FILE)"))
  }
  return Either.right({ baseUrl: baseUrl.right, ...credentials.right.value, dialect: defaultDialect, requestTimeoutMs: 10_000 })
}

/** Client events (retries, refusals) go to stderr so that stdout holds only the answer. */
const cliLogLayer = Log.layer({ destination: process.stderr, level: "warn" })

/** Runs `effect` with a client for `connection`; a failed request becomes a CLI error naming it. */
export const withClient = <A>(connection: Connection, effect: Effect.Effect<A, SvcError, SvcClient>): Effect.Effect<A, CliError> =>
  effect.pipe(
    Effect.mapError((error) => new CliError({ message: error.message, exitCode: 1 })),
    Effect.provide(SvcClient.layerWith(connection).pipe(Layer.provide(cliLogLayer))),
    Effect.scoped
  )

/** Left-aligned columns separated by two spaces. */
export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = header.map((name, column) => Math.max(name.length, ...rows.map((row) => (row[column] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) => cells.map((cell, column) => cell.padEnd(widths[column]!)).join("  ").trimEnd()
  return [line(header), ...rows.map(line)].join("\n")
}

const iso = (ms: number): string => new Date(ms).toISOString()

const common = {
  baseUrl: Options.text("base-url").pipe(Options.withPseudoName("URL"), Options.optional, Options.withDescription("the exchange, e.g. https://exchange.example (default: $SVC_BASE_URL)")),
  json: Options.boolean("json").pipe(Options.withDescription("print JSON instead of a table"))
}

const KEY_NOTE = "The key comes from SVC_API_KEY and SVC_API_SECRET, or their _FILE forms (Docker secrets)."

const connect = (baseUrl: Option.Option<string>) => Effect.suspend(() => connectionFrom(baseUrl))

export const balancesCommand = Command.make("balances", common, (args) =>
  Effect.gen(function* () {
    const rows = yield* withClient(yield* connect(args.baseUrl), Effect.flatMap(SvcClient, (client) => client.spotWallet()))
    if (args.json) return yield* Console.log(stringify(rows.map(({ asset, balance, locked }) => ({ asset, balance, locked }))))
    yield* Console.log(
      table(
        ["asset", "free", "locked", "total"],
        rows.map((row) => [row.asset, row.balance.toFixed(), row.locked.toFixed(), row.balance.plus(row.locked).toFixed()])
      )
    )
  })
).pipe(
  Command.withDescription(
    described("Print the spot wallet: free, locked and total per asset", {
      details: [KEY_NOTE],
      examples: ["svcbot balances --base-url https://exchange.example", "svcbot balances --json"]
    })
  )
)

export const ordersCommand = Command.make(
  "orders",
  { ...common, symbol: Options.text("symbol").pipe(Options.withPseudoName("SYMBOL"), Options.optional, Options.withDescription("only this pair, e.g. BTCUSDT (default: every pair)")) },
  (args) =>
    Effect.gen(function* () {
      const symbol = Option.getOrUndefined(args.symbol)
      const orders = yield* withClient(yield* connect(args.baseUrl), Effect.flatMap(SvcClient, (client) => client.openOrders(symbol)))
      if (args.json) return yield* Console.log(stringify(orders))
      yield* Console.log(
        table(
          ["clientOrderId", "symbol", "side", "type", "kind", "baseQty", "filled", "limitPrice", "stopPrice", "created"],
          orders.map((o) => [
            o.clientOrderId,
            o.symbol,
            o.side,
            o.type,
            o.kind,
            o.baseQty?.toFixed() ?? (o.quoteOrderQty === undefined ? "" : `${o.quoteOrderQty.toFixed()} (quote)`),
            o.filledBaseQty.toFixed(),
            o.limitPrice?.toFixed() ?? "",
            o.stopPrice?.toFixed() ?? "",
            iso(o.createdAt)
          ])
        )
      )
    })
).pipe(
  Command.withDescription(
    described("Print the open orders", {
      details: [KEY_NOTE],
      examples: ["svcbot orders --base-url https://exchange.example", "svcbot orders --symbol BTCUSDT --json"]
    })
  )
)

export const fillsCommand = Command.make(
  "fills",
  { ...common, limit: Options.integer("limit").pipe(Options.withPseudoName("N"), Options.withDefault(50), Options.withDescription("how many of the newest fills (1 to 500)")) },
  (args) =>
    Effect.gen(function* () {
      if (args.limit < 1 || args.limit > 500) return yield* Effect.fail(usageError(`--limit must be from 1 to 500, got ${args.limit}`))
      const page = yield* withClient(yield* connect(args.baseUrl), Effect.flatMap(SvcClient, (client) => client.fillsPage({ limit: args.limit })))
      if (args.json) return yield* Console.log(stringify(page.fills.map(({ raw: _raw, ...fill }) => fill)))
      yield* Console.log(
        table(
          ["time", "fillId", "clientOrderId", "symbol", "side", "liquidity", "price", "baseQty", "quoteQty", "fee"],
          page.fills.map((f) => [
            iso(f.time),
            f.fillId,
            f.clientOrderId ?? "",
            f.symbol,
            f.side,
            f.liquidity,
            f.price.toFixed(),
            f.baseQty.toFixed(),
            f.quoteQty.toFixed(),
            `${f.fee.toFixed()} ${f.feeAsset}`
          ])
        )
      )
    })
).pipe(
  Command.withDescription(
    described("Print the newest fills", {
      details: [KEY_NOTE],
      examples: ["svcbot fills --base-url https://exchange.example", "svcbot fills --limit 500 --json"]
    })
  )
)

export interface Check {
  readonly check: "credentials" | "reachability" | "clock" | "read permission"
  readonly ok: boolean
  readonly detail: string
}

/** What a failed signed request means for the user, and how to fix it. */
const explainSigned = (error: SvcError, recvWindowMs: number): Check => {
  switch (error._tag) {
    case "ApiKeyInvalid":
      return { check: "read permission", ok: false, detail: "API_KEY_INVALID: the key id is unknown, revoked or expired, or the secret does not belong to it. Create a new key on the website and set SVC_API_KEY and SVC_API_SECRET to its id and secret." }
    case "ApiKeyNotPermitted":
      return { check: "read permission", ok: false, detail: `API_KEY_NOT_PERMITTED: the key lacks ${error.requiredScope ?? "a scope"}. Create a key with the Read (or Trade) permission.` }
    case "ApiKeyTimestampInvalid":
      return { check: "clock", ok: false, detail: `API_KEY_TIMESTAMP_INVALID even after correcting from the server's time (${error.reason ?? "no reason given"}): the round trip takes longer than the ${recvWindowMs} ms receive window. Check the network path or raise recvWindowMs.` }
    case "AuthBlocked":
      return { check: "read permission", ok: false, detail: `the exchange blocks this key or address after repeated failed authentication; wait ${error.retryAfter} s, then fix the key or secret before trying again (every failed try extends the block).` }
    case "NetworkError":
      return { check: "reachability", ok: false, detail: `no answer to a signed request (${error.detail}).` }
    default:
      return { check: "read permission", ok: false, detail: error.message }
  }
}

/**
 * The doctor's checks, in order: key and secret format, reachability (a public
 * request), then one signed read that shows the clock skew and the Read permission.
 */
export const doctorChecks = (flag: Option.Option<string>, env: Env = process.env): Effect.Effect<ReadonlyArray<Check>> =>
  Effect.gen(function* () {
    const baseUrl = baseUrlOf(flag, env)
    if (Either.isLeft(baseUrl)) return [{ check: "reachability", ok: false, detail: baseUrl.left }]
    const credentials = loadCredentials(env)
    if (Either.isLeft(credentials)) return [{ check: "credentials", ok: false, detail: credentials.left.problems.join("; ") }]
    if (Option.isNone(credentials.right)) {
      return [{ check: "credentials", ok: false, detail: "SVC_API_KEY and SVC_API_SECRET are not set (or their _FILE forms): set the key id (svk_live_...) and secret (svs_live_...) from the website" }]
    }
    const connection: Connection = { baseUrl: baseUrl.right, ...credentials.right.value, dialect: defaultDialect, requestTimeoutMs: 10_000 }
    const checks: Array<Check> = [{ check: "credentials", ok: true, detail: "key id and secret are well formed" }]
    const probe = Effect.gen(function* () {
      const client = yield* SvcClient
      const pairs = yield* Effect.either(client.exchangeInfo())
      if (Either.isLeft(pairs)) {
        checks.push({
          check: "reachability",
          ok: false,
          detail: `${baseUrl.right} does not answer the public pair list (${pairs.left.message}). Check --base-url (scheme, host, port, no trailing /api) and the network.`
        })
        return
      }
      checks.push({ check: "reachability", ok: true, detail: `${baseUrl.right} answers (${pairs.right.length} pairs)` })
      const wallet = yield* Effect.either(client.spotWallet())
      const offsetMs = yield* client.clockOffsetMs
      if (Either.isLeft(wallet)) {
        const explained = explainSigned(wallet.left, connection.dialect.recvWindowMs)
        if (explained.check !== "clock" && offsetMs !== 0) checks.push(clockCheck(offsetMs, connection.dialect.recvWindowMs))
        checks.push(explained)
        return
      }
      checks.push(clockCheck(offsetMs, connection.dialect.recvWindowMs))
      checks.push({ check: "read permission", ok: true, detail: `signed requests are accepted; the spot wallet has ${wallet.right.length} assets` })
    })
    yield* probe.pipe(Effect.provide(SvcClient.layerWith(connection).pipe(Layer.provide(cliLogLayer))), Effect.scoped)
    return checks
  })

const clockCheck = (offsetMs: number, recvWindowMs: number): Check =>
  offsetMs === 0
    ? { check: "clock", ok: true, detail: `this machine's clock is within the ${recvWindowMs} ms receive window of the server's` }
    : {
        check: "clock",
        ok: false,
        detail: `this machine's clock is ${Math.abs(offsetMs)} ms ${offsetMs > 0 ? "behind" : "ahead of"} the server's. svcbot corrects for it after one refused request, but fix the clock (enable NTP) so that no request is refused.`
      }

export const doctorCommand = Command.make("doctor", common, (args) =>
  Effect.gen(function* () {
    const checks = yield* doctorChecks(args.baseUrl)
    if (args.json) yield* Console.log(JSON.stringify(checks))
    else for (const c of checks) yield* Console.log(`${c.ok ? "ok  " : "FAIL"}  ${c.check}: ${c.detail}`)
    const failed = checks.filter((c) => !c.ok).length
    if (failed > 0) return yield* Effect.fail(new CliError({ message: `${failed} check${failed === 1 ? "" : "s"} failed`, exitCode: 1 }))
  })
).pipe(
  Command.withDescription(
    described("Check the key, the exchange's reachability and the clock", {
      details: [`Checks the key and secret format, reachability, clock skew and the Read permission. ${KEY_NOTE} Exit code 0 when every check passes, 1 when one fails.`],
      examples: ["svcbot doctor --base-url https://exchange.example", "SVC_API_KEY_FILE=key SVC_API_SECRET_FILE=secret svcbot doctor --json"]
    })
  )
)

/** The client commands, for the svcbot command tree. */
export const clientCommands = [balancesCommand, ordersCommand, fillsCommand, doctorCommand] as const
