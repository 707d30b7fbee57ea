/**
 * Reading the configuration: the JSON file, environment overrides on top, then
 * validation; and the API credentials from the environment or Docker secrets.
 */
import { readFileSync } from "node:fs"
import { Data, Effect, Either, Option, ParseResult, Redacted, Schema } from "effect"
import { registerSecret } from "../log/Redaction.js"
import { keyIdProblem, secretProblem } from "../svc/Signer.js"
import { Config } from "./Config.js"

export class ConfigError extends Data.TaggedError("ConfigError")<{
  readonly source: string
  /** One line per problem: `field.path: what is wrong (how to fix it)`. */
  readonly problems: ReadonlyArray<string>
}> {
  /** One line per problem, each naming the file (or "environment") and the field. */
  override get message(): string {
    return this.problems.map((problem) => `${this.source}: ${problem}`).join("\n")
  }
}

type Env = Readonly<Record<string, string | undefined>>

const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>((out, key) => (typeof key === "number" ? `${out}[${key}]` : out === "" ? String(key) : `${out}.${String(key)}`), "")

/** Schema's own wording of a wrong type, e.g. `Expected number, actual "fast"`. */
const TYPE_NAMES: Readonly<Record<string, string>> = { number: "a number", string: "a string", boolean: "true or false", NonEmptyString: "a non-empty string", Int: "an integer" }

const explain = (message: string): string => {
  if (message === "is missing") return "is required but missing (add it)"
  const wrongType = /^Expected (\w+), actual (.*)$/s.exec(message)
  if (wrongType !== null) return `expected ${TYPE_NAMES[wrongType[1]!] ?? wrongType[1]}, got ${wrongType[2]}`
  if (message.startsWith("Expected { ") || message.startsWith("Expected ReadonlyArray<")) {
    return `expected ${message.startsWith("Expected { ") ? "an object" : "an array"}, got ${message.split(", actual ")[1] ?? "something else"}`
  }
  if (message.startsWith("is unexpected")) {
    const known = message.split("expected: ")[1]
    return `is not a known setting (remove it or check its spelling${known === undefined ? "" : `; known settings here: ${known.replaceAll('"', "")}`})`
  }
  return message
}

/** Each problem as `field.path: what is wrong (how to fix it)`. */
export const describeProblems = (error: ParseResult.ParseError): ReadonlyArray<string> =>
  ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => `${formatPath(issue.path) || "(top level)"}: ${explain(issue.message)}`)

const setPath = (target: Record<string, unknown>, path: ReadonlyArray<string>, value: unknown): void => {
  let node = target
  for (const key of path.slice(0, -1)) {
    const next = node[key]
    node = (node[key] = next !== null && typeof next === "object" ? { ...(next as object) } : {}) as Record<string, unknown>
  }
  node[path[path.length - 1]!] = value
}

const readSecretVariable = (env: Env, name: string): Either.Either<string | undefined, string> => {
  const direct = env[name]
  const file = env[`${name}_FILE`]
  if (direct !== undefined && direct !== "" && file !== undefined && file !== "") {
    return Either.left(`${name} and ${name}_FILE are both set: keep one (the _FILE form is for Docker secrets)`)
  }
  if (file !== undefined && file !== "") {
    try {
      // Secret files usually end with a newline that is not part of the value.
      return Either.right(readFileSync(file, "utf8").replace(/\r?\n$/, ""))
    } catch (cause) {
      return Either.left(`${name}_FILE: cannot read ${file}: ${(cause as NodeJS.ErrnoException).code ?? "error"} (check the path and that the file is mounted)`)
    }
  }
  return Either.right(direct === "" ? undefined : direct)
}

/** Environment variables that override file settings, for containers. */
export const envOverrides: ReadonlyArray<{ readonly variable: string; readonly path: ReadonlyArray<string>; readonly integer?: boolean }> = [
  { variable: "SVC_MODE", path: ["mode"] },
  { variable: "SVC_BASE_URL", path: ["venue", "baseUrl"] },
  { variable: "SVC_DATABASE_PATH", path: ["database", "path"] },
  { variable: "SVC_EVIDENCE_PATH", path: ["evidence", "path"] },
  { variable: "SVC_HEALTH_PORT", path: ["health", "port"], integer: true },
  { variable: "SVC_LOG_LEVEL", path: ["log", "level"] },
  { variable: "SVC_ALERT_WEBHOOK_URL", path: ["alerts", "webhookUrl"] }
]

/** Secret settings the environment overrides, each from its variable or its `_FILE` form (a Docker secret). */
export const envSecretOverrides: ReadonlyArray<{ readonly variable: string; readonly path: ReadonlyArray<string> }> = [
  { variable: "SVC_HEALTH_TOKEN", path: ["health", "token"] }
]

export const applyEnv = (raw: unknown, env: Env): { readonly value: unknown; readonly problems: ReadonlyArray<string> } => {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) return { value: raw, problems: [] }
  const value = { ...(raw as Record<string, unknown>) }
  const problems: Array<string> = []
  for (const { variable, path, integer } of envOverrides) {
    const text = env[variable]
    if (text === undefined || text === "") continue
    if (integer === true && !/^\d+$/.test(text)) {
      problems.push(`${variable}: "${text}" is not a whole number (it overrides ${path.join(".")})`)
      continue
    }
    setPath(value, path, integer === true ? Number(text) : text)
    // A base URL from the environment means a real exchange, not the embedded venue.
    if (variable === "SVC_BASE_URL") setPath(value, ["venue", "embedded"], false)
  }
  for (const { variable, path } of envSecretOverrides) {
    const secret = readSecretVariable(env, variable)
    if (Either.isLeft(secret)) problems.push(secret.left)
    else if (secret.right !== undefined) setPath(value, path, secret.right)
  }
  return { value, problems }
}

const decodeConfig = Schema.decodeUnknownEither(Config, { errors: "all", onExcessProperty: "error" })

/** Validates an already-parsed config object (file contents with overrides applied). */
export const parseConfig = (raw: unknown, source: string, env: Env = {}): Either.Either<Config, ConfigError> => {
  const { value, problems } = applyEnv(raw, env)
  const decoded = decodeConfig(value)
  const all = [...problems, ...(Either.isLeft(decoded) ? describeProblems(decoded.left) : [])]
  if (all.length > 0) return Either.left(new ConfigError({ source, problems: all }))
  const config = (decoded as Either.Right<never, Config>).right
  if (config.health.token !== undefined) registerSecret(Redacted.value(config.health.token))
  return Either.right(config)
}

/** Reads, overrides and validates the config file at `path`. */
export const loadConfig = (path: string, env: Env = process.env): Effect.Effect<Config, ConfigError> =>
  Effect.gen(function* () {
    const text = yield* Effect.try({
      try: () => readFileSync(path, "utf8"),
      catch: (cause) =>
        new ConfigError({
          source: path,
          problems: [`cannot read the config file: ${(cause as NodeJS.ErrnoException).code ?? String(cause)} (check the --config path)`]
        })
    })
    const raw = yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: (cause) =>
        new ConfigError({ source: path, problems: [`not valid JSON: ${cause instanceof Error ? cause.message : String(cause)}`] })
    })
    return yield* parseConfig(raw, path, env)
  })

/** How a Postgres URL of the cluster starts; anything else is refused before it is used or shown. */
const POSTGRES_URL = /^postgres(ql)?:\/\//

/**
 * The cluster's Postgres URL: `--cluster` when given, else `SVC_CLUSTER_URL` or `SVC_CLUSTER_URL_FILE`
 * (a Docker secret), so that its password need not be on a command line, where `ps` and the
 * container's inspection show it. None when none is set. Its password is registered for log
 * redaction wherever it came from; a malformed value from the environment is refused without showing it.
 */
export const loadClusterUrl = (flag: Option.Option<string>, env: Env = process.env): Either.Either<Option.Option<string>, ConfigError> => {
  const url = Option.isSome(flag) ? Either.right(flag.value) : readSecretVariable(env, "SVC_CLUSTER_URL")
  if (Either.isLeft(url)) return Either.left(new ConfigError({ source: "environment", problems: [url.left] }))
  if (url.right === undefined) return Either.right(Option.none())
  if (Option.isNone(flag) && !POSTGRES_URL.test(url.right)) {
    return Either.left(new ConfigError({ source: "environment", problems: ["SVC_CLUSTER_URL: must be the cluster's Postgres URL, postgres://USER:PASSWORD@HOST:PORT/DB"] }))
  }
  try {
    registerSecret(decodeURIComponent(new URL(url.right).password))
  } catch {
    // An unparsable URL carries no password to hide; the cluster's client refuses it, naming it masked.
  }
  return Either.right(Option.some(url.right))
}

export interface Credentials {
  readonly apiKey: Redacted.Redacted<string>
  readonly apiSecret: Redacted.Redacted<string>
}

/**
 * The API key and secret from `SVC_API_KEY`/`SVC_API_SECRET` or their `_FILE`
 * forms. None when neither is set; an error (never showing the secret) when
 * only one is set or a value is malformed.
 */
export const loadCredentials = (env: Env = process.env): Either.Either<Option.Option<Credentials>, ConfigError> => {
  const key = readSecretVariable(env, "SVC_API_KEY")
  const secret = readSecretVariable(env, "SVC_API_SECRET")
  const problems: Array<string> = []
  if (Either.isLeft(key)) problems.push(key.left)
  if (Either.isLeft(secret)) problems.push(secret.left)
  const keyValue = Either.getOrUndefined(key)
  const secretValue = Either.getOrUndefined(secret)
  if (secretValue !== undefined) registerSecret(secretValue)
  if (problems.length === 0 && keyValue === undefined && secretValue === undefined) return Either.right(Option.none())
  if (problems.length === 0 && keyValue === undefined) problems.push("SVC_API_KEY is not set but a secret is: set the key id (svk_live_...) too")
  if (problems.length === 0 && secretValue === undefined) problems.push("SVC_API_SECRET is not set but a key is: set the secret (svs_live_...) too")
  if (keyValue !== undefined) {
    const problem = keyIdProblem(keyValue)
    if (problem !== undefined) problems.push(`SVC_API_KEY: ${problem}`)
  }
  if (secretValue !== undefined) {
    const problem = secretProblem(secretValue)
    if (problem !== undefined) problems.push(`SVC_API_SECRET: ${problem}`)
  }
  if (problems.length > 0) return Either.left(new ConfigError({ source: "environment", problems }))
  return Either.right(Option.some({ apiKey: Redacted.make(keyValue!), apiSecret: Redacted.make(secretValue!) }))
}
