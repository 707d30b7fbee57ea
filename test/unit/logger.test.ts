import { Writable } from "node:stream"
import { Cause, Effect, HashMap } from "effect"
import { describe, expect, it } from "vitest"
import { EventCatalog } from "../../src/log/Events.js"
import * as Log from "../../src/log/Logger.js"
import { pino } from "pino"
import { maskKeyFields, redactPaths, REDACTED, registerSecret } from "../../src/log/Redaction.js"

const capture = (level: "debug" | "info" = "debug") => {
  const lines: Array<string> = []
  const destination = new Writable({ write: (chunk, _encoding, done) => { lines.push(...String(chunk).split("\n").filter((l) => l !== "")); done() } })
  return { lines, layer: Log.layer({ destination, pretty: false, level }) }
}

describe("logger", () => {
  it("writes one JSON line per event with its catalog level and fields", async () => {
    const { lines, layer } = capture()
    await Effect.runPromise(
      Effect.all([Log.logEvent("order.accepted", { clientOrderId: "c1", symbol: "BTCUSDT" }), Log.logEvent("auth.invalid", { status: 401 })]).pipe(Effect.provide(layer))
    )
    const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(parsed).toHaveLength(2)
    expect(parsed[0]).toMatchObject({ event: "order.accepted", level: EventCatalog["order.accepted"].level, clientOrderId: "c1", symbol: "BTCUSDT" })
    expect(parsed[1]).toMatchObject({ event: "auth.invalid", level: "error", status: 401 })
    expect(typeof parsed[0]!.time).toBe("string")
  })

  it("censors secrets and signatures and shows key ids as 12 characters", async () => {
    const secret = "svs_live_" + "x".repeat(49)
    registerSecret(secret)
    const key = "svk_live_" + "K".repeat(22)
    const { lines, layer } = capture()
    await Effect.runPromise(
      Log.logEvent("request.failed", {
        apiKey: key,
        headers: { "X-SVC-APIKEY": key, "X-SVC-SIGNATURE": "ab".repeat(32) },
        detail: `sent with ${secret}`,
        signature: "cd".repeat(32)
      }).pipe(Effect.provide(layer))
    )
    const output = lines.join("\n")
    expect(output).not.toContain(secret)
    expect(output).not.toContain(key)
    expect(output).not.toContain("ab".repeat(32))
    expect(output).not.toContain("cd".repeat(32))
    expect(output).toContain(key.slice(0, 12))
  })

  it("censors a secret holding \" and \\ in every form it reaches a line: as written, JSON-escaped once and twice, URL- and form-encoded", async () => {
    const secret = 'pa"ss\\wo rd/ü+%&=;'
    registerSecret(secret)
    const { lines, layer } = capture()
    await Effect.runPromise(
      Log.logEvent("request.failed", {
        detail: `sent with ${secret}`,
        body: JSON.stringify({ error: "refused", password: secret }),
        url: `https://hooks.example.com/alert?token=${encodeURIComponent(secret)}`,
        form: new URLSearchParams({ token: secret, user: "svcbot" }).toString(),
        path: `/api/keys/${encodeURIComponent(secret)}/revoke`
      }).pipe(Effect.provide(layer))
    )
    const output = lines.join("\n")
    console.log(`the log line of a secret holding " and \\:\n${output}`)
    // What a reader of the line gets back from each field by decoding it the way it was encoded.
    const decodings = (value: string): ReadonlyArray<string> => {
      const out = [value]
      try { out.push(JSON.stringify(JSON.parse(value))) } catch { /* not JSON */ }
      try { out.push(decodeURIComponent(value)) } catch { /* not URL-encoded */ }
      out.push(...new URLSearchParams(value.split("?").pop()).values())
      return out
    }
    const fields = JSON.parse(lines[0]!) as Record<string, string>
    for (const name of ["detail", "body", "url", "form", "path"]) {
      expect(fields[name], name).toContain(REDACTED)
      for (const decoded of decodings(fields[name]!)) expect(decoded, name).not.toContain(secret)
    }
    for (const form of [secret, JSON.stringify(secret).slice(1, -1), encodeURIComponent(secret), new URLSearchParams({ s: secret }).toString().slice(2)]) expect(output).not.toContain(form)
    expect(fields.body).toBe(JSON.stringify({ error: "refused", password: REDACTED }))
  })

  it("censors every one of many registered secrets, the first and the last registered alike", async () => {
    const secrets = Array.from({ length: 200 }, (_, i) => `many-secrets-${i.toString().padStart(3, "0")}-${"x".repeat(i % 7)}.*?`)
    for (const secret of secrets) registerSecret(secret)
    const { lines, layer } = capture()
    await Effect.runPromise(
      Effect.all([
        Log.logEvent("request.failed", { detail: `first ${secrets[0]} last ${secrets[199]} middle ${secrets[100]}` }),
        Log.logEvent("request.failed", { detail: "many-secrets-100 without the rest of one" })
      ]).pipe(Effect.provide(layer))
    )
    expect(lines).toHaveLength(2)
    expect(JSON.parse(lines[0]!).detail).toBe(`first ${REDACTED} last ${REDACTED} middle ${REDACTED}`)
    expect(JSON.parse(lines[1]!).detail).toBe("many-secrets-100 without the rest of one")
  })

  it("writes an event's fields and the annotations set around it in one line, the event's own fields winning", async () => {
    const { lines, layer } = capture()
    await Effect.runPromise(
      Log.logEvent("order.accepted", { clientOrderId: "c1", strategy: "inner" }).pipe(
        Effect.annotateLogs({ requestId: "r-7", strategy: "outer" }),
        Effect.provide(layer)
      )
    )
    expect(lines).toHaveLength(1)
    const line = JSON.parse(lines[0]!) as Record<string, unknown>
    expect(line).toEqual({ level: "info", time: line.time, event: "order.accepted", requestId: "r-7", strategy: "inner", clientOrderId: "c1" })
  })

  it("writes a batch of events as one logEvent each would: in order, under the annotations, those below the minimum level dropped", async () => {
    const { lines, layer } = capture("info")
    const key = "svk_live_" + "B".repeat(22)
    await Effect.runPromise(
      Log.logEvents([
        ["order.intent", { tag: "buy-1", strategy: "inner" }],
        ["order.submitted", { tag: "buy-1" }],
        ["order.accepted", { tag: "buy-1", clientOrderId: "c1", apiKey: key }],
        ["order.rejected", { tag: "buy-2", code: "INSUFFICIENT_BALANCE" }]
      ]).pipe(Effect.annotateLogs({ requestId: "r-8", strategy: "outer" }), Effect.provide(layer))
    )
    const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>)
    // order.submitted is a debug event: below the minimum, as with logEvent.
    expect(parsed.map((l) => [l.event, l.level])).toEqual([
      ["order.intent", "info"],
      ["order.accepted", "info"],
      ["order.rejected", "warn"]
    ])
    expect(parsed[0]).toMatchObject({ requestId: "r-8", strategy: "inner", tag: "buy-1" })
    expect(parsed[1]).toMatchObject({ requestId: "r-8", strategy: "outer", clientOrderId: "c1", apiKey: key.slice(0, 12) + "…" })
    expect(lines.join("\n")).not.toContain(key)
  })

  it("censors a secret among an event's fields under annotations, and keeps the caller's fields as they were", async () => {
    const secret = "svs_live_" + "y".repeat(49)
    registerSecret(secret)
    const key = "svk_live_" + "Q".repeat(22)
    const fields = { keyId: key, secret: "s3cr3t-value", note: `built from ${secret}` }
    const { lines, layer } = capture()
    await Effect.runPromise(Log.logEvent("auth.invalid", fields).pipe(Effect.annotateLogs({ component: "client" }), Effect.provide(layer)))
    expect(lines).toHaveLength(1)
    const line = JSON.parse(lines[0]!) as Record<string, unknown>
    expect(line).toMatchObject({ event: "auth.invalid", component: "client", secret: "[REDACTED]", keyId: `${key.slice(0, 12)}…`, note: "built from [REDACTED]" })
    expect(lines[0]).not.toContain("s3cr3t-value")
    expect(fields).toEqual({ keyId: key, secret: "s3cr3t-value", note: `built from ${secret}` })
  })

  it("censors exactly what pino's redact option censors at the paths of Redaction.ts, and leaves the caller's fields as they were", async () => {
    const reference = pino(
      {
        base: null,
        messageKey: "event",
        timestamp: false,
        redact: { paths: [...redactPaths], censor: REDACTED },
        formatters: { level: (label) => ({ level: label }), log: (object) => maskKeyFields(object) }
      },
      { write: (line: string) => expected.push(line.trim()) }
    )
    const expected: Array<string> = []
    const samples: ReadonlyArray<Record<string, unknown>> = [
      { secret: "top", apiSecret: "top2", signature: "top3", what: "cancel" },
      { request: { secret: "nested", apiSecret: "n2", signature: "n3", keep: "k" }, other: ["secret", { secret: "in an array stays" }] },
      { headers: { "x-svc-signature": "lower", "X-SVC-SIGNATURE": "upper", authorization: "a", Authorization: "A", "X-SVC-APIKEY": "svk_live_" + "Z".repeat(22) } },
      { call: { headers: { "x-svc-signature": "deep", "X-SVC-SIGNATURE": "DEEP", authorization: "not at this depth" } } },
      { headers: { "x-svc-signature": "by name", secret: "by wildcard", headers: { "X-SVC-SIGNATURE": "both ways" } } },
      { secret: undefined, signature: null, nested: { secret: 0 }, plain: "nothing to censor", n: 1 }
    ]
    const copies = samples.map((sample) => structuredClone(sample))
    for (const sample of samples) reference.warn(sample, "request.failed")
    const { lines, layer } = capture()
    await Effect.runPromise(Effect.forEach(samples, (sample) => Log.logEvent("request.failed", sample), { discard: true }).pipe(Effect.provide(layer)))
    expect(lines.map((line) => line.replace(/,"time":"[^"]+"/, ""))).toEqual(expected)
    expect(samples).toEqual(copies)
  })

  it("writes nothing for a debug event while the level is info, and writes it at debug", async () => {
    const info = capture("info")
    await Effect.runPromise(Effect.all([Log.logEvent("order.submitted", { clientOrderId: "c1" }), Log.logEvent("order.accepted", { clientOrderId: "c1" })]).pipe(Effect.provide(info.layer)))
    expect(info.lines.map((l) => (JSON.parse(l) as { event: string }).event)).toEqual(["order.accepted"])
    const debug = capture("debug")
    await Effect.runPromise(Log.logEvent("order.submitted", { clientOrderId: "c1" }).pipe(Effect.provide(debug.layer)))
    expect(debug.lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toMatchObject([{ event: "order.submitted", level: "debug", clientOrderId: "c1" }])
  })

  it("reads a library's plain Effect.log line as library.log: its text as message, the rest as detail, with its annotations", () => {
    const line = Log.lineOf(["Listening on: 127.0.0.1:34431", 42], HashMap.make(["package", "@effect/cluster"]))
    expect(line).toEqual({ event: "library.log", fields: { package: "@effect/cluster", message: "Listening on: 127.0.0.1:34431", detail: 42 } })
    expect(EventCatalog[line.event as keyof typeof EventCatalog]).toBeDefined()
  })

  it("writes a cause logged alone (the runtime reporting a defect) with no message, rather than \"undefined\"", async () => {
    const info = capture("info")
    await Effect.runPromise(Effect.logError(Cause.die(new Error("the disk went away"))).pipe(Effect.provide(info.layer)))
    const [line] = info.lines.map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(line).toMatchObject({ level: "error", event: "library.log" })
    expect(line).not.toHaveProperty("message")
    expect(String(line!.cause)).toContain("Error: the disk went away")
  })

  it("every catalog event has a level and a meaning", () => {
    for (const [name, spec] of Object.entries(EventCatalog)) {
      expect(name).toMatch(/^[a-z]+(\.[a-z-]+)?$/)
      expect(["debug", "info", "warn", "error", "fatal"]).toContain(spec.level)
      expect(spec.meaning.length).toBeGreaterThan(10)
    }
  })
})

describe("colour of the pretty log lines and the help", () => {
  it("only on a terminal, never with NO_COLOR set or a dumb terminal", () => {
    expect(Log.colourOn({ isTTY: true }, {})).toBe(true)
    expect(Log.colourOn({ isTTY: true }, { NO_COLOR: "" })).toBe(true)
    expect(Log.colourOn({ isTTY: true }, { NO_COLOR: "1" })).toBe(false)
    expect(Log.colourOn({ isTTY: true }, { TERM: "dumb" })).toBe(false)
    expect(Log.colourOn({ isTTY: false }, {})).toBe(false)
    expect(Log.colourOn({}, {})).toBe(false)
  })
})
