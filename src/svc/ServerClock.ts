/**
 * The server's clock as seen from here. The offset is learned from the
 * `server_time_ms` of an API_KEY_TIMESTAMP_INVALID answer, kept, and applied to
 * every later request; budget windows are computed on this clock too, since the
 * server counts weight per minute of its own clock.
 */
import { Effect } from "effect"
import { logEvent } from "../log/Logger.js"

export interface Correction {
  readonly previousOffsetMs: number
  readonly offsetMs: number
}

export class ServerClock extends Effect.Service<ServerClock>()("svcbot/ServerClock", {
  effect: Effect.sync(() => {
    let offsetMs = 0
    let lastTimestamp = 0

    /**
     * Server-clock milliseconds at the local wall-clock time `localMs`. The caller reads
     * Effect's Clock (so tests can drive it) together with whatever else it needs then.
     */
    const at = (localMs: number): number => localMs + offsetMs

    /**
     * The timestamp of a request signed at local time `localMs`, on the server's clock.
     * For a non-GET it is strictly greater than the last one issued: two identical
     * non-GET requests in the same millisecond would otherwise carry the same
     * signature and the second would be refused as a replay. GETs are never checked
     * for replay, and at more than a thousand a second a strictly increasing count
     * would run ahead of the clock.
     */
    const timestampAt = (method: string, localMs: number): number => {
      const serverNow = Math.floor(at(localMs))
      if (method === "GET") return serverNow
      lastTimestamp = Math.max(serverNow, lastTimestamp + 1)
      return lastTimestamp
    }

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
      at,
      timestampAt,
      learn,
      offsetMs: Effect.sync(() => offsetMs)
    } as const
  })
}) {}
