/**
 * What an order asks for, as the journal, the venue's book and the order status
 * answer all record it. An amount the order type does not use is null (a market
 * buy has no baseQty, a limit order no quoteOrderQty).
 */
import { Schema } from "effect"
import type { Decimal } from "./Decimal.js"

export const Side = Schema.Literal("buy", "sell")
export type Side = typeof Side.Type

/** Limit is the spec's; market and stop-limit are entries of the Dialect (src/svc/Dialect.ts). */
export const OrderType = Schema.Literal("limit", "market", "stop-limit")
export type OrderType = typeof OrderType.Type

export interface OrderTerms {
  readonly side: Side
  readonly type: OrderType
  readonly baseQty: Decimal | null
  readonly quoteOrderQty: Decimal | null
  readonly limitPrice: Decimal | null
  readonly stopPrice: Decimal | null
  readonly maxSlippageBps: number | null
}

/** The same terms as a placement is written before the service has answered: absent amounts are left out. */
export interface PlacementTerms {
  readonly symbol: string
  readonly side: Side
  readonly type: OrderType
  readonly baseQty?: Decimal | undefined
  readonly quoteOrderQty?: Decimal | undefined
  readonly limitPrice?: Decimal | undefined
  readonly stopPrice?: Decimal | undefined
}
