import { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import { Writable } from "node:stream"
import { NodeHttpClient } from "@effect/platform-node"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { logEvent, layer as loggerLayer } from "../../src/log/Logger.js"
import { registerSecret } from "../../src/log/Redaction.js"
import { AlertWebhook, type AlertWebhookOptions } from "../../src/ops/AlertWebhook.js"

interface Received {
  readonly method: string
  readonly url: string
  readonly headers: IncomingHttpHeaders
  readonly body: string
}

/**
 * A webhook receiver on loopback that answers with the scripted statuses in turn, then 200;
 * a status of 0 never answers (a receiver that hangs).
 */
const startReceiver = async (statuses: ReadonlyArray<number> = []) => {
  const received: Array<Received> = []
  const server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      received.push({ method: request.method ?? "", url: request.url ?? "", headers: request.headers, body: Buffer.concat(chunks).toString("utf8") })
      const status = statuses[received.length - 1] ?? 200
      if (status === 0) return
      response.statusCode = status
      response.end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  const close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    })
  return { received, url: `http://127.0.0.1:${port}/hooks/T0KEN-IN-PATH`, close }
}

const capture = () => {
  const lines: Array<Record<string, unknown>> = []
  const destination = new Writable({
    write: (chunk, _encoding, done) => {
      for (const line of String(chunk).split("\n")) if (line !== "") lines.push(JSON.parse(line) as Record<string, unknown>)
      done()
    }
  })
  return { lines, layer: loggerLayer({ destination, pretty: false }) }
}

const waitFor = async (condition: () => boolean, what: string, deadlineMs = 10_000) => {
  const deadline = Date.now() + deadlineMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setImmediate(resolve))
  }
}

const fast: Partial<AlertWebhookOptions> = { retryBaseMs: 5, maxRetryDelayMs: 20, attemptTimeoutMs: 2000 }

const receivers: Array<{ close: () => Promise<void> }> = []
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()))
})

const withReceiver = async (statuses?: ReadonlyArray<number>) => {
  const receiver = await startReceiver(statuses)
  receivers.push(receiver)
  return receiver
}

/** Runs `program` with the pino logger outside and the webhook layer inside, as the daemon composes them. */
const run = <A, E>(program: Effect.Effect<A, E, AlertWebhook>, options: AlertWebhookOptions, log: ReturnType<typeof capture>) =>
  Effect.runPromise(
    program.pipe(
      Effect.provide(AlertWebhook.layer(options).pipe(Layer.provide(NodeHttpClient.layerUndici))),
      Effect.provide(log.layer)
    )
  )

describe("alert webhook", () => {
  it("POSTs one JSON alert with the event, its meaning and the line's fields, and logs alert.sent", async () => {
    const receiver = await withReceiver()
    const log = capture()
    const delivered = await run(
      Effect.flatMap(AlertWebhook, (alerts) =>
        logEvent("config.loaded", { alertsWebhookUrl: receiver.url }).pipe(
          Effect.zipRight(alerts.send("risk.kill-switch", { strategy: "grid-1", realizedPnl: "-250.5", dailyLossLimit: "250" }))
        )
      ),
      { url: receiver.url, instance: "paper-eu", ...fast },
      log
    )
    expect(delivered).toBe(true)
    expect(receiver.received).toHaveLength(1)
    const request = receiver.received[0]!
    expect(request.method).toBe("POST")
    expect(request.url).toBe("/hooks/T0KEN-IN-PATH")
    expect(request.headers["content-type"]).toMatch(/^application\/json/)
    const payload = JSON.parse(request.body) as Record<string, unknown>
    expect(payload).toMatchObject({
      source: "svcbot",
      instance: "paper-eu",
      event: "risk.kill-switch",
      level: "error",
      fields: { strategy: "grid-1", realizedPnl: "-250.5", dailyLossLimit: "250" }
    })
    expect(payload.text).toContain("risk.kill-switch")
    expect(Number.isNaN(Date.parse(String(payload.time)))).toBe(false)
    const sent = log.lines.find((line) => line.event === "alert.sent")
    expect(sent).toMatchObject({ alert: "risk.kill-switch", attempts: 1, status: 200 })
    // The path of a webhook URL is its credential: only the host is logged, and the URL is redacted anywhere else.
    expect(log.lines.find((line) => line.event === "config.loaded")).toBeDefined()
    expect(JSON.stringify(log.lines)).not.toContain("T0KEN-IN-PATH")
  })

  it("retries on 5xx with the same body until the receiver accepts", async () => {
    const receiver = await withReceiver([503, 500, 502])
    const log = capture()
    const delivered = await run(
      Effect.flatMap(AlertWebhook, (alerts) => alerts.send("reconcile.mismatch", { symbol: "BTCUSDT", clientOrderId: "c-17" })),
      { url: receiver.url, maxAttempts: 5, ...fast },
      log
    )
    expect(delivered).toBe(true)
    expect(receiver.received).toHaveLength(4)
    expect(new Set(receiver.received.map((request) => request.body)).size).toBe(1)
    expect(log.lines.find((line) => line.event === "alert.sent")).toMatchObject({ attempts: 4, status: 200 })
  })

  it("gives up after maxAttempts and logs alert.failed; a 4xx answer is final", async () => {
    const failing = await withReceiver([500, 500, 500, 500])
    const log = capture()
    const delivered = await run(
      Effect.flatMap(AlertWebhook, (alerts) => alerts.send("account.blocked", { code: "ACCOUNT_FROZEN" })),
      { url: failing.url, maxAttempts: 3, ...fast },
      log
    )
    expect(delivered).toBe(false)
    expect(failing.received).toHaveLength(3)
    expect(log.lines.find((line) => line.event === "alert.failed")).toMatchObject({ alert: "account.blocked", attempts: 3, reason: "HTTP 500" })

    const refusing = await withReceiver([404])
    const refusedLog = capture()
    const refused = await run(
      Effect.flatMap(AlertWebhook, (alerts) => alerts.send("account.blocked", {})),
      { url: refusing.url, maxAttempts: 5, ...fast },
      refusedLog
    )
    expect(refused).toBe(false)
    expect(refusing.received).toHaveLength(1)
    expect(refusedLog.lines.find((line) => line.event === "alert.failed")).toMatchObject({ attempts: 1, reason: "HTTP 404" })
  })

  it("retries when the receiver cannot be reached, then reports the failure", async () => {
    const gone = await startReceiver()
    await gone.close()
    const log = capture()
    const delivered = await run(Effect.flatMap(AlertWebhook, (alerts) => alerts.send("auth.invalid", {})), { url: gone.url, maxAttempts: 2, ...fast }, log)
    expect(delivered).toBe(false)
    expect(log.lines.find((line) => line.event === "alert.failed")).toMatchObject({ alert: "auth.invalid", attempts: 2 })
  })

  it("never sends a secret, a signature or a whole key id", async () => {
    const secret = "svs_live_" + "S3cr3t".repeat(8) + "Z"
    const keyId = "svk_live_" + "AbCdEfGhIjKlMnOpQrStUv"
    const signature = "9f".repeat(32)
    registerSecret(secret)
    const receiver = await withReceiver()
    await run(
      Effect.flatMap(AlertWebhook, (alerts) =>
        alerts.send("auth.invalid", {
          apiKey: keyId,
          apiSecret: secret,
          signature,
          headers: { "X-SVC-APIKEY": keyId, "X-SVC-SIGNATURE": signature, authorization: `Bearer ${secret}` },
          detail: `request signed with ${secret}`,
          nested: { deeper: { password: "hunter22-hunter22", note: secret } },
          code: "API_KEY_INVALID"
        })
      ),
      { url: receiver.url, ...fast },
      capture()
    )
    const body = receiver.received[0]!.body
    expect(body).not.toContain(secret)
    expect(body).not.toContain(keyId)
    expect(body).not.toContain(signature)
    expect(body).not.toContain("hunter22")
    expect(body).toContain(keyId.slice(0, 12))
    expect(JSON.parse(body)).toMatchObject({ fields: { code: "API_KEY_INVALID" } })
  })

  it("delivers alert events logged anywhere in the program, and only those", async () => {
    const receiver = await withReceiver()
    const log = capture()
    await run(
      Effect.gen(function* () {
        yield* logEvent("order.accepted", { clientOrderId: "c-1", strategy: "grid-1" })
        yield* logEvent("rate.limited", { bucket: "weight-1m" })
        yield* Effect.fork(logEvent("auth.invalid", { code: "API_KEY_INVALID", status: 401 }))
        yield* Effect.promise(() => waitFor(() => log.lines.some((line) => line.event === "alert.sent"), "alert.sent"))
      }),
      { url: receiver.url, ...fast },
      log
    )
    expect(receiver.received).toHaveLength(1)
    expect(JSON.parse(receiver.received[0]!.body)).toMatchObject({ event: "auth.invalid", fields: { code: "API_KEY_INVALID", status: 401 } })
    // The ordinary log lines are still written by pino.
    expect(log.lines.map((line) => line.event)).toEqual(expect.arrayContaining(["order.accepted", "rate.limited", "auth.invalid", "alert.sent"]))
  })

  it("writes alert.sent through the application's logger even when the layers are built side by side", async () => {
    const receiver = await withReceiver()
    const log = capture()
    const layer = Layer.mergeAll(log.layer, AlertWebhook.layer({ url: receiver.url, ...fast }).pipe(Layer.provide(NodeHttpClient.layerUndici)))
    await Effect.runPromise(
      Effect.gen(function* () {
        yield* logEvent("reconcile.mismatch", { clientOrderId: "c-9" })
        yield* Effect.promise(() => waitFor(() => log.lines.some((line) => line.event === "alert.sent"), "alert.sent in the captured log"))
      }).pipe(Effect.provide(layer))
    )
    expect(receiver.received).toHaveLength(1)
    expect(log.lines.find((line) => line.event === "alert.sent")).toMatchObject({ alert: "reconcile.mismatch", level: "info" })
  })

  it("sends the alerts still queued when the daemon shuts down", async () => {
    const receiver = await withReceiver()
    const log = capture()
    await Effect.runPromise(
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(AlertWebhook.Default({ url: receiver.url, ...fast }).pipe(Layer.provide(NodeHttpClient.layerUndici)), scope)
        const alerts = Context.get(context, AlertWebhook)
        yield* alerts.notify("risk.kill-switch", { strategy: "grid-1" })
        yield* alerts.notify("reconcile.mismatch", { symbol: "ETHUSDT" })
        yield* alerts.notify("order.filled", { strategy: "grid-1" })
        yield* Scope.close(scope, Exit.void)
      }).pipe(Effect.provide(log.layer))
    )
    expect(receiver.received.map((request) => (JSON.parse(request.body) as { event: string }).event).sort()).toEqual(["reconcile.mismatch", "risk.kill-switch"])
  })

  it("sends again, at shutdown, the alert whose delivery was under way", async () => {
    const receiver = await withReceiver([0])
    const log = capture()
    await Effect.runPromise(
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(
          AlertWebhook.Default({ url: receiver.url, ...fast, attemptTimeoutMs: 30_000 }).pipe(Layer.provide(NodeHttpClient.layerUndici)),
          scope
        )
        yield* Context.get(context, AlertWebhook).notify("risk.kill-switch", { strategy: "grid-1" })
        yield* Effect.promise(() => waitFor(() => receiver.received.length === 1, "the first delivery to reach the receiver"))
        yield* Scope.close(scope, Exit.void)
      }).pipe(Effect.provide(log.layer))
    )
    expect(receiver.received).toHaveLength(2)
    expect(receiver.received[1]!.body).toBe(receiver.received[0]!.body)
    expect(log.lines.find((line) => line.event === "alert.sent")).toMatchObject({ alert: "risk.kill-switch", attempts: 1 })
  })

  it("refuses a webhook URL that is not http(s)", async () => {
    const exit = await Effect.runPromiseExit(
      Effect.scoped(Layer.build(AlertWebhook.Default({ url: "hooks.example.com/x" }).pipe(Layer.provide(NodeHttpClient.layerUndici))))
    )
    expect(Exit.isFailure(exit)).toBe(true)
    expect(String(exit)).toContain("AlertWebhookUrlInvalid")
  })
})
