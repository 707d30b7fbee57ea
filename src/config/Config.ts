/**
 * The daemon's configuration: one JSON file validated by Schema, with environment
 * overrides. Every problem is reported at once, by field path, with its fix.
 */
import { Schema } from "effect"
import { validate as validateCron } from "node-cron"
import { PositiveDecimalFromString } from "../domain/DecimalSchema.js"
import { Dialect } from "../svc/Dialect.js"
import { DEFAULT_MAX_ANSWER_BYTES } from "../svc/SvcClient.js"

const fix = <S extends Schema.Schema.Any>(schema: S, message: string) =>
  schema.annotations({ message: () => message }) as S

/** A choice among literals, refused with one message that lists the choices. */
const oneOf = <const L extends readonly [string, ...Array<string>]>(...values: L) =>
  Schema.String.pipe(
    Schema.filter((value) => values.includes(value) || `must be one of ${values.map((v) => `"${v}"`).join(", ")}, got "${value}"`, {
      jsonSchema: { enum: values }
    }),
    Schema.compose(Schema.Literal(...values))
  )

/** A bearer token as `Authorization: Bearer` carries it (RFC 6750's token68), long enough not to be guessed. */
const HealthToken = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9\-._~+/]{32,512}={0,2}$/)).annotations({
  description: "the bearer token that /metrics and the reasons of /healthz require (or SVC_HEALTH_TOKEN / SVC_HEALTH_TOKEN_FILE); 32 to 512 characters",
  // One message for every way it is wrong, a wrong type included: a problem never quotes the secret.
  message: () => ({ message: "must be 32 to 512 letters, digits or -._~+/ (a bearer token), e.g. the output of `openssl rand -hex 32`", override: true })
})
const Port = fix(Schema.Int.pipe(Schema.between(1, 65535)), "must be a TCP port number from 1 to 65535")
const Millis = (what: string, min: number, max: number) =>
  fix(Schema.Int.pipe(Schema.between(min, max)), `must be ${what} in milliseconds, an integer from ${min} to ${max}`)

export const CronExpression = Schema.String.pipe(
  Schema.filter((expression) =>
    validateCron(expression) ||
    `"${expression}" is not a valid cron expression (five or six fields, e.g. "0 */4 * * *" for every four hours)`
  )
)

export const Mode = oneOf("paper", "live")
export type Mode = typeof Mode.Type

export const VenueConfig = Schema.Struct({
  /** Start svc-venue in-process and trade against it over loopback (paper trading out of the box). */
  embedded: Schema.optionalWith(Schema.Boolean, { default: () => false, exact: true }),
  /** The exchange's base URL when not embedded, e.g. https://api.example.com (paths start with /api). */
  baseUrl: Schema.optional(
    fix(Schema.String.pipe(Schema.pattern(/^https?:\/\/[^/\s]+(\/[^\s]*)?$/)), "must be an absolute http(s) URL without a trailing /api, e.g. https://exchange.example")
  ),
  /** Synthetic tape of the embedded venue: "synthetic:SEED" or a CSV path. */
  tape: Schema.optionalWith(Schema.String, { default: () => "synthetic:42", exact: true }),
  /** How often the embedded venue's tape moves. */
  tickMs: Schema.optionalWith(Millis("the tape step", 10, 60000), { default: () => 1000, exact: true }),
  settleMs: Schema.optionalWith(Millis("the settlement delay", 0, 60000), { default: () => 50, exact: true }),
  /** A staging run: live mode may trade on a svc-venue (which it refuses otherwise, as that is paper). */
  staging: Schema.optionalWith(Schema.Boolean, { default: () => false, exact: true }),
  /**
   * Paper trading on real prices: the embedded venue follows another venue's public ticker
   * and candles (no key) instead of `tape`. docs/venue.md, "Following another venue".
   */
  follow: Schema.optional(
    Schema.Struct({
      baseUrl: fix(
        Schema.String.pipe(Schema.pattern(/^https?:\/\/[^/\s?#]+(\/[^\s?#]*)?$/)),
        "must be the absolute http(s) URL of the venue to follow, without a trailing /api or a query, e.g. https://exchange.example"
      ),
      pollMs: Schema.optionalWith(Millis("the poll interval of the followed venue's ticker", 100, 60000), { default: () => 1000, exact: true })
    })
  )
}).pipe(
  Schema.filter((venue) =>
    venue.follow !== undefined && !venue.embedded
      ? { path: ["follow"], message: "needs venue.embedded: true: the embedded venue is the one that follows (remove venue.follow to trade on venue.baseUrl)" }
      : true
  )
)

export const ClientConfig = Schema.Struct({
  requestTimeoutMs: Schema.optionalWith(Millis("the per-request timeout", 100, 120000), { default: () => 10000, exact: true }),
  /** Share of the weight budget kept free for cancels and reconciliation. */
  reservePct: Schema.optionalWith(fix(Schema.Number.pipe(Schema.between(0, 50)), "must be a percentage from 0 to 50"), {
    default: () => 10, exact: true
  }),
  /** How long key traffic stops after API_KEY_INVALID before one probe request. */
  authProbeIntervalMs: Schema.optionalWith(Millis("the probe interval", 1000, 3600000), { default: () => 300000, exact: true }),
  /**
   * The longest answer body read from the exchange, in bytes; a longer one is cut off and its
   * request fails (AnswerTooLarge), so a peer that streams without end cannot fill the memory.
   * The default, 4 MiB, is over ten times the largest fills page (500 fills).
   */
  maxAnswerBytes: Schema.optionalWith(
    fix(Schema.Int.pipe(Schema.between(65536, 1073741824)), "must be a number of bytes, an integer from 65536 (64 KiB) to 1073741824 (1 GiB)").annotations({
      description: "the longest answer body read from the exchange, in bytes (default 4194304, 4 MiB); a longer one is cut off and its request fails"
    }),
    { default: () => DEFAULT_MAX_ANSWER_BYTES, exact: true }
  )
})

export const RiskConfig = Schema.Struct({
  maxOrderNotional: Schema.optional(PositiveDecimalFromString),
  maxStrategyNotional: Schema.optional(PositiveDecimalFromString),
  maxOpenOrders: Schema.optional(fix(Schema.Int.pipe(Schema.positive()), "must be a positive integer")),
  priceCollarBps: Schema.optional(fix(Schema.Int.pipe(Schema.between(1, 10000)), "must be basis points from 1 to 10000")),
  dailyLossLimit: Schema.optional(PositiveDecimalFromString)
})

/**
 * How a strategy instance is slowed down when its intents keep being refused or rejected for
 * the same reason: after `refusalsBeforeBackoff` in a row it waits `initialBackoffMs`, doubled at
 * each further refusal up to `maxBackoffMs`; after `refusalsBeforePause` in a row it is paused.
 */
export const BackpressureConfig = Schema.Struct({
  refusalsBeforeBackoff: Schema.optionalWith(fix(Schema.Int.pipe(Schema.between(1, 1000)), "must be an integer from 1 to 1000"), { default: () => 3, exact: true }),
  initialBackoffMs: Schema.optionalWith(Millis("the first backoff", 100, 3600000), { default: () => 1000, exact: true }),
  maxBackoffMs: Schema.optionalWith(Millis("the longest backoff", 100, 3600000), { default: () => 60000, exact: true }),
  refusalsBeforePause: Schema.optionalWith(fix(Schema.Int.pipe(Schema.between(1, 10000)), "must be an integer from 1 to 10000"), { default: () => 10, exact: true })
})
export type BackpressureConfig = typeof BackpressureConfig.Type
export const defaultBackpressure: BackpressureConfig = { refusalsBeforeBackoff: 3, initialBackoffMs: 1000, maxBackoffMs: 60000, refusalsBeforePause: 10 }
export const DEFAULT_MAX_INTENTS_PER_MINUTE = 120

export const EngineConfig = Schema.Struct({
  cancelOnStop: Schema.optionalWith(Schema.Boolean, { default: () => true, exact: true }),
  shutdownTimeoutMs: Schema.optionalWith(Millis("the shutdown bound", 1000, 120000), { default: () => 15000, exact: true }),
  reconcileIntervalMs: Schema.optionalWith(Millis("the reconcile interval", 1000, 3600000), { default: () => 30000, exact: true }),
  fillSyncIntervalMs: Schema.optionalWith(Millis("the fill sync interval", 1000, 3600000), { default: () => 15000, exact: true }),
  risk: Schema.optionalWith(RiskConfig, { default: () => ({}), exact: true }),
  backpressure: Schema.optionalWith(BackpressureConfig, { default: () => defaultBackpressure, exact: true })
})

export const StrategyInstanceConfig = Schema.Struct({
  /** Unique instance id, used in logs, the database and heartbeats. */
  id: fix(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/)), "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"),
  /** A shipped strategy name under strategies/ (e.g. "grid") or a path to a plugin file. */
  strategy: Schema.NonEmptyString,
  symbol: fix(Schema.String.pipe(Schema.pattern(/^[A-Z0-9]{2,20}$/)), "must be a pair written as one upper-case word, e.g. BTCUSDT"),
  params: Schema.optionalWith(Schema.Unknown, { default: () => ({}), exact: true }),
  schedule: Schema.optional(CronExpression),
  candleInterval: Schema.optionalWith(oneOf("1m", "5m", "15m", "1h", "4h", "1d"), {
    default: () => "1m" as const, exact: true
  }),
  /** How often market data is polled for this instance. */
  pollMs: Schema.optionalWith(Millis("the market data poll interval", 250, 3600000), { default: () => 2000, exact: true }),
  enabled: Schema.optionalWith(Schema.Boolean, { default: () => true, exact: true }),
  /** Intents beyond this many in one minute are refused without a risk check. */
  maxIntentsPerMinute: Schema.optionalWith(fix(Schema.Int.pipe(Schema.between(1, 100000)), "must be an integer from 1 to 100000"), {
    default: () => DEFAULT_MAX_INTENTS_PER_MINUTE, exact: true
  }),
  /** The assets and amounts this instance may trade with, e.g. { "USDT": "1000", "BTC": "0.01" }; checked against the account at start. */
  allocation: Schema.optional(Schema.Record({ key: fix(Schema.String.pipe(Schema.pattern(/^[A-Z0-9]{2,12}$/)), "must be an asset written in upper case, e.g. USDT"), value: PositiveDecimalFromString })),
  promotion: Schema.optional(Schema.Unknown)
})
export type StrategyInstanceConfig = typeof StrategyInstanceConfig.Type

const PartialDialect = Schema.Struct({
  paths: Schema.optional(Schema.partialWith(Dialect.fields.paths, { exact: true })),
  budgetHeaders: Schema.optional(Schema.partialWith(Dialect.fields.budgetHeaders, { exact: true })),
  recvWindowMs: Schema.optional(Dialect.fields.recvWindowMs)
})

export const Config = Schema.Struct({
  /** Where an editor finds this file's JSON Schema (`svcbot config schema`); the daemon ignores it. */
  $schema: Schema.optional(Schema.String.annotations({ description: "the JSON Schema of this file, for editors (config/svcbot.schema.json)" })),
  mode: Schema.optionalWith(Mode, { default: () => "paper" as const, exact: true }),
  venue: Schema.optionalWith(VenueConfig, { default: () => ({ embedded: true, tape: "synthetic:42", tickMs: 1000, settleMs: 50, staging: false }), exact: true }),
  dialect: Schema.optionalWith(PartialDialect, { default: () => ({}), exact: true }),
  client: Schema.optionalWith(ClientConfig, {
    default: () => ({ requestTimeoutMs: 10000, reservePct: 10, authProbeIntervalMs: 300000, maxAnswerBytes: DEFAULT_MAX_ANSWER_BYTES }),
    exact: true
  }),
  database: Schema.optionalWith(Schema.Struct({ path: Schema.NonEmptyString }), { default: () => ({ path: "data/svcbot.db" }), exact: true }),
  /**
   * Where promotion evidence lives (runs, paper runs, promotion records): the daemon's own
   * database unless set. A paper and a live daemon that share it see the same evidence.
   */
  evidence: Schema.optional(Schema.Struct({ path: Schema.NonEmptyString })),
  log: Schema.optionalWith(
    Schema.Struct({
      level: Schema.optionalWith(oneOf("debug", "info", "warn", "error"), { default: () => "info" as const, exact: true }),
      pretty: Schema.optional(Schema.Boolean)
    }),
    { default: () => ({ level: "info" as const }), exact: true }
  ),
  health: Schema.optionalWith(
    Schema.Struct({
      port: Schema.optional(Port),
      /** Loopback unless set: `/metrics` and the reasons of `/healthz` are for this machine, or for callers that hold `token`. */
      host: Schema.optionalWith(Schema.String, { default: () => "127.0.0.1", exact: true }),
      /**
       * The bearer token `/metrics` and the reasons of `/healthz` require, when set (or from
       * `SVC_HEALTH_TOKEN` / `SVC_HEALTH_TOKEN_FILE`); without one both are open to whoever reaches the port.
       */
      token: Schema.optionalWith(Schema.Redacted(HealthToken), { exact: true }),
      /** The venue counts as unreachable (health not ready, `venue.unreachable`) when no request has succeeded for this long. */
      unreachableAfterMs: Schema.optionalWith(Millis("the unreachable threshold", 1000, 3600000), { default: () => 30000, exact: true })
    }),
    { default: () => ({ host: "127.0.0.1", unreachableAfterMs: 30000 }), exact: true }
  ),
  heartbeatMs: Schema.optionalWith(Millis("the heartbeat interval", 1000, 3600000), { default: () => 60000, exact: true }),
  engine: Schema.optionalWith(EngineConfig, {
    default: () => ({ cancelOnStop: true, shutdownTimeoutMs: 15000, reconcileIntervalMs: 30000, fillSyncIntervalMs: 15000, risk: {}, backpressure: defaultBackpressure }), exact: true
  }),
  strategies: Schema.optionalWith(Schema.Array(StrategyInstanceConfig), { default: () => [], exact: true }),
  alerts: Schema.optional(Schema.Struct({ webhookUrl: Schema.optional(Schema.String) }))
}).pipe(
  Schema.filter((config) => {
    const issues: Array<{ path: ReadonlyArray<PropertyKey>; message: string }> = []
    if (!config.venue.embedded && config.venue.baseUrl === undefined) {
      issues.push({ path: ["venue", "baseUrl"], message: "is required when venue.embedded is false (set it to the exchange's https base URL, or set venue.embedded to true for paper trading)" })
    }
    if (config.mode === "live" && config.venue.embedded) {
      issues.push({ path: ["venue", "embedded"], message: "must be false in live mode: live trading needs the real exchange (set venue.embedded to false and venue.baseUrl)" })
    }
    if (config.mode === "live" && config.venue.baseUrl !== undefined && !config.venue.baseUrl.startsWith("https://")) {
      issues.push({ path: ["venue", "baseUrl"], message: "must be https in live mode: keys and signatures never travel over plain http" })
    }
    const seen = new Set<string>()
    config.strategies.forEach((instance, index) => {
      if (seen.has(instance.id)) issues.push({ path: ["strategies", index, "id"], message: `"${instance.id}" is used twice; every strategy instance needs its own id` })
      seen.add(instance.id)
    })
    return issues
  })
)
export type Config = typeof Config.Type

/** The evidence store's path: `evidence.path`, else the daemon's own database. */
export const evidencePathOf = (config: Config): string => config.evidence?.path ?? config.database.path
