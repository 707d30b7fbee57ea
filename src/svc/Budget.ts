/**
 * The budget as a service, one per key: `admit` waits (or refuses) until a request may
 * go out, `settle` books how it ended and wakes the waiters. What may go when, and why,
 * is the Governor's (Governor.ts), decided on the server's clock; this file gives it the
 * time, makes requests wait in priority order and logs what it says. `placementTurn` lets
 * the sender hold its placements back while one waits here (the sender shares the order
 * budget among strategy instances in turns).
 */
import { Deferred, Effect, Exit, FiberId } from "effect"
import { logEvent } from "../log/Logger.js"
import type { AuthBlocked, CircuitOpen, RateLimited } from "./Errors.js"
import {
  type BudgetOptions,
  type BudgetSnapshot,
  type Demand,
  Governor,
  type KeyHealth,
  type Outcome,
  resolveBudgetOptions,
  type Ticket
} from "./Governor.js"
import { ServerClock } from "./ServerClock.js"

export class Budget extends Effect.Service<Budget>()("svcbot/Budget", {
  scoped: (options: Partial<BudgetOptions> = {}) =>
    Effect.gen(function* () {
      const clock = yield* ServerClock
      const governor = new Governor(resolveBudgetOptions(options))
      let offsetMs = yield* clock.offsetMs
      /** Server-clock time at a local reading, after rebasing the books if the clock was corrected since the last look. */
      const serverTimeAt = (localMs: number): number => {
        const serverMs = clock.at(localMs)
        if (serverMs - localMs !== offsetMs) {
          offsetMs = serverMs - localMs
          governor.clockCorrected()
        }
        return serverMs
      }
      // One read of Effect's Clock per decision: admission and booking run for every request.
      const serverNow: Effect.Effect<number> = Effect.clockWith((local) => Effect.succeed(serverTimeAt(local.unsafeCurrentTimeMillis())))
      // Every change of the books completes this and replaces it, waking all waiters to decide again.
      let changed = Deferred.unsafeMake<void>(FiberId.none)
      let sleeping = 0
      const notify = () => {
        // Nobody waits in the common case: skip the allocation.
        if (sleeping === 0) return
        const previous = changed
        changed = Deferred.unsafeMake<void>(FiberId.none)
        Deferred.unsafeDone(previous, Exit.void)
      }

      /**
       * Admission without waiting, the common case, decided at local wall-clock time
       * `localMs` (the caller's reading of Effect's Clock): the ticket, or undefined
       * when the request has to wait or is refused, which `admit` then says.
       */
      const tryAdmit = (demand: Demand, localMs: number): Ticket | undefined => {
        const decision = governor.decide(demand, serverTimeAt(localMs))
        return decision._tag === "Admit" ? decision.ticket : undefined
      }

      const admit = (demand: Demand): Effect.Effect<Ticket, AuthBlocked | CircuitOpen | RateLimited> =>
        Effect.clockWith((local): Effect.Effect<Ticket, AuthBlocked | CircuitOpen | RateLimited> => {
          const decision = governor.decide(demand, serverTimeAt(local.unsafeCurrentTimeMillis()))
          if (decision._tag === "Admit") return Effect.succeed(decision.ticket)
          if (decision._tag === "Refuse") return Effect.fail(decision.error)
          return demand.placement ? placementWaiting(admitWaiting(demand)) : admitWaiting(demand)
        })

      /** Placements waiting for admission now. */
      let placementsWaiting = 0

      /** Counts a placement as waiting from the step it is found to wait in until it leaves, and wakes `placementTurn` then. */
      const placementWaiting = <A, E>(waiting: Effect.Effect<A, E>): Effect.Effect<A, E> =>
        Effect.suspend(() => {
          placementsWaiting += 1
          return Effect.ensuring(
            waiting,
            Effect.sync(() => {
              placementsWaiting -= 1
              notify()
            })
          )
        })

      /**
       * Waits until no placement waits for admission. The sender takes its next placement only
       * then, so that which instance's placement goes next is chosen when the budget can let one
       * go: while the order budget binds, placements wait in the sender's turns, where every
       * instance has its turn, not here, where waiting placements go in the order they wake.
       */
      const placementTurn: Effect.Effect<void> = Effect.suspend(() => {
        if (placementsWaiting === 0) return Effect.void
        const signal = changed
        sleeping += 1
        return Deferred.await(signal).pipe(
          Effect.ensuring(Effect.sync(() => (sleeping -= 1))),
          Effect.zipRight(placementTurn)
        )
      })

      const admitWaiting = (demand: Demand): Effect.Effect<Ticket, AuthBlocked | CircuitOpen | RateLimited> =>
        Effect.gen(function* () {
          let waiting = false
          let wasQueued = false
          for (;;) {
            const now = yield* serverNow
            const signal = changed
            const decision = governor.decide(demand, now)
            if (decision._tag !== "Wait") {
              // Lower priorities queued behind this request may go now.
              if (wasQueued) notify()
              if (decision._tag === "Admit") return decision.ticket
              return yield* Effect.fail(decision.error)
            }
            // Registered in the same step as the decision, so that no change in between goes unnoticed.
            const queued = decision.reason === "weight" || decision.reason === "priority"
            if (queued) governor.enqueue(demand.priority)
            sleeping += 1
            const leave = Effect.sync(() => {
              sleeping -= 1
              if (queued) governor.dequeue(demand.priority)
            })
            const sleep = Effect.gen(function* () {
              if (!waiting) {
                waiting = true
                governor.waits += 1
                const snapshot = governor.snapshot(now)
                yield* logEvent("budget.wait", {
                  endpoint: demand.endpoint,
                  priority: demand.priority,
                  reason: decision.reason,
                  // The longest the wait can last; a first answer or a waiter ahead finishing ends it sooner.
                  waitMs: Math.max(0, decision.untilMs - now),
                  endsOn: decision.reason === "held" ? "retry-after" : decision.reason === "first-answer" || decision.reason === "priority" ? "answer-or-window" : "window",
                  usedWeight1m: snapshot.usedWeight1m,
                  weightLimit1m: snapshot.weightLimit1m
                })
              }
              yield* Effect.raceFirst(Deferred.await(signal), Effect.sleep(Math.max(1, decision.untilMs - now)))
            })
            yield* sleep.pipe(
              Effect.ensuring(leave),
              // Lower priorities queued behind an abandoned request may go now.
              Effect.onInterrupt(() => Effect.sync(() => queued && notify()))
            )
            wasQueued = queued
          }
        })

      /**
       * Books how a request ended at local wall-clock time `localMs` and wakes the waiters;
       * returns the line to log about it (`Effect.void` for an ordinary answer).
       */
      const settleAt = (ticket: Ticket, outcome: Outcome, localMs: number): Effect.Effect<void> => {
        governor.settle(ticket, outcome, serverTimeAt(localMs))
        notify()
        const error = outcome._tag === "Answered" ? outcome.error : undefined
        switch (error?._tag) {
          case "ApiKeyInvalid":
            return logEvent("auth.invalid", { endpoint: error.endpoint, nextProbeInMs: governor.options.authProbeIntervalMs })
          case "RateLimited":
            return logEvent("rate.limited", { endpoint: error.endpoint, bucket: error.bucket, retryAfter: error.retryAfter })
          case "AuthBlocked":
            return logEvent("auth.blocked", { endpoint: error.endpoint, code: error.code, retryAfter: error.retryAfter })
          default:
            return Effect.void
        }
      }

      const settle = (ticket: Ticket, outcome: Outcome): Effect.Effect<void> =>
        Effect.clockWith((local) => settleAt(ticket, outcome, local.unsafeCurrentTimeMillis()))

      /** The engine stops: fills and market data may use the reserve from now on (Governor.releaseReserve); waiters decide again. */
      const releaseReserve: Effect.Effect<void> = Effect.sync(() => {
        governor.releaseReserve()
        notify()
      })

      const snapshot: Effect.Effect<BudgetSnapshot> = Effect.map(serverNow, (now) => governor.snapshot(now))
      const keyHealth: Effect.Effect<KeyHealth> = Effect.map(serverNow, (now) => governor.keyHealth(now))

      const logStatus = Effect.flatMap(snapshot, (current) => logEvent("budget.status", { ...current }))
      yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(governor.options.statusIntervalMs), logStatus)))

      return {
        admit,
        tryAdmit,
        placementTurn,
        settle,
        settleAt,
        releaseReserve,
        snapshot,
        keyHealth,
        /** The learned per-endpoint weights, for `doctor` and the status line. */
        learnedWeights: Effect.sync(() => new Map(governor.learnedWeights()) as ReadonlyMap<string, number>),
        options: governor.options
      } as const
    })
}) {}
