import { Writable } from "node:stream"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { daemonLogging } from "../../src/cli/run.js"
import { Health } from "../../src/daemon/Health.js"
import * as Log from "../../src/log/Logger.js"

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

  it("degrades on auth.invalid until restarted, and on auth.blocked only until Retry-After has passed", async () => {
    await withHealth((health) =>
      Effect.gen(function* () {
        yield* health.markReady
        yield* Log.logEvent("auth.blocked", { code: "AUTH_BLOCKED", retryAfter: 0 })
        expect((yield* health.report).status).toBe("ready")
        yield* Log.logEvent("auth.blocked", { code: "AUTH_BLOCKED", retryAfter: 180 })
        const blocked = yield* health.report
        expect(blocked.status).toBe("degraded")
        expect(blocked.reasons.join()).toMatch(/blocked/)
        yield* Log.logEvent("auth.invalid", { endpoint: "/api/wallets/spot" })
        expect((yield* health.report).reasons.join()).toMatch(/API_KEY_INVALID/)
      })
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
