/**
 * The parts of the SVC API that the spec does not show, each one an entry here
 * (defaults from DESIGN.md's Dialect table). svc-venue serves these defaults; the
 * client reads them from config, so learning the real values is a config change.
 */
import { Schema } from "effect"

export const Dialect = Schema.Struct({
  paths: Schema.Struct({
    exchangeInfo: Schema.String,
    ticker: Schema.String,
    candles: Schema.String,
    depth: Schema.String,
    walletsSpot: Schema.String,
    walletsFunding: Schema.String,
    openOrders: Schema.String,
    fills: Schema.String,
    orderStatus: Schema.String,
    limitOrder: Schema.String,
    marketOrder: Schema.String,
    stopLimitOrder: Schema.String,
    cancelOrder: Schema.String
  }),
  budgetHeaders: Schema.Struct({
    usedWeight1m: Schema.String,
    weightLimit1m: Schema.String,
    ordersUsed10s: Schema.String,
    ordersLimit10s: Schema.String,
    ordersUsed1d: Schema.String,
    ordersLimit1d: Schema.String
  }),
  /** Receive window sent in X-SVC-RECV-WINDOW, in milliseconds. */
  recvWindowMs: Schema.Int.pipe(Schema.between(1, 60000))
})
export type Dialect = typeof Dialect.Type

export const defaultDialect: Dialect = {
  paths: {
    exchangeInfo: "/api/spot/exchange-info",
    ticker: "/api/spot/ticker",
    candles: "/api/spot/candles",
    depth: "/api/spot/depth",
    walletsSpot: "/api/wallets/spot",
    walletsFunding: "/api/wallets/funding",
    openOrders: "/api/spot/open-orders",
    fills: "/api/spot/fills",
    orderStatus: "/api/spot/order",
    limitOrder: "/api/spot/limit",
    marketOrder: "/api/spot/market",
    stopLimitOrder: "/api/spot/stop-limit",
    cancelOrder: "/api/spot/cancel"
  },
  budgetHeaders: {
    usedWeight1m: "X-SVC-USED-WEIGHT-1M",
    weightLimit1m: "X-SVC-WEIGHT-LIMIT-1M",
    ordersUsed10s: "X-SVC-ORDERS-USED-10S",
    ordersLimit10s: "X-SVC-ORDERS-LIMIT-10S",
    ordersUsed1d: "X-SVC-ORDERS-USED-1D",
    ordersLimit1d: "X-SVC-ORDERS-LIMIT-1D"
  },
  recvWindowMs: 5000
}

/** The venue accepts receive windows in this range (milliseconds). */
export const RECV_WINDOW_MAX_MS = 60000

/**
 * Order status kinds. The spec names resting, fill, rejected and pending;
 * `cancelled` is our assumption for an order cancelled before it filled.
 */
export const OrderKind = Schema.Literal("pending", "resting", "fill", "rejected", "cancelled")
export type OrderKind = typeof OrderKind.Type
export const TERMINAL_KINDS: ReadonlySet<string> = new Set<OrderKind>(["fill", "rejected", "cancelled"])

// An order's side and type are the domain's words (OrderTerms.ts), offered here with the rest of the API's words to the venue and strategy plugins.
export { OrderType, Side } from "../domain/OrderTerms.js"

export const Liquidity = Schema.Literal("maker", "taker")
export type Liquidity = typeof Liquidity.Type

/** Order reject codes of the order status answer. */
export const RejectCode = {
  insufficientFunds: "SPOT_INSUFFICIENT_FUNDS",
  slippageExceeded: "SPOT_SLIPPAGE_EXCEEDED",
  halted: "SPOT_HALTED"
} as const

export const MAX_SLIPPAGE_BPS = { min: 1, max: 1000 } as const
