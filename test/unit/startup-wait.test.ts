/**
 * Start-up waits out what passes by itself: a transient, or an error the phase names (a
 * refused answer), with one `startup.waiting` line per wait. An error it does not wait out
 * ends the wait at once and says nothing about waiting, since nothing waits.
 */
import { it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { describe, expect } from "vitest"
import * as Log from "../../src/log/Logger.js"
import { DecodeError, isRefusedAnswer, RequestInvalid, ServerUnavailable, type SvcError } from "../../src/svc/Errors.js"
import { STARTUP_RETRY_FIRST_MS, waitOutTransients } from "../../src/svc/Transients.js"
import { CapturedLog } from "../integration/engine-harness.js"

/** Fails with each error in turn, then succeeds. */
const failingWith = (errors: ReadonlyArray<SvcError>) => {
  let calls = 0
  return Effect.suspend(() => (calls < errors.length ? Effect.fail(errors[calls++]!) : Effect.succeed("read")))
}

describe("waiting out transients at start-up", () => {
  const log = new CapturedLog()

  it.effect("waits out a transient and a refused answer it is told to, one line a wait, and stops at once, silently, on anything else", () =>
    Effect.gen(function* () {
      const refused = new DecodeError({ endpoint: "/api/spot/exchange-info", field: "pairs[0].base", detail: "is missing" })
      const waiting = yield* Effect.fork(
        failingWith([new ServerUnavailable({ endpoint: "/api/spot/exchange-info", status: 503 }), refused]).pipe(
          waitOutTransients("venue check", (error) => error.message, isRefusedAnswer)
        )
      )
      yield* TestClock.adjust(3 * STARTUP_RETRY_FIRST_MS)
      expect(yield* Fiber.join(waiting)).toBe("read")
      expect(log.events("startup.waiting").map((line) => [line.phase, line.error, line.retryInMs])).toEqual([
        ["venue check", "ServerUnavailable", STARTUP_RETRY_FIRST_MS],
        ["venue check", "DecodeError", 2 * STARTUP_RETRY_FIRST_MS]
      ])

      const ended = yield* Effect.flip(failingWith([new RequestInvalid({ endpoint: "/api/wallets/spot", status: 400, code: null }), refused]).pipe(waitOutTransients("key check", (error) => error.message)))
      expect(ended._tag).toBe("RequestInvalid")
      expect(log.events("startup.waiting").filter((line) => line.phase === "key check")).toEqual([])
    }).pipe(Effect.provide(Log.layer({ destination: log.stream, pretty: false })))
  )
})
