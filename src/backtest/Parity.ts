/**
 * Backtest = paper: two runs of one tape must produce the same fills. A fill is
 * compared on what the venue decides — price, quantity, side and liquidity — in
 * order; times and ids differ between an in-process run and a venue over HTTP.
 *
 * Compared by intent, the fills of a recorded paper run and of its replay are
 * matched within the placement intent that caused them ("tag#occurrence"), so one
 * fill that went differently is one mismatch, not a shift of every fill after it;
 * the fee is compared too: a replay with other fee rates than the venue charged
 * would show in no other field.
 */
import type { Decimal } from "../domain/Decimal.js"
import type { Liquidity, Side } from "../svc/Dialect.js"
import { CARRIED } from "./ReplayRun.js"
import type { OrderIntent } from "./Run.js"
import type { RunFill } from "./Metrics.js"

export interface ComparableFill {
  readonly price: Decimal
  readonly baseQty: Decimal
  readonly side: Side
  readonly liquidity: Liquidity
}

export interface FillMismatch {
  /** Position in both fill sequences, oldest first. */
  readonly index: number
  readonly expected?: ComparableFill
  readonly actual?: ComparableFill
}

const same = (a: ComparableFill, b: ComparableFill): boolean =>
  a.side === b.side && a.liquidity === b.liquidity && a.price.eq(b.price) && a.baseQty.eq(b.baseQty)

/** Every position where the two sequences differ, including fills only one of them has. */
export const compareFills = (expected: ReadonlyArray<ComparableFill>, actual: ReadonlyArray<ComparableFill>): ReadonlyArray<FillMismatch> => {
  const mismatches: Array<FillMismatch> = []
  const n = Math.max(expected.length, actual.length)
  for (let index = 0; index < n; index++) {
    const e = expected[index]
    const a = actual[index]
    if (e !== undefined && a !== undefined && same(e, a)) continue
    mismatches.push({ index, ...(e === undefined ? {} : { expected: e }), ...(a === undefined ? {} : { actual: a }) })
  }
  return mismatches
}

const show = (fill: ComparableFill | undefined): string =>
  fill === undefined ? "nothing" : `${fill.side} ${fill.baseQty.toFixed()} @ ${fill.price.toFixed()} ${fill.liquidity}`

/** One line per mismatch, for test output and logs. */
export const describeMismatches = (mismatches: ReadonlyArray<FillMismatch>): string =>
  mismatches.map((m) => `fill ${m.index}: expected ${show(m.expected)}, got ${show(m.actual)}`).join("\n")

/** A fill tied to the placement intent that caused it. */
export interface IntentFill extends ComparableFill {
  /** The intent's key, `intentKey(tag, occurrence)`. */
  readonly intent: string
  readonly fee: Decimal
}

export type IntentFillField = "side" | "price" | "baseQty" | "liquidity" | "fee"

export interface IntentFillMismatch {
  readonly intent: string
  /** Position among the intent's fills, oldest first. */
  readonly index: number
  readonly expected?: IntentFill
  readonly actual?: IntentFill
  /** The fields that differ; empty when only one side has the fill. */
  readonly fields: ReadonlyArray<IntentFillField>
}

/** "tag#occurrence": the occurrence-th placement intent with that tag in the run, from 0. */
export const intentKey = (tag: string, occurrence: number): string => `${tag}#${occurrence === CARRIED ? "carried" : occurrence}`

/** A backtest's fills with the intent of each (`BacktestResult.placements`). */
export const fillsByIntent = (fills: ReadonlyArray<RunFill>, placements: ReadonlyMap<string, OrderIntent>): ReadonlyArray<IntentFill> =>
  fills.map((fill) => {
    const placement = placements.get(fill.clientOrderId)
    // Every order of a backtest comes from a placement intent; a fill without one is a bug of the run, not a mismatch.
    if (placement === undefined) throw new Error(`fill ${fill.fillId} of ${fill.clientOrderId} has no placement intent`)
    return { ...fill, intent: intentKey(placement.tag, placement.occurrence) }
  })

const differingFields = (e: IntentFill, a: IntentFill): ReadonlyArray<IntentFillField> => {
  const fields: Array<IntentFillField> = []
  if (e.side !== a.side) fields.push("side")
  if (!e.price.eq(a.price)) fields.push("price")
  if (!e.baseQty.eq(a.baseQty)) fields.push("baseQty")
  if (e.liquidity !== a.liquidity) fields.push("liquidity")
  if (!e.fee.eq(a.fee)) fields.push("fee")
  return fields
}

/** One intent's fills on each side, oldest first. */
interface IntentFills {
  readonly expected: Array<IntentFill>
  readonly actual: Array<IntentFill>
}

const groupByIntent = (fills: ReadonlyArray<IntentFill>, into: Map<string, IntentFills>, side: keyof IntentFills): void => {
  for (const fill of fills) {
    let group = into.get(fill.intent)
    if (group === undefined) {
      group = { expected: [], actual: [] }
      into.set(fill.intent, group)
    }
    group[side].push(fill)
  }
}

/**
 * Every fill that differs within its intent, fills matched one to one in time order:
 * intents in the order the expected run first filled them, then intents only the
 * actual run filled.
 */
export const compareFillsByIntent = (expected: ReadonlyArray<IntentFill>, actual: ReadonlyArray<IntentFill>): ReadonlyArray<IntentFillMismatch> => {
  const intents = new Map<string, IntentFills>()
  groupByIntent(expected, intents, "expected")
  groupByIntent(actual, intents, "actual")
  const mismatches: Array<IntentFillMismatch> = []
  for (const [intent, group] of intents) {
    const n = Math.max(group.expected.length, group.actual.length)
    for (let index = 0; index < n; index++) {
      const e = group.expected[index]
      const a = group.actual[index]
      const fields = e !== undefined && a !== undefined ? differingFields(e, a) : []
      if (e !== undefined && a !== undefined && fields.length === 0) continue
      mismatches.push({ intent, index, ...(e === undefined ? {} : { expected: e }), ...(a === undefined ? {} : { actual: a }), fields })
    }
  }
  return mismatches
}

const showWithFee = (fill: IntentFill | undefined): string => (fill === undefined ? "nothing" : `${show(fill)} fee ${fill.fee.toFixed()}`)

/** One line per mismatch, for test output and the promotion record. */
export const describeIntentMismatches = (mismatches: ReadonlyArray<IntentFillMismatch>): string =>
  mismatches
    .map(
      (m) =>
        `${m.intent} fill ${m.index}: expected ${showWithFee(m.expected)}, got ${showWithFee(m.actual)}${m.fields.length === 0 ? "" : ` (${m.fields.join(", ")} differ)`}`
    )
    .join("\n")
