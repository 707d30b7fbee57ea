import { Writable } from "node:stream"
import { Effect, Exit, Schedule, Scope } from "effect"
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
