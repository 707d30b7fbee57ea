/**
 * Places in a sequence (the sender's marked groups): whatever order their syncs end in, and
 * whichever of them end without taking their turn (a failure), the ones that take it pass in
 * the order the places were taken, and every holder ends.
 */
import fc from "fast-check"
import { Deferred, Effect, Fiber } from "effect"
import { describe, expect, it } from "vitest"
import { makeSequence } from "../../src/engine/Sequence.js"

const arbRun = fc
  .integer({ min: 1, max: 12 })
  .chain((n) => fc.record({ syncEnds: fc.shuffledSubarray([...Array(n).keys()], { minLength: n, maxLength: n }), failing: fc.array(fc.boolean(), { minLength: n, maxLength: n }) }))

describe("Sequence", () => {
  it("lets places take their turn in the order they were taken, whatever order their work ends in", async () => {
    await fc.assert(
      fc.asyncProperty(arbRun, ({ syncEnds, failing }) =>
        Effect.runPromise(
          Effect.gen(function* () {
            const sequence = makeSequence()
            const passed: Array<number> = []
            const syncs = yield* Effect.forEach(syncEnds, () => Deferred.make<void>())
            // Taken in index order, as the marker takes a place for each group it marks.
            const holders = yield* Effect.forEach(syncs, (sync, i) => {
              const place = sequence.take()
              const work = Effect.zipRight(Deferred.await(sync), failing[i] ? Effect.void : Effect.zipRight(place.turn, Effect.sync(() => passed.push(i))))
              return Effect.fork(Effect.ensuring(work, place.release))
            })
            for (const i of syncEnds) {
              yield* Deferred.succeed(syncs[i]!, undefined)
              yield* Effect.yieldNow()
            }
            yield* Fiber.joinAll(holders)
            const expected = syncEnds.map((_, i) => i).filter((i) => !failing[i])
            expect(passed).toEqual(expected)
          })
        )
      ),
      { numRuns: 300 }
    )
  })

  it("holds a later place back while an earlier one's work has not ended", async () => {
    await Effect.runPromise(
      Effect.gen(function* () {
        const sequence = makeSequence()
        const first = sequence.take()
        const second = sequence.take()
        const passed: Array<string> = []
        const waiting = yield* Effect.fork(Effect.zipRight(second.turn, Effect.sync(() => passed.push("second"))))
        yield* Effect.yieldNow()
        expect(passed).toEqual([])
        passed.push("first")
        yield* first.release
        yield* Fiber.join(waiting)
        expect(passed).toEqual(["first", "second"])
      })
    )
  })
})
