/**
 * What an order asks for, as the journal, the venue's book and the order status
 * answer all record it. An amount the order type does not use is null (a market
 * buy has no baseQty, a limit order no quoteOrderQty).
 */
import type { Decimal } from "./Decimal.js"
import type { OrderType, Side } from "../svc/Dialect.js"

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
