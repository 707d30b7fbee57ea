/**
 * The search space of an optimisation: the sweep grid file (`params`, `rankBy`)
 * extended with ranges, a search method, successive halving and constraints.
 *
 * ```json
 * { "params": { "fastPeriod": { "min": 4, "max": 12, "step": 2 }, "slowPeriod": [30, 60], "entry": "market" },
 *   "rankBy": "sharpe", "search": "random", "samples": 20,
 *   "halving": { "slices": 3, "keep": 0.5 },
 *   "constraints": { "minTrades": 5, "maxDrawdownPct": 25 } }
 * ```
 *
 * Every problem is reported as `path: problem (fix)`, so a space file is fixed in one pass.
 */
import { Data, Effect, Either, Random } from "effect"
import { combinations, MAX_COMBINATIONS } from "../backtest/Sweep.js"
import { type Decimal, fromNumberToken, fromString, toJsonNumber } from "../domain/Decimal.js"
import { canonicalParams } from "../domain/Hash.js"
import { isLosslessNumber, LosslessNumber, parse, stringify } from "../domain/Json.js"
import { type Constraints, OBJECTIVE_ALIASES, OBJECTIVES, type Objective } from "./Objective.js"

export class SpaceInvalid extends Data.TaggedError("SpaceInvalid")<{ readonly source: string; readonly problems: ReadonlyArray<string> }> {
  override get message(): string {
    return `the search space ${this.source} is invalid:\n${this.problems.map((p) => `  - ${p}`).join("\n")}`
  }
}

export interface Halving {
  /** How many equal time slices the window is cut into; rung r runs on the first r + 1 of them. */
  readonly slices: number
  /** The share of candidates kept after each rung (at least one is always kept). */
  readonly keep: number
}

export type Search = { readonly method: "grid" } | { readonly method: "random"; readonly samples: number }

export interface Space {
  /** Each param as its alternatives, ranges already expanded (a fixed value is one alternative). */
  readonly params: Readonly<Record<string, ReadonlyArray<unknown>>>
  readonly rankBy: Objective
  readonly search: Search
  readonly halving?: Halving
  readonly constraints: Constraints
}

const FIELDS = ["params", "rankBy", "search", "samples", "halving", "constraints"] as const
const RANGE_FIELDS = ["min", "max", "step"] as const

/** A JSON object (not an array, not null). */
export const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === "object" && !Array.isArray(value)

/** A number of the file, exactly: JSON numbers arrive as lossless tokens, decimal strings are accepted too. */
const exactNumber = (value: unknown): Decimal | undefined => {
  try {
    if (isLosslessNumber(value)) return fromNumberToken(value)
    if (typeof value === "string") return fromString(value)
  } catch {
    return undefined
  }
  return undefined
}

/** A value of the file as it was written, for a message. */
const shown = (value: unknown): string => (value === undefined ? "nothing" : stringify(value))

const plainNumber = (value: unknown): number | undefined => {
  const exact = exactNumber(value)
  return exact === undefined || typeof value === "string" ? undefined : exact.toNumber()
}

/**
 * The values of `{min, max, step}`: min, min + step, ... up to max, exact decimals. A range
 * written with strings gives strings (decimal params such as quote amounts), else numbers.
 */
const expandRange = (path: string, range: Record<string, unknown>, problems: Array<string>): ReadonlyArray<unknown> => {
  const missing = RANGE_FIELDS.filter((field) => range[field] === undefined)
  const extra = Object.keys(range).filter((key) => !(RANGE_FIELDS as ReadonlyArray<string>).includes(key))
  if (missing.length > 0 || extra.length > 0) {
    problems.push(
      `${path}: a range needs exactly min, max and step${missing.length > 0 ? ` (missing ${missing.join(", ")})` : ""}${extra.length > 0 ? ` (unknown ${extra.join(", ")})` : ""}; write e.g. {"min": 5, "max": 20, "step": 5}`
    )
    return []
  }
  const [min, max, step] = RANGE_FIELDS.map((field) => exactNumber(range[field]))
  const bad = RANGE_FIELDS.filter((field, i) => [min, max, step][i] === undefined)
  if (bad.length > 0) {
    problems.push(`${path}.${bad[0]}: ${shown(range[bad[0]!])} is not a number; give a number such as 5 or a decimal string such as "0.5"`)
    return []
  }
  if (step!.lte(0)) {
    problems.push(`${path}.step: must be greater than 0, got ${step!.toFixed()}; give the distance between two tried values, e.g. 1`)
    return []
  }
  if (max!.lt(min!)) {
    problems.push(`${path}: max ${max!.toFixed()} is below min ${min!.toFixed()}; swap them`)
    return []
  }
  const count = max!.minus(min!).div(step!).floor().toNumber() + 1
  if (count > MAX_COMBINATIONS) {
    problems.push(`${path}: the range has ${count} values; at most ${MAX_COMBINATIONS} are tried (use a larger step)`)
    return []
  }
  const asString = typeof range.min === "string"
  return Array.from({ length: count }, (_, i) => {
    const value = min!.plus(step!.mul(i))
    return asString ? value.toFixed() : new LosslessNumber(toJsonNumber(value))
  })
}

const readParams = (value: unknown, problems: Array<string>): Record<string, ReadonlyArray<unknown>> => {
  if (!isObject(value)) {
    problems.push(`params: is required and must be an object of param name to alternatives, e.g. {"params": {"fastPeriod": [5, 10]}}`)
    return {}
  }
  const out: Record<string, ReadonlyArray<unknown>> = {}
  for (const [name, spec] of Object.entries(value)) {
    const path = `params.${name}`
    if (Array.isArray(spec)) {
      if (spec.length === 0) problems.push(`${path}: is an empty list; give at least one value`)
      out[name] = spec
    } else if (isObject(spec) && RANGE_FIELDS.some((field) => field in spec)) {
      out[name] = expandRange(path, spec, problems)
    } else {
      out[name] = [spec]
    }
  }
  return out
}

const readObjective = (value: unknown, problems: Array<string>): Objective => {
  const name = value ?? "sharpe"
  if (typeof name === "string" && (OBJECTIVES as ReadonlyArray<string>).includes(name)) return name as Objective
  if (typeof name === "string" && Object.hasOwn(OBJECTIVE_ALIASES, name)) return OBJECTIVE_ALIASES[name as keyof typeof OBJECTIVE_ALIASES]
  problems.push(`rankBy: ${shown(name)} is not an objective; use one of ${OBJECTIVES.join(", ")}`)
  return "sharpe"
}

const readSearch = (search: unknown, samples: unknown, problems: Array<string>): Search => {
  const method = search ?? "grid"
  if (method === "grid") {
    if (samples !== undefined) problems.push(`samples: only a random search takes samples; remove it or set "search": "random"`)
    return { method: "grid" }
  }
  if (method !== "random") {
    problems.push(`search: ${shown(method)} is not a search method; use "grid" (every combination) or "random" (with "samples")`)
    return { method: "grid" }
  }
  const count = plainNumber(samples)
  if (count === undefined || !Number.isInteger(count) || count < 1 || count > MAX_COMBINATIONS) {
    problems.push(`samples: a random search needs "samples", a whole number from 1 to ${MAX_COMBINATIONS}, got ${shown(samples)}`)
    return { method: "grid" }
  }
  return { method: "random", samples: count }
}

const readHalving = (value: unknown, problems: Array<string>): Halving | undefined => {
  if (value === undefined) return undefined
  if (!isObject(value)) {
    problems.push(`halving: must be an object such as {"slices": 3, "keep": 0.5}`)
    return undefined
  }
  const unknown = Object.keys(value).filter((key) => key !== "slices" && key !== "keep")
  if (unknown.length > 0) problems.push(`halving: unknown field ${unknown.join(", ")}; it takes slices and keep`)
  const slices = plainNumber(value.slices ?? new LosslessNumber("3"))
  const keep = plainNumber(value.keep ?? new LosslessNumber("0.5"))
  let ok = true
  if (slices === undefined || !Number.isInteger(slices) || slices < 2 || slices > 20) {
    problems.push(`halving.slices: must be a whole number from 2 to 20 (the window is cut into that many time slices), got ${shown(value.slices)}`)
    ok = false
  }
  if (keep === undefined || !(keep > 0 && keep < 1)) {
    problems.push(`halving.keep: must be a fraction between 0 and 1 (the share kept after each slice, e.g. 0.5), got ${shown(value.keep)}`)
    ok = false
  }
  return ok ? { slices: slices!, keep: keep! } : undefined
}

const readConstraints = (value: unknown, problems: Array<string>): Constraints => {
  if (value === undefined) return {}
  if (!isObject(value)) {
    problems.push(`constraints: must be an object such as {"minTrades": 10, "maxDrawdownPct": 20}`)
    return {}
  }
  const unknown = Object.keys(value).filter((key) => key !== "minTrades" && key !== "maxDrawdownPct")
  if (unknown.length > 0) problems.push(`constraints: unknown field ${unknown.join(", ")}; it takes minTrades and maxDrawdownPct`)
  const out: { minTrades?: number; maxDrawdownPct?: number } = {}
  if (value.minTrades !== undefined) {
    const minTrades = plainNumber(value.minTrades)
    if (minTrades === undefined || !Number.isInteger(minTrades) || minTrades < 0) {
      problems.push(`constraints.minTrades: must be a whole number of closed trades, 0 or more, got ${shown(value.minTrades)}`)
    } else out.minTrades = minTrades
  }
  if (value.maxDrawdownPct !== undefined) {
    const maxDrawdownPct = plainNumber(value.maxDrawdownPct)
    if (maxDrawdownPct === undefined || !(maxDrawdownPct > 0 && maxDrawdownPct <= 100)) {
      problems.push(`constraints.maxDrawdownPct: must be a percentage above 0 and at most 100, got ${shown(value.maxDrawdownPct)}`)
    } else out.maxDrawdownPct = maxDrawdownPct
  }
  return out
}

/** Reads a space file's text; `source` names it in the errors. */
export const parseSpace = (text: string, source: string): Either.Either<Space, SpaceInvalid> => {
  let value: unknown
  try {
    value = parse(text)
  } catch (error) {
    return Either.left(new SpaceInvalid({ source, problems: [`(file): not JSON: ${error instanceof Error ? error.message : String(error)}; check brackets, commas and quotes`] }))
  }
  if (!isObject(value)) return Either.left(new SpaceInvalid({ source, problems: [`(file): must be a JSON object with "params", e.g. {"params": {"fastPeriod": [5, 10]}}`] }))
  const problems: Array<string> = []
  const unknown = Object.keys(value).filter((key) => !(FIELDS as ReadonlyArray<string>).includes(key))
  if (unknown.length > 0) problems.push(`${unknown.join(", ")}: not a field of a space file; it takes ${FIELDS.join(", ")}`)
  const params = readParams(value.params, problems)
  const rankBy = readObjective(value.rankBy, problems)
  const search = readSearch(value.search, value.samples, problems)
  const halving = readHalving(value.halving, problems)
  const constraints = readConstraints(value.constraints, problems)
  const size = spaceSize(params)
  if (search.method === "grid" && size > MAX_COMBINATIONS) {
    problems.push(`params: the grid makes ${size} combinations; at most ${MAX_COMBINATIONS} are run (narrow the ranges, or use "search": "random" with "samples")`)
  }
  if (problems.length > 0) return Either.left(new SpaceInvalid({ source, problems }))
  return Either.right({ params, rankBy, search, constraints, ...(halving === undefined ? {} : { halving }) })
}

const spaceSize = (params: Readonly<Record<string, ReadonlyArray<unknown>>>): number =>
  Object.values(params).reduce((n, alternatives) => n * alternatives.length, 1)

/**
 * The candidates to try, as canonical params JSON over `base` (the instance's or --params'
 * params, which the space overrides): every combination for a grid (the sweep's order), or
 * `samples` distinct draws for a random search, the same for the same seed. A random search of
 * a space no larger than its samples tries the whole grid.
 */
export const candidates = (space: Space, base: Readonly<Record<string, unknown>>, seed: number): ReadonlyArray<string> => {
  const withBase = (combination: Readonly<Record<string, unknown>>) => canonicalParams({ ...base, ...combination })
  const size = spaceSize(space.params)
  if (space.search.method === "grid" || size <= space.search.samples) {
    return combinations({ params: Object.fromEntries(Object.entries(space.params).map(([k, v]) => [k, [...v]])), rankBy: "sharpe" }).map(withBase)
  }
  const samples = space.search.samples
  const names = Object.keys(space.params).sort()
  const draw = Effect.gen(function* () {
    const seen = new Set<string>()
    const out: Array<string> = []
    // Draws repeat now and then; the bound keeps a space barely larger than the samples from looping long.
    for (let attempt = 0; out.length < samples && attempt < samples * 50; attempt++) {
      const combination: Record<string, unknown> = {}
      for (const name of names) {
        const alternatives = space.params[name]!
        combination[name] = alternatives[yield* Random.nextIntBetween(0, alternatives.length)]
      }
      const candidate = withBase(combination)
      if (!seen.has(candidate)) {
        seen.add(candidate)
        out.push(candidate)
      }
    }
    return out
  })
  return Effect.runSync(draw.pipe(Effect.withRandom(Random.make(seed))))
}
