/**
 * Readiness for the container healthcheck. `GET /healthz` answers 200 with
 * `{"status":"ready"}` once start-up (migrate, key check, reconcile) is done and
 * nothing has halted trading; 503 with `starting` or `degraded` and the reasons
 * otherwise. Degrading events are read off the log stream, so no part of the
 * engine has to know about health.
 */
import { createServer, type Server } from "node:http"
import { Effect, HashMap, Layer, Logger, Ref } from "effect"
import { logEvent } from "../log/Logger.js"
import type { EventName } from "../log/Events.js"

export type HealthStatus = "starting" | "ready" | "degraded"

export interface HealthReport {
  readonly status: HealthStatus
  readonly reasons: ReadonlyArray<string>
}

/** Events that mean trading is halted until an operator acts, and the reason shown for each. */
const DEGRADING: Partial<Record<EventName, string>> = {
  "auth.invalid": "API key refused (API_KEY_INVALID): create a new key on the website",
  "auth.blocked": "key traffic blocked after failed authentication",
  "account.blocked": "account blocked for trading: resolve it on the website",
  "risk.kill-switch": "daily loss limit reached: new placements stopped for the day",
  "reconcile.mismatch": "ledger and exchange disagree"
}

export class Health extends Effect.Service<Health>()("svcbot/Health", {
  effect: Effect.gen(function* () {
    const ready = yield* Ref.make(false)
    const reasons = yield* Ref.make<ReadonlyMap<string, { readonly reason: string; readonly untilMs: number }>>(new Map())
    const report: Effect.Effect<HealthReport> = Effect.gen(function* () {
      const now = Date.now()
      const degraded = [...(yield* Ref.get(reasons)).values()].filter((entry) => entry.untilMs > now).map((entry) => entry.reason)
      if (degraded.length > 0) return { status: "degraded", reasons: degraded }
      return (yield* Ref.get(ready)) ? { status: "ready", reasons: [] } : { status: "starting", reasons: ["start-up not finished"] }
    })
    return {
      markReady: Ref.set(ready, true),
      /** Marks trading halted; a block that lifts by itself (auth.blocked) passes `untilMs`. */
      degrade: (event: string, reason: string, untilMs = Number.POSITIVE_INFINITY) =>
        Ref.update(reasons, (current) => new Map([...current, [event, { reason, untilMs }]])),
      report
    }
  })
}) {}

/** A logger that degrades health when a halting event is logged. */
export const healthLogHook = (health: Health): Layer.Layer<never> =>
  Logger.add(
    Logger.make(({ message, annotations }) => {
      const name = (Array.isArray(message) ? message[0] : message) as EventName
      const reason = DEGRADING[name]
      if (reason === undefined) return
      const code = HashMap.get(annotations, "code")
      const retryAfter = HashMap.get(annotations, "retryAfter")
      // Retry-After is in seconds; a failed-auth block lifts by itself after it.
      const untilMs = retryAfter._tag === "Some" && typeof retryAfter.value === "number" ? Date.now() + retryAfter.value * 1000 : undefined
      Effect.runSync(health.degrade(name, code._tag === "Some" ? `${reason} (${String(code.value)})` : reason, untilMs))
    })
  )

/** Serves `GET /healthz` on host:port for the lifetime of the scope. */
export const serveHealth = (health: Health, host: string, port: number) =>
  Effect.acquireRelease(
    Effect.async<Server, Error>((resume) => {
      const server = createServer((request, response) => {
        if (request.method !== "GET" || request.url?.split("?")[0] !== "/healthz") {
          response.writeHead(404, { "content-type": "application/json" }).end('{"error":"not found"}')
          return
        }
        const current = Effect.runSync(health.report)
        response.writeHead(current.status === "ready" ? 200 : 503, { "content-type": "application/json" }).end(JSON.stringify(current))
      })
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(port, host, () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.async<void>((resume) => { server.close(() => resume(Effect.void)); server.closeAllConnections() })
  ).pipe(
    Effect.tap((server) => {
      const address = server.address()
      return logEvent("health.listening", { url: `http://${host}:${typeof address === "object" && address !== null ? address.port : port}/healthz` })
    })
  )
