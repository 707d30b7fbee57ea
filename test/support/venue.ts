/**
 * A real svc-venue for tests: started in-process on a free loopback port, talked to
 * over HTTP with raw signed requests. Every integration test in the project uses it.
 *
 *   const v = await startVenue()
 *   const r = await v.signed("GET", "/api/wallets/spot")
 *   await v.admin("POST", "/_venue/tape", { symbol: "BTCUSDT", price: "59000" })
 *   await v.close()
 */
import { Effect, Exit, Scope } from "effect"
import * as http from "node:http"
import { setTimeout as delay } from "node:timers/promises"
import { parse as parseJson, stringify } from "../../src/domain/Json.js"
import { devAccounts, devTradeKey, type AccountsFile } from "../../src/venue/Accounts.js"
import type { FaultProfile } from "../../src/venue/Faults.js"
import { serveVenue } from "../../src/venue/Server.js"
import type { TapeSource } from "../../src/venue/Tape.js"
import type { Venue } from "../../src/venue/Venue.js"
import { signRequest } from "../../src/svc/Signer.js"
import { defaultDialect } from "../../src/svc/Dialect.js"

export interface LimitOverrides {
  readonly weightPerMinute?: number
  readonly ordersPer10s?: number
  readonly ordersPerDay?: number
  readonly authFailuresBeforeBlock?: number
  readonly authBlockSeconds?: number
  readonly weightWindowMs?: number
}

export interface StartVenueOptions {
  /** Accounts file content (default: the built-in dev accounts). */
  readonly accounts?: AccountsFile
  /** Acceptance-to-settlement delay (default 50 ms, as the CLI). */
  readonly settleMs?: number
  /** Default: a manual tape that moves only through `/_venue/tape`. */
  readonly tape?: TapeSource
  /** Steps of a synthetic or replay tape (default 1000 ms; 0 = only through the admin route). */
  readonly tickMs?: number
  readonly limits?: LimitOverrides
  readonly faults?: FaultProfile
}

export interface Answer {
  readonly status: number
  /** Lower-case header names. */
  readonly headers: http.IncomingHttpHeaders
  readonly text: string
  /** The body parsed with lossless numbers (numbers are `LosslessNumber`), or undefined when it is not JSON. */
  readonly json: any
}

export interface SignOptions {
  readonly keyId?: string
  readonly secret?: string
  readonly timestamp?: number | string
  readonly recvWindow?: number | string
  /** Extra or overriding headers (lower-case names win over the signed ones). */
  readonly headers?: Readonly<Record<string, string>>
}

export interface TestVenue {
  readonly url: string
  readonly keyId: string
  readonly secret: string
  readonly uid: number
  /** The in-memory exchange (accounts, engine, tapes, faults). */
  readonly venue: Venue
  /** Calls a `/_venue` admin route; returns the parsed JSON answer (throws on a non-2xx answer). */
  admin(method: string, path: string, body?: unknown): Promise<any>
  /** A raw signed request with the dev key (or the key in options). `body` is sent as given when a string, else stringified. */
  signed(method: string, target: string, body?: unknown, options?: SignOptions): Promise<Answer>
  /** An unsigned request with exactly these headers and body bytes. */
  raw(method: string, target: string, init?: { readonly headers?: Readonly<Record<string, string>>; readonly body?: string | Uint8Array }): Promise<Answer>
  close(): Promise<void>
}

const withLimits = (accounts: AccountsFile, limits: LimitOverrides | undefined): AccountsFile =>
  limits === undefined ? accounts : { ...accounts, limits: { ...accounts.limits, ...limits } }

export const startVenue = async (options: StartVenueOptions = {}): Promise<TestVenue> => {
  const scope = Effect.runSync(Scope.make())
  const running = await Effect.runPromise(
    Scope.extend(
      serveVenue({
        accounts: withLimits(options.accounts ?? devAccounts, options.limits),
        ...(options.settleMs === undefined ? {} : { settleMs: options.settleMs }),
        ...(options.tape === undefined ? {} : { tape: options.tape }),
        ...(options.tickMs === undefined ? {} : { tickMs: options.tickMs }),
        ...(options.faults === undefined ? {} : { faults: options.faults })
      }),
      scope
    )
  )
  // An idle kept-alive socket is closed here after a second, well before the venue closes it as
  // idle (node's keepAliveTimeout, 5 s): otherwise a request can go out on a socket the venue is
  // closing and be reset, and only a read can safely be sent again.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16, timeout: 1000 })
  const { hostname, port } = new URL(running.url)

  const raw: TestVenue["raw"] = (method, target, init = {}) => {
    const body = init.body === undefined ? undefined : typeof init.body === "string" ? Buffer.from(init.body, "utf8") : Buffer.from(init.body)
    const headers: Record<string, string> = { ...(init.headers ?? {}) }
    if (body !== undefined) headers["content-length"] = String(body.length)
    return send(method, target, headers, body).catch((error: NodeJS.ErrnoException & { readonly reusedSocket?: boolean }) => {
      // A kept-alive socket the server closed as idle just as a request went out on it is reset
      // before the server read anything. Only a read is sent again: a reset can also be a fault
      // profile dropping an answer after the venue acted on the request.
      if (method === "GET" && error.reusedSocket === true && error.code === "ECONNRESET") return send(method, target, headers, body)
      throw error
    })
  }

  const send = (method: string, target: string, headers: Record<string, string>, body: Buffer | undefined) =>
    new Promise<Answer>((resolve, reject) => {
      const req = http.request({ host: hostname, port, method, path: target, headers, agent }, (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8")
          let json: unknown
          try {
            json = parseJson(text)
          } catch {
            json = undefined
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json })
        })
        res.on("error", reject)
      })
      req.on("error", (error) => reject(Object.assign(error, { reusedSocket: req.reusedSocket })))
      req.end(body)
    })

  // Two identical requests in one millisecond would carry the same signature and be refused as a
  // replay; a test that means to replay passes its timestamp explicitly.
  let lastTimestamp = 0
  const freshTimestamp = (): number => (lastTimestamp = Math.max(Date.now(), lastTimestamp + 1))

  const signed: TestVenue["signed"] = (method, target, body, sign = {}) => {
    const text = body === undefined ? undefined : typeof body === "string" ? body : stringify(body)
    const request = signRequest(sign.keyId ?? devTradeKey.keyId, sign.secret ?? devTradeKey.secret, {
      method,
      target,
      timestamp: sign.timestamp ?? freshTimestamp(),
      recvWindow: sign.recvWindow ?? defaultDialect.recvWindowMs,
      ...(text === undefined ? {} : { body: text })
    })
    return raw(method, target, { headers: { ...request.headers, ...(sign.headers ?? {}) }, ...(text === undefined ? {} : { body: text }) })
  }

  const admin: TestVenue["admin"] = async (method, path, body) => {
    const answer = await raw(method, path, body === undefined ? {} : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
    if (answer.status < 200 || answer.status > 299) throw new Error(`${method} ${path} answered ${answer.status}: ${answer.text}`)
    return JSON.parse(answer.text)
  }

  return {
    url: running.url,
    keyId: devTradeKey.keyId,
    secret: devTradeKey.secret,
    uid: devTradeKey.uid,
    venue: running.venue,
    admin,
    signed,
    raw,
    close: async () => {
      agent.destroy()
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }
}

/** Polls `probe` until it returns a value other than undefined, or fails after `timeoutMs`. */
export const eventually = async <A>(probe: () => Promise<A | undefined>, timeoutMs = 5000, what = "condition"): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await delay(5)
  }
}

/**
 * An admin call, tried again once when a kept-alive connection was reset: the venue
 * closes idle connections, and a request can race that close after a long quiet phase.
 * (Free of vitest, so that benchmarks can use it too.)
 */
export const admin = (venue: TestVenue, method: string, path: string, body?: unknown): Promise<any> =>
  venue.admin(method, path, body).catch((error: unknown) =>
    (error as { code?: string }).code === "ECONNRESET" ? venue.admin(method, path, body) : Promise.reject(error)
  )
