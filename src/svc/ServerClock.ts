/**
 * The server's clock as seen from here. The offset is learned from the
 * `server_time_ms` of an API_KEY_TIMESTAMP_INVALID answer, kept, and applied to
 * every later request; budget windows are computed on this clock too, since the
 * server counts weight per minute of its own clock.
 */
import { Clock, Effect } from "effect"
import { logEvent } from "../log/Logger.js"

export interface Correction {
  readonly previousOffsetMs: number
  readonly offsetMs: number
}

export class ServerClock extends Effect.Service<ServerClock>()("svcbot/ServerClock", {
  effect: Effect.sync(() => {
    let offsetMs = 0
    let lastTimestamp = 0

    /** Server-clock milliseconds now. */
    const now: Effect.Effect<number> = Effect.map(Clock.currentTimeMillis, (local) => local + offsetMs)

    /**
     * A request timestamp on the server's clock. For a non-GET it is strictly greater
     * than the last one issued: two identical non-GET requests in the same millisecond
     * would otherwise carry the same signature and the second would be refused as a
     * replay. GETs are never checked for replay, and at more than a thousand a second
     * a strictly increasing count would run ahead of the clock.
     */
    const timestamp = (method: string): Effect.Effect<number> =>
      Effect.map(now, (serverNow) => {
        if (method === "GET") return Math.floor(serverNow)
        lastTimestamp = Math.max(Math.floor(serverNow), lastTimestamp + 1)
        return lastTimestamp
      })

    /**
     * Learns the offset from a refused request's `server_time_ms`. The server read
     * its clock somewhere between sending and receiving, so the midpoint is used.
     */
    const learn = (serverTimeMs: number, sentAtLocalMs: number, receivedAtLocalMs: number, reason: string | null) =>
      Effect.gen(function* () {
        const previousOffsetMs = offsetMs
        offsetMs = Math.round(serverTimeMs - (sentAtLocalMs + receivedAtLocalMs) / 2)
        // When the correction moves the clock back, timestamps must follow it back
        // rather than stay ahead of the server by the old error.
        if (offsetMs < previousOffsetMs) lastTimestamp = 0
        yield* logEvent("clock.corrected", { offsetMs, previousOffsetMs, serverTimeMs, reason })
        return { previousOffsetMs, offsetMs } satisfies Correction
      })

    return {
      now,
      timestamp,
      learn,
      offsetMs: Effect.sync(() => offsetMs)
    } as const
  })
}) {}
