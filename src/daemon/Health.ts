/**
 * Readiness for the container healthcheck. `GET /healthz` answers 200 with
 * `{"status":"ready"}` once start-up (key check, migrate, reconcile) is done and
 * nothing stops trading; 503 with `starting` or `degraded` and every reason
 * otherwise.
 *
 * Reasons come from checks that read the state of the parts that own it (the
 * client's view of the key and the venue, the engine's placement blocks, kill
 * switches and lost orders, the strategy instances' pauses, the storage of the
 * database files), so health turns
 * ready again on its own when the cause clears. The one reason that has no state
 * to read, a reconcile mismatch the engine could not resolve, is taken off the
 * log stream and holds until the daemon restarts.
 *
 * The same server answers `GET /metrics` with the daemon's Prometheus metrics
 * (src/ops/Metrics.ts), so one port serves both the orchestrator and the scraper.
 *
 * With a token configured (`health.token`), `/metrics` answers only a request that
 * carries it as `Authorization: Bearer TOKEN` (401 otherwise), and `/healthz` gives
 * its reasons only to such a request: they name strategies, limits and the exchange.
 * Everyone else gets the bare status and its HTTP code, all an orchestrator needs.
 *
 * The operator's console (src/console/) answers `/` and `/api/v1/...` on the same server.
 */
import { createHash, timingSafeEqual } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { Effect, Layer, Logger, Redacted, Ref, Schedule, type Scope } from "effect"
import { lineOf, logEvent } from "../log/Logger.js"

export type HealthStatus = "starting" | "ready" | "degraded"

export interface HealthReport {
  readonly status: HealthStatus
  readonly reasons: ReadonlyArray<string>
}

/** The current reasons one part of the daemon gives for not being ready (none when all is well). */
export type HealthCheck = Effect.Effect<ReadonlyArray<string>>

/** How often the status is evaluated to log its changes (`health.changed`). */
const WATCH_INTERVAL_MS = 1000

export class Health extends Effect.Service<Health>()("svcbot/Health", {
  effect: Effect.gen(function* () {
    const ready = yield* Ref.make(false)
    const starting = yield* Ref.make<string>("start-up not finished")
    const checks = yield* Ref.make<ReadonlyMap<symbol, HealthCheck>>(new Map())
    const mismatches = yield* Ref.make<ReadonlyArray<string>>([])

    const report: Effect.Effect<HealthReport> = Effect.gen(function* () {
      const reasons: Array<string> = []
      for (const check of (yield* Ref.get(checks)).values()) {
        reasons.push(...(yield* check.pipe(Effect.catchAllCause((cause) => Effect.succeed([`a health check failed: ${String(cause)}`])))))
      }
      reasons.push(...(yield* Ref.get(mismatches)))
      if (!(yield* Ref.get(ready))) return { status: "starting", reasons: [yield* Ref.get(starting), ...reasons] }
      return reasons.length > 0 ? { status: "degraded", reasons } : { status: "ready", reasons: [] }
    })

    return {
      markReady: Ref.set(ready, true),
      /** What start-up is doing or waiting for, shown while the status is `starting`. */
      starting: (reason: string) => Ref.set(starting, reason),
      /** Adds a check for the lifetime of the scope (the part it reads lives as long). */
      check: (check: HealthCheck): Effect.Effect<void, never, Scope.Scope> => {
        const key = Symbol()
        return Effect.acquireRelease(
          Ref.update(checks, (current) => new Map([...current, [key, check]])),
          () => Ref.update(checks, (current) => new Map([...current].filter(([k]) => k !== key)))
        )
      },
      /** A reconcile mismatch the engine could not resolve: it holds until the daemon restarts. */
      mismatch: (reason: string) => Ref.update(mismatches, (current) => (current.includes(reason) ? current : [...current, reason])),
      report,
      /** Logs `health.changed` whenever the status or its reasons change, for the lifetime of the scope. */
      watch: Effect.gen(function* () {
        let last = ""
        const look = Effect.gen(function* () {
          const current = yield* report
          const key = JSON.stringify(current)
          if (key === last) return
          last = key
          yield* logEvent("health.changed", { status: current.status, reasons: current.reasons })
        })
        yield* Effect.forkScoped(Effect.repeat(look, Schedule.spaced(WATCH_INTERVAL_MS)))
      })
    }
  })
}) {}

/** A logger that hands health what only the log stream carries: start-up's waits and unresolved reconcile mismatches. */
export const healthLogHook = (health: Health): Layer.Layer<never> =>
  Logger.add(
    Logger.make(({ message, annotations }) => {
      const { event, fields } = lineOf(message, annotations)
      if (event === "startup.waiting") {
        if (fields.reason !== undefined) Effect.runSync(health.starting(`waiting: ${String(fields.reason)}`))
        return
      }
      if (event !== "reconcile.mismatch") return
      // A lost order is reported by the engine's own check until it is acknowledged.
      if (fields.clientOrderId !== undefined && fields.lost !== undefined) return
      Effect.runSync(health.mismatch(`ledger and exchange disagree${fields.problem !== undefined ? `: ${String(fields.problem)}` : ""}`))
    })
  )

/** The Prometheus text exposition and its content type, as `GET /metrics` serves it. */
export type MetricsExposition = Effect.Effect<{ readonly contentType: string; readonly body: string }>

const sha256 = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest()

/**
 * Whether a request carries `Authorization: Bearer TOKEN` with the token whose digest is `expected`.
 * Digests of equal length are compared in constant time, so neither the token's bytes nor its length show in the timing.
 */
const carriesToken = (request: IncomingMessage, expected: Buffer): boolean =>
  timingSafeEqual(sha256(/^Bearer +(\S+) *$/i.exec(request.headers.authorization ?? "")?.[1] ?? ""), expected)

/** More paths on the health server: answers the requests it takes and returns true. */
export interface ExtraRoutes {
  readonly handle: (request: IncomingMessage, response: ServerResponse) => boolean
}

/**
 * Serves `GET /healthz` and `GET /metrics` on host:port for the lifetime of the scope; with
 * `token`, `/metrics` and the reasons of `/healthz` only to a request that carries it. `extra`
 * (the console) is asked first about every other path.
 */
export const serveHealth = (health: Health, metrics: MetricsExposition, host: string, port: number, token?: Redacted.Redacted<string>, extra?: ExtraRoutes) =>
  Effect.acquireRelease(
    Effect.async<Server, Error>((resume) => {
      const expected = token === undefined ? undefined : sha256(Redacted.value(token))
      const trusted = (request: IncomingMessage): boolean => expected === undefined || carriesToken(request, expected)
      const server = createServer((request, response) => {
        const path = request.method === "GET" ? request.url?.split("?")[0] : undefined
        if (path === "/healthz") {
          void Effect.runPromise(health.report).then((current) =>
            response
              .writeHead(current.status === "ready" ? 200 : 503, { "content-type": "application/json" })
              .end(JSON.stringify(trusted(request) ? current : { status: current.status }))
          )
          return
        }
        if (path === "/metrics") {
          if (!trusted(request)) {
            response
              .writeHead(401, { "content-type": "application/json", "www-authenticate": 'Bearer realm="svcbot"' })
              .end('{"error":"unauthorized: send the health token (health.token) as Authorization: Bearer TOKEN"}')
            return
          }
          void Effect.runPromise(metrics).then(({ contentType, body }) => response.writeHead(200, { "content-type": contentType }).end(body))
          return
        }
        if (extra?.handle(request, response) === true) return
        response
          .writeHead(404, { "content-type": "application/json" })
          .end(`{"error":"not found: the paths are /healthz and /metrics${extra === undefined ? "" : ", the console at / and its API under /api/v1/"}"}`)
      })
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(port, host, () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.async<void>((resume) => { server.close(() => resume(Effect.void)); server.closeAllConnections() })
  ).pipe(
    Effect.tap((server) => {
      const address = server.address()
      const origin = `http://${host}:${typeof address === "object" && address !== null ? address.port : port}`
      return logEvent("health.listening", { url: `${origin}/healthz`, metrics: `${origin}/metrics`, ...(extra === undefined ? {} : { console: `${origin}/` }) })
    })
  )
