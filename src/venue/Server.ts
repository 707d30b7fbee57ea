/**
 * svc-venue over HTTP: @effect/platform's server on node's http (or https), inside a
 * Scope. The handler reads the raw body (the signature covers its exact bytes, and
 * more than 64 KiB is drained and answered 413), hands the request to the synchronous
 * `Venue`, and writes its answer. Settlement and the tape run as scoped fibers.
 */
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Data, Duration, Effect, Schedule, type Scope } from "effect"
import * as http from "node:http"
import * as https from "node:https"
import type { IncomingMessage } from "node:http"
import { logEvent } from "../log/Logger.js"
import { devAccounts, type AccountsFile } from "./Accounts.js"
import type { FaultProfile } from "./Faults.js"
import { followVenue } from "./Follow.js"
import type { Retention } from "./Matching.js"
import type { TapeSource } from "./Tape.js"
import type { VenueAnswer } from "./Answers.js"
import { VENUE_IMPLEMENTATION, VENUE_IMPLEMENTATION_HEADER } from "../svc/VenueIdentity.js"
import { MAX_BODY_BYTES, Venue } from "./Venue.js"

export class VenueStartError extends Data.TaggedError("VenueStartError")<{ readonly message: string; readonly cause?: unknown }> {}

export interface ServeVenueOptions {
  /** Interface to listen on (default 127.0.0.1). */
  readonly host?: string
  /** Port; 0 picks any free port (default 0). */
  readonly port?: number
  /** Accounts, keys, pairs, limits and fees (default: the built-in dev accounts). */
  readonly accounts?: AccountsFile
  readonly settleMs?: number
  /**
   * Where prices come from (default: a manual tape that moves only through the admin route).
   * A follow tape polls another venue's public ticker and candles (`Follow.ts`); the start
   * fails when that venue cannot be read or lacks a pair.
   */
  readonly tape?: TapeSource
  /** A synthetic or replay tape steps every `tickMs` (default 1000; 0 = only through the admin route). */
  readonly tickMs?: number
  /** PEM text of a certificate and its key: serve https. */
  readonly tls?: { readonly cert: string; readonly key: string }
  /** A fault profile active from the start. */
  readonly faults?: FaultProfile
  /** The venue's clock before any skew fault (default Date.now). */
  readonly clock?: () => number
  /** Ended orders and fills kept (default DEFAULT_RETENTION in Venue.ts). */
  readonly retention?: Partial<Retention>
}

export interface RunningVenue {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  readonly url: string
  readonly port: number
  /** The in-memory exchange: accounts, keys, matching engine, tapes, faults. */
  readonly venue: Venue
}

/** How often accepted orders are checked for settlement when no request arrives. */
const SETTLEMENT_POLL = Schedule.spaced(Duration.millis(10))

const NO_BODY = new Uint8Array(0)

/** Reads the whole body; undefined when it exceeded MAX_BODY_BYTES (the rest is drained, not kept). */
const readBody = (incoming: IncomingMessage): Effect.Effect<Uint8Array | undefined> =>
  Effect.async<Uint8Array | undefined>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= MAX_BODY_BYTES) chunks.push(chunk)
      else chunks.length = 0
    }
    const onEnd = () => resume(Effect.succeed(size > MAX_BODY_BYTES ? undefined : Buffer.concat(chunks)))
    const onError = () => resume(Effect.interrupt)
    incoming.on("data", onData)
    incoming.once("end", onEnd)
    incoming.once("error", onError)
    return Effect.sync(() => {
      incoming.off("data", onData)
      incoming.off("end", onEnd)
      incoming.off("error", onError)
    })
  })

const hasBody = (incoming: IncomingMessage): boolean => {
  const length = incoming.headers["content-length"]
  return (length !== undefined && length !== "0") || incoming.headers["transfer-encoding"] !== undefined
}

/**
 * Stands for an answer already written to node's response: the server writes
 * nothing more for a response that has ended.
 */
const WRITTEN = HttpServerResponse.empty()

/**
 * Writes the venue's answer straight to node's response, in one socket write with
 * the head (a string body with its length): nothing on the way needs to see it.
 */
const write = (request: HttpServerRequest.HttpServerRequest, incoming: IncomingMessage, result: VenueAnswer): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  if (result.dropResponse === true) {
    // The order stands; only its answer is lost, as when a connection breaks after acceptance.
    incoming.socket.destroy()
    return Effect.interrupt
  }
  result.headers["content-length"] = String(Buffer.byteLength(result.body))
  result.headers[VENUE_IMPLEMENTATION_HEADER] = VENUE_IMPLEMENTATION
  NodeHttpServerRequest.toServerResponse(request).writeHead(result.status, result.headers).end(result.body)
  return Effect.succeed(WRITTEN)
}

const respond = (venue: Venue, request: HttpServerRequest.HttpServerRequest, incoming: IncomingMessage, body: Uint8Array | undefined) => {
  const result = venue.handle({
    method: incoming.method ?? "GET",
    target: incoming.url ?? "/",
    headers: incoming.headers,
    body,
    remoteAddress: incoming.socket.remoteAddress ?? ""
  })
  if (result.event === undefined) return write(request, incoming, result)
  return Effect.zipRight(logEvent(result.event.name, result.event.fields), Effect.suspend(() => write(request, incoming, result)))
}

/** The fault profile's added latency comes before the venue sees the request. */
const delayed = (venue: Venue, request: HttpServerRequest.HttpServerRequest, incoming: IncomingMessage, body: Uint8Array | undefined) => {
  const latency = venue.faults.latencyMs
  if (latency > 0 && (incoming.url ?? "/").startsWith("/api")) {
    return Effect.zipRight(Effect.sleep(Duration.millis(latency)), Effect.suspend(() => respond(venue, request, incoming, body)))
  }
  return respond(venue, request, incoming, body)
}

const app = (venue: Venue) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const incoming = NodeHttpServerRequest.toIncomingMessage(request)
    // Most requests carry no body: they are answered without waiting for one.
    if (!hasBody(incoming)) return delayed(venue, request, incoming, NO_BODY)
    return Effect.flatMap(readBody(incoming), (body) => delayed(venue, request, incoming, body))
  })

/** Serves svc-venue until the scope closes. */
export const serveVenue = (options: ServeVenueOptions = {}): Effect.Effect<RunningVenue, VenueStartError, Scope.Scope> =>
  Effect.gen(function* () {
    const venue = yield* Effect.try({
      try: () =>
        new Venue({
          accounts: options.accounts ?? devAccounts,
          ...(options.settleMs === undefined ? {} : { settleMs: options.settleMs }),
          ...(options.tape === undefined ? {} : { tape: options.tape }),
          ...(options.clock === undefined ? {} : { clock: options.clock }),
          ...(options.retention === undefined ? {} : { retention: options.retention })
        }),
      catch: (cause) => new VenueStartError({ message: cause instanceof Error ? cause.message : String(cause), cause })
    })
    if (options.faults !== undefined) venue.applyFaults(options.faults)
    // Before listening: a venue that cannot follow must not serve prices it does not have.
    if (options.tape?.kind === "follow") yield* followVenue(venue, options.tape).pipe(Effect.mapError((e) => new VenueStartError({ message: e.message, cause: e })))
    const tls = options.tls
    const server = yield* NodeHttpServer.make(
      () => (tls === undefined ? http.createServer() : (https.createServer({ cert: tls.cert, key: tls.key }) as unknown as http.Server)),
      { host: options.host ?? "127.0.0.1", port: options.port ?? 0 }
    ).pipe(Effect.mapError((cause) => new VenueStartError({ message: `cannot listen: ${String(cause.cause ?? cause)}`, cause })))
    // No tracing spans per request: the venue is a hot loopback path and nothing collects them.
    yield* HttpServer.serveEffect(app(venue)).pipe(
      HttpMiddleware.withTracerDisabledWhenEffect(() => true),
      Effect.provideService(HttpServer.HttpServer, server)
    )
    yield* Effect.sync(() => venue.settle()).pipe(Effect.repeat(SETTLEMENT_POLL), Effect.forkScoped)
    const tickMs = options.tickMs ?? 1000
    if (tickMs > 0 && (options.tape?.kind === "synthetic" || options.tape?.kind === "csv")) {
      yield* Effect.sync(() => venue.stepTapes()).pipe(Effect.repeat(Schedule.spaced(Duration.millis(tickMs))), Effect.forkScoped)
    }
    const address = server.address
    if (address._tag !== "TcpAddress") return yield* new VenueStartError({ message: "the server is not listening on TCP" })
    const host = address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname
    const url = `${tls === undefined ? "http" : "https"}://${host}:${address.port}`
    yield* Effect.addFinalizer(() => logEvent("venue.stopped", { url }))
    return { url, port: address.port, venue }
  })
