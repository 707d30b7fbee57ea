/**
 * Building intents that the venue will accept: prices on the tick, quantities on
 * the step, above the pair's minimums, and never more than the free balance.
 * Every builder returns `undefined` instead of an intent that would be refused,
 * so a strategy simply places nothing when it cannot.
 */
import { compare, Decimal, divideDown, ONE_BPS, quantize, sign, ZERO } from "../domain/Decimal.js"
import type { CancelIntent, LimitIntent, MarketIntent, StopLimitIntent } from "../domain/Intent.js"
import type { OrderType, Side } from "../svc/Dialect.js"
import type { OpenOrder, PairRules, StrategyView } from "./Strategy.js"

/** The rules of `symbol` when it is trading; a halted or unknown pair places nothing. */
export const tradingPair = (view: StrategyView, symbol: string): PairRules | undefined => {
  const rules = view.pairs.get(symbol)
  return rules !== undefined && rules.status === "trading" ? rules : undefined
}

export const freeBalance = (view: StrategyView, asset: string): Decimal => view.balances.get(asset)?.free ?? ZERO

/** `value` moved by `bps` basis points: up for positive, down for negative. */
export const shiftBps = (value: Decimal, bps: number | Decimal): Decimal => value.mul(ONE_BPS.mul(bps).add(1))

/** A buy never pays more than asked and a sell never takes less, so prices round away from the trader's harm. */
export const roundPrice = (price: Decimal, side: Side, rules: PairRules): Decimal =>
  quantize(price, rules.tickSize, side === "buy" ? "floor" : "ceil")

/** Quantities round down: rounding up could spend funds the strategy does not have. */
export const roundQty = (qty: Decimal, rules: PairRules): Decimal => quantize(qty, rules.stepSize, "floor")

export const meetsMinimums = (rules: PairRules, baseQty: Decimal, price: Decimal): boolean =>
  sign(baseQty) > 0 && compare(baseQty, rules.minBaseQty) >= 0 && compare(baseQty.mul(price), rules.minNotional) >= 0

/**
 * The free balances a handler may still commit while it builds several intents:
 * each placement takes what its order will lock, so one handler call can never
 * commit more than the view's free balance.
 */
export class FreeFunds {
  private readonly left = new Map<string, Decimal>()

  constructor(private readonly view: StrategyView) {}

  available(asset: string): Decimal {
    return this.left.get(asset) ?? freeBalance(this.view, asset)
  }

  /** Takes `amount` of `asset` if it is free; false (and nothing taken) otherwise. */
  take(asset: string, amount: Decimal): boolean {
    const available = this.available(asset)
    if (compare(amount, available) > 0) return false
    this.left.set(asset, available.sub(amount))
    return true
  }
}

/** The largest quantity on the step whose cost at `price` fits in `quote`. */
export const qtyForQuote = (quote: Decimal, price: Decimal, rules: PairRules): Decimal =>
  sign(price) > 0 && sign(quote) > 0 ? divideDown(quote, price, rules.stepSize) : ZERO

interface LimitRequest {
  readonly tag: string
  readonly side: Side
  readonly baseQty: Decimal
  readonly limitPrice: Decimal
}

/** What an order locks: quote for a buy, base for a sell. */
const lockFor = (side: Side, baseQty: Decimal, price: Decimal, rules: PairRules) =>
  side === "buy" ? { asset: rules.quote, amount: baseQty.mul(price) } : { asset: rules.base, amount: baseQty }

export const limitOrder = (request: LimitRequest, rules: PairRules, funds: FreeFunds): LimitIntent | undefined => {
  const limitPrice = roundPrice(request.limitPrice, request.side, rules)
  const baseQty = roundQty(request.baseQty, rules)
  if (sign(limitPrice) <= 0 || !meetsMinimums(rules, baseQty, limitPrice)) return undefined
  const lock = lockFor(request.side, baseQty, limitPrice, rules)
  if (!funds.take(lock.asset, lock.amount)) return undefined
  return { type: "limit", tag: request.tag, symbol: rules.symbol, side: request.side, baseQty, limitPrice }
}

interface StopLimitRequest extends LimitRequest {
  readonly stopPrice: Decimal
}

export const stopLimitOrder = (request: StopLimitRequest, rules: PairRules, funds: FreeFunds): StopLimitIntent | undefined => {
  const limitPrice = roundPrice(request.limitPrice, request.side, rules)
  // The stop is a trigger, not a price paid: it rounds toward the limit so the limit stays reachable once triggered.
  const stopPrice = quantize(request.stopPrice, rules.tickSize, request.side === "sell" ? "ceil" : "floor")
  const baseQty = roundQty(request.baseQty, rules)
  if (sign(limitPrice) <= 0 || sign(stopPrice) <= 0 || !meetsMinimums(rules, baseQty, limitPrice)) return undefined
  const lock = lockFor(request.side, baseQty, limitPrice, rules)
  if (!funds.take(lock.asset, lock.amount)) return undefined
  return { type: "stop-limit", tag: request.tag, symbol: rules.symbol, side: request.side, baseQty, limitPrice, stopPrice }
}

/** A market buy spending `quoteOrderQty`; refused below the pair's minimum notional. */
export const marketBuy = (
  request: { readonly tag: string; readonly quoteOrderQty: Decimal; readonly maxSlippageBps: number },
  rules: PairRules,
  funds: FreeFunds
): MarketIntent | undefined => {
  const quoteOrderQty = request.quoteOrderQty
  // `sign` and `compare`, not `lte(0)` and `lt`: decimal.js copies (and parses) what it compares with, at every entry.
  if (sign(quoteOrderQty) <= 0 || compare(quoteOrderQty, rules.minNotional) < 0) return undefined
  if (!funds.take(rules.quote, quoteOrderQty)) return undefined
  return { type: "market", tag: request.tag, symbol: rules.symbol, side: "buy", quoteOrderQty, maxSlippageBps: request.maxSlippageBps }
}

/** A market sell of `baseQty` (rounded down to the step), checked against the minimums at `referencePrice`. */
export const marketSell = (
  request: { readonly tag: string; readonly baseQty: Decimal; readonly maxSlippageBps: number; readonly referencePrice: Decimal },
  rules: PairRules,
  funds: FreeFunds
): MarketIntent | undefined => {
  const baseQty = roundQty(request.baseQty, rules)
  if (!meetsMinimums(rules, baseQty, request.referencePrice)) return undefined
  if (!funds.take(rules.base, baseQty)) return undefined
  return { type: "market", tag: request.tag, symbol: rules.symbol, side: "sell", baseQty, maxSlippageBps: request.maxSlippageBps }
}

/**
 * An open order a cancel can reach. A market order is not one: it fills within its
 * maxSlippageBps or is rejected as a whole, so a cancel of it could only be refused.
 */
export type CancellableOrder = OpenOrder & { readonly type: Exclude<OrderType, "market"> }

export const isCancellable = (order: OpenOrder): order is CancellableOrder => order.type !== "market"

/** The cancel of a limit or stop-limit order; a market order does not type-check here (narrow with `isCancellable`). */
export const cancelOrder = (order: CancellableOrder): CancelIntent => ({ type: "cancel", tag: order.tag })

/** The base a fill adds to (buy) or removes from (sell) a position, net of a fee charged in base. */
export const positionChange = (fill: { readonly side: Side; readonly baseQty: Decimal; readonly fee: Decimal; readonly feeAsset: string }, base: string): Decimal => {
  const fee = fill.feeAsset === base ? fill.fee : ZERO
  return fill.side === "buy" ? fill.baseQty.sub(fee) : fill.baseQty.neg().sub(fee)
}
