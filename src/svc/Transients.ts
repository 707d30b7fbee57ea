/**
 * Waiting out transients at start-up: the process stays up, logs `startup.waiting`
 * with the reason (health shows it while the status is `starting`), and tries
 * again with a growing delay. Requests refused locally while the key's circuit
 * is open cost nothing, so a refused key is still probed only once per probe
 * interval by the client's budget governor.
 */
import { Duration, Effect, Schedule } from "effect"
import { logEvent } from "../log/Logger.js"
import { isTransient, type SvcError } from "./Errors.js"

/** The first wait, doubled after each failure up to the longest. */
export const STARTUP_RETRY_FIRST_MS = 1000
export const STARTUP_RETRY_LONGEST_MS = 30_000

/** Outputs the delay before the next try: the shorter of the doubling one and the longest. */
const startupRetry = Schedule.exponential(STARTUP_RETRY_FIRST_MS).pipe(
  Schedule.modifyDelay((delay) => Duration.min(delay, Duration.millis(STARTUP_RETRY_LONGEST_MS))),
  Schedule.delays
)

/**
 * Retries `effect` while it fails with a transient, or with an error `alsoWaitOut` names,
 * logging each wait with `explain(error)`.
 */
export const waitOutTransients =
  (phase: string, explain: (error: SvcError) => string, alsoWaitOut: (error: SvcError) => boolean = () => false) =>
  <A, E extends SvcError, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
    const waitedOut = (error: SvcError) => isTransient(error) || alsoWaitOut(error)
    return Effect.retry(effect, {
      while: waitedOut,
      schedule: startupRetry.pipe(
        Schedule.intersect(Schedule.identity<E>()),
        // The schedule steps before `while` is asked: an error that ends the wait must not say it waits.
        Schedule.tapOutput(([delay, error]) =>
          waitedOut(error) ? logEvent("startup.waiting", { phase, reason: explain(error), error: error._tag, retryInMs: Duration.toMillis(delay) }) : Effect.void
        )
      )
    })
  }

/**
 * Repeats `effect` until `ready` holds of what it answers, logging each wait with `why`: an answer
 * that reads well and says the exchange is not open for business yet (a pair list with nothing in
 * it), which no configuration fixes.
 */
export const waitUntil =
  <A>(phase: string, ready: (answer: A) => boolean, why: string) =>
  <E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.repeat(
      effect,
      startupRetry.pipe(
        Schedule.intersect(Schedule.identity<A>()),
        // The schedule steps on the answer that ends the wait too: that one must not say it waits.
        Schedule.tapOutput(([delay, answer]) => (ready(answer) ? Effect.void : logEvent("startup.waiting", { phase, reason: why, retryInMs: Duration.toMillis(delay) }))),
        Schedule.whileInput((answer: A) => !ready(answer)),
        Schedule.map(([, answer]) => answer)
      )
    )
