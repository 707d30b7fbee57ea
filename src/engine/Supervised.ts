/**
 * A background loop run for good under supervision: one that ends in a defect met a bug and is
 * started again after a pause, told of as `engine.loop-failed`.
 */
import { Cause, Clock, Effect } from "effect"
import { logEvent } from "../log/Logger.js"

/** The pause before a background loop that ended in a defect is started again, doubled for each defect in a row up to the longest. */
const FIRST_RESTART_MS = 1000
const LONGEST_RESTART_MS = 60_000

/**
 * Runs a background loop for good. The loops catch every failure they expect, so one that ends
 * in a defect met a bug: it is logged with its cause (`engine.loop-failed`, an alert) and started
 * again after a pause, rather than leave the engine without its tracker, fill sync,
 * reconciliation, or the sender's marker or answer recorder, while the daemon trades on and
 * reports ready. A defect that comes back at once
 * is told of at most once a minute; a run that lasted that long starts the pauses over. An
 * interruption (the stop) ends it.
 */
export const supervised = (loop: string, body: Effect.Effect<unknown>): Effect.Effect<never> => {
  // A loop runs for good: one that returns met a bug as well.
  const forGood = Effect.zipRight(body, Effect.dieMessage(`the ${loop} loop returned`))
  const run = (pauseMs: number): Effect.Effect<never> =>
    Effect.flatMap(Clock.currentTimeMillis, (started) =>
      forGood.pipe(
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause)
            : Effect.flatMap(Clock.currentTimeMillis, (ended) => {
                const restartInMs = ended - started >= LONGEST_RESTART_MS ? FIRST_RESTART_MS : pauseMs
                return Effect.as(logEvent("engine.loop-failed", { loop, restartInMs, detail: Cause.pretty(cause) }), restartInMs)
              })
        ),
        Effect.flatMap((restartInMs) => Effect.zipRight(Effect.sleep(restartInMs), run(Math.min(LONGEST_RESTART_MS, 2 * restartInMs))))
      )
    )
  return run(FIRST_RESTART_MS)
}
