/**
 * Order intents: what a strategy asks for. A strategy names its orders with its
 * own `tag` because the service, not the client, creates `clientOrderId`.
 */
import type { Decimal } from "./Decimal.js"
import type { Side } from "../svc/Dialect.js"

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
