import type { AddressInfo } from "node:net"
import { networkInterfaces } from "node:os"
import { Writable } from "node:stream"
import { Effect, Either, Exit, Schedule, Scope } from "effect"
import { describe, expect, it } from "vitest"
import { daemonLogging } from "../../src/cli/run.js"
import { parseConfig } from "../../src/config/Load.js"
import { Health, serveHealth } from "../../src/daemon/Health.js"
import * as Log from "../../src/log/Logger.js"
import { freeLoopbackPort } from "../support/daemon.js"

const capture = () => {
  const lines: Array<string> = []
  const destination = new Writable({ write: (chunk, _encoding, done) => { lines.push(...String(chunk).split("\n").filter((l) => l !== "")); done() } })
  return { lines, destination }
}

const withHealth = <A>(body: (health: Health, lines: Array<string>) => Effect.Effect<A>) =>
  Effect.gen(function* () {
    const health = yield* Health
    const { lines, destination } = capture()
    // An outer pino logger, as svcbot's entry point installs: the daemon's must replace it, not add to it.
    const outer = capture()
    return yield* body(health, lines).pipe(
      Effect.provide(daemonLogging(health, { destination, pretty: false })),
      Effect.provide(Log.layer({ destination: outer.destination, pretty: false })),
      Effect.tap(() => expect(outer.lines).toEqual([]))
    )
  }).pipe(Effect.provide(Health.Default), Effect.runPromise)

describe("health and the daemon's logging", () => {
  it("is starting, then ready, and each line is written once", async () => {
    await withHealth((health, lines) =>
      Effect.gen(function* () {
        expect((yield* health.report).status).toBe("starting")
        yield* health.markReady
        yield* Log.logEvent("heartbeat", { strategy: "s" })
        expect(yield* health.report).toEqual({ status: "ready", reasons: [] })
        expect(lines.filter((l) => l.includes('"heartbeat"'))).toHaveLength(1)
      })
    )
  })

  it("is degraded while a check gives reasons, ready again when they clear, and forgets a check when its scope closes", async () => {
    await withHealth((health) =>
      Effect.gen(function* () {
        yield* health.markReady
        let reasons: ReadonlyArray<string> = []
        const scope = yield* Scope.make()
        yield* health.check(Effect.sync(() => reasons)).pipe(Scope.extend(scope))
        expect((yield* health.report).status).toBe("ready")
        reasons = ["venue unreachable for 31 s"]
        expect(yield* health.report).toEqual({ status: "degraded", reasons: ["venue unreachable for 31 s"] })
        reasons = []
        expect((yield* health.report).status).toBe("ready")
        reasons = ["b is paused: refused 10 times"]
        yield* Scope.close(scope, Exit.void)
        expect((yield* health.report).status).toBe("ready")
      })
    )
  })

  it("shows what start-up waits for while starting, and reasons from checks too", async () => {
    await withHealth((health) =>
      Effect.gen(function* () {
        yield* Log.logEvent("startup.waiting", { phase: "key check", reason: "cannot reach http://127.0.0.1:9", retryInMs: 1000 })
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* health.check(Effect.succeed(["API key refused (API_KEY_INVALID)"]))
            expect(yield* health.report).toEqual({
              status: "starting",
              reasons: ["waiting: cannot reach http://127.0.0.1:9", "API key refused (API_KEY_INVALID)"]
            })
          })
        )
      })
    )
  })

  it("holds an unresolved reconcile mismatch until restart, but leaves lost orders to their own check", async () => {
    await withHealth((health) =>
      Effect.gen(function* () {
        yield* health.markReady
        yield* Log.logEvent("reconcile.mismatch", { clientOrderId: "o-1", lost: true, problem: "the venue no longer knows this order" })
        expect((yield* health.report).status).toBe("ready")
        yield* Log.logEvent("reconcile.mismatch", { orderId: 3, problem: "fill -> resting is not a transition" })
        expect(yield* health.report).toEqual({ status: "degraded", reasons: ["ledger and exchange disagree: fill -> resting is not a transition"] })
      })
    )
  })

  it("logs health.changed once per change of status or reasons", async () => {
    await withHealth((health, lines) =>
      Effect.scoped(
        Effect.gen(function* () {
          let reasons: ReadonlyArray<string> = []
          yield* health.check(Effect.sync(() => reasons))
          yield* health.markReady
          yield* health.watch
          const changes = () => lines.filter((l) => l.includes('"health.changed"')).map((l) => JSON.parse(l) as { status: string; reasons: Array<string> })
          const until = (n: number) => Effect.repeat(Effect.sync(() => changes().length >= n), { until: (done) => done, schedule: Schedule.spaced(20) })
          yield* until(1)
          reasons = ["x is paused: refused"]
          yield* until(2)
          reasons = []
          yield* until(3)
          expect(changes().map((c) => c.status)).toEqual(["ready", "degraded", "ready"])
          expect(changes()[1]!.reasons).toEqual(["x is paused: refused"])
        })
      )
    )
  })

  it("ignores events that do not halt trading", async () => {
    await withHealth((health) =>
      Effect.gen(function* () {
        yield* health.markReady
        yield* Log.logEvent("order.rejected", { code: "SPOT_INSUFFICIENT_FUNDS" })
        yield* Log.logEvent("rate.limited", { bucket: "weight" })
        expect((yield* health.report).status).toBe("ready")
      })
    )
  })
})

const TOKEN = "b1f3c5e7a9d2b4f6c8e0a1b3d5f7c9e2"
const METRICS = Effect.succeed({ contentType: "text/plain; version=0.0.4", body: "svcbot_up 1\n" })

/**
 * The health server as the daemon starts it from `raw` (a config with environment `env`), on a free
 * loopback port, degraded for one reason; `body` gets where it listens and a GET of a path there.
 */
const onHealthServer = <A>(
  raw: Record<string, unknown>,
  env: Record<string, string>,
  body: (listening: AddressInfo, get: (path: string, headers?: Record<string, string>) => Promise<{ status: number; body: string; headers: Headers }>) => Promise<A>
) =>
  Effect.gen(function* () {
    const port = yield* Effect.promise(freeLoopbackPort)
    const config = Either.getOrThrow(parseConfig({ ...raw, health: { ...(raw.health as object), port } }, "test.json", env))
    const health = yield* Health
    yield* health.markReady
    yield* health.check(Effect.succeed(["grid-btc: daily loss limit reached"]))
    const server = yield* serveHealth(health, METRICS, config.health.host, config.health.port!, config.health.token).pipe(Effect.orDie)
    const listening = server.address() as AddressInfo
    const get = async (path: string, headers: Record<string, string> = {}) => {
      const response = await fetch(`http://127.0.0.1:${listening.port}${path}`, { headers })
      return { status: response.status, body: await response.text(), headers: response.headers }
    }
    return yield* Effect.promise(() => body(listening, get))
  }).pipe(Effect.scoped, Effect.provide(Health.Default), Effect.provide(Log.layer({ destination: capture().destination, pretty: false })), Effect.runPromise)

describe("the health server", () => {
  it("listens on 127.0.0.1 when health.host is not set, and is not reachable on another interface", async () => {
    const other = Object.values(networkInterfaces()).flat().find((i) => i !== undefined && i.family === "IPv4" && !i.internal)
    await onHealthServer({}, {}, async (listening) => {
      console.log(`health server with no health.host set listens on ${listening.address}:${listening.port}`)
      expect(listening.address).toBe("127.0.0.1")
      if (other !== undefined) {
        const refused = await fetch(`http://${other.address}:${listening.port}/healthz`).then(() => "answered", (error: unknown) => String((error as { cause?: { code?: string } }).cause?.code))
        expect(refused, `${other.address}:${listening.port}`).toBe("ECONNREFUSED")
      }
    })
  })

  it("without a token, serves /metrics and the reasons of /healthz to anyone who reaches it", async () => {
    await onHealthServer({}, {}, async (_, get) => {
      expect(await get("/metrics")).toMatchObject({ status: 200, body: "svcbot_up 1\n" })
      expect(await get("/healthz")).toMatchObject({ status: 503, body: JSON.stringify({ status: "degraded", reasons: ["grid-btc: daily loss limit reached"] }) })
    })
  })

  it("with a token, answers /metrics only to Authorization: Bearer TOKEN, and 401 to anything else", async () => {
    await onHealthServer({ health: { token: TOKEN } }, {}, async (_, get) => {
      expect(await get("/metrics", { authorization: `Bearer ${TOKEN}` })).toMatchObject({ status: 200, body: "svcbot_up 1\n" })
      const refusals = [{}, { authorization: "Bearer " }, { authorization: `Bearer ${TOKEN.slice(0, -1)}` }, { authorization: `Bearer ${TOKEN}0` }, { authorization: TOKEN }, { authorization: `Basic ${TOKEN}` }, { "x-health-token": TOKEN }]
      for (const headers of refusals) {
        const answer = await get("/metrics", headers)
        expect(answer.status, JSON.stringify(headers)).toBe(401)
        expect(answer.headers.get("www-authenticate")).toBe('Bearer realm="svcbot"')
        expect(answer.body).not.toContain("svcbot_up")
      }
      // A token in the query is not a bearer token: it would end up in proxies' and scrapers' logs.
      expect((await get(`/metrics?token=${TOKEN}`)).status).toBe(401)
    })
  })

  it("with a token, /healthz gives everyone the bare status and its code, and the reasons only with the token", async () => {
    await onHealthServer({ health: { token: TOKEN } }, {}, async (_, get) => {
      expect(await get("/healthz")).toMatchObject({ status: 503, body: '{"status":"degraded"}' })
      expect(await get("/healthz", { authorization: "Bearer wrong-token-wrong-token-wrong-token" })).toMatchObject({ status: 503, body: '{"status":"degraded"}' })
      expect(await get("/healthz", { authorization: `Bearer ${TOKEN}` })).toMatchObject({
        status: 503,
        body: JSON.stringify({ status: "degraded", reasons: ["grid-btc: daily loss limit reached"] })
      })
    })
  })

  it("takes the token from SVC_HEALTH_TOKEN", async () => {
    await onHealthServer({}, { SVC_HEALTH_TOKEN: TOKEN }, async (_, get) => {
      expect((await get("/metrics")).status).toBe(401)
      expect((await get("/metrics", { authorization: `Bearer ${TOKEN}` })).status).toBe(200)
    })
  })
})
