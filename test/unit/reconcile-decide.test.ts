/**
 * What one reconcile look decides for lost placements, given the strangers on the service and
 * the placements still being sent. The look's inputs are read at different moments, so a
 * stranger can be the order of a placement whose answer is still on its way: the lost
 * placement must not take it.
 */
import { describe, expect, it } from "vitest"
import { Decimal } from "../../src/domain/Decimal.js"
import { type Candidate, decideLost, type LostPlacement, type Placement } from "../../src/engine/Reconcile.js"

const settings = { matchWindowMs: 60_000, absenceWindowMs: 6_000 }
const now = 100_000

const terms = (price: string) => ({
  symbol: "BTCUSDT",
  side: "buy" as const,
  type: "limit" as const,
  baseQty: new Decimal("0.001"),
  quoteOrderQty: null,
  limitPrice: new Decimal(price),
  stopPrice: null
})
const lost = (orderId: number, sentAt: number, price = "50000"): LostPlacement => ({ orderId, sentAt, lostAt: sentAt + 2_000, ...terms(price) })
const sending = (sentAt: number, price = "50000"): Placement => ({ sentAt, ...terms(price) })
const stranger = (clientOrderId: string, time: number, price = "50000"): Candidate => ({
  clientOrderId,
  time,
  symbol: "BTCUSDT",
  side: "buy",
  type: "limit",
  baseQty: new Decimal("0.001"),
  limitPrice: new Decimal(price)
})
const outcomes = (decisions: ReturnType<typeof decideLost>) =>
  decisions.map((d) => (d._tag === "adopt" ? [d.order.orderId, d.found.clientOrderId] : [d.order.orderId, "not placed"]))

describe("a reconcile look's decisions", () => {
  it("adopts the stranger a lost placement matches, oldest first, and proves absent one left without a stranger past the window", () => {
    const decisions = decideLost([lost(2, 90_000), lost(1, 80_000)], [stranger("co_b", 90_010), stranger("co_a", 80_010)], [], now, settings)
    expect(outcomes(decisions)).toEqual([
      [1, "co_a"],
      [2, "co_b"]
    ])
    // Two placements of the same terms and one stranger: the older takes it, the younger is proven absent.
    expect(outcomes(decideLost([lost(1, 80_000), lost(2, 90_000)], [stranger("co_a", 85_000)], [], now, settings))).toEqual([
      [1, "co_a"],
      [2, "not placed"]
    ])
  })

  it("leaves a placement unknown while its absence window runs", () => {
    expect(decideLost([lost(1, now - 5_000)], [], [], now, settings)).toEqual([])
    expect(outcomes(decideLost([lost(1, now - 8_000)], [], [], now, settings))).toEqual([[1, "not placed"]])
  })

  it("does not take a stranger that a placement still being sent could be, and proves nothing of the lost one meanwhile", () => {
    const order = lost(1, 80_000)
    const theirs = stranger("co_s", 95_000)
    expect(decideLost([order], [theirs], [sending(94_990)], now, settings)).toEqual([])
    // A placement being sent with other terms, or sent outside the match window, is no reason to wait.
    expect(outcomes(decideLost([order], [theirs], [sending(94_990, "50001")], now, settings))).toEqual([[1, "co_s"]])
    expect(outcomes(decideLost([order], [theirs], [sending(20_000)], now, settings))).toEqual([[1, "co_s"]])
  })
})
