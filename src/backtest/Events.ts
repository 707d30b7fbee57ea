/**
 * The matching engine's shapes as the strategy hears them (candles, order updates, open
 * orders), and the strategy's placement intents as the engine's requests.
 */
import { type Decimal, ZERO } from "../domain/Decimal.js"
import type { PlaceIntent } from "../domain/Intent.js"
import type { CandleEvent, OpenOrder, OrderUpdateEvent, OrderUpdateKind } from "../strategy/Strategy.js"
import type { OrderView, PlaceRequest } from "../venue/Orders.js"
import type { VenueCandle } from "../venue/PricePath.js"

export type Mutable<T> = { -readonly [K in keyof T]: T[K] }

export const toRequest = (intent: PlaceIntent): PlaceRequest => {
  switch (intent.type) {
    case "limit":
      return { type: "limit", symbol: intent.symbol, side: intent.side, baseQty: intent.baseQty, limitPrice: intent.limitPrice }
    case "stop-limit":
      return {
        type: "stop-limit",
        symbol: intent.symbol,
        side: intent.side,
        baseQty: intent.baseQty,
        limitPrice: intent.limitPrice,
        stopPrice: intent.stopPrice
      }
    case "market":
      return intent.side === "buy"
        ? { type: "market", symbol: intent.symbol, side: "buy", quoteOrderQty: intent.quoteOrderQty, maxSlippageBps: intent.maxSlippageBps }
        : { type: "market", symbol: intent.symbol, side: "sell", baseQty: intent.baseQty, maxSlippageBps: intent.maxSlippageBps }
  }
}

export const candleEvent = (symbol: string, interval: string, candle: VenueCandle): CandleEvent => ({
  symbol,
  interval,
  openTime: candle.openTimeMs,
  open: candle.open,
  high: candle.high,
  low: candle.low,
  close: candle.close,
  volume: candle.volume
})

/** What the strategy hears of an order as the engine shows it: `code` and `avgPrice` only when it has them. */
export const orderUpdate = (tag: string, order: OrderView, kind: OrderUpdateKind): OrderUpdateEvent => {
  // Set one by one, not spread in: spreading a conditional object costs a runtime call per update.
  const update: Mutable<OrderUpdateEvent> = { tag, clientOrderId: order.clientOrderId, kind, filledBaseQty: order.filledBaseQty }
  if (order.code !== null) update.code = order.code
  if (order.avgPrice !== null) update.avgPrice = order.avgPrice
  return update
}

export const openOrderOf = (intent: PlaceIntent, clientOrderId: string): OpenOrder => {
  const order: Mutable<OpenOrder> = {
    tag: intent.tag,
    clientOrderId,
    symbol: intent.symbol,
    side: intent.side,
    type: intent.type,
    baseQty: intent.type === "market" && intent.side === "buy" ? ZERO : (intent as { readonly baseQty: Decimal }).baseQty,
    filledBaseQty: ZERO,
    kind: "pending"
  }
  // Set one by one, as in `orderUpdate`.
  if (intent.type !== "market") order.limitPrice = intent.limitPrice
  if (intent.type === "stop-limit") order.stopPrice = intent.stopPrice
  return order
}
