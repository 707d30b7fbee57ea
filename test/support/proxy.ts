/**
 * Loopback proxies in front of a venue. `startProxy` (TCP) takes the venue off the network
 * and brings it back with its state intact: `stop()` closes the listener and cuts every
 * connection (clients see refused connections), `start()` listens on the same port.
 * `startAnswerProxy` (HTTP) rewrites the venue's answers.
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

export interface AnswerProxy {
  /** Base URL through the proxy, e.g. `http://127.0.0.1:41234`. */
  readonly url: string
  /** Answers that `rewrite` changed, in order. */
  readonly rewritten: Array<ProxiedAnswer>
  readonly close: () => Promise<void>
}

/**
 * A loopback HTTP proxy in front of a venue that hands every answer to `rewrite` and sends
 * the client what it returns instead (undefined: the venue's answer as it came), headers
 * and status kept. Requests pass unchanged, so their signatures hold. For tests of what a
 * client does with hostile or broken answers.
 *
 *   const proxy = await startAnswerProxy(venue.url, (answer) => answer.body.replace(...))
 */
export const startAnswerProxy = async (venueUrl: string, rewrite: (answer: ProxiedAnswer) => string | undefined): Promise<AnswerProxy> => {
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
          const body = rewrite(original)
          if (body !== undefined && body !== original.body) rewritten.push({ ...original, body })
          const bytes = Buffer.from(body ?? original.body, "utf8")
          res.writeHead(original.status, { ...answer.headers, "content-length": String(bytes.length) }).end(bytes)
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
