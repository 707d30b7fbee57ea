/**
 * The console's Server-Sent Events: every connected page gets each order, fill,
 * instance, health, budget and action event as one `event:`/`data:` frame. Plain
 * TypeScript on the publishing path: an event is serialised once, and not at all
 * while nobody listens.
 *
 * Bounded: at most `maxClients` streams (one more is answered 503), and a client
 * whose socket has more than `maxBufferedBytes` waiting (a stalled or slow reader)
 * is dropped rather than let the daemon's memory grow; its page reconnects and
 * reads the state afresh.
 */
import type { IncomingMessage, ServerResponse } from "node:http"

export interface StreamLimits {
  readonly maxClients: number
  readonly maxBufferedBytes: number
}

export const DEFAULT_STREAM_LIMITS: StreamLimits = { maxClients: 8, maxBufferedBytes: 256 * 1024 }

/** What a page is told: the kinds its event list and panels follow. */
export type StreamEventType = "order" | "fill" | "instance" | "health" | "budget" | "action"

export class EventStream {
  private readonly clients = new Set<ServerResponse>()
  private seq = 0
  /** Clients dropped for falling behind, since start. */
  dropped = 0

  constructor(
    private readonly limits: StreamLimits,
    /** Told of each dropped client (a log line); not called on the publishing path's hot loop otherwise. */
    private readonly onDrop: (bufferedBytes: number) => void
  ) {}

  get size(): number {
    return this.clients.size
  }

  /** Takes a request as a stream; false when the limit of clients is reached (the caller answers). */
  open(request: IncomingMessage, response: ServerResponse): boolean {
    if (this.clients.size >= this.limits.maxClients) return false
    response.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      connection: "keep-alive"
    })
    // A page that reconnects waits this long first; it reads the state again once connected.
    response.write("retry: 3000\n\n")
    this.clients.add(response)
    const forget = () => this.clients.delete(response)
    request.once("close", forget)
    response.once("close", forget)
    return true
  }

  publish(type: StreamEventType, data: unknown): void {
    if (this.clients.size === 0) return
    this.seq += 1
    this.write(`id: ${this.seq}\nevent: ${type}\ndata: ${JSON.stringify(data)}\n\n`)
  }

  /** A comment line, so that proxies and the page see the stream alive while nothing happens. */
  keepAlive(): void {
    if (this.clients.size > 0) this.write(": keep-alive\n\n")
  }

  closeAll(): void {
    for (const client of this.clients) client.end()
    this.clients.clear()
  }

  private write(frame: string): void {
    for (const client of this.clients) {
      const waiting = client.writableLength
      if (waiting + frame.length > this.limits.maxBufferedBytes) {
        this.clients.delete(client)
        this.dropped += 1
        client.destroy()
        this.onDrop(waiting)
        continue
      }
      client.write(frame)
    }
  }
}
