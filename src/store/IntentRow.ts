/**
 * The journal's intents as the journal takes them in (a placement with its terms and the funds
 * it locks, an intent without an order) and reads them back, and the id each one gets.
 */
import type { Decimal } from "../domain/Decimal.js"
import type { PlacementTerms } from "../domain/OrderTerms.js"

export interface PlacementRecord extends PlacementTerms {
  readonly maxSlippageBps?: number | undefined
  readonly lockAsset: string
  readonly lockAmount: Decimal
}

export interface IntentRecord {
  readonly intentId: string
  readonly strategyId: string
  readonly seq: number
  readonly tag: string
  readonly type: string
  readonly body: string
  readonly outcome: "approved" | "refused" | null
  readonly refusal: string | null
  readonly createdAt: number
}

export const toIntent = (raw: {
  intent_id: string
  strategy_id: string
  seq: number
  tag: string
  type: string
  body: string
  outcome: "approved" | "refused" | null
  refusal: string | null
  created_at: number
}): IntentRecord => ({
  intentId: raw.intent_id,
  strategyId: raw.strategy_id,
  seq: raw.seq,
  tag: raw.tag,
  type: raw.type,
  body: raw.body,
  outcome: raw.outcome,
  refusal: raw.refusal,
  createdAt: raw.created_at
})

/** The deterministic id of a strategy's n-th intent. */
export const intentIdOf = (strategyId: string, seq: number): string => `${strategyId}:${String(seq).padStart(6, "0")}`

export interface PlacementInput {
  readonly strategyId: string
  readonly tag: string
  readonly body: unknown
  readonly placement: PlacementRecord
  readonly now: number
  /** The strategy outbox row this intent was saved in, if any. */
  readonly outboxId?: number | undefined
}

export interface IntentInput {
  readonly strategyId: string
  readonly tag: string
  readonly type: string
  readonly body: unknown
  readonly refusal: string | null
  readonly now: number
  readonly outboxId?: number | undefined
}
