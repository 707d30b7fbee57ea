/**
 * Loopback proxies in front of a venue. `startProxy` (TCP) takes the venue off the network
 * and brings it back with its state intact: `stop()` closes the listener and cuts every
 * connection (clients see refused connections), `start()` listens on the same port.
 * `startAnswerProxy` (HTTP) rewrites the venue's answers: their bodies, and when asked their
 * status, headers and bytes (bytes that are not UTF-8 text, a body streamed without a length).
 *
 *   const proxy = await startProxy(new URL(venue.url).port)
 *   await proxy.stop(); ...; await proxy.start()
 */
import * as http from "node:http"
import { createServer, connect, type Server, type Socket } from "node:net"

export interface Proxy {
  /** Base URL through the proxy, e.g. `http://127.0.0.1:41234`. */
  readonly url: string
  readonly stop: () => Promise<void>
  readonly start: () => Promise<void>
}

export const startProxy = async (targetPort: number, port = 0): Promise<Proxy> => {
  const sockets = new Set<Socket>()
  let server: Server | undefined
  let boundPort = port
  const listen = () =>
    new Promise<void>((done, fail) => {
      const next = createServer((client) => {
        const upstream = connect(targetPort, "127.0.0.1")
        for (const socket of [client, upstream]) {
          sockets.add(socket)
          socket.on("close", () => sockets.delete(socket))
          socket.on("error", () => { client.destroy(); upstream.destroy() })
        }
        client.pipe(upstream).pipe(client)
      })
      next.once("error", fail)
      next.listen(boundPort, "127.0.0.1", () => {
        const address = next.address()
        if (typeof address === "object" && address !== null) boundPort = address.port
        server = next
        done()
      })
    })
  await listen()
  return {
    url: `http://127.0.0.1:${boundPort}`,
    stop: () =>
      new Promise<void>((done) => {
        for (const socket of sockets) socket.destroy()
        if (server === undefined) return done()
        server.close(() => done())
        server = undefined
      }),
    start: listen
  }
}

/** An answer of the venue as the rewriting proxy hands it to `rewrite`. */
export interface ProxiedAnswer {
  readonly method: string
  /** Path and query exactly as on the request line. */
  readonly target: string
  readonly status: number
  readonly body: string
}

/**
 * An answer as `rewrite` makes it anew, for what a body of text cannot say: `body` as bytes
 * (invalid UTF-8), another `status`, `headers` set over the venue's (lower-case names), and
 * `streamed` to send it in chunks without a Content-Length, as a peer that does not say how
 * long its answer is.
 */
export interface Rewrite {
  readonly body: string | Uint8Array
  readonly status?: number
  readonly headers?: Readonly<Record<string, string>>
  readonly streamed?: boolean
}

/** Chunks of a streamed answer: small enough that a client that stops reading stops the stream early. */
const STREAM_CHUNK_BYTES = 64 * 1024

export interface AnswerProxy {
  /** Base URL through the proxy, e.g. `http://127.0.0.1:41234`. */
  readonly url: string
  /** Answers that `rewrite` changed, in order (a body given as bytes read as UTF-8 text). */
  readonly rewritten: Array<ProxiedAnswer>
  readonly close: () => Promise<void>
}

/** Writes `bytes` from `at` on in chunks as the client takes them, until the end or until the client hangs up. */
const streamOut = (res: http.ServerResponse, bytes: Buffer, at: number): void => {
  for (; at < bytes.length; at += STREAM_CHUNK_BYTES) {
    if (res.destroyed) return
    if (!res.write(bytes.subarray(at, at + STREAM_CHUNK_BYTES))) {
      res.once("drain", () => streamOut(res, bytes, at + STREAM_CHUNK_BYTES))
      return
    }
  }
  res.end()
}

/**
 * A loopback HTTP proxy in front of a venue that hands every answer to `rewrite` and sends
 * the client what it returns instead (undefined: the venue's answer as it came): a body, with
 * headers and status kept, or a Rewrite. Requests pass unchanged, so their signatures hold.
 * For tests of what a client does with hostile or broken answers.
 *
 *   const proxy = await startAnswerProxy(venue.url, (answer) => answer.body.replace(...))
 */
export const startAnswerProxy = async (venueUrl: string, rewrite: (answer: ProxiedAnswer) => string | Rewrite | undefined): Promise<AnswerProxy> => {
  const upstream = new URL(venueUrl)
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 })
  const rewritten: Array<ProxiedAnswer> = []
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const forward = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers, agent }, (answer) => {
        const parts: Array<Buffer> = []
        answer.on("data", (chunk: Buffer) => parts.push(chunk))
        answer.on("end", () => {
          const original: ProxiedAnswer = { method: req.method ?? "", target: req.url ?? "", status: answer.statusCode ?? 502, body: Buffer.concat(parts).toString("utf8") }
          const given = rewrite(original)
          const next: Rewrite = given === undefined || typeof given === "string" ? { body: given ?? original.body } : given
          const bytes = typeof next.body === "string" ? Buffer.from(next.body, "utf8") : Buffer.from(next.body)
          const status = next.status ?? original.status
          const body = typeof next.body === "string" ? next.body : bytes.toString("utf8")
          if (body !== original.body || status !== original.status || next.headers !== undefined) rewritten.push({ ...original, status, body })
          const { "content-length": _length, ...kept } = answer.headers
          if (next.streamed !== true) return res.writeHead(status, { ...kept, ...next.headers, "content-length": String(bytes.length) }).end(bytes)
          res.writeHead(status, { ...kept, ...next.headers })
          streamOut(res, bytes, 0)
        })
      })
      forward.on("error", () => res.socket?.destroy())
      forward.end(Buffer.concat(chunks))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  return {
    url: `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`,
    rewritten,
    close: () =>
      new Promise<void>((resolve) => {
        agent.destroy()
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
