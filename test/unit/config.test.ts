import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Writable } from "node:stream"
import { Effect, Either, Option, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import { loadClusterUrl, loadConfig, loadCredentials, parseConfig, type ConfigError } from "../../src/config/Load.js"
import * as Log from "../../src/log/Logger.js"

const KEY = "svk_live_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3S"
const SECRET = "svs_live_" + "m2N4b6V8c0X1z3L5k7J9h2G4f6D8s0A1p3O5i7U9y2T4r6E8w"

const problemsOf = (raw: unknown, env: Record<string, string> = {}): ReadonlyArray<string> => {
  const result = parseConfig(raw, "test.json", env)
  if (Either.isRight(result)) throw new Error("expected the config to be refused")
  return result.left.problems
}

describe("config", () => {
  it("the shipped default config is valid paper trading on the embedded venue", async () => {
    const config = await Effect.runPromise(loadConfig("config/default.json", {}))
    expect(config.mode).toBe("paper")
    expect(config.venue.embedded).toBe(true)
  })

  it("an empty object gets complete defaults", () => {
    const result = parseConfig({}, "x", {})
    expect(Either.isRight(result)).toBe(true)
  })

  const cases: ReadonlyArray<{ name: string; raw: unknown; env?: Record<string, string>; field: RegExp }> = [
    { name: "unknown mode", raw: { mode: "yolo" }, field: /^mode: must be one of "paper", "live", got "yolo"/ },
    { name: "misspelt setting", raw: { engine: { cancelOnStp: true } }, field: /^engine\.cancelOnStp: is not a known setting/ },
    { name: "bad port", raw: { health: { port: 70000 } }, field: /^health\.port: must be a TCP port/ },
    { name: "bad decimal cap", raw: { engine: { risk: { maxOrderNotional: "1e5x" } } }, field: /^engine\.risk\.maxOrderNotional:/ },
    { name: "negative cap", raw: { engine: { risk: { dailyLossLimit: "-5" } } }, field: /^engine\.risk\.dailyLossLimit: must be greater than 0/ },
    { name: "cap beyond the bounds of an amount", raw: { engine: { risk: { maxOrderNotional: "1e900000000" } } }, field: /^engine\.risk\.maxOrderNotional: .*exponent must be from -40 to 40/ },
    { name: "allocation with too many digits", raw: { strategies: [{ id: "d", strategy: "dca", symbol: "BTCUSDT", allocation: { USDT: "1".repeat(41) } }] }, field: /^strategies\[0\]\.allocation\.USDT: .*more than 40 significant digits/ },
    { name: "bad cron", raw: { strategies: [{ id: "d", strategy: "dca", symbol: "BTCUSDT", schedule: "every day" }] }, field: /^strategies\[0\]\.schedule: "every day" is not a valid cron expression/ },
    { name: "lower-case symbol", raw: { strategies: [{ id: "d", strategy: "dca", symbol: "btc-usdt" }] }, field: /^strategies\[0\]\.symbol: must be a pair written as one upper-case word/ },
    { name: "missing strategy name", raw: { strategies: [{ id: "d", symbol: "BTCUSDT" }] }, field: /^strategies\[0\]\.strategy: is required but missing/ },
    { name: "duplicate ids", raw: { strategies: [{ id: "a", strategy: "x", symbol: "BTCUSDT" }, { id: "a", strategy: "y", symbol: "BTCUSDT" }] }, field: /^strategies\[1\]\.id: "a" is used twice/ },
    { name: "no base URL without the embedded venue", raw: { venue: { embedded: false } }, field: /^venue\.baseUrl: is required when venue\.embedded is false/ },
    { name: "live over plain http", raw: { mode: "live", venue: { embedded: false, baseUrl: "http://exchange.example" } }, field: /^venue\.baseUrl: must be https in live mode/ },
    { name: "env override with a non-number port", raw: {}, env: { SVC_HEALTH_PORT: "eighty" }, field: /^SVC_HEALTH_PORT: "eighty" is not a whole number/ }
  ]
  for (const c of cases) {
    it(`names the field: ${c.name}`, () => {
      const problems = problemsOf(c.raw, c.env)
      expect(problems.some((p) => c.field.test(p)), problems.join("\n")).toBe(true)
    })
  }

  it("lists every problem at once", () => {
    const problems = problemsOf({ mode: "x", health: { port: 0 }, engine: { risk: { maxOpenOrders: -1 } } })
    expect(problems.length).toBeGreaterThanOrEqual(3)
  })

  it("environment overrides apply on top of the file", () => {
    const result = parseConfig({}, "x", { SVC_BASE_URL: "https://exchange.example", SVC_DATABASE_PATH: "/data/x.db", SVC_HEALTH_PORT: "8081" })
    const config = Either.getOrThrow(result)
    expect(config.venue.embedded).toBe(false)
    expect(config.venue.baseUrl).toBe("https://exchange.example")
    expect(config.database.path).toBe("/data/x.db")
    expect(config.health.port).toBe(8081)
  })

  it("health listens on loopback unless health.host is set", () => {
    expect(Either.getOrThrow(parseConfig({}, "x", {})).health.host).toBe("127.0.0.1")
    expect(Either.getOrThrow(parseConfig({ health: { port: 8081 } }, "x", {})).health.host).toBe("127.0.0.1")
    expect(Either.getOrThrow(parseConfig({ health: { host: "0.0.0.0", port: 8081 } }, "x", {})).health.host).toBe("0.0.0.0")
  })

  describe("the health token", () => {
    const TOKEN = "f0e1d2c3b4a5968778695a4b3c2d1e0f"
    const tokenOf = (raw: unknown, env: Record<string, string>) => Either.getOrThrow(parseConfig(raw, "x", env)).health.token

    it("comes from health.token, SVC_HEALTH_TOKEN or SVC_HEALTH_TOKEN_FILE (its last newline dropped), Redacted", () => {
      const dir = mkdtempSync(join(tmpdir(), "svcbot-config-"))
      writeFileSync(join(dir, "token"), `${TOKEN}\n`)
      for (const token of [tokenOf({ health: { token: TOKEN } }, {}), tokenOf({}, { SVC_HEALTH_TOKEN: TOKEN }), tokenOf({}, { SVC_HEALTH_TOKEN_FILE: join(dir, "token") })]) {
        expect(Redacted.isRedacted(token)).toBe(true)
        expect(Redacted.value(token!)).toBe(TOKEN)
        expect(String(token)).not.toContain(TOKEN)
      }
      expect(tokenOf({}, {})).toBeUndefined()
    })

    it("is refused short, not a string, with spaces, or set twice, and no problem shows it", () => {
      const short = "abc123"
      const spaced = `${TOKEN} ${TOKEN}`
      const problems = [
        ...problemsOf({ health: { token: short } }),
        ...problemsOf({ health: { token: 123456789012345 } }),
        ...problemsOf({}, { SVC_HEALTH_TOKEN: spaced }),
        ...problemsOf({}, { SVC_HEALTH_TOKEN: TOKEN, SVC_HEALTH_TOKEN_FILE: "/run/secrets/svc_health_token" }),
        ...problemsOf({}, { SVC_HEALTH_TOKEN_FILE: "/nonexistent/token" })
      ]
      expect(problems.filter((p) => p.startsWith("health.token: must be 32 to 512"))).toHaveLength(3)
      expect(problems).toContain("SVC_HEALTH_TOKEN and SVC_HEALTH_TOKEN_FILE are both set: keep one (the _FILE form is for Docker secrets)")
      expect(problems.some((p) => p.startsWith("SVC_HEALTH_TOKEN_FILE: cannot read /nonexistent/token: ENOENT"))).toBe(true)
      for (const problem of problems) for (const secret of [short, "123456789012345", TOKEN]) expect(problem).not.toContain(secret)
    })

    it("is registered for redaction: a log line that carries it shows [REDACTED]", async () => {
      const token = "9a8b7c6d5e4f30211203f4e5d6c7b8a9"
      tokenOf({}, { SVC_HEALTH_TOKEN: token })
      const lines: Array<string> = []
      const destination = new Writable({ write: (chunk, _encoding, done) => { lines.push(String(chunk)); done() } })
      await Effect.runPromise(Log.logEvent("request.failed", { detail: `Authorization: Bearer ${token}` }).pipe(Effect.provide(Log.layer({ destination, pretty: false }))))
      expect(lines.join("")).toContain("Bearer [REDACTED]")
      expect(lines.join("")).not.toContain(token)
    })
  })

  describe("the cluster's URL", () => {
    const URL_WITH_PASSWORD = "postgres://svcbot:s3cret%2Fpw-0f9e8d@postgres:5432/svcbot"

    it("is --cluster when given, else SVC_CLUSTER_URL or SVC_CLUSTER_URL_FILE (its last newline dropped), else none", () => {
      const dir = mkdtempSync(join(tmpdir(), "svcbot-config-"))
      writeFileSync(join(dir, "cluster_url"), `${URL_WITH_PASSWORD}\n`)
      expect(Either.getOrThrow(loadClusterUrl(Option.some("postgres://a@b/c"), { SVC_CLUSTER_URL: URL_WITH_PASSWORD }))).toEqual(Option.some("postgres://a@b/c"))
      expect(Either.getOrThrow(loadClusterUrl(Option.none(), { SVC_CLUSTER_URL: URL_WITH_PASSWORD }))).toEqual(Option.some(URL_WITH_PASSWORD))
      expect(Either.getOrThrow(loadClusterUrl(Option.none(), { SVC_CLUSTER_URL_FILE: join(dir, "cluster_url") }))).toEqual(Option.some(URL_WITH_PASSWORD))
      expect(Either.getOrThrow(loadClusterUrl(Option.none(), {}))).toEqual(Option.none())
    })

    it("from the environment, is refused set twice or malformed, without showing it", () => {
      const twice = loadClusterUrl(Option.none(), { SVC_CLUSTER_URL: URL_WITH_PASSWORD, SVC_CLUSTER_URL_FILE: "/run/secrets/svc_cluster_url" })
      expect(Either.isLeft(twice) && twice.left.problems).toEqual(["SVC_CLUSTER_URL and SVC_CLUSTER_URL_FILE are both set: keep one (the _FILE form is for Docker secrets)"])
      const malformed = loadClusterUrl(Option.none(), { SVC_CLUSTER_URL: "mysql://svcbot:hunter2-hunter2@db/svcbot" })
      expect(Either.isLeft(malformed) && malformed.left.message).toBe("environment: SVC_CLUSTER_URL: must be the cluster's Postgres URL, postgres://USER:PASSWORD@HOST:PORT/DB")
    })

    it("has its password registered for redaction: a log line that carries it shows [REDACTED]", async () => {
      Either.getOrThrow(loadClusterUrl(Option.none(), { SVC_CLUSTER_URL: URL_WITH_PASSWORD }))
      const lines: Array<string> = []
      const destination = new Writable({ write: (chunk, _encoding, done) => { lines.push(String(chunk)); done() } })
      await Effect.runPromise(Log.logEvent("request.failed", { detail: "password authentication failed for s3cret/pw-0f9e8d", url: URL_WITH_PASSWORD }).pipe(Effect.provide(Log.layer({ destination, pretty: false }))))
      expect(lines.join("")).not.toContain("s3cret")
    })
  })

  it("a missing or malformed file is a clear error", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svcbot-config-"))
    const missing = await Effect.runPromise(Effect.either(loadConfig(join(dir, "nope.json"), {})))
    expect(Either.isLeft(missing) && missing.left.problems[0]).toMatch(/cannot read the config file: ENOENT/)
    writeFileSync(join(dir, "bad.json"), "{ mode: paper }")
    const bad = await Effect.runPromise(Effect.either(loadConfig(join(dir, "bad.json"), {})))
    expect(Either.isLeft(bad) && bad.left.problems[0]).toMatch(/not valid JSON/)
  })
})

describe("credentials", () => {
  it("reads key and secret from the environment as Redacted values", () => {
    const creds = Either.getOrThrow(loadCredentials({ SVC_API_KEY: KEY, SVC_API_SECRET: SECRET }))
    expect(Option.isSome(creds)).toBe(true)
    const value = Option.getOrThrow(creds)
    expect(Redacted.value(value.apiSecret)).toBe(SECRET)
    expect(String(value.apiSecret)).not.toContain(SECRET)
  })

  it("reads Docker secret files and drops their trailing newline", () => {
    const dir = mkdtempSync(join(tmpdir(), "svcbot-secrets-"))
    writeFileSync(join(dir, "key"), `${KEY}\n`)
    writeFileSync(join(dir, "secret"), `${SECRET}\n`)
    const creds = Either.getOrThrow(loadCredentials({ SVC_API_KEY_FILE: join(dir, "key"), SVC_API_SECRET_FILE: join(dir, "secret") }))
    expect(Redacted.value(Option.getOrThrow(creds).apiKey)).toBe(KEY)
  })

  it("no credentials is none, not an error", () => {
    expect(Either.getOrThrow(loadCredentials({}))).toEqual(Option.none())
  })

  it("bad credentials are named without printing the secret, and never reach a log line", async () => {
    const truncated = SECRET.slice(0, -3)
    const cases = [
      loadCredentials({ SVC_API_KEY: KEY, SVC_API_SECRET: truncated }),
      loadCredentials({ SVC_API_SECRET: SECRET }),
      loadCredentials({ SVC_API_KEY: SECRET, SVC_API_SECRET: KEY }),
      loadCredentials({ SVC_API_KEY: KEY, SVC_API_SECRET: SECRET, SVC_API_SECRET_FILE: "/nonexistent" })
    ]
    const lines: Array<string> = []
    const sink = new Writable({ write: (chunk, _encoding, done) => { lines.push(String(chunk)); done() } })
    for (const result of cases) {
      expect(Either.isLeft(result)).toBe(true)
      const error = (result as Either.Left<ConfigError, unknown>).left
      expect(error.message).not.toContain(truncated)
      expect(error.message).not.toContain(SECRET)
      await Effect.runPromise(
        Log.logEvent("config.invalid", { problems: error.problems, secret: SECRET, echoed: `value=${SECRET}` }).pipe(Effect.provide(Log.layer({ destination: sink, pretty: false })))
      )
    }
    const output = lines.join("")
    expect(output).toContain("config.invalid")
    expect(output).toMatch(/SVC_API_SECRET: the API secret must be svs_live_ followed by 49 characters/)
    expect(output).not.toContain(SECRET)
    expect(output).not.toContain(truncated)
  })
})
