import { Effect, Exit, Scope } from "effect"
import { describe, expect, it } from "vitest"
import { defaultBackpressure } from "../../../src/config/Config.js"
import { ZERO } from "../../../src/domain/Decimal.js"
import { admit, heldUntil, initialBackpressure, instancePressure, refused, succeeded, type Backpressure } from "../../../src/strategy/Backpressure.js"
import { CIRCUIT_OPEN, ErrorCode } from "../../../src/svc/ErrorCodes.js"

const config = { refusalsBeforeBackoff: 3, initialBackoffMs: 1000, maxBackoffMs: 5000, refusalsBeforePause: 6 }

describe("back-pressure of a strategy instance", () => {
  it("counts refusals of one kind in a row, backs off doubling up to the longest, then pauses", () => {
    let state: Backpressure = initialBackpressure
    const steps: Array<string> = []
    for (let i = 0; i < 6; i++) {
      const [next, step] = refused(state, "refused:max-order-notional", 10_000, config)
      state = next
      steps.push(step._tag === "Backoff" ? `backoff ${step.untilMs - 10_000}` : step._tag)
    }
    expect(steps).toEqual(["Counted", "Counted", "backoff 1000", "backoff 2000", "backoff 4000", "Pause"])
    const [, seventh] = refused({ ...state, streak: 4 }, "refused:max-order-notional", 0, { ...config, refusalsBeforePause: 100 })
    expect(seventh).toMatchObject({ _tag: "Backoff", untilMs: 4000 })
    const [, capped] = refused({ ...state, streak: 20 }, "refused:max-order-notional", 0, { ...config, refusalsBeforePause: 100 })
    expect(capped).toMatchObject({ _tag: "Backoff", untilMs: 5000 })
  })

  it("starts a new streak on another kind of refusal, and forgets the streak on an acceptance or a fill", () => {
    let [state] = refused(initialBackpressure, "refused:a", 0, config)
    ;[state] = refused(state, "refused:a", 0, config)
    const [other, step] = refused(state, "rejected:SPOT_INSUFFICIENT_FUNDS", 0, config)
    expect(step._tag).toBe("Counted")
    expect(other.streak).toBe(1)
    const [backing] = refused(refused(other, "rejected:SPOT_INSUFFICIENT_FUNDS", 0, config)[0], "rejected:SPOT_INSUFFICIENT_FUNDS", 0, config)
    expect(backing.backoffUntil).toBe(1000)
    expect(succeeded(backing)).toMatchObject({ streak: 0, backoffUntil: 0, streakKey: undefined })
  })

  it("holds placements back while backing off, and beyond the ceiling per minute until the next minute", () => {
    const backingOff = { ...initialBackpressure, backoffUntil: 5_000 }
    expect(admit(backingOff, 4_999, 10)[1]).toBe("backoff")
    expect(heldUntil(backingOff, 4_999)).toBe(5_000)
    let state: Backpressure = initialBackpressure
    const verdicts: Array<string> = []
    for (let i = 0; i < 5; i++) {
      const [next, verdict] = admit(state, 60_000 + i, 3)
      state = next
      verdicts.push(verdict)
    }
    expect(verdicts).toEqual(["admit", "admit", "admit", "throttled", "throttled"])
    expect(state.throttledThisMinute).toBe(2)
    expect(heldUntil(state, 60_004)).toBe(120_000)
    expect(admit(state, 120_000, 3)).toEqual([{ ...state, minute: 2, placedThisMinute: 1, throttledThisMinute: 0 }, "admit"])
  })

  it("never counts a refusal that says nothing of the placement (rate limited, key blocked, circuit open); the same number of a placement's own refusals pauses", () => {
    const scope = Effect.runSync(Scope.make())
    try {
      const pressure = instancePressure({
        strategyId: "grid",
        config: defaultBackpressure,
        maxIntentsPerMinute: 120,
        heldCodes: new Set(["backoff"]),
        now: () => 0,
        answer: () => undefined,
        scope
      })
      const refusal = (code: string) => pressure.observe({ _tag: "OrderUpdate", event: { tag: "g1", kind: "refused", code, filledBaseQty: ZERO } })
      const transient = [ErrorCode.authBlocked, ErrorCode.rateLimited, CIRCUIT_OPEN].flatMap((code) => Array.from({ length: 12 }, () => refusal(code)))
      expect(transient.every((step) => step === undefined)).toBe(true)
      const own = Array.from({ length: defaultBackpressure.refusalsBeforePause }, () => refusal("SPOT_INSUFFICIENT_FUNDS")?._tag)
      expect(own.at(-1)).toBe("Pause")
      expect(own.filter((tag) => tag === "Backoff").length).toBeGreaterThan(0)
    } finally {
      Effect.runSync(Scope.close(scope, Exit.void))
    }
  })

  it("has sane defaults: backoff after 3, pause after 10", () => {
    expect(defaultBackpressure).toMatchObject({ refusalsBeforeBackoff: 3, refusalsBeforePause: 10 })
  })
})
