/**
 * Order intents: what a strategy asks for. A strategy names its orders with its
 * own `tag` because the service, not the client, creates `clientOrderId`.
 */
import { Schema } from "effect"
import type { Decimal } from "./Decimal.js"
import { DecimalFromString } from "./DecimalSchema.js"
import { Side } from "./OrderTerms.js"

interface IntentBase {
  /** The strategy's own name for this order, unique among its live orders (e.g. "grid-buy-3"). */
  readonly tag: string
  readonly symbol: string
}

export interface LimitIntent extends IntentBase {
  readonly type: "limit"
  readonly side: Side
  readonly baseQty: Decimal
  readonly limitPrice: Decimal
}

/** A market buy spends `quoteOrderQty`; a market sell sells `baseQty`. */
export type MarketIntent = IntentBase & {
  readonly type: "market"
  readonly maxSlippageBps: number
} & (
    | { readonly side: "buy"; readonly quoteOrderQty: Decimal }
    | { readonly side: "sell"; readonly baseQty: Decimal }
  )

export interface StopLimitIntent extends IntentBase {
  readonly type: "stop-limit"
  readonly side: Side
  readonly baseQty: Decimal
  readonly limitPrice: Decimal
  readonly stopPrice: Decimal
}

export interface CancelIntent {
  readonly type: "cancel"
  /** The tag of the strategy's order to cancel. */
  readonly tag: string
}

export type PlaceIntent = LimitIntent | MarketIntent | StopLimitIntent
export type Intent = PlaceIntent | CancelIntent

export const isPlacement = (intent: Intent): intent is PlaceIntent => intent.type !== "cancel"

const Tagged = { tag: Schema.String, symbol: Schema.String }

/**
 * An intent as stored before the engine has it (the strategy outbox): amounts as
 * exact decimal strings. Decoding gives back the intent the strategy emitted.
 */
export const IntentFromJson = Schema.Union(
  Schema.Struct({ type: Schema.Literal("limit"), ...Tagged, side: Side, baseQty: DecimalFromString, limitPrice: DecimalFromString }),
  Schema.Struct({
    type: Schema.Literal("stop-limit"),
    ...Tagged,
    side: Side,
    baseQty: DecimalFromString,
    limitPrice: DecimalFromString,
    stopPrice: DecimalFromString
  }),
  Schema.Struct({ type: Schema.Literal("market"), ...Tagged, maxSlippageBps: Schema.Number, side: Schema.Literal("buy"), quoteOrderQty: DecimalFromString }),
  Schema.Struct({ type: Schema.Literal("market"), ...Tagged, maxSlippageBps: Schema.Number, side: Schema.Literal("sell"), baseQty: DecimalFromString }),
  Schema.Struct({ type: Schema.Literal("cancel"), tag: Schema.String })
)
