/**
 * svc-venue's history retention over the wire: ended orders and fills are kept for a
 * time and up to a count per account, then answered as never given out
 * (404 ORDER_NOT_FOUND, absent from the fills pages); open orders are never
 * forgotten, and fills paging stays consistent over what is kept.
 */
import { Effect, Exit, Scope } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { stringify } from "../../src/domain/Json.js"
import { fromString } from "../../src/domain/Decimal.js"
import { defaultDialect } from "../../src/svc/Dialect.js"
import { signRequest } from "../../src/svc/Signer.js"
import { devTradeKey } from "../../src/venue/Accounts.js"
import type { Retention } from "../../src/venue/Matching.js"
import { serveVenue } from "../../src/venue/Server.js"

const d = fromString
const scopes: Array<Scope.CloseableScope> = []
afterEach(async () => {
  for (const scope of scopes.splice(0)) await Effect.runPromise(Scope.close(scope, Exit.void))
})

/** A venue on loopback whose clock moves only when told, with the dev trade key's requests signed on that clock. */
const venueWith = async (retention: Partial<Retention>) => {
  let nowMs = Date.now()
  const scope = Effect.runSync(Scope.make())
  scopes.push(scope)
  const running = await Effect.runPromise(Scope.extend(serveVenue({ settleMs: 0, retention, clock: () => nowMs }), scope))
  let lastTimestamp = 0
  const request = async (method: string, target: string, body?: unknown) => {
    const text = body === undefined ? undefined : stringify(body)
    // Each request a new timestamp, so that two identical cancels are never taken for a replay.
    lastTimestamp = Math.max(nowMs, lastTimestamp + 1)
    const signed = signRequest(devTradeKey.keyId, devTradeKey.secret, {
      method,
      target,
      timestamp: lastTimestamp,
      recvWindow: defaultDialect.recvWindowMs,
      ...(text === undefined ? {} : { body: text })
    })
    const response = await fetch(`${running.url}${target}`, { method, headers: signed.headers, ...(text === undefined ? {} : { body: text }) })
    return { status: response.status, json: (await response.json()) as any }
  }
  const place = async (symbol: string, limitPrice: string) => {
    const r = await request("POST", "/api/spot/limit", { symbol, side: "buy", baseQty: d(symbol === "BTCUSDT" ? "0.001" : "0.01"), limitPrice: d(limitPrice) })
    expect(r.status, JSON.stringify(r.json)).toBe(202)
    return r.json.clientOrderId as string
  }
  const status = (id: string) => request("GET", `/api/spot/order?clientOrderId=${id}`)
  /** A buy far below the price: it rests until cancelled. */
  const resting = (symbol = "BTCUSDT") => place(symbol, symbol === "BTCUSDT" ? "30000" : "1500")
  /** A buy above the price: it takes one level of the book at settlement, one fill. */
  const filled = async () => {
    const id = await place("BTCUSDT", "60600")
    running.venue.settle()
    expect((await status(id)).json.kind).toBe("fill")
    return id
  }
  const cancel = (id: string) => request("POST", "/api/spot/cancel", { clientOrderId: id })
  const fillPages = async (limit: number, before?: string) => {
    const pages: Array<{ ids: Array<string>; nextCursor: string | null }> = []
    let cursor = before
    do {
      const r = await request("GET", `/api/spot/fills?limit=${limit}${cursor === undefined ? "" : `&before=${cursor}`}`)
      expect(r.status).toBe(200)
      pages.push({ ids: r.json.fills.map((f: { fillId: string }) => f.fillId), nextCursor: r.json.nextCursor })
      cursor = r.json.nextCursor ?? undefined
    } while (cursor !== undefined)
    return pages
  }
  return {
    venue: running.venue,
    request,
    status,
    resting,
    filled,
    cancel,
    fillPages,
    advance: (ms: number) => {
      nowMs += ms
    }
  }
}

describe("svc-venue retention", () => {
  it("keeps ended orders up to the count per account, then answers ORDER_NOT_FOUND for the oldest; open orders stay", async () => {
    const v = await venueWith({ terminalCount: 3 })
    const ended: Array<string> = []
    for (let i = 0; i < 5; i++) {
      const id = await v.resting()
      expect((await v.cancel(id)).status).toBe(200)
      ended.push(id)
    }
    const open = [await v.resting(), await v.resting("ETHUSDT"), await v.resting()]

    for (const id of ended.slice(0, 2)) {
      const r = await v.status(id)
      expect(r.status).toBe(404)
      expect(r.json.code).toBe("ORDER_NOT_FOUND")
      // A cancel retried after the order is forgotten cannot be told from one for an unknown id.
      expect((await v.cancel(id)).json.code).toBe("ORDER_NOT_FOUND")
    }
    for (const id of ended.slice(2)) expect((await v.status(id)).json.kind).toBe("cancelled")
    for (const id of open) expect((await v.status(id)).status).toBe(200)

    const listed = (await v.request("GET", "/api/spot/open-orders")).json.map((o: { clientOrderId: string }) => o.clientOrderId)
    expect(listed).toEqual(open)
    const btc = (await v.request("GET", "/api/spot/open-orders?symbol=BTCUSDT")).json.map((o: { clientOrderId: string }) => o.clientOrderId)
    expect(btc).toEqual([open[0], open[2]])
    expect(v.venue.engine.allOrders(devTradeKey.uid).map((o) => o.clientOrderId)).toEqual([...ended.slice(2), ...open])
  })

  it("forgets an ended order once it is older than the retention time, and never an open one", async () => {
    const v = await venueWith({ terminalMs: 60_000 })
    const cancelled = await v.resting()
    await v.cancel(cancelled)
    const open = await v.resting()
    v.advance(59_000)
    expect((await v.status(cancelled)).json.kind).toBe("cancelled")
    // Age is looked at once a second of venue time, so an order may outlive its time by that second.
    v.advance(2_000)
    expect((await v.status(cancelled)).json.code).toBe("ORDER_NOT_FOUND")
    v.advance(10 * 60_000)
    expect((await v.status(open)).json.kind).toBe("resting")
    expect((await v.request("GET", "/api/spot/open-orders")).json.map((o: { clientOrderId: string }) => o.clientOrderId)).toEqual([open])
  })

  it("pages the fills it keeps newest first, and a cursor from before older fills were forgotten still ends in null", async () => {
    const v = await venueWith({ terminalCount: 6 })
    for (let i = 0; i < 4; i++) await v.filled()
    const before = await v.fillPages(2)
    expect(before.map((p) => p.ids.length)).toEqual([2, 2])
    const staleCursor = before[0]!.nextCursor!

    for (let i = 0; i < 3; i++) await v.filled()
    const kept = v.venue.engine.allFills(devTradeKey.uid).map((f) => f.fillId).reverse()
    expect(kept).toHaveLength(6)
    const after = await v.fillPages(2)
    expect(after.flatMap((p) => p.ids)).toEqual(kept)
    expect(after.map((p) => p.nextCursor === null)).toEqual([false, false, true])

    // Of the two fills older than the stale cursor, the older one is forgotten by now.
    const resumed = await v.fillPages(2, staleCursor)
    expect(resumed.flatMap((p) => p.ids)).toEqual(kept.slice(5))
    expect(resumed[resumed.length - 1]!.nextCursor).toBeNull()
  })

  it("forgets fills older than the retention time", async () => {
    const v = await venueWith({ terminalMs: 60_000 })
    await v.filled()
    v.advance(30_000)
    const recent = await v.filled()
    v.advance(31_000)
    const pages = await v.fillPages(10)
    expect(pages).toHaveLength(1)
    expect(pages[0]!.ids).toHaveLength(1)
    expect(v.venue.engine.allFills(devTradeKey.uid).map((f) => f.clientOrderId)).toEqual([recent])
  })

  it("refuses a retention that is not a whole number of at least 1, naming the option", async () => {
    const scope = Effect.runSync(Scope.make())
    scopes.push(scope)
    const refused = await Effect.runPromise(Effect.flip(Scope.extend(serveVenue({ retention: { terminalCount: 0 } }), scope)))
    expect(refused.message).toContain("--retain-terminal-count")
  })
})
