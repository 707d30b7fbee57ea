/**
 * One backtest run: candles drive the strategy's handlers and svc-venue's own
 * matching and settlement module (`MatchingEngine`), in-process, with the venue's
 * order state machine, settle delay, fees, synthetic book, slippage and reject
 * codes. Synchronous, no Effect, no I/O: one run is a pure function of its setup.
 *
 * Time, for each candle with open time `t` and close time `T = t + interval`:
 * 1. orders accepted earlier settle at their settlement time (acceptance + settle
 *    delay) if that falls before `T`, against the tape price of that moment (the
 *    previous close): market orders fill or are rejected, limit orders take the book
 *    their price reaches and rest, stops start waiting for their trigger;
 * 2. the candle's price path is played (open, the nearer extreme, the other extreme,
 *    close — the venue's `candlePath`): resting orders fill as maker at their limit
 *    price (the whole remainder when the path passes the price, half when it only
 *    touches it), stops trigger; these fills carry time `T`;
 * 3. at `T` the strategy hears, in this order: each new fill (`onFill`), each order
 *    whose kind or filled quantity changed (`onOrderUpdate`), the closed candle
 *    (`onCandle`), a ticker at the close (`onTicker`), and the `schedule` timer for
 *    every minute in (t, T] that its cron expression matches (`onTimer`);
 * 4. intents are placed or cancelled at `T`; a refused placement is answered at
 *    once with an order update of kind `refused` and the venue's code, a cancel at
 *    once with kind `cancelled`; a cancel of a market order is refused by the
 *    matching engine, as svc-venue and the daemon's engine refuse it, and the
 *    order settles filled or rejected whole;
 * 5. equity is marked at the close: quote held plus base held times the close, in
 *    floating point for the statistics (`equityMarks`); the exact Decimal marks
 *    (`equity`) are worked out from the holdings only when read, and the final
 *    equity, from which PnL follows, is always exact.
 *
 * A recorded paper run is replayed by `ReplayRun`, which changes when things happen
 * through the protected methods marked as its seams; this class is the plain run.
 */
import { Data } from "effect"
import { compare, Decimal, plus, toFloat, ZERO } from "../domain/Decimal.js"
import type { Intent } from "../domain/Intent.js"
import { type OrderKind, TERMINAL_KINDS } from "../svc/Dialect.js"
import {
  type Balance,
  isFinalUpdate,
  type OpenOrder,
  type OrderUpdateEvent,
  type PairRules,
  SCHEDULE_TIMER,
  type StrategyDefinition,
  type StrategyView,
  type Handler,
  type HandlerResult
} from "../strategy/Strategy.js"
import { GivenPrices } from "../strategy/GivenPrices.js"
import { type Fees, MatchingEngine, type Retention } from "../venue/Matching.js"
import type { PairSpec } from "../venue/Orders.js"
import type { VenueCandle } from "../venue/PricePath.js"
import { candleEvent, type Mutable, openOrderOf, orderUpdate, toRequest } from "./Events.js"
import { MetricsRecorder, type RunFill } from "./Metrics.js"

/** What every run is set up with; a replay of a recorded paper run adds what was recorded of it (`RecordedRun`). */
export interface RunSetup<P = unknown, S = unknown> {
  readonly strategy: StrategyDefinition<P, S>
  /** Decoded params (`decodeParams`). */
  readonly params: P
  readonly pair: PairSpec
  readonly fees: Fees
  readonly settleDelayMs: number
  /** Starting free balances per asset. */
  readonly balances: Readonly<Record<string, Decimal>>
  readonly candles: ReadonlyArray<VenueCandle>
  readonly intervalMs: number
  /** The instance's cron `schedule`, firing `onTimer` with the timer name "schedule". */
  readonly schedule?: string
  /**
   * History the strategy hears before the first candle, as the daemon gives a fresh instance:
   * `onCandle` only, marked `warmup`, its intents dropped.
   */
  readonly warmup?: ReadonlyArray<VenueCandle>
  /** Start from this state instead of `init` (a recorded run whose instance resumed its stored state). */
  readonly initialState?: S
  /**
   * Called after each candle, once the strategy has heard it, with the candle's index and the
   * strategy's state then: how a report reads the series the strategy plots. A run without it
   * reads nothing.
   */
  readonly afterCandle?: (index: number, state: S) => void
}

/** The placement intent an order came from: its tag and how many placement intents of that tag came before it. */
export interface OrderIntent {
  readonly tag: string
  readonly occurrence: number
}

export interface OrderCounts {
  placed: number
  refused: number
  rejected: number
  cancelled: number
}

/** A handler threw; the run stops there, as the daemon would pause the instance. */
export class StrategyFailed extends Data.TaggedError("StrategyFailed")<{
  readonly strategy: string
  readonly handler: string
  readonly atMs: number
  readonly cause: unknown
}> {
  override get message(): string {
    const reason = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `strategy ${this.strategy} failed in ${this.handler} at ${new Date(this.atMs).toISOString()}: ${reason}`
  }
}

/** The refusal code of a placement whose tag names a live order of the instance. */
export const TAG_IN_USE = "TAG_IN_USE"

/** What the account held from one candle's close on, until the next entry. */
export interface Holdings {
  readonly from: number
  readonly base: Decimal
  readonly quote: Decimal
}

/** An order of the strategy that is live, as the run last read it from the matching engine. */
export interface Tracked {
  readonly clientOrderId: string
  readonly stop: boolean
  /** As the matching engine last showed it; a replayed strategy may hear of it later. */
  kind: OrderKind
  filledBaseQty: Decimal
}

const NO_RUN_FILLS: ReadonlyArray<RunFill> = []

/** A strategy answering its own refusals with new orders forever would never let time move. */
const MAX_INTENTS_PER_MOMENT = 10_000
/** The account every run trades from. */
export const UID = 1

const INTERVAL_NAMES: ReadonlyMap<number, string> = new Map([
  [60_000, "1m"],
  [300_000, "5m"],
  [900_000, "15m"],
  [3_600_000, "1h"],
  [14_400_000, "4h"],
  [86_400_000, "1d"]
])

const intervalName = (intervalMs: number): string => INTERVAL_NAMES.get(intervalMs) ?? `${intervalMs}ms`

const DAY_MS = 86_400_000

/**
 * How long the engine keeps ended orders and fills. The run reads every fill and every change of
 * an order by the close of the candle it happens in (at a recorded step or ticker, sooner), and
 * never asks about an ended order again, so a day of tape, or two candles or settle delays if
 * longer, keeps all it reads; what the engine forgets then is garbage before the collector has
 * to copy it, instead of every order of the run held to its end. Never by count: a moment may
 * end any number of orders.
 */
const engineRetention = (setup: RunSetup<any, any>): Retention => ({
  terminalMs: Math.max(DAY_MS, 2 * setup.intervalMs, 2 * setup.settleDelayMs),
  terminalCount: Number.MAX_SAFE_INTEGER
})

export class Run<P, S> {
  protected readonly engine: MatchingEngine
  protected readonly strategy: StrategyDefinition<P, S>
  protected readonly symbol: string
  /** The candles' interval as events name it ("1m"). */
  private readonly interval: string
  protected readonly view: Mutable<StrategyView<P>>
  private readonly balances = new Map<string, Balance>()
  protected readonly openOrders = new Map<string, OpenOrder>()
  protected readonly lastPrices: GivenPrices
  protected readonly tracked = new Map<string, Tracked>()
  /** By clientOrderId. */
  readonly placements = new Map<string, OrderIntent>()
  /** Placement intents seen per tag, refused ones included: the next intent's `occurrence`. */
  private readonly occurrences = new Map<string, number>()
  private readonly fillLog: Array<RunFill> = []
  /** Order updates that answer intents at the moment they are placed: refusals and cancels. */
  protected readonly answers: Array<OrderUpdateEvent> = []
  private lastFillSeq = 0
  /** Stop-limit orders still pending: their trigger changes their kind without a fill. */
  protected waitingStops = 0
  /** The last candle played while no order was live, not shown to the engine yet (`catchUp`). */
  private unplayed: VenueCandle | undefined
  private unplayedCloseMs = 0
  protected intentsThisMoment = 0
  private state: S
  private baseHeld = ZERO
  private quoteHeld = ZERO
  private baseHeldFloat = 0
  private quoteHeldFloat = 0
  /** Changes whenever the holdings are read again from the engine. */
  private holdingsReads = 0
  readonly counts: OrderCounts = { placed: 0, refused: 0, rejected: 0, cancelled: 0 }
  protected readonly intervalMs: number
  /** The metrics, fed each fill and each close's equity as the run goes (`markClose`). */
  readonly recorder: MetricsRecorder
  private fillsRecorded = 0
  /** What the account held from each change on: the exact equity at every close follows from it. */
  readonly holdings: Array<Holdings> = []
  private holdingsRecorded = -1
  private readonly minNotional: Decimal
  private readonly minNotionalFloat: number
  /** Closes at which base worth at least the minimum notional was held. */
  inMarketCandles = 0

  constructor(protected readonly setup: RunSetup<P, S>, firstPrice: Decimal, startMs: number) {
    const pair = setup.pair
    this.strategy = setup.strategy
    this.symbol = pair.symbol
    this.interval = intervalName(setup.intervalMs)
    this.engine = new MatchingEngine({
      pairs: [pair],
      fees: setup.fees,
      settleDelayMs: setup.settleDelayMs,
      prices: { [pair.symbol]: firstPrice },
      retention: engineRetention(setup)
    })
    this.engine.openAccount(UID)
    for (const [asset, amount] of Object.entries(setup.balances)) this.engine.setBalance(UID, asset, amount)
    this.lastPrices = new GivenPrices(pair.symbol, firstPrice)
    const rules: PairRules = {
      symbol: pair.symbol,
      base: pair.base,
      quote: pair.quote,
      status: pair.status,
      tickSize: pair.tickSize,
      stepSize: pair.stepSize,
      minBaseQty: pair.minBaseQty,
      minNotional: pair.minNotional
    }
    this.view = {
      params: setup.params,
      symbol: pair.symbol,
      now: startMs,
      balances: this.balances,
      openOrders: this.openOrders,
      lastPrices: this.lastPrices,
      pairs: new Map([[pair.symbol, rules]])
    }
    this.openingOrders(startMs)
    this.refreshBalances()
    this.state = setup.initialState !== undefined ? setup.initialState : this.call("init", () => this.strategy.init(setup.params, this.view))
    this.intervalMs = setup.intervalMs
    this.minNotional = pair.minNotional
    this.minNotionalFloat = toFloat(pair.minNotional)
    this.recorder = new MetricsRecorder(
      { baseAsset: pair.base, quoteAsset: pair.quote, initialEquity: this.quoteHeld.plus(this.baseHeld.mul(firstPrice)), initialBase: this.baseHeld, initialPrice: firstPrice },
      setup.candles.length
    )
  }

  /**
   * Seam of a replay: puts on the book the orders that were live when the first candle opens,
   * before the strategy starts and the initial equity is taken. Called from the constructor, so
   * it may use only this class's fields. A plain run starts with none.
   */
  protected openingOrders(_startMs: number): void {}

  /** Base held, free and locked. */
  get base(): Decimal {
    return this.baseHeld
  }

  /** Quote held, free and locked. */
  get quote(): Decimal {
    return this.quoteHeld
  }

  get fills(): ReadonlyArray<RunFill> {
    return this.fillLog
  }

  get finalBalances(): ReadonlyMap<string, Balance> {
    return this.balances
  }

  get strategyState(): S {
    return this.state
  }

  private call<A>(handler: string, body: () => A): A {
    try {
      return body()
    } catch (cause) {
      throw this.failed(handler, cause)
    }
  }

  private failed(handler: string, cause: unknown): StrategyFailed {
    return cause instanceof StrategyFailed ? cause : new StrategyFailed({ strategy: this.strategy.name, handler, atMs: this.view.now, cause })
  }

  protected refreshBalances(): void {
    this.balances.clear()
    const pair = this.setup.pair
    let base = ZERO
    let quote = ZERO
    for (const row of this.engine.balances(UID)) {
      this.balances.set(row.asset, { free: row.free, locked: row.locked })
      if (row.asset === pair.base) base = plus(row.free, row.locked)
      else if (row.asset === pair.quote) quote = plus(row.free, row.locked)
    }
    // An amount that is the same object as before is the same value: its float and the holdings stand.
    if (base === this.baseHeld && quote === this.quoteHeld) return
    if (base !== this.baseHeld) this.baseHeldFloat = toFloat(base)
    if (quote !== this.quoteHeld) this.quoteHeldFloat = toFloat(quote)
    this.baseHeld = base
    this.quoteHeld = quote
    this.holdingsReads += 1
  }

  /**
   * Settlements due before `limitMs`, or also at it when `atLimit`, each at its own
   * time: step 1 settles what falls before the close; a recorded price step settles
   * what falls due up to its time, as the venue settles before it moves the price.
   */
  protected settleUntil(limitMs: number, atLimit: boolean): boolean {
    let settled = false
    let next = this.engine.nextSettlementAt()
    while (next !== undefined && (next < limitMs || (atLimit && next === limitMs))) {
      this.engine.settleDue(next)
      settled = true
      next = this.engine.nextSettlementAt()
    }
    return settled
  }

  /**
   * Step 5 for the candle at `index`, once the strategy has heard it: the fills since the last close
   * go to the metrics, the holdings are noted when they changed, the equity at the close is marked,
   * and the close counts as in the market when the base held is worth the minimum notional.
   */
  markClose(index: number, candle: VenueCandle, close: number): void {
    const fills = this.fillLog
    while (this.fillsRecorded < fills.length) this.recorder.fill(fills[this.fillsRecorded++]!)
    if (this.holdingsReads !== this.holdingsRecorded) {
      this.holdingsRecorded = this.holdingsReads
      this.holdings.push({ from: index, base: this.baseHeld, quote: this.quoteHeld })
    }
    const baseFloat = this.baseHeldFloat
    if (baseFloat === 0) {
      this.recorder.mark(this.quoteHeldFloat)
      return
    }
    const position = baseFloat * close
    this.recorder.mark(this.quoteHeldFloat + position)
    // Fee dust left after selling a position is not a position. The float decides
    // unless it lies too near the minimum to tell; then the exact value does.
    const minimum = this.minNotionalFloat
    const held = Math.abs(position - minimum) > minimum * 1e-9 ? position > minimum : this.baseHeld.mul(candle.close).gte(this.minNotional)
    if (held) this.inMarketCandles++
  }

  /** A history candle: the strategy hears it closed; what it would do then is dropped, as the daemon's host drops it. */
  warmUp(candle: VenueCandle, closeMs: number): void {
    const onCandle = this.strategy.onCandle
    this.view.now = closeMs
    this.lastPrices.given = candle.close
    if (onCandle === undefined) return
    try {
      this.state = onCandle(this.state, { ...candleEvent(this.symbol, this.interval, candle), warmup: true }, this.view).state
    } catch (cause) {
      throw this.failed("onCandle", cause)
    }
  }

  /** Steps 1 to 4 for one candle. */
  candle(candle: VenueCandle, timers: ReadonlyArray<number>): void {
    // Worked out here rather than passed in: a time is not a small integer, and passing one costs an allocation.
    const closeMs = candle.openTimeMs + this.intervalMs
    let settled = false
    if (this.tracked.size === 0) {
      // No order is live, so none settles or waits for the path: the engine learns where the path
      // ended when the next order is placed (`catchUp`), instead of at every candle.
      this.unplayed = candle
      this.unplayedCloseMs = closeMs
    } else {
      settled = this.settleUntil(closeMs, false)
      this.engine.onCandle(this.symbol, candle, closeMs)
    }
    this.atClose(candle, closeMs, settled, timers)
  }

  /** Shows the engine the candle it was not shown while no order was live. */
  private catchUp(): void {
    if (this.unplayed === undefined) return
    this.engine.onCandle(this.symbol, this.unplayed, this.unplayedCloseMs)
    this.unplayed = undefined
  }

  /**
   * Seam of a replay: whether the strategy hears a ticker at each close, and takes each close
   * as its last price even when it handles no candles. A replay of recorded tickers hears them
   * when they were given instead.
   */
  protected tickerAtEachClose(): boolean {
    return true
  }

  /** Steps 3 and 4: what the strategy hears at the close, and the intents it answers with. */
  protected atClose(candle: VenueCandle, closeMs: number, settled: boolean, timers: ReadonlyArray<number>): void {
    const { onCandle, onTicker, onTimer } = this.strategy
    const tickerAtClose = this.tickerAtEachClose()
    this.view.now = closeMs
    // The daemon gives candles only to a strategy that handles them.
    if (onCandle !== undefined || tickerAtClose) this.lastPrices.given = candle.close
    this.intentsThisMoment = 0
    if (this.tracked.size > 0) this.deliverOrderProgress(settled)
    if (onCandle !== undefined) this.handle("onCandle", onCandle, candleEvent(this.symbol, this.interval, candle))
    if (onTicker !== undefined && tickerAtClose) this.handle("onTicker", onTicker, { symbol: this.symbol, price: candle.close, time: closeMs })
    if (onTimer !== undefined) for (const at of timers) this.handle("onTimer", onTimer, { name: SCHEDULE_TIMER, scheduledAt: at })
  }

  /** Runs a handler and places its intents; refusals and cancels it causes are answered before this returns. */
  protected handle<E>(name: string, handler: Handler<S, E, P>, event: E): void {
    this.invoke(name, handler, event)
    this.answer()
  }

  /** Delivers the answers (refusals, cancels) waiting for the strategy, and those its handling causes. */
  protected answer(): void {
    if (this.answers.length === 0) return
    const onOrderUpdate = this.strategy.onOrderUpdate
    // A loop, not recursion: a strategy answering each refusal with a new order must not exhaust the stack.
    for (let next = this.answers.shift(); next !== undefined; next = this.answers.shift()) {
      if (onOrderUpdate !== undefined) this.invoke("onOrderUpdate", onOrderUpdate, next)
    }
  }

  private invoke<E>(name: string, handler: Handler<S, E, P>, event: E): void {
    // No closure per call (as `call` takes): this runs for every candle.
    let outcome: HandlerResult<S>
    try {
      outcome = handler(this.state, event, this.view)
    } catch (cause) {
      throw this.failed(name, cause)
    }
    this.state = outcome.state
    if (outcome.intents.length > 0) this.apply(outcome.intents)
  }

  private apply(intents: ReadonlyArray<Intent>): void {
    const now = this.view.now
    let cancelled = false
    for (const intent of intents) {
      this.intentsThisMoment += 1
      if (this.intentsThisMoment > MAX_INTENTS_PER_MOMENT) {
        throw new StrategyFailed({
          strategy: this.strategy.name,
          handler: "intents",
          atMs: now,
          cause: new Error(`more than ${MAX_INTENTS_PER_MOMENT} intents at one moment; the strategy keeps answering its own orders`)
        })
      }
      if (intent.type === "cancel") {
        if (this.cancelIntent(intent.tag, now)) cancelled = true
        continue
      }
      const occurrence = this.occurrences.get(intent.tag) ?? 0
      this.occurrences.set(intent.tag, occurrence + 1)
      if (this.tracked.has(intent.tag)) {
        this.refused(intent.tag, TAG_IN_USE)
        continue
      }
      const placedAt = this.placedAt(intent.tag, occurrence, now)
      this.catchUp()
      const placed = this.engine.place(UID, toRequest(intent), placedAt)
      if (!placed.ok) {
        this.refused(intent.tag, placed.code)
        continue
      }
      this.counts.placed += 1
      const stop = intent.type === "stop-limit"
      if (stop) this.waitingStops += 1
      this.tracked.set(intent.tag, { clientOrderId: placed.clientOrderId, stop, kind: "pending", filledBaseQty: ZERO })
      this.placements.set(placed.clientOrderId, { tag: intent.tag, occurrence })
      this.openOrders.set(intent.tag, openOrderOf(intent, placed.clientOrderId))
    }
    if (cancelled) this.refreshBalances()
  }

  /** Seam of a replay: when the order of this placement intent reaches the venue. In a plain run, at once. */
  protected placedAt(_tag: string, _occurrence: number, now: number): number {
    return now
  }

  /** Seam of a replay: a cancel intent for the tag, at once in a plain run. True when an order was cancelled now. */
  protected cancelIntent(tag: string, now: number): boolean {
    const order = this.tracked.get(tag)
    return order !== undefined && this.cancel(tag, order, now)
  }

  /**
   * A cancel answers at once (the venue's cancel answer carries the final kind), so
   * the tag is free again for the intents that follow it. A cancel of an order that
   * already filled, of a market order (matched or rejected whole at settlement), or of
   * a tag with no live order, changes nothing: the daemon refuses those without an
   * update of the order too. True when the order was cancelled.
   */
  protected cancel(tag: string, order: Tracked, now: number): boolean {
    if (!this.engine.cancel(UID, order.clientOrderId, now).ok) return false
    const after = this.engine.order(UID, order.clientOrderId)!
    if (order.stop && order.kind === "pending") this.waitingStops -= 1
    order.kind = "cancelled"
    this.counts.cancelled += 1
    const update = orderUpdate(tag, after, "cancelled")
    if (this.heardLater(order, update, now)) return true
    this.applyUpdate(update)
    this.answers.push(update)
    return true
  }

  /** What the strategy's view shows once it hears an update. */
  protected applyUpdate(update: OrderUpdateEvent): void {
    if (isFinalUpdate(update.kind)) {
      this.tracked.delete(update.tag)
      this.openOrders.delete(update.tag)
    } else {
      // An update that is not final names a kind an order can rest in.
      this.openOrders.set(update.tag, { ...this.openOrders.get(update.tag)!, kind: update.kind as OrderKind, filledBaseQty: update.filledBaseQty })
    }
  }

  /** Seam of a replay: true when the strategy hears this update of the order after `now` instead of now. Never in a plain run. */
  protected heardLater(_order: Tracked, _update: OrderUpdateEvent, _now: number): boolean {
    return false
  }

  /** Seam of a replay: of the new fills, those the strategy hears now. All of them in a plain run. */
  protected fillsHeardNow(fills: ReadonlyArray<RunFill>, _now: number): ReadonlyArray<RunFill> {
    return fills
  }

  private refused(tag: string, code: string): void {
    this.counts.refused += 1
    this.answers.push({ tag, kind: "refused", code, filledBaseQty: ZERO })
  }

  /** New fills, then orders whose kind or filled quantity changed: those the strategy hears now. */
  protected deliverOrderProgress(settled: boolean): void {
    const fills = this.newFills()
    // Kinds change only at settlement, with a fill, or when a stop triggers; otherwise no order needs reading.
    if (fills.length === 0 && !settled && this.waitingStops === 0) return
    const now = this.view.now
    const updates: Array<OrderUpdateEvent> = []
    for (const [tag, order] of this.tracked) {
      // An ended order changes no more, and the engine may have forgotten it (`engineRetention`)
      // while a replayed strategy had not heard of it yet.
      if (TERMINAL_KINDS.has(order.kind)) continue
      const progress = this.engine.progress(UID, order.clientOrderId)!
      // Every fill gives the order a new filled quantity, so the same object means no change.
      if (progress.kind === order.kind && (progress.filledBaseQty === order.filledBaseQty || compare(progress.filledBaseQty, order.filledBaseQty) === 0)) continue
      const after = this.engine.order(UID, order.clientOrderId)!
      if (order.stop && order.kind === "pending") this.waitingStops -= 1
      order.kind = after.kind
      order.filledBaseQty = after.filledBaseQty
      if (after.kind === "rejected") this.counts.rejected += 1
      const update = orderUpdate(tag, after, after.kind)
      if (this.heardLater(order, update, now)) continue
      this.applyUpdate(update)
      updates.push(update)
    }
    const heardFills = fills.length === 0 ? fills : this.fillsHeardNow(fills, now)
    if (heardFills.length === 0 && updates.length === 0) return
    this.refreshBalances()
    const { onFill, onOrderUpdate } = this.strategy
    if (onFill !== undefined) for (const fill of heardFills) this.handle("onFill", onFill, fill)
    if (onOrderUpdate !== undefined) for (const update of updates) this.handle("onOrderUpdate", onOrderUpdate, update)
  }

  private newFills(): ReadonlyArray<RunFill> {
    const page = this.engine.fillsAfter(UID, this.lastFillSeq)
    if (page.length === 0) return NO_RUN_FILLS
    this.lastFillSeq = page[page.length - 1]!.seq
    const events: Array<RunFill> = []
    for (const fill of page) {
      // One object is both the strategy's fill event and the run's fill record.
      const event: RunFill = {
        tag: this.placements.get(fill.clientOrderId)?.tag ?? fill.clientOrderId,
        fillId: fill.fillId,
        clientOrderId: fill.clientOrderId,
        side: fill.side,
        price: fill.price,
        baseQty: fill.baseQty,
        quoteQty: fill.quoteQty,
        fee: fill.fee,
        feeAsset: fill.feeAsset,
        liquidity: fill.liquidity,
        time: fill.time
      }
      this.fillLog.push(event)
      events.push(event)
    }
    return events
  }
}
