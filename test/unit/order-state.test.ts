import { Either } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  alreadyApplied,
  eventsFrom,
  IN_FLIGHT_STATES,
  InvalidTransition,
  LIVE_STATES,
  ORDER_EVENTS,
  ORDER_STATES,
  type OrderState,
  TERMINAL_STATES,
  transition
} from "../../src/domain/OrderState.js"

const event = fc.constantFrom(...ORDER_EVENTS)

/** Applies events from `intent`, skipping refused ones; returns the walk of states taken. */
const walk = (events: ReadonlyArray<(typeof ORDER_EVENTS)[number]>) => {
  const states: Array<OrderState> = ["intent"]
  for (const e of events) {
    const next = transition(states[states.length - 1]!, e)
    if (Either.isRight(next)) states.push(next.right)
  }
  return states
}

describe("order state machine", () => {
  it("is total: every state and event gives a next state or an InvalidTransition", () => {
    fc.assert(
      fc.property(fc.constantFrom(...ORDER_STATES), event, (state, e) => {
        const next = transition(state, e)
        if (Either.isLeft(next)) {
          expect(next.left).toBeInstanceOf(InvalidTransition)
          expect(next.left).toMatchObject({ from: state, event: e })
        } else {
          expect(ORDER_STATES).toContain(next.right)
        }
      })
    )
  })

  it("terminal states accept no event", () => {
    for (const state of TERMINAL_STATES) expect(eventsFrom(state)).toEqual([])
  })

  it("random event sequences only ever walk documented paths", () => {
    fc.assert(
      fc.property(fc.array(event, { maxLength: 40 }), (events) => {
        const states = walk(events)
        for (let i = 1; i < states.length; i++) {
          const from = states[i - 1]!
          const to = states[i]!
          // Nothing leaves a terminal state.
          expect(TERMINAL_STATES.has(from)).toBe(false)
          // Only a placement being sent can be lost; refused, it was being sent or withdrawn unsent.
          if (to === "unknown") expect(from).toBe("submitting")
          if (to === "refused") expect(["intent", "submitting"]).toContain(from)
          // An order is on the book only after the service accepted it.
          if (LIVE_STATES.has(to) && !LIVE_STATES.has(from)) expect(["submitting", "unknown"]).toContain(from)
          // A lost placement ends adopted or proven absent, never re-sent.
          if (from === "unknown") expect(["accepted", "not_placed"]).toContain(to)
          if (to === "submitting") expect(from).toBe("intent")
        }
        // "submitting" is entered at most once: a placement is sent once.
        expect(states.filter((s) => s === "submitting").length).toBeLessThanOrEqual(1)
      }),
      { numRuns: 2000 }
    )
  })

  it("every state is reachable from intent and every non-terminal state can still end", () => {
    const reachable = new Set<OrderState>(["intent"])
    let grew = true
    while (grew) {
      grew = false
      for (const s of [...reachable]) {
        for (const e of eventsFrom(s)) {
          const next = Either.getOrThrow(transition(s, e))
          if (!reachable.has(next)) {
            reachable.add(next)
            grew = true
          }
        }
      }
    }
    expect([...reachable].sort()).toEqual([...ORDER_STATES].sort())
    for (const s of ORDER_STATES) {
      if (TERMINAL_STATES.has(s)) continue
      const canEnd = (state: OrderState, seen: Set<OrderState>): boolean =>
        TERMINAL_STATES.has(state) ||
        eventsFrom(state).some((e) => {
          const next = Either.getOrThrow(transition(state, e))
          return !seen.has(next) && canEnd(next, new Set([...seen, next]))
        })
      expect(canEnd(s, new Set([s]))).toBe(true)
    }
  })

  it("in-flight, live and terminal states partition the states", () => {
    for (const s of ORDER_STATES) {
      const memberships = [IN_FLIGHT_STATES.has(s), LIVE_STATES.has(s), TERMINAL_STATES.has(s)].filter(Boolean)
      expect(memberships).toHaveLength(1)
    }
  })

  it("names the refused edge in the error", () => {
    const result = transition("fill", "cancelled")
    expect(Either.isLeft(result) && result.left.message).toBe("an order in state fill cannot take event cancelled")
  })
})

describe("an outcome reached twice", () => {
  it("is recognised as applied already, so racing observers report no mismatch; a real disagreement is not", () => {
    // Two reconcile passes both proved a lost placement absent.
    expect(alreadyApplied("not_placed", "proveAbsent")).toBe(true)
    // The tracker and reconciliation both saw the order accepted, or filled.
    expect(alreadyApplied("accepted", "accept")).toBe(true)
    expect(alreadyApplied("fill", "fill")).toBe(true)
    // A filled order proved absent, or an order never sent reported filled, is a disagreement.
    expect(alreadyApplied("fill", "proveAbsent")).toBe(false)
    expect(alreadyApplied("intent", "fill")).toBe(false)
  })
})
