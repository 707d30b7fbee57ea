/**
 * Building views and events by hand, for strategy unit tests: a handler is a pure
 * function, so its specification is a table of (state, event, view) -> intents.
 */
import { Decimal, from } from "../domain/Decimal.js"
import type { Intent } from "../domain/Intent.js"
import type { OrderKind, Side } from "../svc/Dialect.js"
import type { CandleEvent, FillEvent, OpenOrder, OrderUpdateEvent, OrderUpdateKind, PairRules, StrategyView } from "./Strategy.js"

type Amount = Decimal | string

export const pair = (
  symbol: string,
  base: string,
  quote: string,
  rules: Partial<Record<"tickSize" | "stepSize" | "minBaseQty" | "minNotional", Amount>> & { readonly status?: "trading" | "halted" } = {}
): PairRules => ({
  symbol,
  base,
  quote,
  status: rules.status ?? "trading",
  tickSize: from(rules.tickSize ?? "0.01"),
  stepSize: from(rules.stepSize ?? "0.00001"),
  minBaseQty: from(rules.minBaseQty ?? "0.00001"),
  minNotional: from(rules.minNotional ?? "5")
})

export const BTCUSDT = pair("BTCUSDT", "BTC", "USDT")

export interface ViewInput<P> {
  readonly params: P
  readonly symbol?: string
  readonly now?: number
  /** Free balances, or `{ free, locked }`. */
  readonly balances?: Readonly<Record<string, Amount | { readonly free: Amount; readonly locked: Amount }>>
  readonly openOrders?: ReadonlyArray<OpenOrder>
  readonly lastPrices?: Readonly<Record<string, Amount>>
  readonly pairs?: ReadonlyArray<PairRules>
}

export const viewOf = <P>(input: ViewInput<P>): StrategyView<P> => ({
  params: input.params,
  symbol: input.symbol ?? "BTCUSDT",
  now: input.now ?? 1_700_000_000_000,
  balances: new Map(
    Object.entries(input.balances ?? {}).map(([asset, amount]) =>
      typeof amount === "string" || Decimal.isDecimal(amount)
        ? [asset, { free: from(amount as Amount), locked: new Decimal(0) }]
        : [asset, { free: from((amount as { free: Amount }).free), locked: from((amount as { locked: Amount }).locked) }]
    )
  ),
  openOrders: new Map((input.openOrders ?? []).map((order) => [order.tag, order])),
  lastPrices: new Map(Object.entries(input.lastPrices ?? {}).map(([symbol, price]) => [symbol, from(price)])),
  pairs: new Map((input.pairs ?? [BTCUSDT]).map((rules) => [rules.symbol, rules]))
})

/** The open order an accepted placement intent becomes (resting, nothing filled). */
export const openOrderOf = (intent: Intent, kind: OrderKind = "resting"): OpenOrder => {
  if (intent.type === "cancel") throw new Error("a cancel intent is not an order")
  return {
    tag: intent.tag,
    clientOrderId: `coid-${intent.tag}`,
    symbol: intent.symbol,
    side: intent.side,
    type: intent.type,
    baseQty: intent.type !== "market" || intent.side === "sell" ? intent.baseQty : new Decimal(0),
    filledBaseQty: new Decimal(0),
    ...(intent.type !== "market" ? { limitPrice: intent.limitPrice } : {}),
    ...(intent.type === "stop-limit" ? { stopPrice: intent.stopPrice } : {}),
    kind
  }
}

export const candle = (close: Amount, openTime = 0, symbol = "BTCUSDT"): CandleEvent => {
  const price = from(close)
  return { symbol, interval: "1m", openTime, open: price, high: price, low: price, close: price, volume: new Decimal(1) }
}

export const update = (tag: string, kind: OrderUpdateKind, filledBaseQty: Amount = "0", code?: string): OrderUpdateEvent => ({
  tag,
  clientOrderId: `coid-${tag}`,
  kind,
  filledBaseQty: from(filledBaseQty),
  ...(code !== undefined ? { code } : {})
})

export const fill = (
  tag: string,
  side: Side,
  price: Amount,
  baseQty: Amount,
  fee: { readonly amount: Amount; readonly asset: string } = { amount: "0", asset: "USDT" }
): FillEvent => ({
  tag,
  fillId: `fill-${tag}-${String(price)}`,
  side,
  price: from(price),
  baseQty: from(baseQty),
  quoteQty: from(price).mul(from(baseQty)),
  fee: from(fee.amount),
  feeAsset: fee.asset,
  liquidity: "maker",
  time: 1_700_000_000_000
})
