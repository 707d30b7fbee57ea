import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { combinations, parseGrid } from "../../src/backtest/Sweep.js"
import { canonicalParams } from "../../src/domain/Hash.js"
import { isLosslessNumber, parse } from "../../src/domain/Json.js"
import { candidates, parseSpace, type Space } from "../../src/optimize/Space.js"

const space = (value: unknown): Space => Either.getOrThrow(parseSpace(JSON.stringify(value), "space.json"))

const problems = (text: string): ReadonlyArray<string> => {
  const parsed = parseSpace(text, "space.json")
  if (Either.isRight(parsed)) throw new Error("expected the space to be refused")
  expect(parsed.left.message).toMatch(/^the search space space.json is invalid:/)
  return parsed.left.problems
}

const plain = (value: unknown): unknown => (isLosslessNumber(value) ? `#${value.value}` : value)

describe("space files", () => {
  it("expands ranges exactly: numbers stay numbers, decimal strings stay strings", () => {
    const parsed = space({ params: { fastPeriod: { min: 5, max: 20, step: 5 }, ratio: { min: "0.1", max: "0.35", step: "0.1" }, entry: ["market", "limit"], quoteQty: "100" } })
    expect(parsed.params.fastPeriod!.map(plain)).toEqual(["#5", "#10", "#15", "#20"])
    expect(parsed.params.ratio).toEqual(["0.1", "0.2", "0.3"])
    expect(parsed.params.entry).toEqual(["market", "limit"])
    expect(parsed.params.quoteQty).toEqual(["100"])
    expect(parsed).toMatchObject({ rankBy: "sharpe", search: { method: "grid" }, constraints: {} })
    expect(parsed.halving).toBeUndefined()
  })

  it("reads a sweep grid file as a space (its pnl is the profit objective)", () => {
    const grid = `{"params": {"fastPeriod": [3, 5], "slowPeriod": 20}, "rankBy": "pnl"}`
    const parsed = Either.getOrThrow(parseSpace(grid, "grid.json"))
    expect(parsed.rankBy).toBe("profit")
    expect(candidates(parsed, {}, 1)).toEqual(combinations(Either.getOrThrow(parseGrid(grid))).map(canonicalParams))
    expect(candidates(parsed, {}, 1)).toEqual(['{"fastPeriod":3,"slowPeriod":20}', '{"fastPeriod":5,"slowPeriod":20}'])
  })

  it("reads search, halving and constraints", () => {
    const parsed = space({ params: { a: [1, 2] }, rankBy: "calmar", search: "random", samples: 7, halving: { slices: 4, keep: 0.25 }, constraints: { minTrades: 3, maxDrawdownPct: 15 } })
    expect(parsed).toMatchObject({ rankBy: "calmar", search: { method: "random", samples: 7 }, halving: { slices: 4, keep: 0.25 }, constraints: { minTrades: 3, maxDrawdownPct: 15 } })
    expect(space({ params: { a: [1] }, halving: {} }).halving).toEqual({ slices: 3, keep: 0.5 })
  })

  it("lists every problem at once, each with its path, what is wrong and the fix", () => {
    const found = problems(
      JSON.stringify({
        params: { a: { min: 1, max: 5, step: 0 }, b: { min: 9, max: 2, step: 1 }, c: { min: 1, step: 1 }, d: [], e: { min: "x", max: 2, step: 1 } },
        rankBy: "luck",
        search: "random",
        halving: { slices: 1, keep: 1.5 },
        constraints: { minTrades: -1, maxWins: 3 },
        extra: true
      })
    )
    expect(found).toEqual([
      "extra: not a field of a space file; it takes params, rankBy, search, samples, halving, constraints",
      "params.a.step: must be greater than 0, got 0; give the distance between two tried values, e.g. 1",
      "params.b: max 2 is below min 9; swap them",
      'params.c: a range needs exactly min, max and step (missing max); write e.g. {"min": 5, "max": 20, "step": 5}',
      "params.d: is an empty list; give at least one value",
      'params.e.min: "x" is not a number; give a number such as 5 or a decimal string such as "0.5"',
      'rankBy: "luck" is not an objective; use one of sharpe, sortino, calmar, profit',
      'samples: a random search needs "samples", a whole number from 1 to 100000, got nothing',
      "halving.slices: must be a whole number from 2 to 20 (the window is cut into that many time slices), got 1",
      "halving.keep: must be a fraction between 0 and 1 (the share kept after each slice, e.g. 0.5), got 1.5",
      "constraints: unknown field maxWins; it takes minTrades and maxDrawdownPct",
      "constraints.minTrades: must be a whole number of closed trades, 0 or more, got -1"
    ])
  })

  it("refuses text that is not a JSON object, a missing params, samples on a grid and an oversized grid", () => {
    expect(problems("{ nope")[0]).toMatch(/^\(file\): not JSON: .*; check brackets, commas and quotes$/)
    expect(problems("[1]")).toEqual([`(file): must be a JSON object with "params", e.g. {"params": {"fastPeriod": [5, 10]}}`])
    expect(problems(`{"rankBy": "sharpe"}`)).toEqual([`params: is required and must be an object of param name to alternatives, e.g. {"params": {"fastPeriod": [5, 10]}}`])
    expect(problems(`{"params": {"a": [1]}, "samples": 3}`)).toEqual([`samples: only a random search takes samples; remove it or set "search": "random"`])
    const big = JSON.stringify({ params: { a: { min: 1, max: 1000, step: 1 }, b: { min: 1, max: 1000, step: 1 } } })
    expect(problems(big)).toEqual([`params: the grid makes 1000000 combinations; at most 100000 are run (narrow the ranges, or use "search": "random" with "samples")`])
    // The same space is fine as a random search.
    expect(Either.isRight(parseSpace(JSON.stringify({ ...JSON.parse(big), search: "random", samples: 50 }), "s"))).toBe(true)
  })
})

describe("candidates", () => {
  const grid = space({ params: { fastPeriod: { min: 3, max: 9, step: 3 }, slowPeriod: [20, 40], entry: "market" } })

  it("a grid is every combination in the sweep's order, over the base params, as canonical JSON", () => {
    expect(candidates(grid, { quoteQty: "100", entry: "limit" }, 1)).toEqual([
      '{"entry":"market","fastPeriod":3,"quoteQty":"100","slowPeriod":20}',
      '{"entry":"market","fastPeriod":3,"quoteQty":"100","slowPeriod":40}',
      '{"entry":"market","fastPeriod":6,"quoteQty":"100","slowPeriod":20}',
      '{"entry":"market","fastPeriod":6,"quoteQty":"100","slowPeriod":40}',
      '{"entry":"market","fastPeriod":9,"quoteQty":"100","slowPeriod":20}',
      '{"entry":"market","fastPeriod":9,"quoteQty":"100","slowPeriod":40}'
    ])
  })

  it("a random search draws distinct candidates from the space, the same for the same seed", () => {
    const random = space({ params: { fastPeriod: { min: 1, max: 50, step: 1 }, slowPeriod: { min: 60, max: 200, step: 10 } }, search: "random", samples: 25 })
    const first = candidates(random, {}, 42)
    expect(first).toHaveLength(25)
    expect(new Set(first).size).toBe(25)
    expect(candidates(random, {}, 42)).toEqual(first)
    expect(candidates(random, {}, 43)).not.toEqual(first)
    for (const candidate of first) {
      const params = parse(candidate) as Record<string, { value: string }>
      const fast = Number(params.fastPeriod!.value)
      const slow = Number(params.slowPeriod!.value)
      expect(Number.isInteger(fast) && fast >= 1 && fast <= 50).toBe(true)
      expect(slow % 10 === 0 && slow >= 60 && slow <= 200).toBe(true)
    }
  })

  it("a random search with at least as many samples as the space has tries the whole grid", () => {
    const small = space({ params: { fastPeriod: { min: 3, max: 9, step: 3 }, slowPeriod: [20, 40], entry: "market" }, search: "random", samples: 6 })
    expect(candidates(small, {}, 5)).toEqual(candidates(grid, {}, 1))
  })
})
