/**
 * The console's HTTP surface on the health server: the page at `/`, the JSON API
 * under `/api/v1/`, its event stream and its controls. Plain request handling; what
 * an answer needs from the running daemon comes from a `ConsoleBackend`, attached
 * once the daemon trades (until then the API answers 503 `starting`).
 *
 * - Every error is one JSON shape: `{ "error": { "code", "message" } }`, the message
 *   saying what to do.
 * - Reads are open when no token is configured, as `/healthz`'s reasons are; with
 *   `health.token` they need `Authorization: Bearer TOKEN`. Controls always need it:
 *   403 naming the setting when none is configured, 401 for a wrong or missing one.
 *   Tokens travel in a header only, never a cookie, so another site's page cannot
 *   act for the operator; no answer carries CORS headers.
 * - Without a token, console requests must name the server by an IP address or
 *   `localhost`: a page on a domain that was made to resolve to 127.0.0.1 (DNS
 *   rebinding) is refused.
 * - Query parameters are checked (unknown, repeated or malformed ones are refused
 *   by name), request bodies are bounded, and the event stream has its own bounds.
 */
import { createHash, timingSafeEqual } from "node:crypto"
import { isIP } from "node:net"
import type { IncomingMessage, ServerResponse } from "node:http"
import { Redacted } from "effect"
import type { OperatorActionName } from "./Actions.js"
import type { EventStream } from "./EventStream.js"

/** What an API route answers: an HTTP status and a JSON document. */
export interface Answer {
  readonly status: number
  readonly body: unknown
}

export const failure = (status: number, code: string, message: string): Answer => ({ status, body: { error: { code, message } } })

export const MAX_LIMIT = 1000
/** The largest control body: a clientOrderId or `{"all": true}` is far less. */
export const MAX_BODY_BYTES = 4096
const MAX_URL_CHARS = 2048

export interface OrdersQuery {
  readonly instance?: string | undefined
  readonly open: boolean
  readonly limit: number
}

/** What the API reads and does in the running daemon. */
export interface ConsoleBackend {
  readonly instanceIds: ReadonlyArray<string>
  readonly instances: () => Promise<unknown>
  readonly orders: (query: OrdersQuery) => Promise<unknown>
  readonly fills: (query: { readonly instance?: string | undefined; readonly limit: number }) => Promise<unknown>
  readonly trades: (query: { readonly instance?: string | undefined; readonly since?: number | undefined }) => Promise<unknown>
  readonly profit: (query: { readonly instance?: string | undefined }) => Promise<unknown>
  readonly pnl: (instance: string) => Promise<unknown>
  readonly health: () => Promise<unknown>
  readonly promotions: () => Promise<unknown>
  readonly actions: (limit: number) => Promise<unknown>
  readonly control: (action: OperatorActionName, instance: string | undefined, body: Readonly<Record<string, unknown>>) => Promise<Answer>
  readonly events: EventStream
}

export interface ConsolePage {
  readonly html: string
  readonly csp: string
}

const sha256 = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest()

const JSON_HEADERS = { "content-type": "application/json; charset=utf-8", "cache-control": "no-store", "x-content-type-options": "nosniff" }

const send = (response: ServerResponse, answer: Answer, extra: Record<string, string> = {}): void => {
  response.writeHead(answer.status, { ...JSON_HEADERS, ...extra }).end(JSON.stringify(answer.body))
}

/** The query of one route: each parameter once, and only the ones it takes. */
const queryOf = (search: URLSearchParams, allowed: ReadonlyArray<string>): Map<string, string> | Answer => {
  const seen = new Map<string, string>()
  for (const [name, value] of search) {
    if (!allowed.includes(name)) {
      return failure(400, "bad-query", `unknown query parameter "${name.slice(0, 40)}"; this path takes ${allowed.length === 0 ? "none" : allowed.join(", ")}`)
    }
    if (seen.has(name)) return failure(400, "bad-query", `query parameter "${name}" is given twice; give it once`)
    seen.set(name, value)
  }
  return seen
}

const isAnswer = (value: unknown): value is Answer => typeof value === "object" && value !== null && "status" in value && "body" in value

const limitOf = (query: Map<string, string>, fallback: number): number | Answer => {
  const raw = query.get("limit")
  if (raw === undefined) return fallback
  if (!/^\d{1,4}$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_LIMIT) return failure(400, "bad-query", `limit must be a whole number from 1 to ${MAX_LIMIT}, not "${raw.slice(0, 20)}"`)
  return Number(raw)
}

const sinceOf = (query: Map<string, string>): number | undefined | Answer => {
  const raw = query.get("since")
  if (raw === undefined) return undefined
  const ms = /^\d{1,15}$/.test(raw) ? Number(raw) : /^\d{4}-\d\d-\d\d([T ][\d:.]+Z?)?$/.test(raw) ? Date.parse(raw.length === 10 ? `${raw}T00:00:00Z` : raw) : Number.NaN
  return Number.isFinite(ms) ? ms : failure(400, "bad-query", `since must be epoch milliseconds or a UTC date such as 2026-11-01 or 2026-11-01T12:00:00Z, not "${raw.slice(0, 40)}"`)
}

const CONTROLS: ReadonlyArray<OperatorActionName> = ["pause", "resume", "stop-entries", "cancel-all"]

/** Reads a request body of at most MAX_BODY_BYTES as a JSON object (an empty body is `{}`). */
const readBody = (request: IncomingMessage): Promise<Record<string, unknown> | Answer> =>
  new Promise((done) => {
    const declared = Number(request.headers["content-length"] ?? "0")
    if (declared > MAX_BODY_BYTES) {
      request.resume()
      return done(failure(413, "body-too-large", `a control's body is at most ${MAX_BODY_BYTES} bytes`))
    }
    const chunks: Array<Buffer> = []
    let size = 0
    request.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > MAX_BODY_BYTES) {
        request.removeAllListeners("data")
        request.resume()
        done(failure(413, "body-too-large", `a control's body is at most ${MAX_BODY_BYTES} bytes`))
        return
      }
      chunks.push(chunk)
    })
    request.on("end", () => {
      if (size > MAX_BODY_BYTES) return
      const text = Buffer.concat(chunks).toString("utf8").trim()
      if (text === "") return done({})
      if (!/^application\/json\b/i.test(request.headers["content-type"] ?? "")) return done(failure(415, "bad-body", "send the body as application/json"))
      try {
        const parsed: unknown = JSON.parse(text)
        done(typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : failure(400, "bad-body", "the body must be a JSON object"))
      } catch {
        done(failure(400, "bad-body", "the body is not valid JSON"))
      }
    })
    request.on("error", () => done(failure(400, "bad-body", "the body could not be read")))
  })

/** A hostname a DNS rebinding attack cannot produce: an IP literal or localhost. */
const isDirectHost = (host: string | undefined): boolean => {
  if (host === undefined) return false
  const name = host.startsWith("[") ? host.slice(1, host.indexOf("]")) : host.replace(/:\d+$/, "")
  return isIP(name) !== 0 || name === "localhost"
}

/**
 * The console's routes. `handle` answers `/` and `/api/...` and returns false for anything
 * else (the health server's own paths); `attach` hands it the running daemon until the
 * returned function detaches it.
 */
export const consoleRoutes = (page: ConsolePage, token: Redacted.Redacted<string> | undefined) => {
  const expected = token === undefined ? undefined : sha256(Redacted.value(token))
  let backend: ConsoleBackend | undefined
  const carriesToken = (request: IncomingMessage): boolean =>
    expected !== undefined && timingSafeEqual(sha256(/^Bearer +(\S+) *$/i.exec(request.headers.authorization ?? "")?.[1] ?? ""), expected)
  const unauthorized = failure(401, "unauthorized", "send the health token (health.token, SVC_HEALTH_TOKEN or SVC_HEALTH_TOKEN_FILE) as Authorization: Bearer TOKEN")
  const challenge = { "www-authenticate": 'Bearer realm="svcbot"' }

  const answerRead = (response: ServerResponse, work: Promise<unknown>): void => {
    work.then(
      (body) => send(response, { status: 200, body }),
      (error: unknown) => send(response, failure(500, "internal", `the daemon could not answer: ${error instanceof Error ? error.message : String(error)}`))
    )
  }

  const instanceOf = (daemon: ConsoleBackend, query: Map<string, string>, required: boolean): string | undefined | Answer => {
    const id = query.get("instance")
    if (id === undefined) return required ? failure(400, "bad-query", "instance is required: give a strategies[].id of the config") : undefined
    return daemon.instanceIds.includes(id) ? id : failure(404, "unknown-instance", `no instance "${id.slice(0, 80)}": the configured ones are ${daemon.instanceIds.join(", ") || "none"}`)
  }

  const read = (daemon: ConsoleBackend, path: string, search: URLSearchParams, request: IncomingMessage, response: ServerResponse): void => {
    const route = (allowed: ReadonlyArray<string>, answer: (query: Map<string, string>) => Promise<unknown> | Answer): void => {
      const query = queryOf(search, allowed)
      if (isAnswer(query)) return send(response, query)
      const work = answer(query)
      if (isAnswer(work)) return send(response, work)
      answerRead(response, work)
    }
    switch (path) {
      case "/api/v1/instances":
        return route([], () => daemon.instances())
      case "/api/v1/orders":
        return route(["instance", "open", "limit"], (query) => {
          const instance = instanceOf(daemon, query, false)
          const limit = limitOf(query, 100)
          const open = query.get("open") ?? "false"
          if (isAnswer(instance)) return instance
          if (isAnswer(limit)) return limit
          if (open !== "true" && open !== "false") return failure(400, "bad-query", `open must be true or false, not "${open.slice(0, 20)}"`)
          return daemon.orders({ instance, open: open === "true", limit })
        })
      case "/api/v1/fills":
        return route(["instance", "limit"], (query) => {
          const instance = instanceOf(daemon, query, false)
          const limit = limitOf(query, 50)
          if (isAnswer(instance)) return instance
          if (isAnswer(limit)) return limit
          return daemon.fills({ instance, limit })
        })
      case "/api/v1/trades":
        return route(["instance", "since"], (query) => {
          const instance = instanceOf(daemon, query, false)
          const since = sinceOf(query)
          if (isAnswer(instance)) return instance
          if (isAnswer(since)) return since
          return daemon.trades({ instance, since })
        })
      case "/api/v1/profit":
        return route(["instance"], (query) => {
          const instance = instanceOf(daemon, query, false)
          return isAnswer(instance) ? instance : daemon.profit({ instance })
        })
      case "/api/v1/pnl":
        return route(["instance"], (query) => {
          const instance = instanceOf(daemon, query, true)
          return isAnswer(instance) ? instance : daemon.pnl(instance!)
        })
      case "/api/v1/health":
        return route([], () => daemon.health())
      case "/api/v1/promotions":
        return route([], () => daemon.promotions())
      case "/api/v1/actions":
        return route(["limit"], (query) => {
          const limit = limitOf(query, 50)
          return isAnswer(limit) ? limit : daemon.actions(limit)
        })
      case "/api/v1/events": {
        const query = queryOf(search, [])
        if (isAnswer(query)) return send(response, query)
        if (!daemon.events.open(request, response)) send(response, failure(503, "too-many-streams", "the console serves a limited number of event streams; close another page"), { "retry-after": "10" })
        return
      }
    }
    send(response, failure(404, "not-found", "no such path: the API is /api/v1/instances, orders, fills, trades, profit, pnl, health, promotions, actions, events and session"))
  }

  const control = (daemon: ConsoleBackend, path: string, search: URLSearchParams, request: IncomingMessage, response: ServerResponse): void => {
    const lost = path === "/api/v1/lost/ack"
    const match = /^\/api\/v1\/instances\/([^/]{1,200})\/([a-z-]+)$/.exec(path)
    const action = lost ? "ack-lost" : CONTROLS.find((name) => name === match?.[2])
    if (action === undefined) {
      request.resume()
      return send(response, failure(404, "not-found", "no such control: POST /api/v1/instances/ID/pause, resume, stop-entries or cancel-all, or /api/v1/lost/ack"))
    }
    let instance: string | undefined
    if (!lost) {
      try {
        instance = decodeURIComponent(match![1]!)
      } catch {
        instance = match![1]!
      }
      if (!daemon.instanceIds.includes(instance)) {
        request.resume()
        return send(response, failure(404, "unknown-instance", `no instance "${instance.slice(0, 80)}": the configured ones are ${daemon.instanceIds.join(", ") || "none"}`))
      }
    }
    const query = queryOf(search, [])
    if (isAnswer(query)) {
      request.resume()
      return send(response, query)
    }
    void readBody(request).then((body) => {
      if (isAnswer(body)) return send(response, body)
      daemon.control(action, instance, body).then(
        (answer) => send(response, answer),
        (error: unknown) => send(response, failure(500, "internal", `the action failed: ${error instanceof Error ? error.message : String(error)}`))
      )
    })
  }

  const handle = (request: IncomingMessage, response: ServerResponse): boolean => {
    const raw = request.url ?? "/"
    const path = raw.split("?")[0]!
    if (path !== "/" && path !== "/api" && !path.startsWith("/api/")) return false
    if (raw.length > MAX_URL_CHARS) {
      send(response, failure(414, "url-too-long", `a console URL is at most ${MAX_URL_CHARS} characters`))
      return true
    }
    if (expected === undefined && !isDirectHost(request.headers.host)) {
      send(response, failure(403, "host-refused", "without a health token the console answers only requests to an IP address or localhost; set health.token to reach it by name"))
      return true
    }
    if (path === "/") {
      if (request.method !== "GET" && request.method !== "HEAD") {
        send(response, failure(405, "method-not-allowed", "the page answers GET"), { allow: "GET, HEAD" })
        return true
      }
      response
        .writeHead(200, {
          "content-type": "text/html; charset=utf-8",
          "content-security-policy": page.csp,
          "cache-control": "no-store",
          "x-content-type-options": "nosniff",
          "referrer-policy": "no-referrer",
          "x-frame-options": "DENY"
        })
        .end(request.method === "HEAD" ? undefined : page.html)
      return true
    }
    const search = new URL(raw, "http://console").searchParams
    if (path === "/api/v1/session" && request.method === "GET") {
      // What the page asks before anything else, so that a missing token is not a failed request.
      send(response, { status: 200, body: { tokenConfigured: expected !== undefined, authorized: expected === undefined || carriesToken(request) } })
      return true
    }
    const post = request.method === "POST"
    if (!post && request.method !== "GET") {
      request.resume()
      send(response, failure(405, "method-not-allowed", "the API answers GET, and POST for controls"), { allow: "GET, POST" })
      return true
    }
    if (post && expected === undefined) {
      request.resume()
      send(response, failure(403, "no-token-configured", "controls need a token: set health.token (or SVC_HEALTH_TOKEN / SVC_HEALTH_TOKEN_FILE), 32 to 512 characters, and restart the daemon"))
      return true
    }
    if (expected !== undefined && !carriesToken(request)) {
      request.resume()
      send(response, unauthorized, challenge)
      return true
    }
    if (backend === undefined) {
      request.resume()
      send(response, failure(503, "starting", "the daemon is starting (or stopping): the console answers once it trades"), { "retry-after": "2" })
      return true
    }
    if (post) control(backend, path, search, request, response)
    else read(backend, path, search, request, response)
    return true
  }

  return {
    handle,
    attach: (daemon: ConsoleBackend): (() => void) => {
      backend = daemon
      return () => {
        if (backend === daemon) backend = undefined
        daemon.events.closeAll()
      }
    }
  }
}

export type ConsoleRoutes = ReturnType<typeof consoleRoutes>
