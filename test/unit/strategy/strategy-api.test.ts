import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { parse } from "../../../src/domain/Json.js"
import {
  decodeParams,
  defineStrategy,
  DecimalFromString,
  deserializeState,
  InvalidStoredState,
  InvalidStrategyDefinition,
  isFinalUpdate,
  Param,
  result,
  serializeState
} from "../../../src/strategy/Strategy.js"

const probe = defineStrategy({
  name: "probe",
  version: "1",
  params: Schema.Struct({
    amount: Param.decimal("an amount such as \"1.5\"", { positive: true }),
    count: Param.int("a count from 1 to 10", { min: 1, max: 10 }),
    mode: Param.choice('"a" or "b"', "a", "b")
  }),
  state: Schema.Struct({ total: DecimalFromString }),
  init: (params) => ({ total: params.amount }),
  onTimer: (state) => result(state)
})

describe("the strategy plugin API", () => {
  it("reads decimal params exactly from config JSON numbers, lossless tokens and strings", () => {
    const fromConfig = parse('{ "amount": 0.100000000000000000000000001, "count": 3, "mode": "a" }') as Record<string, unknown>
    const lossless = Either.getOrThrow(decodeParams(probe, "p", fromConfig))
    expect(lossless.amount.toFixed()).toBe("0.100000000000000000000000001")
    expect(lossless.count).toBe(3)
    const plain = Either.getOrThrow(decodeParams(probe, "p", JSON.parse('{ "amount": 0.1, "count": 10, "mode": "b" }')))
    expect(plain.amount.toFixed()).toBe("0.1")
    expect(Either.getOrThrow(decodeParams(probe, "p", { amount: "2.50", count: "4", mode: "a" })).amount.toFixed()).toBe("2.5")
  })

  it("lists every problem as strategies[<id>].params.<field>: <problem> (<fix>)", () => {
    const decoded = decodeParams(probe, "my-probe", { amount: "0", count: 11, mode: "c", extra: true })
    expect(Either.isLeft(decoded)).toBe(true)
    if (Either.isRight(decoded)) return
    expect(decoded.left.instanceId).toBe("my-probe")
    expect(decoded.left.problems).toEqual([
      "strategies[my-probe].params.extra: is not a parameter of probe (remove it; probe takes amount, count, mode)",
      'strategies[my-probe].params.amount: 0 must be greater than 0 (expected an amount such as "1.5")',
      "strategies[my-probe].params.count: 11 is above the maximum 10 (expected a count from 1 to 10)",
      'strategies[my-probe].params.mode: "c" is not one of "a", "b" (expected "a" or "b")'
    ])
    expect(decoded.left.message).toBe(decoded.left.problems.join("\n"))
    const missing = decodeParams(probe, "x", undefined)
    expect(Either.isLeft(missing) && missing.left.problems[0]).toBe('strategies[x].params.amount: is missing (add it: an amount such as "1.5")')
  })

  it("refuses a decimal param beyond the bounds of an amount, naming it and why, without echoing all its digits", () => {
    for (const raw of [
      '{ "amount": 1e900000000, "count": 1, "mode": "a" }',
      '{ "amount": "1e900000000", "count": 1, "mode": "a" }',
      `{ "amount": "${"7".repeat(500)}", "count": 1, "mode": "a" }`,
      '{ "amount": 1e300, "count": 1, "mode": "a" }'
    ]) {
      for (const params of [parse(raw), JSON.parse(raw)]) {
        const decoded = decodeParams(probe, "p", params)
        expect(Either.isLeft(decoded), raw).toBe(true)
        const [problem] = Either.isLeft(decoded) ? decoded.left.problems : []
        expect(problem).toMatch(/^strategies\[p\]\.params\.amount: /)
        // A JSON number out of a double's range reads as Infinity natively: refused as not finite.
        if (problem!.includes("not a finite number")) continue
        expect(problem).toMatch(/exponent must be from -40 to 40|longer than 160 characters/)
        expect(problem!.length).toBeLessThan(300)
      }
    }
  })

  it("round-trips Decimal state through JSON text digit for digit, and refuses a state that does not decode", () => {
    const text = serializeState(probe, { total: Either.getOrThrow(decodeParams(probe, "p", { amount: "123456789.123456789123456789", count: 1, mode: "a" })).amount })
    expect(text).toBe('{"total":"123456789.123456789123456789"}')
    expect(Either.getOrThrow(deserializeState(probe, text)).total.toFixed()).toBe("123456789.123456789123456789")
    expect(Either.isLeft(deserializeState(probe, '{"total": 5}'))).toBe(true)
    expect(Either.isLeft(deserializeState(probe, "not json"))).toBe(true)
    expect(() => serializeState(probe, { total: "1" as never })).toThrow(InvalidStoredState)
  })

  it("refuses a definition without a proper name or any handler", () => {
    const base = { version: "1", params: Schema.Struct({}), state: Schema.Struct({}), init: () => ({}) }
    expect(() => defineStrategy({ ...base, name: "Bad Name", onTimer: (s: {}) => result(s) })).toThrow(InvalidStrategyDefinition)
    expect(() => defineStrategy({ ...base, name: "no-handlers" })).toThrow(/defines no handler/)
  })

  it("treats fill, rejected, cancelled, refused and not_placed as final", () => {
    expect((["pending", "resting", "fill", "rejected", "cancelled", "refused", "not_placed"] as const).filter(isFinalUpdate)).toEqual([
      "fill",
      "rejected",
      "cancelled",
      "refused",
      "not_placed"
    ])
  })
})
