/**
 * A loopback TCP proxy in front of a venue, to take the venue off the network and
 * bring it back with its state intact: `stop()` closes the listener and cuts every
 * connection (clients see refused connections), `start()` listens on the same port.
 *
 *   const proxy = await startProxy(new URL(venue.url).port)
 *   await proxy.stop(); ...; await proxy.start()
 */
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
