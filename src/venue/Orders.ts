/**
 * What the matching engine trades: pairs, placement requests, its own record of an order,
 * the read-only view of one it answers with, and its record of a fill.
 */
import { type Decimal, toBounds } from "../domain/Decimal.js"
import type { OrderTerms } from "../domain/OrderTerms.js"
import type { Liquidity, OrderKind, Side } from "../svc/Dialect.js"
import type { BookShape } from "./Book.js"

export type PairStatus = "trading" | "halted"

export interface PairSpec extends BookShape {
  readonly symbol: string
  readonly base: string
  readonly quote: string
  readonly minBaseQty: Decimal
  readonly minNotional: Decimal
  readonly status: PairStatus
}

export type PlaceRequest =
  | { readonly type: "limit"; readonly symbol: string; readonly side: Side; readonly baseQty: Decimal; readonly limitPrice: Decimal }
  | {
      readonly type: "stop-limit"
      readonly symbol: string
      readonly side: Side
      readonly baseQty: Decimal
      readonly limitPrice: Decimal
      readonly stopPrice: Decimal
    }
  | { readonly type: "market"; readonly symbol: string; readonly side: "buy"; readonly quoteOrderQty: Decimal; readonly maxSlippageBps: number }
  | { readonly type: "market"; readonly symbol: string; readonly side: "sell"; readonly baseQty: Decimal; readonly maxSlippageBps: number }

export interface BalanceRow {
  readonly asset: string
  readonly free: Decimal
  readonly locked: Decimal
}

export interface OrderView extends OrderTerms {
  readonly clientOrderId: string
  readonly kind: OrderKind
  readonly code: string | null
  readonly symbol: string
  readonly filledBaseQty: Decimal
  readonly filledQuoteQty: Decimal
  /** Volume-weighted fill price; null until something filled. */
  readonly avgPrice: Decimal | null
  readonly createdAt: number
  readonly updatedAt: number
}

/** The venue's record of a fill; the client reads it as the wire `Fill` of src/svc/Api.ts. */
export interface VenueFill {
  /** Position in the venue-wide fill sequence; pages of fills are cut on it. */
  readonly seq: number
  readonly fillId: string
  readonly clientOrderId: string
  readonly symbol: string
  readonly side: Side
  readonly liquidity: Liquidity
  readonly price: Decimal
  readonly baseQty: Decimal
  readonly quoteQty: Decimal
  readonly fee: Decimal
  readonly feeAsset: string
  readonly time: number
}

/** The engine's own, mutable record of an order; readers get an OrderView of it. */
export interface EngineOrder extends OrderTerms {
  /** Placement sequence: the order of orders in the listings. */
  readonly seq: number
  readonly clientOrderId: string
  readonly uid: number
  readonly pair: PairSpec
  readonly createdAt: number
  readonly settleAt: number
  kind: OrderKind
  code: string | null
  settled: boolean
  filledBaseQty: Decimal
  filledQuoteQty: Decimal
  /**
   * The average fill price once known. After one fill it is that fill's price; after
   * more it is worked out when first read, as the 64-digit quotient of the fills.
   */
  avgPrice: Decimal | null
  /** What is still held for this order, in quote (buy) or base (sell). */
  locked: Decimal
  updatedAt: number
}

export const byPlacement = (a: EngineOrder, b: EngineOrder): number => a.seq - b.seq

export const view = (order: EngineOrder): OrderView => ({
  clientOrderId: order.clientOrderId,
  kind: order.kind,
  code: order.code,
  symbol: order.pair.symbol,
  side: order.side,
  type: order.type,
  baseQty: order.baseQty,
  quoteOrderQty: order.quoteOrderQty,
  limitPrice: order.limitPrice,
  stopPrice: order.stopPrice,
  maxSlippageBps: order.maxSlippageBps,
  filledBaseQty: order.filledBaseQty,
  filledQuoteQty: order.filledQuoteQty,
  // An average of several fills is a quotient of 64 digits; it is answered within the bounds a client reads amounts with.
  avgPrice: order.filledBaseQty.isZero() ? null : (order.avgPrice ??= toBounds(order.filledQuoteQty.div(order.filledBaseQty))),
  createdAt: order.createdAt,
  updatedAt: order.updatedAt
})
