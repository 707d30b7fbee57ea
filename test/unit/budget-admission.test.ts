/**
 * The budget's admission as DESIGN.md states it, held over any state of the books: cancels are
 * never held back by budgets, priorities go in order, fills and market data leave the reserve
 * free until the engine stops, placements stay inside the order budgets, a held bucket and an auth block stop what
 * they cover, and deciding changes nothing.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  type Admission,
  type AdmissionState,
  decideAdmission,
  defaultBudgetOptions,
  type Demand,
  Priority,
  type Ticket,
  WindowCount
} from "../../src/svc/Governor.js"

const ENDPOINTS = ["GET /api/wallets/spot", "GET /api/spot/fills", "POST /api/spot/limit"] as const
const PRIORITIES = Object.keys(Priority) as Array<Priority>

/** Halfway through a weight window and an order window, away from the guard around their boundaries. */
const NOW = 7 * 86_400_000 + 30_000 + 5_000

const windowWith = (windowMs: number, limit: number | undefined, used: number): WindowCount => {
  const count = new WindowCount(windowMs)
  count.limit = limit
  if (used > 0) count.report(count.windowOf(NOW), used, 0)
  return count
}

/** A time around now, or none half the time: most states hold nothing back. */
const arbUntil = fc.option(fc.integer({ min: NOW - 60_000, max: NOW + 60_000 }), { nil: undefined, freq: 2 })

const arbState: fc.Arbitrary<AdmissionState> = fc
  .record({
    reservePct: fc.integer({ min: 0, max: 50 }),
    weightLimit: fc.option(fc.integer({ min: 1, max: 1_200 }), { nil: undefined }),
    /** Percent of the limit used, or of 1,000 before the limit is known. */
    weightUsedPct: fc.nat(110),
    orders10s: fc.option(fc.integer({ min: 1, max: 50 }), { nil: undefined }),
    orders10sUsed: fc.nat(60),
    orders1d: fc.option(fc.integer({ min: 1, max: 500 }), { nil: undefined }),
    orders1dUsed: fc.nat(600),
    learned: fc.array(fc.tuple(fc.constantFrom(...ENDPOINTS), fc.integer({ min: 1, max: 40 })), { maxLength: 3 }),
    inFlight: fc.array(fc.record({ weight: fc.integer({ min: 1, max: 40 }), placement: fc.boolean(), guessed: fc.boolean() }), { maxLength: 5 }),
    heldAll: arbUntil,
    heldWeight: arbUntil,
    held10s: arbUntil,
    held1d: arbUntil,
    blockedUntil: fc.option(fc.integer({ min: NOW - 60_000, max: NOW + 60_000 }), { nil: 0, freq: 2 }),
    circuitOpenUntil: arbUntil,
    probing: fc.boolean(),
    waitingByRank: fc.array(fc.constantFrom(0, 0, 0, 1), { minLength: 6, maxLength: 6 }),
    reserveKept: fc.boolean()
  })
  .map((a) => {
    const learned = new Map(a.learned)
    const inFlight = new Map<number, Ticket>(
      a.inFlight.map((t, i) => [
        i + 1,
        {
          id: i + 1,
          demand: { endpoint: ENDPOINTS[0], priority: t.placement ? "place" : "reconcile", placement: t.placement },
          weight: t.weight,
          guessed: t.guessed,
          admittedAtMs: NOW - 100,
          probe: false
        }
      ])
    )
    const heldUntil = new Map<"weight" | "orders10s" | "orders1d" | "all", number>()
    if (a.heldAll !== undefined) heldUntil.set("all", a.heldAll)
    if (a.heldWeight !== undefined) heldUntil.set("weight", a.heldWeight)
    if (a.held10s !== undefined) heldUntil.set("orders10s", a.held10s)
    if (a.held1d !== undefined) heldUntil.set("orders1d", a.held1d)
    const tickets = [...inFlight.values()]
    return {
      options: { ...defaultBudgetOptions, reservePct: a.reservePct },
      weight: windowWith(defaultBudgetOptions.weightWindowMs, a.weightLimit, Math.floor(((a.weightLimit ?? 1_000) * a.weightUsedPct) / 100)),
      orders10s: windowWith(defaultBudgetOptions.ordersWindowMs, a.orders10s, a.orders10sUsed),
      orders1d: windowWith(86_400_000, a.orders1d, a.orders1dUsed),
      learned,
      heaviest: Math.max(0, ...learned.values()),
      inFlight,
      inFlightWeight: tickets.reduce((sum, t) => sum + t.weight, 0),
      inFlightOrders: tickets.filter((t) => t.demand.placement).length,
      inFlightUnlearned: tickets.filter((t) => t.guessed).length,
      heldUntil,
      blockedUntil: a.blockedUntil,
      circuitOpenUntil: a.circuitOpenUntil,
      probing: a.probing,
      waitingByRank: a.waitingByRank,
      reserveKept: a.reserveKept
    } satisfies AdmissionState
  })

const arbDemand: fc.Arbitrary<Demand> = fc
  .tuple(fc.constantFrom(...ENDPOINTS), fc.constantFrom(...PRIORITIES))
  .map(([endpoint, priority]) => ({ endpoint, priority, placement: priority === "place" }))

const usedNow = (state: AdmissionState) => state.weight.usedIn(state.weight.bindingWindow(NOW, state.options.windowGuardMs))

/** What the books say, for telling whether deciding changed them. */
const booksOf = (state: AdmissionState) => ({
  weight: [state.weight.limit, usedNow(state)],
  orders10s: [state.orders10s.limit, state.orders10s.usedIn(state.orders10s.bindingWindow(NOW, state.options.windowGuardMs))],
  learned: [...state.learned],
  inFlight: [...state.inFlight.keys()],
  held: [...state.heldUntil],
  rest: [state.inFlightWeight, state.inFlightOrders, state.inFlightUnlearned, state.blockedUntil, state.circuitOpenUntil, state.probing, [...state.waitingByRank]]
})

const property = (check: (state: AdmissionState, demand: Demand, admission: Admission) => void) =>
  fc.assert(
    fc.property(arbState, arbDemand, (state, demand) => check(state, demand, decideAdmission(state, demand, NOW))),
    { numRuns: 2_000 }
  )

describe("the budget's admission", () => {
  it("property: a cancel is never held back by a budget, only refused while the key is blocked or its circuit open", () => {
    property((state, demand, admission) => {
      if (demand.priority !== "cancel") return
      const circuitOpen = state.circuitOpenUntil !== undefined && (NOW < state.circuitOpenUntil || state.probing)
      const blocked = NOW < state.blockedUntil
      expect(admission._tag).toBe(circuitOpen || blocked ? "Refuse" : "Admit")
    })
  })

  it("property: while the key is blocked or its circuit open, nothing goes", () => {
    property((state, _demand, admission) => {
      if (NOW < state.blockedUntil || (state.circuitOpenUntil !== undefined && NOW < state.circuitOpenUntil)) {
        expect(admission).toMatchObject({ _tag: "Refuse", error: { _tag: expect.stringMatching(/^(AuthBlocked|CircuitOpen)$/) } })
      }
    })
  })

  it("property: an admitted request costs its learned weight, or the heaviest seen when not learned yet", () => {
    property((state, demand, admission) => {
      if (admission._tag !== "Admit") return
      expect(admission.weight).toBe(state.learned.get(demand.endpoint) ?? Math.max(state.options.defaultWeight, state.heaviest))
    })
  })

  it("property: nothing but a cancel goes while a bucket it spends is held by RATE_LIMITED, or a higher priority waits", () => {
    property((state, demand, admission) => {
      if (admission._tag !== "Admit" || demand.priority === "cancel") return
      const held = Math.max(state.heldUntil.get("all") ?? 0, state.heldUntil.get("weight") ?? 0, demand.placement ? (state.heldUntil.get("orders10s") ?? 0) : 0)
      expect(NOW).toBeGreaterThanOrEqual(held)
      if (demand.placement) expect(NOW).toBeGreaterThanOrEqual(state.heldUntil.get("orders1d") ?? 0)
      if (state.weight.limit !== undefined) expect(state.waitingByRank.slice(0, Priority[demand.priority]).every((n) => n === 0)).toBe(true)
    })
  })

  it("property: before the first answer tells the limit, requests go one at a time", () => {
    property((state, demand, admission) => {
      if (admission._tag === "Admit" && demand.priority !== "cancel" && state.weight.limit === undefined) expect(state.inFlight.size).toBe(0)
    })
  })

  it("property: an admitted request fits under the weight limit, less the reserve for fills and market data until the engine stops, unless nothing else is counted", () => {
    property((state, demand, admission) => {
      const limit = state.weight.limit
      if (admission._tag !== "Admit" || demand.priority === "cancel" || limit === undefined) return
      const counted = usedNow(state) + state.inFlightWeight
      if (counted === 0) return
      const cap = Priority[demand.priority] >= Priority.fills && state.reserveKept ? (limit * (100 - state.options.reservePct)) / 100 : limit
      expect(counted + admission.weight).toBeLessThanOrEqual(cap)
      // A guessed weight may be too low: it goes only while half the allowance stays free.
      if (!state.learned.has(demand.endpoint)) expect(counted + admission.weight).toBeLessThanOrEqual(cap / 2)
    })
  })

  it("property: an admitted placement stays inside the 10-second and daily order budgets, once an answer has told the limits", () => {
    property((state, demand, admission) => {
      // Before the first answer the one request let through is not checked against order limits: they come with that answer.
      if (admission._tag !== "Admit" || !demand.placement || state.weight.limit === undefined) return
      const orders10s = state.orders10s.usedIn(state.orders10s.bindingWindow(NOW, state.options.windowGuardMs))
      const orders1d = state.orders1d.usedIn(state.orders1d.bindingWindow(NOW, state.options.windowGuardMs))
      if (state.orders10s.limit !== undefined) expect(orders10s + state.inFlightOrders + 1).toBeLessThanOrEqual(state.orders10s.limit)
      if (state.orders1d.limit !== undefined) expect(orders1d + state.inFlightOrders + 1).toBeLessThanOrEqual(state.orders1d.limit)
    })
  })

  it("property: once the engine stops, fills and market data wait on the weight only when the whole limit holds no room, as any read does", () => {
    property((state, demand, admission) => {
      if (state.reserveKept || Priority[demand.priority] < Priority.fills) return
      const asReconcile = decideAdmission(state, { ...demand, priority: "reconcile" }, NOW)
      if (admission._tag === "Wait" && admission.reason === "weight") expect(asReconcile).toMatchObject({ _tag: "Wait", reason: "weight" })
    })
  })

  it("property: a request that waits is told until when, never a time already past", () => {
    property((_state, _demand, admission) => {
      if (admission._tag === "Wait") expect(admission.untilMs).toBeGreaterThan(NOW)
    })
  })

  it("property: deciding changes nothing, and decides the same again", () => {
    fc.assert(
      fc.property(arbState, arbDemand, (state, demand) => {
        const before = booksOf(state)
        const first = decideAdmission(state, demand, NOW)
        expect(booksOf(state)).toEqual(before)
        expect(decideAdmission(state, demand, NOW)).toEqual(first)
      })
    )
  })
})
