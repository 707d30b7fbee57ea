/**
 * Back-pressure for one strategy instance, as plain state and pure steps (the
 * host calls them per event; tests drive them with any clock).
 *
 * - Refusals and rejections of the same kind in a row (same kind and code) put
 *   the instance into exponential backoff, then pause it: a strategy that keeps
 *   asking for what the account or the venue refuses must not spin.
 * - A ceiling on placements per minute refuses the excess before any risk check.
 *
 * Cancels are never held back: they only ever reduce what is on the book.
 */
import type { BackpressureConfig } from "../config/Config.js"

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
