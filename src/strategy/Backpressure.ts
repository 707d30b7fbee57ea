/**
 * Back-pressure for one strategy instance, as plain state and pure steps (the
 * host calls them per event; tests drive them with any clock).
 *
 * - Refusals and rejections of the same kind in a row (same kind and code) put
 *   the instance into exponential backoff, then pause it: a strategy that keeps
 *   asking for what the account or the venue refuses must not spin. Refusals that
 *   say nothing of the placement (`TRANSIENT_REFUSALS`: rate limited, a key blocked
 *   after a failed authentication, an open circuit) do not count.
 * - A ceiling on placements per minute refuses the excess before any risk check.
 *
 * Cancels are never held back: they only ever reduce what is on the book.
 *
 * `instancePressure` keeps one running instance's state over these steps, with the answers
 * it owes to the intents it held back.
 */
import { Effect, type Scope } from "effect"
import type { BackpressureConfig } from "../config/Config.js"
import { ZERO } from "../domain/Decimal.js"
import type { Intent } from "../domain/Intent.js"
import { logEvent } from "../log/Logger.js"
import { TRANSIENT_REFUSALS } from "../svc/ErrorCodes.js"
import type { HostEvent } from "./Inbox.js"
import type { OrderUpdateEvent } from "./Strategy.js"

export interface Backpressure {
  /** What the last refusals in a row were, e.g. `refused:insufficient-funds`. */
  readonly streakKey: string | undefined
  readonly streak: number
  /** Until when (ms) placements are held back; 0 when they are not. */
  readonly backoffUntil: number
  /** The minute (ms since epoch / 60000) `placedThisMinute` counts. */
  readonly minute: number
  readonly placedThisMinute: number
  /** Placements refused by the ceiling this minute. */
  readonly throttledThisMinute: number
}

export const initialBackpressure: Backpressure = { streakKey: undefined, streak: 0, backoffUntil: 0, minute: 0, placedThisMinute: 0, throttledThisMinute: 0 }

/** What a refusal did to the instance. */
export type RefusalStep =
  | { readonly _tag: "Counted" }
  | { readonly _tag: "Backoff"; readonly untilMs: number; readonly reason: string }
  | { readonly _tag: "Pause"; readonly reason: string }

const MINUTE_MS = 60_000

/** One more refusal or rejection (`kind:code`) at `now`. */
export const refused = (state: Backpressure, key: string, now: number, config: BackpressureConfig): readonly [Backpressure, RefusalStep] => {
  const streak = state.streakKey === key ? state.streak + 1 : 1
  const reason = `${streak} intents in a row ${key.replace(":", " (")})`
  if (streak >= config.refusalsBeforePause) return [{ ...state, streakKey: key, streak, backoffUntil: 0 }, { _tag: "Pause", reason }]
  if (streak < config.refusalsBeforeBackoff) return [{ ...state, streakKey: key, streak }, { _tag: "Counted" }]
  const delayMs = Math.min(config.maxBackoffMs, config.initialBackoffMs * 2 ** (streak - config.refusalsBeforeBackoff))
  const untilMs = now + delayMs
  return [{ ...state, streakKey: key, streak, backoffUntil: untilMs }, { _tag: "Backoff", untilMs, reason }]
}

/** An order was accepted or filled: the refusals in a row are over. */
export const succeeded = (state: Backpressure): Backpressure =>
  state.streak === 0 && state.backoffUntil === 0 ? state : { ...state, streakKey: undefined, streak: 0, backoffUntil: 0 }

export type Admission = "admit" | "backoff" | "throttled"

/**
 * Whether one placement may go out at `now`: not while backing off, and not beyond
 * `maxPerMinute` in the current minute. Counts what it admits and what the ceiling refuses.
 */
export const admit = (state: Backpressure, now: number, maxPerMinute: number): readonly [Backpressure, Admission] => {
  if (now < state.backoffUntil) return [state, "backoff"]
  const minute = Math.floor(now / MINUTE_MS)
  const current = minute === state.minute ? state : { ...state, minute, placedThisMinute: 0, throttledThisMinute: 0 }
  if (current.placedThisMinute >= maxPerMinute) return [{ ...current, throttledThisMinute: current.throttledThisMinute + 1 }, "throttled"]
  return [{ ...current, placedThisMinute: current.placedThisMinute + 1 }, "admit"]
}

/** When placements held back at `now` may be answered: the end of the backoff, or the next minute. */
export const heldUntil = (state: Backpressure, now: number): number =>
  now < state.backoffUntil ? state.backoffUntil : (Math.floor(now / MINUTE_MS) + 1) * MINUTE_MS

export interface InstancePressureOptions {
  readonly strategyId: string
  readonly config: BackpressureConfig
  readonly maxIntentsPerMinute: number
  /** Codes of the host's own refusals, which say nothing of the venue or the risk check. */
  readonly heldCodes: ReadonlySet<string>
  readonly now: () => number
  /** Hands the instance an answer it is owed (into its inbox). */
  readonly answer: (event: OrderUpdateEvent) => void
  /** Where the answers to held-back intents wait for their time. */
  readonly scope: Scope.Scope
}

/** The back-pressure of one running instance: its state, and the answers owed to what it held back, given when placements may go out again. */
export const instancePressure = (options: InstancePressureOptions) => {
  let pressure = initialBackpressure
  const held: Array<OrderUpdateEvent> = []
  let flushAt: number | undefined

  /** Hands the strategy the answers to what was held back, once placements may go out again. */
  const flushHeld = Effect.suspend(() => {
    flushAt = undefined
    const answers = held.splice(0)
    const throttled = answers.filter((answer) => answer.code === "throttled").length
    return Effect.zipRight(
      throttled === 0 ? Effect.void : logEvent("strategy.throttled", { strategy: options.strategyId, refused: throttled, maxIntentsPerMinute: options.maxIntentsPerMinute }),
      Effect.sync(() => {
        for (const event of answers) options.answer(event)
      })
    )
  })

  return {
    /** Placements the back-pressure lets through now; the others are held back, and answered later. */
    admitted: (intents: ReadonlyArray<Intent>, at: number): Effect.Effect<Array<Intent>> =>
      Effect.gen(function* () {
        const through: Array<Intent> = []
        for (const intent of intents) {
          if (intent.type === "cancel") {
            through.push(intent)
            continue
          }
          const [next, verdict] = admit(pressure, at, options.maxIntentsPerMinute)
          pressure = next
          if (verdict === "admit") through.push(intent)
          else held.push({ tag: intent.tag, kind: "refused", code: verdict, filledBaseQty: ZERO })
        }
        if (held.length > 0 && flushAt === undefined) {
          flushAt = heldUntil(pressure, at)
          yield* Effect.forkIn(Effect.zipRight(Effect.sleep(Math.max(0, flushAt - at)), flushHeld), options.scope)
        }
        return through
      }),
    /**
     * Counts what a refusal, a rejection, an acceptance or a fill says about the instance's last
     * intents; returns the step a refusal led to, when it is a backoff or a pause.
     */
    observe: (event: HostEvent): RefusalStep | undefined => {
      if (event._tag === "Fill") {
        pressure = succeeded(pressure)
        return undefined
      }
      if (event._tag !== "OrderUpdate") return undefined
      const update = event.event
      if (update.kind === "pending" || update.kind === "resting" || update.kind === "fill") {
        pressure = succeeded(pressure)
        return undefined
      }
      const code = update.code ?? ""
      // A key blocked for a second, a rate budget spent or an open circuit says nothing of the
      // placement and ends by itself: counted, it would pause the instance until an operator resumes it.
      if ((update.kind !== "refused" && update.kind !== "rejected") || options.heldCodes.has(code) || TRANSIENT_REFUSALS.has(code)) return undefined
      const [next, step] = refused(pressure, `${update.kind}:${update.code ?? "no code"}`, options.now(), options.config)
      pressure = next
      return step._tag === "Counted" ? undefined : step
    },
    /** A resume starts afresh. */
    reset: (): void => {
      pressure = initialBackpressure
    }
  }
}
