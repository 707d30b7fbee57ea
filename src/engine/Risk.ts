/**
 * Pre-trade risk: a pure function from an intent and what the engine knows to
 * `Approved` (with the order quantized to the pair's steps and what it will
 * lock) or `Refused` (with the reason). A refused intent is never sent.
 */
import { atIncrement, atPlaces } from "../domain/Display.js"
import { Decimal, ONE_BPS, quantize, ZERO } from "../domain/Decimal.js"
import type { PlaceIntent } from "../domain/Intent.js"
import { MAX_SLIPPAGE_BPS, type OrderType, type Side } from "../svc/Dialect.js"

/**
 * A pair and its trading rules as exchange-info lists them: its status may be one svcbot does
 * not know (a strategy's `PairRules` sees only trading or halted).
 */
export interface ListedPair {
  readonly symbol: string
  readonly base: string
  readonly quote: string
  readonly status: string
  readonly tickSize: Decimal
  readonly stepSize: Decimal
  readonly minBaseQty: Decimal
  readonly minNotional: Decimal
}

export interface RiskLimits {
  /** Largest notional (quote asset) of one order. */
  readonly maxOrderNotional?: Decimal | undefined
  /** Largest notional of all of a strategy's open and in-flight orders together. */
  readonly maxStrategyNotional?: Decimal | undefined
  /** Most open and in-flight orders per strategy. */
  readonly maxOpenOrders?: number | undefined
  /** Limit and stop prices must lie within this many basis points of the last price. */
  readonly priceCollarBps?: number | undefined
  /** New placements stop for the day once the day's PnL falls to minus this amount (quote asset). */
  readonly dailyLossLimit?: Decimal | undefined
}

export interface RiskContext {
  readonly pair: ListedPair | undefined
  readonly lastPrice: Decimal | undefined
  /** Free balance of an asset minus what the strategy's in-flight intents will lock. */
  readonly available: (asset: string) => Decimal
  readonly openOrders: number
  readonly openNotional: Decimal
  /** True while the strategy has an unfinished order with the intent's tag. */
  readonly tagInUse: boolean
  readonly dailyPnl: Decimal
  /** Set while the account or key cannot place orders (frozen, geo-blocked, legal acceptance, missing spot.trade). */
  readonly placementsBlocked: string | undefined
  /** The instance's own book when it has an allocation: what of an asset it still has free, and was allocated. */
  readonly allocation?: { readonly free: (asset: string) => Decimal; readonly allocated: (asset: string) => Decimal } | undefined
}

export type RefusalReason =
  | "placements-blocked"
  | "kill-switch"
  | "tag-in-use"
  | "unknown-pair"
  | "pair-not-trading"
  | "invalid-amount"
  | "below-min-qty"
  | "below-min-notional"
  | "no-last-price"
  | "price-collar"
  | "order-notional-cap"
  | "strategy-notional-cap"
  | "open-order-cap"
  | "insufficient-balance"
  | "allocation-exceeded"

/** The order as it will be sent: amounts snapped to the pair's tick and step sizes. */
export interface ApprovedOrder {
  readonly symbol: string
  readonly side: Side
  readonly type: OrderType
  readonly baseQty?: Decimal
  readonly quoteOrderQty?: Decimal
  readonly limitPrice?: Decimal
  readonly stopPrice?: Decimal
  readonly maxSlippageBps?: number
}

export interface Approved {
  readonly _tag: "Approved"
  readonly order: ApprovedOrder
  /** Quote-asset value of the order (estimated at the last price for a market sell). */
  readonly notional: Decimal
  /** What the order holds while open: the reservation against free balance. */
  readonly lock: { readonly asset: string; readonly amount: Decimal }
}

export interface Refused {
  readonly _tag: "Refused"
  readonly reason: RefusalReason
  readonly detail: string
}

export type Assessment = Approved | Refused

const refuse = (reason: RefusalReason, detail: string): Refused => ({ _tag: "Refused", reason, detail })

const outsideCollar = (price: Decimal, last: Decimal, collarBps: number): boolean =>
  price.minus(last).abs().gt(last.mul(collarBps).mul(ONE_BPS))

export const assess = (intent: PlaceIntent, ctx: RiskContext, limits: RiskLimits): Assessment => {
  if (ctx.placementsBlocked !== undefined) return refuse("placements-blocked", ctx.placementsBlocked)
  if (limits.dailyLossLimit !== undefined && ctx.dailyPnl.lte(limits.dailyLossLimit.neg())) {
    const shown = ctx.pair === undefined ? atPlaces(ctx.dailyPnl, 8) : atIncrement(ctx.dailyPnl, ctx.pair.tickSize)
    return refuse("kill-switch", `the day's PnL ${shown} reached the daily loss limit ${limits.dailyLossLimit.toFixed()}`)
  }
  if (ctx.tagInUse) return refuse("tag-in-use", `the strategy already has an unfinished order tagged ${intent.tag}`)
  const pair = ctx.pair
  if (pair === undefined) return refuse("unknown-pair", `${intent.symbol} is not listed by exchange-info`)
  if (pair.status !== "trading") return refuse("pair-not-trading", `${intent.symbol} is ${pair.status}`)
  if (limits.maxOpenOrders !== undefined && ctx.openOrders >= limits.maxOpenOrders) {
    return refuse("open-order-cap", `the strategy has ${ctx.openOrders} open orders, the cap is ${limits.maxOpenOrders}`)
  }

  let order: ApprovedOrder
  let notional: Decimal
  let lock: Approved["lock"]
  if (intent.type === "market") {
    if (!Number.isInteger(intent.maxSlippageBps) || intent.maxSlippageBps < MAX_SLIPPAGE_BPS.min || intent.maxSlippageBps > MAX_SLIPPAGE_BPS.max) {
      return refuse("invalid-amount", `maxSlippageBps must be an integer from ${MAX_SLIPPAGE_BPS.min} to ${MAX_SLIPPAGE_BPS.max}`)
    }
    if (intent.side === "buy") {
      if (!intent.quoteOrderQty.isFinite() || intent.quoteOrderQty.lte(0)) return refuse("invalid-amount", "quoteOrderQty must be positive")
      notional = intent.quoteOrderQty
      order = { symbol: pair.symbol, side: "buy", type: "market", quoteOrderQty: intent.quoteOrderQty, maxSlippageBps: intent.maxSlippageBps }
      lock = { asset: pair.quote, amount: intent.quoteOrderQty }
    } else {
      const baseQty = quantize(intent.baseQty, pair.stepSize, "down")
      if (baseQty.lte(0) || baseQty.lt(pair.minBaseQty)) {
        return refuse("below-min-qty", `baseQty ${baseQty.toFixed()} after the step ${pair.stepSize.toFixed()} is below ${pair.minBaseQty.toFixed()}`)
      }
      if (ctx.lastPrice === undefined) return refuse("no-last-price", `no last price for ${pair.symbol} to value a market sell`)
      notional = baseQty.mul(ctx.lastPrice)
      order = { symbol: pair.symbol, side: "sell", type: "market", baseQty, maxSlippageBps: intent.maxSlippageBps }
      lock = { asset: pair.base, amount: baseQty }
    }
  } else {
    const baseQty = quantize(intent.baseQty, pair.stepSize, "down")
    // Round the price toward the cautious side: a buy never pays more, a sell never takes less than asked.
    const limitPrice = quantize(intent.limitPrice, pair.tickSize, intent.side === "buy" ? "floor" : "ceil")
    if (!intent.baseQty.isFinite() || !intent.limitPrice.isFinite() || limitPrice.lte(0)) {
      return refuse("invalid-amount", "baseQty and limitPrice must be positive")
    }
    if (baseQty.lte(0) || baseQty.lt(pair.minBaseQty)) {
      return refuse("below-min-qty", `baseQty ${baseQty.toFixed()} after the step ${pair.stepSize.toFixed()} is below ${pair.minBaseQty.toFixed()}`)
    }
    notional = baseQty.mul(limitPrice)
    if (intent.type === "stop-limit") {
      const stopPrice = quantize(intent.stopPrice, pair.tickSize, "halfEven")
      if (stopPrice.lte(0)) return refuse("invalid-amount", "stopPrice must be positive")
      order = { symbol: pair.symbol, side: intent.side, type: "stop-limit", baseQty, limitPrice, stopPrice }
    } else {
      order = { symbol: pair.symbol, side: intent.side, type: "limit", baseQty, limitPrice }
    }
    lock = intent.side === "buy" ? { asset: pair.quote, amount: notional } : { asset: pair.base, amount: baseQty }
    if (limits.priceCollarBps !== undefined) {
      if (ctx.lastPrice === undefined) return refuse("no-last-price", `no last price for ${pair.symbol} to check the price collar`)
      for (const price of [limitPrice, order.stopPrice]) {
        if (price !== undefined && outsideCollar(price, ctx.lastPrice, limits.priceCollarBps)) {
          return refuse(
            "price-collar",
            `${price.toFixed()} is more than ${limits.priceCollarBps} bps from the last price ${ctx.lastPrice.toFixed()}`
          )
        }
      }
    }
  }
  // Shown at the exchange's precision: a notional is a product and a free balance a difference of them.
  const inQuote = (value: Decimal) => atIncrement(value, pair.tickSize)
  const inLock = (value: Decimal) => (lock.asset === pair.quote ? inQuote(value) : atIncrement(value, pair.stepSize))
  if (notional.lt(pair.minNotional)) {
    return refuse("below-min-notional", `notional ${inQuote(notional)} is below ${pair.minNotional.toFixed()}`)
  }
  if (limits.maxOrderNotional !== undefined && notional.gt(limits.maxOrderNotional)) {
    return refuse("order-notional-cap", `notional ${inQuote(notional)} is above the per-order cap ${limits.maxOrderNotional.toFixed()}`)
  }
  if (limits.maxStrategyNotional !== undefined && ctx.openNotional.plus(notional).gt(limits.maxStrategyNotional)) {
    return refuse(
      "strategy-notional-cap",
      `open notional ${inQuote(ctx.openNotional)} plus ${inQuote(notional)} is above the strategy cap ${limits.maxStrategyNotional.toFixed()}`
    )
  }
  if (ctx.allocation !== undefined) {
    const free = ctx.allocation.free(lock.asset)
    if (free.lt(lock.amount)) {
      return refuse(
        "allocation-exceeded",
        `needs ${inLock(lock.amount)} ${lock.asset}, the instance's allocation has ${inLock(Decimal.max(free, ZERO))} ${lock.asset} free of ${ctx.allocation.allocated(lock.asset).toFixed()} ${lock.asset} allocated (raise strategies[].allocation.${lock.asset} or trade smaller)`
      )
    }
  }
  const available = ctx.available(lock.asset)
  if (available.lt(lock.amount)) {
    return refuse("insufficient-balance", `needs ${inLock(lock.amount)} ${lock.asset}, ${inLock(Decimal.max(available, ZERO))} is free`)
  }
  return { _tag: "Approved", order, notional, lock }
}
