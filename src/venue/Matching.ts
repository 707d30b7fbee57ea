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
import { compact, compare, Decimal, divideDown, min, plus, ZERO } from "../domain/Decimal.js"
import { RejectCode, type Liquidity, type OrderKind, type Side } from "../svc/Dialect.js"
import { BOOK_LEVELS, BookSide, levelSpacing } from "./Book.js"
import { Fifo } from "./Fifo.js"
import { FillLog } from "./FillLog.js"
import { planMarket } from "./MarketPlan.js"
import { byPlacement, type EngineOrder, type VenueFill, type OrderView, type PairSpec, type PairStatus, type PlaceRequest, type BalanceRow, view } from "./Orders.js"
import { placementProblem, type Refusal, refuse, RefusalCode } from "./PlaceRules.js"
import type { VenueCandle } from "./PricePath.js"
import { restingOrders, stopOrders, stopReached, type Waiting } from "./Waiting.js"

// Test support still reads these two from the engine.
export type { PairSpec } from "./Orders.js"
export type { VenueCandle } from "./PricePath.js"

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

export type PlaceResult = { readonly ok: true; readonly clientOrderId: string } | Refusal
export type CancelResult = { readonly ok: true; readonly clientOrderId: string; readonly kind: OrderKind } | Refusal

interface Wallet {
  free: Decimal
  locked: Decimal
}

interface Account {
  readonly wallets: Map<string, Wallet>
  /** Orders not ended yet, per symbol, each in placement order: what open orders are read from. */
  readonly open: Map<string, Map<string, EngineOrder>>
  /** Ended orders in the order they ended, so the oldest are forgotten first. */
  readonly ended: Fifo<EngineOrder>
  /** Fills, oldest first (and so in `seq` order). */
  readonly fills: FillLog
}

const TWO = new Decimal(2)

/** How often, in engine time, ended orders and fills are checked for their age. */
const FORGET_EVERY_MS = 1000

/** The book sides orders last walked, kept while the pair and the price stay the same. */
interface BookCache {
  readonly pair: PairSpec
  readonly price: Decimal
  readonly spacing: Decimal
  asks?: BookSide
  bids?: BookSide
}

export class MatchingEngine {
  private readonly pairsBySymbol = new Map<string, PairSpec>()
  private readonly accounts = new Map<number, Account>()
  private readonly orders = new Map<string, EngineOrder>()
  /** Accepted, not yet settled; in acceptance order. */
  private unsettled: Array<EngineOrder> = []
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
      account = { wallets: new Map(), open: new Map(), ended: new Fifo(), fills: new FillLog(this.retention?.terminalCount ?? Number.POSITIVE_INFINITY) }
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
    const problem = placementProblem(pair, request, this.prices.get(pair.symbol))
    if (problem !== undefined) return problem
    this.orderSeq += 1
    const clientOrderId = `co_${this.idPrefix}${String(this.orderSeq).padStart(10, "0")}`
    const order: EngineOrder = {
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
    const due: Array<EngineOrder> = []
    const waiting: Array<EngineOrder> = []
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

  private settle(order: EngineOrder, nowMs: number): void {
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

  private reject(order: EngineOrder, code: string): void {
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
  private ended(order: EngineOrder): void {
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
      account.fills.forgetUntil(endedBy)
    }
  }

  private lock(order: EngineOrder): boolean {
    const amount = order.side === "buy" ? order.baseQty!.mul(order.limitPrice!) : order.baseQty!
    const wallet = this.wallet(order.uid, order.side === "buy" ? order.pair.quote : order.pair.base)
    if (compare(wallet.free, amount) < 0) return false
    wallet.free = wallet.free.sub(amount)
    wallet.locked = wallet.locked.add(amount)
    order.locked = amount
    return true
  }

  private release(order: EngineOrder): void {
    if (order.locked.isZero()) return
    const wallet = this.wallet(order.uid, order.side === "buy" ? order.pair.quote : order.pair.base)
    wallet.locked = wallet.locked.sub(order.locked)
    wallet.free = wallet.free.add(order.locked)
    order.locked = ZERO
  }

  /** A limit order (or a triggered stop) reaching the book: take what its price reaches, rest the remainder. */
  private arrive(order: EngineOrder, nowMs: number): void {
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

  private trigger(order: EngineOrder, nowMs: number): void {
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

  private settleMarket(order: EngineOrder, nowMs: number): void {
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
  private fill(order: EngineOrder, baseQty: Decimal, price: Decimal, liquidity: Liquidity, nowMs: number): void {
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
    order.filledBaseQty = plus(order.filledBaseQty, baseQty)
    order.filledQuoteQty = plus(order.filledQuoteQty, quoteQty)
    order.updatedAt = nowMs
    if (order.baseQty !== null && compare(order.filledBaseQty, order.baseQty) === 0) {
      order.kind = "fill"
      // Anything still held (rounding cannot leave any, but a lock must never leak) goes back.
      this.release(order)
      this.ended(order)
    }
    this.fillSeq += 1
    const record: VenueFill = {
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
    this.account(order.uid).fills.push(record)
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
  private makerFill(order: EngineOrder, price: Decimal, nowMs: number): boolean {
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
  onCandle(symbol: string, candle: VenueCandle, nowMs: number): void {
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
    const orders: Array<EngineOrder> = []
    for (const ofSymbol of open.values()) for (const order of ofSymbol.values()) orders.push(order)
    return orders.sort(byPlacement).map(view)
  }

  /** One page of fills, newest first, older than the fill `beforeSeq` when given. */
  fills(uid: number, page: { readonly symbol?: string; readonly limit: number; readonly beforeSeq?: number }): {
    readonly fills: ReadonlyArray<VenueFill>
    readonly hasOlder: boolean
  } {
    return this.account(uid).fills.page(page)
  }

  /** Every order of an account still kept, in placement order (for tests that count orders). */
  allOrders(uid: number): ReadonlyArray<OrderView> {
    const account = this.account(uid)
    const orders = account.ended.toArray()
    for (const ofSymbol of account.open.values()) for (const order of ofSymbol.values()) orders.push(order)
    return orders.sort(byPlacement).map(view)
  }

  /** The account's fills after the fill `seq` (those a reader that has seen up to it has not), oldest first. */
  fillsAfter(uid: number, seq: number): ReadonlyArray<VenueFill> {
    return this.account(uid).fills.after(seq)
  }

  /** Every fill of an account still kept, oldest first. */
  allFills(uid: number): ReadonlyArray<VenueFill> {
    return this.account(uid).fills.all()
  }
}

const isResting = (order: EngineOrder): boolean => order.kind === "resting"
