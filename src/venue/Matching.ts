/**
 * Matching and settlement: the whole trading logic of svc-venue as one synchronous,
 * deterministic module. No I/O, no Effect, no wall clock — time comes in as `nowMs`
 * — so the backtester runs exactly the same rules in-process.
 *
 * Rules (docs/venue.md, "Matching rules"):
 * - `place` validates and accepts an order (kind `pending`); it settles once
 *   `settleDelayMs` has passed, at the next `settleDue`.
 * - Settlement locks funds (limit and stop-limit) or checks them (market); a pair
 *   that is halted rejects with SPOT_HALTED, missing funds with SPOT_INSUFFICIENT_FUNDS.
 * - A market order walks the synthetic book and fills completely within
 *   `maxSlippageBps` of the tape price, or is rejected whole with SPOT_SLIPPAGE_EXCEEDED.
 * - A limit order takes the book levels its price reaches (taker), the rest rests and
 *   fills as maker at its limit price when the tape crosses it: fully when the tape
 *   passes the price, half the remainder when the tape only touches it.
 * - A stop-limit order stays pending until the tape reaches `stopPrice`, then acts as
 *   a limit order.
 * - Fees: the received asset pays the maker or taker rate (a buy pays in base, a sell
 *   in quote).
 * - With a retention, an ended order and a fill are forgotten once they are older
 *   than `terminalMs`, or once the account has `terminalCount` newer ones; reads then
 *   answer as for an id never given out. Without one everything is kept.
 */
import { compact, compare, Decimal, divideDown, isMultipleOf, min, ONE_BPS, sign, toBounds, toFloat, ZERO } from "../domain/Decimal.js"
import type { OrderTerms } from "../domain/OrderTerms.js"
import { RejectCode, type Liquidity, type OrderKind, type Side, MAX_SLIPPAGE_BPS } from "../svc/Dialect.js"
import { BOOK_LEVELS, type BookShape, BookSide, divideDownFast, ESTIMATE_ERROR, levelSpacing } from "./Book.js"
import { ErrorCode } from "../svc/ErrorCodes.js"
import { Fifo } from "./Fifo.js"

export type PairStatus = "trading" | "halted"

export interface PairSpec extends BookShape {
  readonly symbol: string
  readonly base: string
  readonly quote: string
  readonly minBaseQty: Decimal
  readonly minNotional: Decimal
  readonly status: PairStatus
}

export interface Fees {
  readonly maker: Decimal
  readonly taker: Decimal
}

/** How much history the engine keeps: ended orders (filled, rejected, cancelled) and fills. */
export interface Retention {
  /** Forgotten this long after the order ended, or the fill happened. */
  readonly terminalMs: number
  /** Per account, at most this many ended orders and this many fills; the oldest are forgotten first. */
  readonly terminalCount: number
}

export interface EngineOptions {
  readonly pairs: ReadonlyArray<PairSpec>
  readonly fees: Fees
  /** Time between acceptance and settlement. */
  readonly settleDelayMs: number
  /** Starting tape price per symbol. */
  readonly prices?: Readonly<Record<string, Decimal>>
  /**
   * Put into every clientOrderId and fillId after the `co_`/`fl_` kind: an exchange never hands
   * out an id twice, so a venue process that starts empty must not repeat the last one's ids.
   */
  readonly idPrefix?: string
  /** What history to keep; everything when absent (a backtest reads each of its orders back). */
  readonly retention?: Retention
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

/** A request the engine refuses outright (nothing is accepted); status is the HTTP status svc-venue answers with. */
export interface Refusal {
  readonly ok: false
  readonly status: 400 | 404 | 409
  readonly code: string
  readonly msg: string
  readonly field?: string
  readonly reason?: string
}

export type PlaceResult = { readonly ok: true; readonly clientOrderId: string } | Refusal
export type CancelResult = { readonly ok: true; readonly clientOrderId: string; readonly kind: OrderKind } | Refusal

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

export interface Fill {
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

export interface Candle {
  readonly openTimeMs: number
  readonly open: Decimal
  readonly high: Decimal
  readonly low: Decimal
  readonly close: Decimal
  readonly volume: Decimal
}

interface Order extends OrderTerms {
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

interface Wallet {
  free: Decimal
  locked: Decimal
}

interface Account {
  readonly wallets: Map<string, Wallet>
  /** Orders not ended yet, per symbol, each in placement order: what open orders are read from. */
  readonly open: Map<string, Map<string, Order>>
  /** Ended orders in the order they ended, so the oldest are forgotten first. */
  readonly ended: Fifo<Order>
  /** Fills, oldest first (and so in `seq` order). */
  readonly fills: Fifo<Fill>
}

const refuse = (status: Refusal["status"], code: string, msg: string, field?: string, reason?: string): Refusal => ({
  ok: false,
  status,
  code,
  msg,
  ...(field === undefined ? {} : { field }),
  ...(reason === undefined ? {} : { reason })
})

const TWO = new Decimal(2)

/** How often, in engine time, ended orders and fills are checked for their age. */
const FORGET_EVERY_MS = 1000

const byPlacement = (a: Order, b: Order): number => a.seq - b.seq

/**
 * Orders of one symbol waiting for the tape — resting limit orders or stops not yet
 * triggered — in time priority, with the bounds of the prices that wake any of them,
 * so a price that wakes none costs two comparisons and no allocation.
 */
class Waiting {
  readonly orders: Array<Order> = []
  /** The highest wake price among orders woken by a price at or below it. */
  private highestBelow: Decimal | null = null
  /** The lowest wake price among orders woken by a price at or above it. */
  private lowestAbove: Decimal | null = null
  /** An order left: the bounds may be too wide and are worked out again on the next read. */
  private stale = false

  constructor(
    private readonly wakePrice: (order: Order) => Decimal,
    private readonly wakesAbove: (order: Order) => boolean
  ) {}

  push(order: Order): void {
    this.orders.push(order)
    if (!this.stale) this.widen(order)
  }

  remove(order: Order): void {
    const at = this.orders.indexOf(order)
    if (at === -1) return
    this.orders.splice(at, 1)
    this.stale = true
  }

  /** Keeps only the orders `keep` accepts, in their order. */
  retain(keep: (order: Order) => boolean): void {
    const orders = this.orders
    let kept = 0
    for (let i = 0; i < orders.length; i++) {
      const order = orders[i]!
      if (keep(order)) orders[kept++] = order
    }
    if (kept === orders.length) return
    orders.length = kept
    this.stale = true
  }

  /** Whether `price` can wake any order; false means no order needs looking at. */
  mayWake(price: Decimal): boolean {
    if (this.orders.length === 0) return false
    if (this.stale) {
      this.highestBelow = null
      this.lowestAbove = null
      for (const order of this.orders) this.widen(order)
      this.stale = false
    }
    return (this.highestBelow !== null && compare(price, this.highestBelow) <= 0) || (this.lowestAbove !== null && compare(price, this.lowestAbove) >= 0)
  }

  private widen(order: Order): void {
    const wake = this.wakePrice(order)
    if (this.wakesAbove(order)) {
      if (this.lowestAbove === null || compare(wake, this.lowestAbove) < 0) this.lowestAbove = wake
    } else if (this.highestBelow === null || compare(wake, this.highestBelow) > 0) {
      this.highestBelow = wake
    }
  }
}

/** A resting buy fills when the price comes down to its limit, a sell when it comes up to it. */
const restingOrders = (): Waiting =>
  new Waiting(
    (order) => order.limitPrice!,
    (order) => order.side === "sell"
  )

/** A buy stop triggers when the price rises to its stop price, a sell stop when it falls to it. */
const stopOrders = (): Waiting =>
  new Waiting(
    (order) => order.stopPrice!,
    (order) => order.side === "buy"
  )

/** The book sides orders last walked, kept while the pair and the price stay the same. */
interface BookCache {
  readonly pair: PairSpec
  readonly price: Decimal
  readonly spacing: Decimal
  asks?: BookSide
  bids?: BookSide
}

/** Error codes of placement and cancel refusals (HTTP 400/404/409). */
export const RefusalCode = {
  invalidParameter: "INVALID_PARAMETER",
  unknownSymbol: "UNKNOWN_SYMBOL",
  orderNotFound: ErrorCode.orderNotFound,
  orderNotOpen: ErrorCode.orderNotOpen
} as const

// Validation steps are module functions, not closures made per placement: placing is a hot path of a backtest.
const positiveProblem = (field: string, value: Decimal, step: Decimal, stepName: string): Refusal | undefined => {
  if (!value.isFinite() || sign(value) <= 0) return refuse(400, RefusalCode.invalidParameter, `${field} must be greater than 0`, field, "not-positive")
  if (!isMultipleOf(value, step)) {
    return refuse(400, RefusalCode.invalidParameter, `${field} must be a multiple of the ${stepName} ${step.toFixed()}`, field, stepName === "tick size" ? "tick-size" : "step-size")
  }
  return undefined
}

const notionalProblem = (pair: PairSpec, value: Decimal): Refusal | undefined =>
  compare(value, pair.minNotional) < 0
    ? refuse(400, RefusalCode.invalidParameter, `order value ${value.toFixed()} is below the minimum notional ${pair.minNotional.toFixed()}`, "baseQty", "below-min-notional")
    : undefined

const baseQtyProblem = (pair: PairSpec, value: Decimal): Refusal | undefined =>
  positiveProblem("baseQty", value, pair.stepSize, "step size") ??
  (compare(value, pair.minBaseQty) < 0 ? refuse(400, RefusalCode.invalidParameter, `baseQty is below the minimum ${pair.minBaseQty.toFixed()}`, "baseQty", "below-min-base-qty") : undefined)

export class MatchingEngine {
  private readonly pairsBySymbol = new Map<string, PairSpec>()
  private readonly accounts = new Map<number, Account>()
  private readonly orders = new Map<string, Order>()
  /** Accepted, not yet settled; in acceptance order. */
  private unsettled: Array<Order> = []
  /** Per symbol: settled limit orders on the book, and stops waiting for their trigger, in time priority. */
  private readonly resting = new Map<string, Waiting>()
  private readonly stops = new Map<string, Waiting>()
  private readonly books = new Map<string, BookCache>()
  private readonly prices = new Map<string, Decimal>()
  private readonly halted = new Set<string>()
  private orderSeq = 0
  private fillSeq = 0
  readonly fees: Fees
  readonly settleDelayMs: number
  private readonly idPrefix: string
  private readonly retention: Retention | undefined
  /** Engine time of the next look for history past its age. */
  private forgetDueAt = Number.NEGATIVE_INFINITY

  constructor(options: EngineOptions) {
    for (const pair of options.pairs) this.addPair(pair)
    for (const [symbol, price] of Object.entries(options.prices ?? {})) this.prices.set(symbol, price)
    this.fees = options.fees
    this.settleDelayMs = options.settleDelayMs
    this.idPrefix = options.idPrefix ?? ""
    this.retention = options.retention
  }

  // ---- pairs and prices -------------------------------------------------------

  addPair(pair: PairSpec): void {
    this.pairsBySymbol.set(pair.symbol, pair)
    if (pair.status === "halted") this.halted.add(pair.symbol)
    if (!this.resting.has(pair.symbol)) this.resting.set(pair.symbol, restingOrders())
    if (!this.stops.has(pair.symbol)) this.stops.set(pair.symbol, stopOrders())
  }

  pair(symbol: string): PairSpec | undefined {
    return this.pairsBySymbol.get(symbol)
  }

  pairs(): ReadonlyArray<PairSpec> {
    return [...this.pairsBySymbol.values()]
  }

  setPairStatus(symbol: string, status: PairStatus): boolean {
    const pair = this.pairsBySymbol.get(symbol)
    if (pair === undefined) return false
    this.pairsBySymbol.set(symbol, { ...pair, status })
    if (status === "halted") this.halted.add(symbol)
    else this.halted.delete(symbol)
    return true
  }

  price(symbol: string): Decimal | undefined {
    return this.prices.get(symbol)
  }

  // ---- balances ---------------------------------------------------------------

  private account(uid: number): Account {
    let account = this.accounts.get(uid)
    if (account === undefined) {
      account = { wallets: new Map(), open: new Map(), ended: new Fifo(), fills: new Fifo() }
      this.accounts.set(uid, account)
    }
    return account
  }

  private wallet(uid: number, asset: string): Wallet {
    const wallets = this.account(uid).wallets
    let wallet = wallets.get(asset)
    if (wallet === undefined) {
      wallet = { free: ZERO, locked: ZERO }
      wallets.set(asset, wallet)
    }
    return wallet
  }

  openAccount(uid: number): void {
    this.account(uid)
  }

  /** Sets the free part of an asset (the website's deposit or adjustment); locked funds stay held. */
  setBalance(uid: number, asset: string, free: Decimal): void {
    this.wallet(uid, asset).free = free
  }

  balances(uid: number): ReadonlyArray<BalanceRow> {
    const rows: Array<BalanceRow> = []
    for (const [asset, wallet] of this.account(uid).wallets) rows.push({ asset, free: wallet.free, locked: wallet.locked })
    return rows
  }

  // ---- orders -----------------------------------------------------------------

  place(uid: number, request: PlaceRequest, nowMs: number): PlaceResult {
    const pair = this.pairsBySymbol.get(request.symbol)
    if (pair === undefined) return refuse(400, RefusalCode.unknownSymbol, `unknown symbol ${request.symbol}`, "symbol", "unknown-symbol")
    const problem = this.validate(pair, request)
    if (problem !== undefined) return problem
    this.orderSeq += 1
    const clientOrderId = `co_${this.idPrefix}${String(this.orderSeq).padStart(10, "0")}`
    const order: Order = {
      seq: this.orderSeq,
      clientOrderId,
      uid,
      pair,
      side: request.side,
      type: request.type,
      baseQty: "baseQty" in request ? request.baseQty : null,
      quoteOrderQty: "quoteOrderQty" in request ? request.quoteOrderQty : null,
      limitPrice: request.type === "market" ? null : request.limitPrice,
      stopPrice: request.type === "stop-limit" ? request.stopPrice : null,
      maxSlippageBps: request.type === "market" ? request.maxSlippageBps : null,
      createdAt: nowMs,
      settleAt: nowMs + this.settleDelayMs,
      kind: "pending",
      code: null,
      settled: false,
      filledBaseQty: ZERO,
      filledQuoteQty: ZERO,
      avgPrice: null,
      locked: ZERO,
      updatedAt: nowMs
    }
    this.orders.set(clientOrderId, order)
    const open = this.account(uid).open
    let ofSymbol = open.get(pair.symbol)
    if (ofSymbol === undefined) {
      ofSymbol = new Map()
      open.set(pair.symbol, ofSymbol)
    }
    ofSymbol.set(clientOrderId, order)
    this.unsettled.push(order)
    return { ok: true, clientOrderId }
  }

  private validate(pair: PairSpec, request: PlaceRequest): Refusal | undefined {
    switch (request.type) {
      case "limit":
        return (
          baseQtyProblem(pair, request.baseQty) ??
          positiveProblem("limitPrice", request.limitPrice, pair.tickSize, "tick size") ??
          notionalProblem(pair, request.baseQty.mul(request.limitPrice))
        )
      case "stop-limit":
        return (
          baseQtyProblem(pair, request.baseQty) ??
          positiveProblem("limitPrice", request.limitPrice, pair.tickSize, "tick size") ??
          positiveProblem("stopPrice", request.stopPrice, pair.tickSize, "tick size") ??
          notionalProblem(pair, request.baseQty.mul(request.limitPrice))
        )
      case "market": {
        const bps = request.maxSlippageBps
        if (!Number.isInteger(bps) || bps < MAX_SLIPPAGE_BPS.min || bps > MAX_SLIPPAGE_BPS.max) {
          return refuse(400, RefusalCode.invalidParameter, `maxSlippageBps must be an integer from ${MAX_SLIPPAGE_BPS.min} to ${MAX_SLIPPAGE_BPS.max}`, "maxSlippageBps", "out-of-range")
        }
        if (request.side === "buy") {
          const quoteQty = request.quoteOrderQty
          if (!quoteQty.isFinite() || sign(quoteQty) <= 0) {
            return refuse(400, RefusalCode.invalidParameter, "quoteOrderQty must be greater than 0", "quoteOrderQty", "not-positive")
          }
          return compare(quoteQty, pair.minNotional) < 0
            ? refuse(400, RefusalCode.invalidParameter, `quoteOrderQty is below the minimum notional ${pair.minNotional.toFixed()}`, "quoteOrderQty", "below-min-notional")
            : undefined
        }
        const price = this.prices.get(pair.symbol)
        return baseQtyProblem(pair, request.baseQty) ?? (price === undefined ? undefined : notionalProblem(pair, request.baseQty.mul(price)))
      }
    }
  }

  cancel(uid: number, clientOrderId: string, nowMs: number): CancelResult {
    const order = this.orders.get(clientOrderId)
    if (order === undefined || order.uid !== uid) {
      return refuse(404, RefusalCode.orderNotFound, "no order with this clientOrderId", "clientOrderId", "not-found")
    }
    // Cancelling twice answers like the first time: a client may retry a cancel whose answer it lost.
    if (order.kind === "cancelled") return { ok: true, clientOrderId, kind: order.kind }
    if (order.kind === "fill" || order.kind === "rejected") {
      return refuse(409, RefusalCode.orderNotOpen, `the order is already ${order.kind === "fill" ? "filled" : "rejected"}`, "clientOrderId", order.kind)
    }
    // A market order fills within its slippage bound or is rejected whole at settlement: it is never open to cancel.
    if (order.type === "market") {
      return refuse(409, RefusalCode.orderNotOpen, "a market order fills or is rejected as a whole; it cannot be cancelled", "clientOrderId", "market")
    }
    this.release(order)
    order.kind = "cancelled"
    order.updatedAt = nowMs
    this.unsettled = this.unsettled.filter((o) => o !== order)
    this.resting.get(order.pair.symbol)?.remove(order)
    this.stops.get(order.pair.symbol)?.remove(order)
    this.ended(order)
    return { ok: true, clientOrderId, kind: order.kind }
  }

  /**
   * Settles every accepted order whose settlement time has come; returns how many settled.
   * Every user of the engine calls this as its time passes, so history past its age is
   * forgotten here too.
   */
  settleDue(nowMs: number): number {
    if (nowMs >= this.forgetDueAt) this.forgetAged(nowMs)
    if (this.unsettled.length === 0) return 0
    const due: Array<Order> = []
    const waiting: Array<Order> = []
    for (const order of this.unsettled) (order.settleAt <= nowMs ? due : waiting).push(order)
    if (due.length === 0) return 0
    this.unsettled = waiting
    for (const order of due) this.settle(order, nowMs)
    return due.length
  }

  /** When the next accepted order will settle, if any is waiting. */
  nextSettlementAt(): number | undefined {
    let next: number | undefined
    for (const order of this.unsettled) if (next === undefined || order.settleAt < next) next = order.settleAt
    return next
  }

  private settle(order: Order, nowMs: number): void {
    order.settled = true
    order.updatedAt = nowMs
    if (this.halted.has(order.pair.symbol)) return this.reject(order, RejectCode.halted)
    if (order.type === "market") return this.settleMarket(order, nowMs)
    if (!this.lock(order)) return this.reject(order, RejectCode.insufficientFunds)
    if (order.type === "stop-limit") {
      this.stops.get(order.pair.symbol)?.push(order)
      const price = this.prices.get(order.pair.symbol)
      if (price !== undefined && stopReached(order, price)) this.trigger(order, nowMs)
      return
    }
    this.arrive(order, nowMs)
  }

  private reject(order: Order, code: string): void {
    order.kind = "rejected"
    order.code = code
    this.ended(order)
  }

  /**
   * An order reached a final kind: it leaves the open orders and joins the history, which
   * forgets its oldest order when the account holds more than the retention allows.
   * Called again for an order already ended (a market sell's last fill ends it before
   * its settlement does), it does nothing.
   */
  private ended(order: Order): void {
    const account = this.account(order.uid)
    if (account.open.get(order.pair.symbol)?.delete(order.clientOrderId) !== true) return
    account.ended.push(order)
    if (this.retention !== undefined && account.ended.length > this.retention.terminalCount) this.orders.delete(account.ended.shift()!.clientOrderId)
  }

  /** Forgets the ended orders and fills of every account that are older than the retention allows. */
  private forgetAged(nowMs: number): void {
    this.forgetDueAt = nowMs + FORGET_EVERY_MS
    if (this.retention === undefined) return
    const endedBy = nowMs - this.retention.terminalMs
    for (const account of this.accounts.values()) {
      for (let oldest = account.ended.peek(); oldest !== undefined && oldest.updatedAt <= endedBy; oldest = account.ended.peek()) {
        this.orders.delete(oldest.clientOrderId)
        account.ended.shift()
      }
      for (let oldest = account.fills.peek(); oldest !== undefined && oldest.time <= endedBy; oldest = account.fills.peek()) account.fills.shift()
    }
  }

  private lock(order: Order): boolean {
    const amount = order.side === "buy" ? order.baseQty!.mul(order.limitPrice!) : order.baseQty!
    const wallet = this.wallet(order.uid, order.side === "buy" ? order.pair.quote : order.pair.base)
    if (compare(wallet.free, amount) < 0) return false
    wallet.free = wallet.free.sub(amount)
    wallet.locked = wallet.locked.add(amount)
    order.locked = amount
    return true
  }

  private release(order: Order): void {
    if (order.locked.isZero()) return
    const wallet = this.wallet(order.uid, order.side === "buy" ? order.pair.quote : order.pair.base)
    wallet.locked = wallet.locked.sub(order.locked)
    wallet.free = wallet.free.add(order.locked)
    order.locked = ZERO
  }

  /** A limit order (or a triggered stop) reaching the book: take what its price reaches, rest the remainder. */
  private arrive(order: Order, nowMs: number): void {
    const price = this.prices.get(order.pair.symbol)
    if (price !== undefined) {
      const levels = this.book(order.pair, price, order.side)
      // The remainder is checked before the next level's price is read: a filled order reads no further level.
      for (let i = 0; ; i++) {
        const remaining = order.baseQty!.sub(order.filledBaseQty)
        if (remaining.isZero()) break
        const at = levels.priceAt(i)
        if (at === undefined || compare(at, order.limitPrice!) === (order.side === "buy" ? 1 : -1)) break
        this.fill(order, min(remaining, levels.level(i)!.baseQty), at, "taker", nowMs)
      }
    }
    if (order.kind !== "fill") {
      order.kind = "resting"
      this.resting.get(order.pair.symbol)?.push(order)
    }
  }

  private trigger(order: Order, nowMs: number): void {
    this.stops.get(order.pair.symbol)?.remove(order)
    this.arrive(order, nowMs)
  }

  /** The side of the synthetic book an order of `side` takes from. */
  private book(pair: PairSpec, price: Decimal, side: Side): BookSide {
    let cache = this.books.get(pair.symbol)
    if (cache === undefined || cache.pair !== pair || cache.price !== price) {
      cache = { pair, price, spacing: levelSpacing(pair, price) }
      this.books.set(pair.symbol, cache)
    }
    if (side === "buy") return (cache.asks ??= new BookSide(pair, price, "asks", BOOK_LEVELS, cache.spacing))
    return (cache.bids ??= new BookSide(pair, price, "bids", BOOK_LEVELS, cache.spacing))
  }

  private settleMarket(order: Order, nowMs: number): void {
    const pair = order.pair
    const price = this.prices.get(pair.symbol)
    if (order.side === "buy") {
      const quote = this.wallet(order.uid, pair.quote)
      if (compare(quote.free, order.quoteOrderQty!) < 0) return this.reject(order, RejectCode.insufficientFunds)
    } else {
      const base = this.wallet(order.uid, pair.base)
      if (compare(base.free, order.baseQty!) < 0) return this.reject(order, RejectCode.insufficientFunds)
    }
    if (price === undefined) return this.reject(order, RejectCode.slippageExceeded)
    const plan = planMarket(pair, order, price, this.book(pair, price, order.side))
    if (plan === undefined) return this.reject(order, RejectCode.slippageExceeded)
    for (const step of plan) this.fill(order, step.baseQty, step.price, "taker", nowMs)
    order.kind = "fill"
    this.ended(order)
  }

  /** Books one fill: moves funds (from the order's lock when it has one), charges the fee, records the fill. */
  private fill(order: Order, baseQty: Decimal, price: Decimal, liquidity: Liquidity, nowMs: number): void {
    const pair = order.pair
    const rate = liquidity === "maker" ? this.fees.maker : this.fees.taker
    // The fill record keeps its amounts as long as fills are retained: products are made compact
    // (see `compact`), or each would hold twice the memory it needs.
    const quoteQty = compact(baseQty.mul(price))
    const base = this.wallet(order.uid, pair.base)
    const quote = this.wallet(order.uid, pair.quote)
    let fee: Decimal
    let feeAsset: string
    if (order.side === "buy") {
      fee = compact(baseQty.mul(rate))
      feeAsset = pair.base
      if (order.limitPrice === null) {
        quote.free = quote.free.sub(quoteQty)
      } else {
        // The lock was taken at the limit price; a better price gives the difference back.
        const held = baseQty.mul(order.limitPrice)
        quote.locked = quote.locked.sub(held)
        quote.free = quote.free.add(held.sub(quoteQty))
        order.locked = order.locked.sub(held)
      }
      base.free = base.free.add(baseQty.sub(fee))
    } else {
      fee = compact(quoteQty.mul(rate))
      feeAsset = pair.quote
      if (order.limitPrice === null) {
        base.free = base.free.sub(baseQty)
      } else {
        base.locked = base.locked.sub(baseQty)
        order.locked = order.locked.sub(baseQty)
      }
      quote.free = quote.free.add(quoteQty.sub(fee))
    }
    // The first fill's price is its exact average; a later fill leaves the average to be worked out on read.
    order.avgPrice = order.filledBaseQty.isZero() ? price : null
    order.filledBaseQty = order.filledBaseQty.add(baseQty)
    order.filledQuoteQty = order.filledQuoteQty.add(quoteQty)
    order.updatedAt = nowMs
    if (order.baseQty !== null && compare(order.filledBaseQty, order.baseQty) === 0) {
      order.kind = "fill"
      // Anything still held (rounding cannot leave any, but a lock must never leak) goes back.
      this.release(order)
      this.ended(order)
    }
    this.fillSeq += 1
    const record: Fill = {
      seq: this.fillSeq,
      fillId: `fl_${this.idPrefix}${String(this.fillSeq).padStart(10, "0")}`,
      clientOrderId: order.clientOrderId,
      symbol: pair.symbol,
      side: order.side,
      liquidity,
      price,
      baseQty,
      quoteQty,
      fee,
      feeAsset,
      time: nowMs
    }
    const fills = this.account(order.uid).fills
    fills.push(record)
    if (this.retention !== undefined && fills.length > this.retention.terminalCount) fills.shift()
  }

  // ---- the tape ---------------------------------------------------------------

  /**
   * A new tape price: resting orders the price crosses fill as maker, then stops the
   * price reaches trigger. Orders that came to rest during this call wait for the next price.
   */
  onPrice(symbol: string, price: Decimal, nowMs: number): void {
    if (!this.pairsBySymbol.has(symbol)) return
    this.prices.set(symbol, price)
    if (this.halted.has(symbol)) return
    const resting = this.resting.get(symbol)
    if (resting !== undefined && resting.mayWake(price)) {
      let filled = false
      for (const order of resting.orders) if (this.makerFill(order, price, nowMs)) filled = true
      if (filled) resting.retain(isResting)
    }
    const stops = this.stops.get(symbol)
    if (stops !== undefined && stops.mayWake(price)) {
      for (const order of stops.orders.filter((o) => stopReached(o, price))) this.trigger(order, nowMs)
    }
  }

  /** Fills a resting order as maker if the price reaches its limit; says whether it filled. */
  private makerFill(order: Order, price: Decimal, nowMs: number): boolean {
    const limit = order.limitPrice!
    const side = compare(price, limit)
    const crossed = side === (order.side === "buy" ? -1 : 1)
    const touched = side === 0
    if (!crossed && !touched) return false
    const remaining = order.baseQty!.sub(order.filledBaseQty)
    let qty = remaining
    if (touched) {
      const half = divideDown(remaining, TWO, order.pair.stepSize)
      if (!half.isZero()) qty = half
    }
    this.fill(order, qty, limit, "maker", nowMs)
    return true
  }

  /** Feeds a candle as its price path: open, then the nearer extreme, the other extreme, close. */
  onCandle(symbol: string, candle: Candle, nowMs: number): void {
    if (this.resting.get(symbol)?.orders.length === 0 && this.stops.get(symbol)?.orders.length === 0) {
      // Nothing waits for the tape: only where the path ends matters.
      this.prices.set(symbol, candle.close)
      return
    }
    const rising = compare(candle.close, candle.open) >= 0
    this.onPrice(symbol, candle.open, nowMs)
    this.onPrice(symbol, rising ? candle.low : candle.high, nowMs)
    this.onPrice(symbol, rising ? candle.high : candle.low, nowMs)
    this.onPrice(symbol, candle.close, nowMs)
  }

  // ---- reads ------------------------------------------------------------------

  order(uid: number, clientOrderId: string): OrderView | undefined {
    const order = this.orders.get(clientOrderId)
    return order === undefined || order.uid !== uid ? undefined : view(order)
  }

  /** An order's kind and filled quantity without building its view: what a poller compares every step. */
  progress(uid: number, clientOrderId: string): { readonly kind: OrderKind; readonly filledBaseQty: Decimal } | undefined {
    const order = this.orders.get(clientOrderId)
    return order === undefined || order.uid !== uid ? undefined : order
  }

  /** Orders not yet terminal: accepted but unsettled, stops waiting, and resting orders; in placement order. */
  openOrders(uid: number, symbol?: string): ReadonlyArray<OrderView> {
    const open = this.account(uid).open
    if (symbol !== undefined) return [...(open.get(symbol)?.values() ?? [])].map(view)
    const orders: Array<Order> = []
    for (const ofSymbol of open.values()) for (const order of ofSymbol.values()) orders.push(order)
    return orders.sort(byPlacement).map(view)
  }

  /** One page of fills, newest first, older than the fill `beforeSeq` when given. */
  fills(uid: number, page: { readonly symbol?: string; readonly limit: number; readonly beforeSeq?: number }): {
    readonly fills: ReadonlyArray<Fill>
    readonly hasOlder: boolean
  } {
    const all = this.account(uid).fills
    const out: Array<Fill> = []
    let i = page.beforeSeq === undefined ? all.length - 1 : newestBefore(all, page.beforeSeq)
    for (; i >= 0 && out.length < page.limit; i--) {
      const fill = all.at(i)!
      if (page.symbol === undefined || fill.symbol === page.symbol) out.push(fill)
    }
    let hasOlder = false
    for (; i >= 0; i--) {
      if (page.symbol === undefined || all.at(i)!.symbol === page.symbol) {
        hasOlder = true
        break
      }
    }
    return { fills: out, hasOlder }
  }

  /** Every order of an account still kept, in placement order (for tests that count orders). */
  allOrders(uid: number): ReadonlyArray<OrderView> {
    const account = this.account(uid)
    const orders = account.ended.toArray()
    for (const ofSymbol of account.open.values()) for (const order of ofSymbol.values()) orders.push(order)
    return orders.sort(byPlacement).map(view)
  }

  /** The account's fills after the fill `seq` (those a reader that has seen up to it has not), oldest first. */
  fillsAfter(uid: number, seq: number): ReadonlyArray<Fill> {
    const all = this.account(uid).fills
    let from = all.length
    while (from > 0 && all.at(from - 1)!.seq > seq) from--
    if (from === all.length) return NO_FILLS
    const after: Array<Fill> = []
    for (let i = from; i < all.length; i++) after.push(all.at(i)!)
    return after
  }

  /** Every fill of an account still kept, oldest first. */
  allFills(uid: number): ReadonlyArray<Fill> {
    return this.account(uid).fills.toArray()
  }
}

const NO_FILLS: ReadonlyArray<Fill> = []

const isResting = (order: Order): boolean => order.kind === "resting"

/** Index of the newest fill older than the fill `seq` (-1 for none): fills are kept in `seq` order. */
const newestBefore = (fills: Fifo<Fill>, seq: number): number => {
  let low = 0
  let high = fills.length
  while (low < high) {
    const mid = (low + high) >>> 1
    if (fills.at(mid)!.seq < seq) low = mid + 1
    else high = mid
  }
  return low - 1
}

const stopReached = (order: Order, price: Decimal): boolean =>
  compare(price, order.stopPrice!) !== (order.side === "buy" ? -1 : 1)

/** The candle's price path: bullish candles dip first, bearish ones spike first (`onCandle` walks the same path). */
export const candlePath = (candle: Candle): ReadonlyArray<Decimal> =>
  compare(candle.close, candle.open) >= 0
    ? [candle.open, candle.low, candle.high, candle.close]
    : [candle.open, candle.high, candle.low, candle.close]

interface PlannedFill {
  readonly price: Decimal
  readonly baseQty: Decimal
}

/**
 * The fills of a market order against the book, or undefined when it cannot fill
 * completely within its slippage bound (the order is then rejected as a whole).
 */
const planMarket = (pair: PairSpec, order: Order, reference: Decimal, levels: BookSide): ReadonlyArray<PlannedFill> | undefined => {
  const plan: Array<PlannedFill> = []
  if (order.side === "buy") {
    const bound = new SlippageBound(reference, order.maxSlippageBps!, "above")
    let quoteLeft = order.quoteOrderQty!
    for (let i = 0, level = levels.level(0); level !== undefined; level = levels.level(++i)) {
      const affordable = divideDownFast(quoteLeft, level.price, pair.stepSize)
      // The rest of the quote cannot buy one more step: the order is complete.
      if (affordable.isZero()) return plan.length === 0 ? undefined : plan
      if (bound.compare(level.price) > 0) return undefined
      const qty = min(affordable, level.baseQty)
      plan.push({ price: level.price, baseQty: qty })
      if (compare(qty, affordable) === 0) return plan
      quoteLeft = quoteLeft.sub(qty.mul(level.price))
    }
    return undefined
  }
  const bound = new SlippageBound(reference, order.maxSlippageBps!, "below")
  let baseLeft = order.baseQty!
  for (let i = 0, level = levels.level(0); level !== undefined; level = levels.level(++i)) {
    if (baseLeft.isZero()) break
    if (bound.compare(level.price) < 0) return undefined
    const qty = min(baseLeft, level.baseQty)
    plan.push({ price: level.price, baseQty: qty })
    baseLeft = baseLeft.sub(qty)
    // Complete: the next level is not worked out.
    if (baseLeft.isZero()) return plan
  }
  return baseLeft.isZero() ? plan : undefined
}

/**
 * How far a market order may walk the book: `maxSlippageBps` of the reference price above it (a
 * buy) or below it (a sell). Levels are compared with a double estimate of the bound; the exact
 * bound is worked out only for a level whose price lies too near it for the estimate to tell.
 */
class SlippageBound {
  private readonly estimate: number
  private readonly margin: number
  private exact: Decimal | undefined

  constructor(
    private readonly reference: Decimal,
    private readonly bps: number,
    private readonly side: "above" | "below"
  ) {
    const price = toFloat(reference)
    const slip = price * bps * 1e-4
    this.estimate = side === "above" ? price + slip : price - slip
    this.margin = Math.abs(price) * ESTIMATE_ERROR
  }

  /** -1, 0 or 1 as `price` is below, at or above the bound. */
  compare(price: Decimal): number {
    const gap = toFloat(price) - this.estimate
    if (gap > this.margin) return 1
    if (gap < -this.margin) return -1
    if (this.exact === undefined) {
      const slip = this.reference.mul(this.bps).mul(ONE_BPS)
      this.exact = this.side === "above" ? this.reference.add(slip) : this.reference.sub(slip)
    }
    return compare(price, this.exact)
  }
}

const view = (order: Order): OrderView => ({
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
