/**
 * The cluster's trial messages, as a worker reads a batch's request and a run reads its answer.
 *
 * Both come out of the cluster's Postgres, which anything holding its URL can write, so each
 * field is read to the exact form svcbot writes and a message that is not is refused whole
 * (the library answers it as malformed) before any of it is used: a dataset's hash becomes a
 * file name in the worker's cache folder, a strategy reference a file the worker imports, and
 * a trial key the key its result is stored under for every later run.
 */
import { extname } from "node:path"
import { Either, ParseResult, Schema } from "effect"
import { CronExpression, StrategyInstanceConfig } from "../config/Config.js"
import { DecimalFromString } from "../domain/DecimalSchema.js"
import { canonicalParams } from "../domain/Hash.js"
import { parse } from "../domain/Json.js"
import { PLUGIN_EXTENSIONS } from "../strategy/Loader.js"
import { MAX_BATCH } from "./Batches.js"

/** A SHA-256 as svcbot writes one (a trial key, a strategy's source hash, a dataset's content hash): 64 lowercase hex digits. */
const Sha256Hex = Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/))

/** A shipped strategy's name, as under strategies/. */
const SHIPPED_NAME = /^[a-z0-9][a-z0-9-]{0,63}$/
const MAX_PATH_LENGTH = 1024
/** Canonical params of any strategy svcbot ships or a user writes fit well within this. */
const MAX_PARAMS_LENGTH = 64 * 1024
const MAX_ASSETS = 64
/** `metricsToJson` writes a few dozen. */
const MAX_METRICS = 256
const MAX_ERROR_LENGTH = 64 * 1024
/** A worker's host:port: a host name is at most 253 characters. */
const MAX_WORKER_LENGTH = 260

/** What `--strategy` names: a shipped strategy's name, or the path of a plugin file (the worker checks its source hash before importing it). */
const StrategyReference = Schema.String.pipe(
  Schema.filter((reference) =>
    SHIPPED_NAME.test(reference) ||
    (reference.length <= MAX_PATH_LENGTH && !/[\u0000-\u001f\u007f]/.test(reference) && PLUGIN_EXTENSIONS.includes(extname(reference))) ||
    `must be a shipped strategy's name or the path of a ${PLUGIN_EXTENSIONS.join(", ")} plugin file`
  )
)

/** An amount kept as the text it came in (it is hashed and passed on as such), read within the bounds of `DecimalFromString`. */
const DecimalText = Schema.String.pipe(
  Schema.filter((text) => Either.isRight(Schema.decodeEither(DecimalFromString)(text)) || "must be a decimal written as a string, such as \"0.01\"")
)

/**
 * A record whose every key matches `key` (a record schema with a refined key would drop the others
 * silently, changing the message instead of refusing it), with at most `max` entries.
 */
const RecordOf = <V extends Schema.Schema.Any>(key: RegExp, what: string, value: V, max: number) =>
  Schema.Record({ key: Schema.String, value }).pipe(
    Schema.filter((record) => {
      const keys = Object.keys(record)
      if (keys.length > max) return `must have at most ${max} entries`
      const wrong = keys.find((name) => !key.test(name))
      return wrong === undefined || `${JSON.stringify(wrong.slice(0, 40))} is not ${what}`
    })
  )

/** Params as the run writes them: canonical JSON (`canonicalParams`), so that reading them and writing them back gives the same text. */
const CanonicalParams = Schema.String.pipe(
  Schema.filter((text) => {
    if (text.length > MAX_PARAMS_LENGTH) return `must be at most ${MAX_PARAMS_LENGTH} characters`
    try {
      return canonicalParams(parse(text)) === text || "must be canonical params JSON"
    } catch {
      return "must be canonical params JSON"
    }
  })
)

const Millis = Schema.Int.pipe(Schema.between(0, Number.MAX_SAFE_INTEGER))

/** What a worker needs to rebuild a study: the job's setup, with the candles named by their hash. */
export const StudyRef = Schema.Struct({
  strategy: StrategyReference,
  sourceHash: Sha256Hex,
  dataHash: Sha256Hex,
  symbol: StrategyInstanceConfig.fields.symbol,
  balances: RecordOf(/^[A-Z0-9]{2,12}$/, "an asset", DecimalText, MAX_ASSETS),
  fees: Schema.optionalWith(Schema.Struct({ maker: DecimalText, taker: DecimalText }), { exact: true }),
  settleDelayMs: Schema.Int.pipe(Schema.between(0, 60_000)),
  schedule: Schema.optionalWith(CronExpression, { exact: true })
})
export type StudyRef = typeof StudyRef.Type

const TrialMessage = Schema.Struct({ key: Sha256Hex, params: CanonicalParams, fromMs: Millis, toMs: Millis })

/** A batch of trials' request: the run that asks, the study and the trials (`Batches.ts` sizes it). */
export const TrialsRequest = Schema.Struct({
  runId: Schema.Int.pipe(Schema.positive()),
  study: StudyRef,
  trials: Schema.Array(TrialMessage).pipe(Schema.minItems(1), Schema.maxItems(MAX_BATCH))
})

export const TrialAnswer = Schema.Struct({
  key: Sha256Hex,
  metrics: Schema.optionalWith(RecordOf(/^[A-Za-z][A-Za-z0-9]{0,63}$/, "a metric's name", Schema.Union(DecimalText, Schema.Number, Schema.Null), MAX_METRICS), { exact: true }),
  error: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(MAX_ERROR_LENGTH)), { exact: true })
})

/**
 * A batch's answer: a result for each trial asked, the worker that answered (its host:port, which
 * tells the run where the batch's lane goes), and how many trials it ran and in how many
 * milliseconds (those it found stored it did not run), from which the run sizes later batches.
 */
const CheckedTrialsAnswer = Schema.Struct({
  worker: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MAX_WORKER_LENGTH)),
  ran: Schema.Int.pipe(Schema.between(0, MAX_BATCH)),
  ms: Schema.Number.pipe(Schema.finite(), Schema.nonNegative()),
  results: Schema.Array(TrialAnswer).pipe(Schema.maxItems(MAX_BATCH))
})

/**
 * `schema` checked in full where a message is read, and written as it is: the worker builds its
 * answer itself, and checking it again on the way out (every metric of every result a decimal
 * parsed within bounds, twice, as the answer is stored and as it is sent) took about a twentieth
 * of a worker's time. Nor is the answer walked on the way out to check its shape: that walk of
 * every metric of every result was a hundredth. Only for a schema whose checks refine and never transform.
 */
const checkedOnRead = <A>(schema: Schema.Schema<A, A>) => {
  const asIs = Schema.declare((_: unknown): _ is A => true)
  return Schema.transformOrFail(asIs, asIs, {
    strict: true,
    decode: (input, options) => ParseResult.decodeUnknown(schema)(input, options),
    encode: ParseResult.succeed
  })
}

export const TrialsAnswer = checkedOnRead(CheckedTrialsAnswer)
export type TrialsAnswer = typeof TrialsAnswer.Type
