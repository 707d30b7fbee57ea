/**
 * svc-venue stamps its record so that time alone orders a cancel and a price step: a step
 * after a cancel of the same millisecond is stamped a millisecond later, and a cancel after
 * a step of the same millisecond carries the step's stamp (a step and a cancel of one
 * millisecond mean the step came first). A paper run's parity replay relies on it.
 */
import { Effect, Exit, Scope } from "effect"
import { afterEach, expect, it } from "vitest"
import { fromString as d } from "../../src/domain/Decimal.js"
import { stringify } from "../../src/domain/Json.js"
import { defaultDialect } from "../../src/svc/Dialect.js"
import { signRequest } from "../../src/svc/Signer.js"
import { devTradeKey } from "../../src/venue/Accounts.js"
import { serveVenue } from "../../src/venue/Server.js"

const scopes: Array<Scope.CloseableScope> = []
afterEach(async () => {
  for (const scope of scopes.splice(0)) await Effect.runPromise(Scope.close(scope, Exit.void))
})

it("orders cancels and price steps of one millisecond by their stamps", async () => {
  // The clock stands still: every request and step below happens in the same millisecond.
  const nowMs = Date.now()
  const scope = Effect.runSync(Scope.make())
  scopes.push(scope)
  const running = await Effect.runPromise(Scope.extend(serveVenue({ settleMs: 0, clock: () => nowMs }), scope))
  let timestamp = nowMs - 1000
  const request = async (method: string, target: string, body: unknown) => {
    const text = stringify(body)
    const signed = signRequest(devTradeKey.keyId, devTradeKey.secret, { method, target, timestamp: ++timestamp, recvWindow: defaultDialect.recvWindowMs, body: text })
    const response = await fetch(`${running.url}${target}`, { method, headers: signed.headers, body: text })
    return (await response.json()) as { clientOrderId: string }
  }
  const rest = async () => (await request("POST", "/api/spot/limit", { symbol: "BTCUSDT", side: "buy", baseQty: d("0.001"), limitPrice: d("30000") })).clientOrderId
  const cancelledAt = async (id: string) => {
    await request("POST", "/api/spot/cancel", { clientOrderId: id })
    return running.venue.engine.order(devTradeKey.uid, id)!.updatedAt
  }
  const lastStep = () => {
    const log = running.venue.steps.get("BTCUSDT")!
    return log.after(log.oldestSeq - 1, 1_000_000).at(-1)!.timeMs
  }
  const first = await rest()
  const second = await rest()
  running.venue.settle()

  const firstCancel = await cancelledAt(first)
  expect(firstCancel).toBe(nowMs)
  running.venue.setPrice("BTCUSDT", d("60001"))
  expect(lastStep(), "a step after a cancel of its millisecond").toBe(nowMs + 1)

  const secondCancel = await cancelledAt(second)
  expect(secondCancel, "a cancel after a step carries the step's stamp").toBe(nowMs + 1)
  running.venue.setPrice("BTCUSDT", d("60002"))
  expect(lastStep()).toBe(nowMs + 2)
})
