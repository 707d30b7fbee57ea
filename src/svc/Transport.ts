/**
 * The wire under SvcClient: HTTP requests on an undici connection pool, each under the
 * client's deadline, each answer collected whole in memory up to a size bound. It knows
 * nothing of endpoints, signatures or budgets; SvcClient.ts hands it a request ready to go
 * and reads what came back.
 *
 * The pool is used directly: Effect's HttpClient costs more per request than the exchange
 * itself. Effect keeps what is around it: the pool's lifetime (a scoped Dispatcher) and the
 * one fiber that enforces every deadline.
 */
import type { Dispatcher } from "@effect/platform-node/Undici"
import { isUtf8 } from "node:buffer"
import { type Clock, Effect, type Scope } from "effect"
import { errorCodeOf } from "./Errors.js"

export type IncomingHttpHeaders = Dispatcher.ResponseData["headers"]

/**
 * What came back for one request off the wire: an answer (its `text` undefined when the body
 * is not UTF-8), one whose body ran past the limit (`TooLarge`: its status and headers, not
 * its body), or why there was none (`answered` when the status line came but the body did not).
 */
export type Reply =
  | { readonly _tag: "Answer"; readonly status: number; readonly headers: IncomingHttpHeaders; readonly text: string | undefined }
  | { readonly _tag: "TooLarge"; readonly status: number; readonly headers: IncomingHttpHeaders }
  | { readonly _tag: "NoAnswer"; readonly answered: boolean; readonly cause: unknown }

/** A request ready for the wire: signed already when it needs to be. */
export interface OutgoingRequest {
  readonly method: "GET" | "POST"
  /** Path and query exactly as on the request line. */
  readonly target: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array | undefined
}

/** Why a request got no answer, as the retry policy tells it apart. */
export interface NoAnswerReason {
  readonly reason: "timeout" | "connection"
  /** The connection never opened: nothing reached the server. */
  readonly neverSent: boolean
  readonly detail: string
}

/** Error codes of a connection that was never opened: nothing reached the server. */
const NEVER_CONNECTED = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"])

export const noAnswerReason = (reply: Extract<Reply, { _tag: "NoAnswer" }>, timedOut: boolean, requestTimeoutMs: number): NoAnswerReason => {
  if (timedOut) return { reason: "timeout", neverSent: false, detail: `no answer within ${requestTimeoutMs} ms` }
  const code = errorCodeOf(reply.cause)
  const detail = code ?? (reply.cause instanceof Error ? reply.cause.message : String(reply.cause))
  return { reason: "connection", neverSent: !reply.answered && code !== undefined && NEVER_CONNECTED.has(code), detail }
}

export const headerOf =
  (headers: IncomingHttpHeaders) =>
  (name: string): string | undefined => {
    const value = headers[name.toLowerCase()]
    return Array.isArray(value) ? value.join(", ") : value
  }

/**
 * The body as text, as undici's `body.text()` reads it: UTF-8, a byte order mark skipped; or
 * undefined when it is not UTF-8. Decoding would put U+FFFD in place of the bad bytes, and an
 * id read that way (a clientOrderId, a fillId) is another id, well formed and wrong.
 */
const utf8Text = (chunks: ReadonlyArray<Buffer>): string | undefined => {
  const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
  if (!isUtf8(bytes)) return undefined
  const start = bytes.length > 2 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0
  return bytes.toString("utf8", start)
}

/**
 * One HTTP request on an undici pool, as a dispatch handler. Dispatching directly skips
 * the response stream, promise chain and AbortSignal of `request()`, which cost as
 * much as the rest of a request; an answer (a small JSON document) is collected in
 * memory and handed over once. `abort` works before the request reached a socket
 * too: undici hands over the request's controller only then, so the abort is
 * passed on when it does.
 *
 * At most `maxBytes` of a body are kept: one that says it is longer (Content-Length)
 * or runs longer is aborted there, which closes its connection, so a peer that
 * streams without end costs no more memory than the limit.
 */
class HttpRequest implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined
  private aborted: Error | undefined
  private done: ((reply: Reply) => void) | undefined
  private status = 0
  private headers: IncomingHttpHeaders = {}
  private chunks: Array<Buffer> = []
  private received = 0

  constructor(private readonly maxBytes: number) {}

  send(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions, done: (reply: Reply) => void): void {
    this.done = done
    dispatcher.dispatch(options, this)
  }

  abort(): void {
    if (this.aborted !== undefined) return
    this.aborted = new Error("request aborted")
    this.controller?.abort(this.aborted)
    this.finish({ _tag: "NoAnswer", answered: this.status !== 0, cause: this.aborted })
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller
    if (this.aborted !== undefined) controller.abort(this.aborted)
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    this.status = statusCode
    this.headers = headers
    const declared = Number(headers["content-length"])
    if (declared > this.maxBytes) this.cutOff(controller)
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.received += chunk.length
    if (this.received > this.maxBytes) this.cutOff(controller)
    else this.chunks.push(chunk)
  }

  onResponseEnd(): void {
    this.finish({ _tag: "Answer", status: this.status, headers: this.headers, text: utf8Text(this.chunks) })
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.finish({ _tag: "NoAnswer", answered: this.status !== 0, cause: error })
  }

  /** Stops reading an answer past the limit: what was kept is dropped and the connection closed. */
  private cutOff(controller: Dispatcher.DispatchController): void {
    if (this.done === undefined) return
    this.chunks = []
    this.finish({ _tag: "TooLarge", status: this.status, headers: this.headers })
    controller.abort(new Error(`answer larger than ${this.maxBytes} bytes`))
  }

  private finish(reply: Reply): void {
    const done = this.done
    this.done = undefined
    done?.(reply)
  }
}

/** A request on the wire, watched for its deadline (milliseconds of the monotonic clock). */
interface Watched {
  readonly deadlineMs: number
  readonly request: HttpRequest
  /** Set by the watchdog when the deadline came first and it aborted the request. */
  timedOut: boolean
  /** Set when the request ended, one way or another: the watchdog leaves it alone. */
  ended: boolean
}

const monotonicMillisOf = (clock: Clock.Clock): number => Number(clock.unsafeCurrentTimeNanos() / 1_000_000n)

const monotonicMillis: Effect.Effect<number> = Effect.clockWith((clock) => Effect.sync(() => monotonicMillisOf(clock)))

/**
 * The per-request timeout, enforced by one fiber for every request of a client. A
 * timeout race per request forks two fibers and arms a timer for each, the largest
 * single cost of a request. All requests of a client share one timeout, so their
 * deadlines come in the order they started and the earliest pending one is at the
 * head of the queue. At a deadline the watchdog aborts the request, which then
 * fails and reads `timedOut` to know why.
 */
const deadlineWatchdog: Effect.Effect<{ readonly watch: (request: HttpRequest, deadlineMs: number) => Watched }, never, Scope.Scope> =
  Effect.gen(function* () {
    const queue: Array<Watched> = []
    const dropEnded = () => {
      while (queue[0]?.ended === true) queue.shift()
    }
    const wake = yield* Effect.makeLatch(false)
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.gen(function* () {
          yield* wake.await
          const now = yield* monotonicMillis
          dropEnded()
          for (let overdue = queue[0]; overdue !== undefined && overdue.deadlineMs <= now; overdue = queue[0]) {
            queue.shift()
            overdue.timedOut = true
            overdue.ended = true
            overdue.request.abort()
            dropEnded()
          }
          const next = queue[0]
          if (next === undefined) wake.unsafeClose()
          else yield* Effect.sleep(next.deadlineMs - now)
        })
      )
    )
    return {
      watch: (request: HttpRequest, deadlineMs: number): Watched => {
        dropEnded()
        const watched: Watched = { deadlineMs, request, timedOut: false, ended: false }
        queue.push(watched)
        wake.unsafeOpen()
        return watched
      }
    }
  })

export interface TransportOptions {
  /** Scheme, host and port of every request. */
  readonly origin: string
  readonly requestTimeoutMs: number
  /** Longest answer body read; a longer one ends as `TooLarge`. */
  readonly maxAnswerBytes: number
}

export interface Transport {
  /**
   * Sends one request; its deadline runs from `local`'s reading now. `read` is given how it
   * ended (and whether the deadline ended it) in the dispatcher's callback, and its effect is
   * the request's result: the fiber is resumed once, with what `read` made of it. Interrupting
   * the fiber aborts the request, which then ends as `NoAnswer` and is read all the same.
   */
  readonly send: <A>(request: OutgoingRequest, local: Clock.Clock, read: (reply: Reply, timedOut: boolean) => Effect.Effect<A>) => Effect.Effect<A>
}

/** The transport of one client over `dispatcher`; its watchdog fiber lives as long as the scope. */
export const makeTransport = (dispatcher: Dispatcher, options: TransportOptions): Effect.Effect<Transport, never, Scope.Scope> =>
  Effect.map(deadlineWatchdog, (watchdog) => ({
    send: <A>(request: OutgoingRequest, local: Clock.Clock, read: (reply: Reply, timedOut: boolean) => Effect.Effect<A>): Effect.Effect<A> => {
      const http = new HttpRequest(options.maxAnswerBytes)
      const watched = watchdog.watch(http, monotonicMillisOf(local) + options.requestTimeoutMs)
      const dispatch: Dispatcher.DispatchOptions = {
        origin: options.origin,
        method: request.method,
        path: request.target,
        headers: request.headers,
        body: request.body ?? null,
        // The deadline is the watchdog's alone.
        headersTimeout: 0,
        bodyTimeout: 0
      }
      return Effect.async<A>((resume) => {
        http.send(dispatcher, dispatch, (reply) => {
          watched.ended = true
          resume(read(reply, watched.timedOut))
        })
        // A caller that gives up aborts the request; its end (no answer) is read as it comes, so it is not counted in flight forever.
        return Effect.sync(() => http.abort())
      })
    }
  }))
