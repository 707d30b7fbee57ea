/**
 * A background loop of the engine that ends in a defect is logged with its cause and started
 * again after a pause, doubled for each defect in a row; one that returns is a defect too; the
 * stop's interruption ends it for good, silently.
 */
import { it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { describe, expect } from "vitest"
import { supervised } from "../../src/engine/Supervised.js"
import * as Log from "../../src/log/Logger.js"
import { CapturedLog } from "../integration/engine-harness.js"

describe("a supervised background loop", () => {
  const log = new CapturedLog()

  it.effect("is started again after a defect, with one engine.loop-failed line naming the loop and the cause, and ends on interruption", () =>
    Effect.gen(function* () {
      let runs = 0
      // Dies on its first two runs, then runs for good, as a loop does.
      const loop = Effect.suspend(() => {
        runs += 1
        return runs <= 2 ? Effect.die(new Error(`Invalid argument on run ${runs}`)) : Effect.never
      })
      const running = yield* Effect.fork(supervised("reconcile", loop))
      yield* TestClock.adjust(0)
      expect(runs).toBe(1)
      yield* TestClock.adjust(1000)
      expect(runs).toBe(2)
      yield* TestClock.adjust(1000)
      expect(runs).toBe(2)
      yield* TestClock.adjust(1000)
      expect(runs).toBe(3)
      yield* TestClock.adjust(10_000)
      expect(runs).toBe(3)
      const lines = log.events("engine.loop-failed")
      expect(lines.map((line) => [line.level, line.loop, line.restartInMs])).toEqual([
        ["error", "reconcile", 1000],
        ["error", "reconcile", 2000]
      ])
      expect(String(lines[0]!.detail)).toContain("Invalid argument on run 1")
      expect(String(lines[1]!.detail)).toContain("Invalid argument on run 2")

      yield* Fiber.interrupt(running)
      expect(log.events("engine.loop-failed")).toHaveLength(2)
      expect(runs).toBe(3)
    }).pipe(Effect.provide(Log.layer({ destination: log.stream, pretty: false })))
  )

  it.effect("takes a loop that returns for a defect", () =>
    Effect.gen(function* () {
      let runs = 0
      const running = yield* Effect.fork(supervised("tracker", Effect.sync(() => (runs += 1))))
      yield* TestClock.adjust(0)
      yield* TestClock.adjust(1000)
      expect(runs).toBe(2)
      yield* Fiber.interrupt(running)
      expect(log.events("engine.loop-failed").filter((line) => line.loop === "tracker").map((line) => [line.restartInMs, String(line.detail)])).toEqual([
        [1000, expect.stringContaining("the tracker loop returned")],
        [2000, expect.stringContaining("the tracker loop returned")]
      ])
    }).pipe(Effect.provide(Log.layer({ destination: log.stream, pretty: false })))
  )
})
