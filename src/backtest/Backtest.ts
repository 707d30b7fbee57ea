/**
 * The backtest event loop: candles drive the strategy's handlers and svc-venue's
 * own matching and settlement module (`MatchingEngine`), in-process, with the
 * venue's order state machine, settle delay, fees, synthetic book, slippage and
 * reject codes. Synchronous, no Effect, no I/O: one run is a pure function of its
 * setup.
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
 * Replaying a recorded paper run (`tape`, `timing`): to judge paper trading fill
 * for fill, the run can be given the venue's own price steps. Inside each candle's
 * window (t, T] the recorded steps replace the candle path (step 2), played as the
 * venue plays them: at each step time, every order whose settlement time has come
 * settles (each at its own time, against the price in effect then), then the step's
 * price moves the book; steps of one time are played together, as one venue tick.
 * Fills and order updates a step brings are delivered at once, at the step's time
 * (`view.now`), so a strategy answering a fill places its intents then, not at the
 * close; settlements after the window's last step are delivered at `T` (step 1).
 * A window without steps moves no price: the tape, not the candle, decides. The
 * candle, ticker and timers stay at `T`, and steps outside every window are
 * ignored. `timing` gives, per placement intent (its tag and how many placement
 * intents of that tag came before it), the time its order reached the venue; the
 * order is placed with that time when it is later than the intent, so it stays
 * pending, unseen by the steps, until that time plus the settle delay. It gives the
 * same for a cancel intent (counted among the cancels of its tag): the time the venue
 * cancelled the order. Until then the order stays live, as it did on the venue: it
 * can still fill, its tag is still in use, and the strategy hears `cancelled` at that
 * time, played before a step or ticker of a later time and after one of the same
 * time (without a tape, before the next candle's path). Each order's intent is in
 * `placements`, so fills compare intent by intent (`Parity.ts`).
 */
import { Data, Either } from "effect"
import { compare, Decimal, toFloat, ZERO } from "../domain/Decimal.js"
import type { Intent, PlaceIntent } from "../domain/Intent.js"
import { type OrderKind, TERMINAL_KINDS } from "../svc/Dialect.js"
import {
  type Balance,
  type CandleEvent,
  type FillEvent,
  isFinalUpdate,
  type OpenOrder,
  type OrderUpdateEvent,
  type OrderUpdateKind,
  type PairRules,
  SCHEDULE_TIMER,
  type StrategyDefinition,
  type StrategyView,
  type Handler,
  type HandlerResult
} from "../strategy/Strategy.js"
import { type Candle, type Fees, MatchingEngine, type OrderView, type PairSpec, type PlaceRequest, type Retention } from "../venue/Matching.js"
import { CronSchedule } from "./CronSchedule.js"
import { type Metrics, MetricsRecorder, plus, type RunFill } from "./Metrics.js"

export interface BacktestSetup<P = unknown, S = unknown> {
  readonly strategy: StrategyDefinition<P, S>
  /** Decoded params (`decodeParams`). */
  readonly params: P
  readonly pair: PairSpec
  readonly fees: Fees
  readonly settleDelayMs: number
  /** Starting free balances per asset. */
  readonly balances: Readonly<Record<string, Decimal>>
  readonly candles: ReadonlyArray<Candle>
  readonly intervalMs: number
  /** The instance's cron `schedule`, firing `onTimer` with the timer name "schedule". */
  readonly schedule?: string
  /** The venue's price steps of a recorded run, by time: played instead of the candle paths (see the header). */
  readonly tape?: ReadonlyArray<TapeStep>
  /** When each placement intent's order reached the venue in a recorded run. */
  readonly timing?: ReplayTiming
  /**
   * With `tape`: the tickers the recorded run gave the strategy, sorted by when it was given
   * them. Each is heard then, in place of the ticker at each close, and a strategy's last price
   * moves only with the tickers (and, for a strategy given candles, the closes) it hears.
   */
  readonly tickers?: ReadonlyArray<GivenTicker>
  /**
   * History the strategy hears before the first candle, as the daemon gives a fresh instance:
   * `onCandle` only, marked `warmup`, its intents dropped.
   */
  readonly warmup?: ReadonlyArray<Candle>
  /** Start from this state instead of `init` (a recorded run whose instance resumed its stored state). */
  readonly initialState?: S
  /**
   * With `initialState`: the orders the instance had live when the recorded run started, each for
   * what was left of it. They are on the book when the first candle opens (placed one settle delay
   * before it), and their placement's occurrence is `CARRIED`.
   */
  readonly carried?: ReadonlyArray<PlaceIntent>
  /**
   * With `initialState`: what the recorded run's instance was handed first, before anything of
   * the run, as the daemon hands a restored instance the final updates and fills of its orders
   * that came about while it did not run. Heard at the start, in this order.
   */
  readonly missed?: ReadonlyArray<MissedOutcome>
  /**
   * Called after each candle, once the strategy has heard it, with the candle's index and the
   * strategy's state then: how a report reads the series the strategy plots. A run without it
   * reads nothing.
   */
  readonly afterCandle?: (index: number, state: S) => void
}

/** A final order update or a fill of an order from before a recorded run. */
export type MissedOutcome = { readonly _tag: "OrderUpdate"; readonly event: OrderUpdateEvent } | { readonly _tag: "Fill"; readonly event: FillEvent }

/** A ticker a recorded run gave its strategy. */
export interface GivenTicker {
  /** When the strategy was given it. */
  readonly atMs: number
  /** The ticker's own time. */
  readonly timeMs: number
  /** The price it showed; undefined for a recording without it (the tape's price at `timeMs` is used). */
  readonly price: Decimal | undefined
}

/** One price step of the venue's tape, on the venue's clock. */
export interface TapeStep {
  readonly timeMs: number
  readonly price: Decimal
}

export interface ReplayTiming {
  /**
   * When the order of the `occurrence`-th placement intent with this tag (0-based,
   * counting every placement intent of the tag in the run, refused or not) reached
   * the venue; undefined when the recording has no such order.
   */
  placedAt(tag: string, occurrence: number): number | undefined
  /**
   * When the venue cancelled the order the `occurrence`-th cancel intent with this tag
   * (0-based, among the cancel intents of the tag) was sent for; undefined when the
   * recording has no such cancel taking effect (the cancel is then applied at once).
   */
  cancelledAt(tag: string, occurrence: number): number | undefined
  /**
   * When the recorded run's strategy heard the `index`-th fill (0-based) of the order of this
   * placement intent; undefined when it never did (the replay's strategy then hears it at once).
   */
  fillHeardAt?(tag: string, occurrence: number, index: number): HeardAt | undefined
  /** The same for the order's `index`-th update of this kind. */
  updateHeardAt?(tag: string, occurrence: number, kind: OrderUpdateKind, index: number): HeardAt | undefined
}

/** When a recorded strategy heard something, and its place among all it heard (what one moment brought comes in that order). */
export interface HeardAt {
  readonly atMs: number
  readonly order: number
}

/** The placement intent an order came from: its tag and how many placement intents of that tag came before it. */
export interface Placement {
  readonly tag: string
  readonly occurrence: number
}

export interface OrderCounts {
  placed: number
  refused: number
  rejected: number
  cancelled: number
}

export interface BacktestResult {
  readonly fills: ReadonlyArray<RunFill>
  /**
   * Equity at each candle's close, exact. Computed on first read from the holdings
   * between fills: a million Decimal marks cost more than the run itself.
   */
  readonly equity: ReadonlyArray<Decimal>
  /** Equity at each candle's close in floating point: what drawdown, Sharpe and Sortino are computed from. */
  readonly equityMarks: Float64Array
  readonly metrics: Metrics
  readonly balances: ReadonlyMap<string, Balance>
  readonly orders: Readonly<OrderCounts>
  /** The intent behind every order the run placed, by its clientOrderId. */
  readonly placements: ReadonlyMap<string, Placement>
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

export class BacktestSetupInvalid extends Data.TaggedError("BacktestSetupInvalid")<{ readonly message: string }> {}

export type BacktestFailed = StrategyFailed | BacktestSetupInvalid

const NO_RUN_FILLS: ReadonlyArray<RunFill> = []

/** A strategy answering its own refusals with new orders forever would never let time move. */
const MAX_INTENTS_PER_MOMENT = 10_000
const UID = 1
const MINUTE_MS = 60_000
/** The occurrence of an order a recorded run started with (`carried`): no intent of the run placed it. */
export const CARRIED = -1
/** The refusal code of a placement whose tag names a live order of the instance. */
export const TAG_IN_USE = "TAG_IN_USE"

const INTERVAL_NAMES: ReadonlyMap<number, string> = new Map([
  [60_000, "1m"],
  [300_000, "5m"],
  [900_000, "15m"],
  [3_600_000, "1h"],
  [14_400_000, "4h"],
  [86_400_000, "1d"]
])

const intervalName = (intervalMs: number): string => INTERVAL_NAMES.get(intervalMs) ?? `${intervalMs}ms`

/**
 * Something a recorded run had happen later than the moment the replay reaches it: a cancel
 * the venue applied later, or a fill or order update the strategy heard later.
 */
type Scheduled = {
  readonly atMs: number
  /** Among things of one time: a cancel (the venue's) first, then what the strategy heard in the order it heard it. */
  readonly order: number
} & (
  | { readonly what: "cancel"; readonly tag: string; readonly clientOrderId: string }
  | { readonly what: "fill"; readonly fill: RunFill }
  | { readonly what: "update"; readonly update: OrderUpdateEvent }
)

interface Tracked {
  readonly clientOrderId: string
  readonly stop: boolean
  /** As the matching engine last showed it; the strategy may hear of it later (`updateHeardAt`). */
  kind: OrderKind
  filledBaseQty: Decimal
  /** Fills of the order, and its updates per kind, so far: which one a recorded hearing time is for. */
  fills: number
  /** Counted only for a recording that says when its updates were heard (`updateHeardAt`). */
  updates?: Map<OrderUpdateKind, number>
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

const toRequest = (intent: PlaceIntent): PlaceRequest => {
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

const candleEvent = (symbol: string, interval: string, candle: Candle): CandleEvent => ({
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
const orderUpdate = (tag: string, order: OrderView, kind: OrderUpdateKind): OrderUpdateEvent => {
  // Set one by one, not spread in: spreading a conditional object costs a runtime call per update.
  const update: Mutable<OrderUpdateEvent> = { tag, clientOrderId: order.clientOrderId, kind, filledBaseQty: order.filledBaseQty }
  if (order.code !== null) update.code = order.code
  if (order.avgPrice !== null) update.avgPrice = order.avgPrice
  return update
}

const openOrderOf = (intent: PlaceIntent, clientOrderId: string): OpenOrder => {
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

class Run<P, S> {
  private readonly engine: MatchingEngine
  private readonly strategy: StrategyDefinition<P, S>
  private readonly timing: ReplayTiming | undefined
  private readonly symbol: string
  /** The candles' interval as events name it ("1m"). */
  private readonly interval: string
  private readonly view: Mutable<StrategyView<P>>
  private readonly balances = new Map<string, Balance>()
  private readonly openOrders = new Map<string, OpenOrder>()
  private readonly lastPrices = new Map<string, Decimal>()
  private readonly tracked = new Map<string, Tracked>()
  /** By clientOrderId. */
  readonly placements = new Map<string, Placement>()
  /** Placement intents seen per tag, refused ones included: the next intent's `occurrence`. */
  private readonly occurrences = new Map<string, number>()
  /** Cancel intents seen per tag: the next cancel's `occurrence`. */
  private readonly cancelOccurrences = new Map<string, number>()
  /** Sorted by time, in the order scheduled among equal times. */
  private scheduled: Array<Scheduled> = []
  /** Tape mode: the first step not played yet. */
  private nextStep = 0
  private nextTicker = 0
  private readonly fillLog: Array<RunFill> = []
  /** Order updates that answer intents at the moment they are placed: refusals and cancels. */
  private readonly answers: Array<OrderUpdateEvent> = []
  private lastFillSeq = 0
  /** Stop-limit orders still pending: their trigger changes their kind without a fill. */
  private waitingStops = 0
  /** The last candle played while no order was live, not shown to the engine yet (`catchUp`). */
  private unplayed: Candle | undefined
  private unplayedCloseMs = 0
  private intentsThisMoment = 0
  private state: S
  private baseHeld = ZERO
  private quoteHeld = ZERO
  private baseHeldFloat = 0
  private quoteHeldFloat = 0
  /** Changes whenever the holdings are read again from the engine. */
  private holdingsReads = 0
  readonly counts: OrderCounts = { placed: 0, refused: 0, rejected: 0, cancelled: 0 }
  private readonly intervalMs: number
  /** The metrics, fed each fill and each close's equity as the run goes (`record`). */
  readonly recorder: MetricsRecorder
  private fillsRecorded = 0
  /** What the account held from each change on: the exact equity at every close follows from it. */
  readonly holdings: Array<Holdings> = []
  private holdingsRecorded = -1
  private readonly minNotional: Decimal
  private readonly minNotionalFloat: number
  /** Closes at which base worth at least the minimum notional was held. */
  inMarketCandles = 0

  constructor(private readonly setup: BacktestSetup<P, S>, firstPrice: Decimal, startMs: number) {
    const pair = setup.pair
    this.strategy = setup.strategy
    this.timing = setup.timing
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
    this.lastPrices.set(pair.symbol, firstPrice)
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
    this.carry(setup.carried ?? [], startMs)
    this.refreshBalances()
    this.state = setup.initialState !== undefined ? setup.initialState : this.call("init", () => this.strategy.init(setup.params, this.view))
    this.intervalMs = setup.intervalMs
    this.minNotional = pair.minNotional
    this.minNotionalFloat = toFloat(pair.minNotional)
    this.recorder = new MetricsRecorder(
      { baseAsset: pair.base, quoteAsset: pair.quote, initialEquity: this.quoteHeld.plus(this.baseHeld.mul(firstPrice)), initialBase: this.baseHeld, initialPrice: firstPrice },
      setup.candles.length
    )
    this.handMissed(setup.missed ?? [])
  }

  /** What a recorded run's instance was handed first: heard at the start, its intents placed then. */
  private handMissed(missed: ReadonlyArray<MissedOutcome>): void {
    const { onFill, onOrderUpdate } = this.strategy
    for (const outcome of missed) {
      if (outcome._tag === "Fill") {
        if (onFill !== undefined) this.handle("onFill", onFill, outcome.event)
      } else if (onOrderUpdate !== undefined) {
        this.handle("onOrderUpdate", onOrderUpdate, outcome.event)
      }
    }
  }

  /**
   * Puts the orders a recorded run started with on the book as they stood: settled by the start,
   * heard of already. One the rules no longer accept (a remainder below the minimum) is left out:
   * its later fills then show as mismatches.
   */
  private carry(orders: ReadonlyArray<PlaceIntent>, startMs: number): void {
    if (orders.length === 0) return
    for (const intent of orders) {
      const placed = this.engine.place(UID, toRequest(intent), startMs - this.setup.settleDelayMs)
      if (!placed.ok) continue
      const stop = intent.type === "stop-limit"
      this.tracked.set(intent.tag, { clientOrderId: placed.clientOrderId, stop, kind: "pending", filledBaseQty: ZERO, fills: 0, updates: new Map() })
      this.placements.set(placed.clientOrderId, { tag: intent.tag, occurrence: CARRIED })
      this.openOrders.set(intent.tag, openOrderOf(intent, placed.clientOrderId))
    }
    this.settleUntil(startMs, true)
    for (const [tag, order] of this.tracked) {
      const now = this.engine.order(UID, order.clientOrderId)!
      order.kind = now.kind
      order.filledBaseQty = now.filledBaseQty
      if (now.kind === "pending" || now.kind === "resting") {
        if (order.stop && now.kind === "pending") this.waitingStops += 1
        this.openOrders.set(tag, { ...this.openOrders.get(tag)!, kind: now.kind, filledBaseQty: now.filledBaseQty })
      } else {
        // It crossed the start price and filled: the strategy hears the fills with the first moment's news.
        this.tracked.delete(tag)
        this.openOrders.delete(tag)
      }
    }
  }

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

  private refreshBalances(): void {
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
   * time: step 1 settles what falls before the close; a tape step settles what falls
   * due up to its time, as the venue settles before it moves the price.
   */
  private settleUntil(limitMs: number, atLimit: boolean): boolean {
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
  record(index: number, candle: Candle): void {
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
    const position = baseFloat * toFloat(candle.close)
    this.recorder.mark(this.quoteHeldFloat + position)
    // Fee dust left after selling a position is not a position. The float decides
    // unless it lies too near the minimum to tell; then the exact value does.
    const minimum = this.minNotionalFloat
    const held = Math.abs(position - minimum) > minimum * 1e-9 ? position > minimum : this.baseHeld.mul(candle.close).gte(this.minNotional)
    if (held) this.inMarketCandles++
  }

  /** A history candle: the strategy hears it closed; what it would do then is dropped, as the daemon's host drops it. */
  warmUp(candle: Candle, closeMs: number): void {
    const onCandle = this.strategy.onCandle
    this.view.now = closeMs
    this.lastPrices.set(this.symbol, candle.close)
    if (onCandle === undefined) return
    try {
      this.state = onCandle(this.state, { ...candleEvent(this.symbol, this.interval, candle), warmup: true }, this.view).state
    } catch (cause) {
      throw this.failed("onCandle", cause)
    }
  }

  /** Steps 1 to 4 for one candle. */
  candle(candle: Candle, timers: ReadonlyArray<number>): void {
    // Worked out here rather than passed in: a time is not a small integer, and passing one costs an allocation.
    const closeMs = candle.openTimeMs + this.intervalMs
    this.scheduledUntil(closeMs, true)
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

  /** Steps 1 to 4 for one candle in tape mode: the recorded steps of its window instead of its path. */
  replayCandle(tape: ReadonlyArray<TapeStep>, candle: Candle, closeMs: number, timers: ReadonlyArray<number>): void {
    let at = this.nextStep
    while (at < tape.length && tape[at]!.timeMs <= candle.openTimeMs) at++
    const tickers = this.setup.tickers ?? []
    let heard = this.nextTicker
    while (heard < tickers.length && tickers[heard]!.atMs <= candle.openTimeMs) heard++
    while ((at < tape.length && tape[at]!.timeMs <= closeMs) || (heard < tickers.length && tickers[heard]!.atMs <= closeMs)) {
      // A ticker given at the moment of a step saw the step: it comes after it.
      if (heard < tickers.length && tickers[heard]!.atMs <= closeMs && (at >= tape.length || tickers[heard]!.atMs < tape[at]!.timeMs)) {
        this.scheduledUntil(tickers[heard]!.atMs, false)
        this.ticker(tickers[heard++]!)
        continue
      }
      const stepMs = tape[at]!.timeMs
      this.scheduledUntil(stepMs, false)
      const settled = this.settleUntil(stepMs, true)
      // Steps of one time are one venue tick: the strategy can answer only after all of them.
      do this.engine.onPrice(this.symbol, tape[at++]!.price, stepMs)
      while (at < tape.length && tape[at]!.timeMs === stepMs)
      if (this.tracked.size > 0) {
        this.view.now = stepMs
        this.intentsThisMoment = 0
        this.deliverOrderProgress(settled)
      }
    }
    this.nextStep = at
    this.nextTicker = heard
    this.scheduledUntil(closeMs, true)
    this.atClose(candle, closeMs, this.settleUntil(closeMs, false), timers)
  }

  /** A recorded ticker: what settled by then, the fills and updates it brought, then the price the strategy was shown. */
  private ticker(given: GivenTicker): void {
    const settled = this.settleUntil(given.atMs, true)
    this.view.now = given.atMs
    this.intentsThisMoment = 0
    if (this.tracked.size > 0) this.deliverOrderProgress(settled)
    const price = given.price ?? this.engine.price(this.symbol)
    const onTicker = this.strategy.onTicker
    if (price === undefined || onTicker === undefined) return
    this.lastPrices.set(this.symbol, price)
    this.handle("onTicker", onTicker, { symbol: this.symbol, price, time: given.timeMs })
  }

  /** Steps 3 and 4: what the strategy hears at the close, and the intents it answers with. */
  private atClose(candle: Candle, closeMs: number, settled: boolean, timers: ReadonlyArray<number>): void {
    const { onCandle, onTicker, onTimer } = this.strategy
    this.view.now = closeMs
    // The daemon gives candles only to a strategy that handles them; with recorded tickers, one that does not hears no close.
    if (onCandle !== undefined || this.setup.tickers === undefined) this.lastPrices.set(this.symbol, candle.close)
    this.intentsThisMoment = 0
    if (this.tracked.size > 0) this.deliverOrderProgress(settled)
    if (onCandle !== undefined) this.handle("onCandle", onCandle, candleEvent(this.symbol, this.interval, candle))
    // A recorded run's tickers are heard when they were given, not at each close.
    if (onTicker !== undefined && this.setup.tickers === undefined) this.handle("onTicker", onTicker, { symbol: this.symbol, price: candle.close, time: closeMs })
    if (onTimer !== undefined) for (const at of timers) this.handle("onTimer", onTimer, { name: SCHEDULE_TIMER, scheduledAt: at })
  }

  /** Runs a handler and places its intents; refusals and cancels it causes are answered before this returns. */
  private handle<E>(name: string, handler: Handler<S, E, P>, event: E): void {
    this.invoke(name, handler, event)
    this.answer()
  }

  /** Delivers the answers (refusals, cancels) waiting for the strategy, and those its handling causes. */
  private answer(): void {
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
        const occurrence = this.cancelOccurrences.get(intent.tag) ?? 0
        this.cancelOccurrences.set(intent.tag, occurrence + 1)
        const cancelAt = this.timing?.cancelledAt(intent.tag, occurrence)
        const order = this.tracked.get(intent.tag)
        if (order !== undefined && cancelAt !== undefined && cancelAt > now) {
          this.schedule({ atMs: cancelAt, order: Number.NEGATIVE_INFINITY, what: "cancel", tag: intent.tag, clientOrderId: order.clientOrderId })
          continue
        }
        if (order !== undefined && this.cancel(intent.tag, order, now)) cancelled = true
        continue
      }
      const occurrence = this.occurrences.get(intent.tag) ?? 0
      this.occurrences.set(intent.tag, occurrence + 1)
      if (this.tracked.has(intent.tag)) {
        this.refused(intent.tag, TAG_IN_USE)
        continue
      }
      // A recorded order that reached the venue after the intent settles that much later, as it did there.
      const placedAt = this.timing?.placedAt(intent.tag, occurrence)
      this.catchUp()
      const placed = this.engine.place(UID, toRequest(intent), placedAt !== undefined && placedAt > now ? placedAt : now)
      if (!placed.ok) {
        this.refused(intent.tag, placed.code)
        continue
      }
      this.counts.placed += 1
      const stop = intent.type === "stop-limit"
      if (stop) this.waitingStops += 1
      this.tracked.set(intent.tag, { clientOrderId: placed.clientOrderId, stop, kind: "pending", filledBaseQty: ZERO, fills: 0 })
      this.placements.set(placed.clientOrderId, { tag: intent.tag, occurrence })
      this.openOrders.set(intent.tag, openOrderOf(intent, placed.clientOrderId))
    }
    if (cancelled) this.refreshBalances()
  }

  /**
   * A cancel answers at once (the venue's cancel answer carries the final kind), so
   * the tag is free again for the intents that follow it, unless a recorded run says
   * the strategy heard it later (`updateHeardAt`). A cancel of an order that already
   * filled, of a market order (matched or rejected whole at settlement), or of a tag
   * with no live order, changes nothing: the daemon refuses those without an update
   * of the order too. True when the order was cancelled.
   */
  private cancel(tag: string, order: Tracked, now: number): boolean {
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
  private applyUpdate(update: OrderUpdateEvent): void {
    if (isFinalUpdate(update.kind)) {
      this.tracked.delete(update.tag)
      this.openOrders.delete(update.tag)
    } else {
      // An update that is not final names a kind an order can rest in.
      this.openOrders.set(update.tag, { ...this.openOrders.get(update.tag)!, kind: update.kind as OrderKind, filledBaseQty: update.filledBaseQty })
    }
  }

  /** Counts an update of the order and schedules it when the recorded run heard it after `now`. */
  private heardLater(order: Tracked, update: OrderUpdateEvent, now: number): boolean {
    const timing = this.timing
    if (timing?.updateHeardAt === undefined) return false
    const updates = (order.updates ??= new Map())
    const index = updates.get(update.kind) ?? 0
    updates.set(update.kind, index + 1)
    const placement = this.placements.get(order.clientOrderId)
    const heard = placement === undefined ? undefined : timing.updateHeardAt(placement.tag, placement.occurrence, update.kind, index)
    if (heard === undefined || heard.atMs <= now) return false
    this.schedule({ atMs: heard.atMs, order: heard.order, what: "update", update })
    return true
  }

  private schedule(item: Scheduled): void {
    let i = this.scheduled.length
    for (; i > 0; i--) {
      const before = this.scheduled[i - 1]!
      if (before.atMs < item.atMs || (before.atMs === item.atMs && before.order <= item.order)) break
    }
    this.scheduled.splice(i, 0, item)
  }

  /**
   * What was scheduled before `limitMs` (or also at it, `atLimit`), each at its time: what
   * settled by then settles first, and the strategy hears the fills and updates of that
   * moment, then the scheduled cancel, fill or update.
   */
  private scheduledUntil(limitMs: number, atLimit: boolean): void {
    while (this.scheduled.length > 0) {
      const next = this.scheduled[0]!
      if (next.atMs > limitMs || (!atLimit && next.atMs === limitMs)) return
      this.scheduled.shift()
      const settled = this.settleUntil(next.atMs, true)
      this.view.now = next.atMs
      this.intentsThisMoment = 0
      this.deliverOrderProgress(settled)
      switch (next.what) {
        case "cancel": {
          const order = this.tracked.get(next.tag)
          if (order === undefined || order.clientOrderId !== next.clientOrderId || !this.cancel(next.tag, order, next.atMs)) break
          this.refreshBalances()
          this.answer()
          break
        }
        case "fill": {
          this.refreshBalances()
          const onFill = this.strategy.onFill
          if (onFill !== undefined) this.handle("onFill", onFill, next.fill)
          break
        }
        case "update": {
          this.applyUpdate(next.update)
          this.refreshBalances()
          this.answers.push(next.update)
          this.answer()
          break
        }
      }
    }
  }

  private refused(tag: string, code: string): void {
    this.counts.refused += 1
    this.answers.push({ tag, kind: "refused", code, filledBaseQty: ZERO })
  }

  /** New fills, then orders whose kind or filled quantity changed: those the strategy hears now. */
  private deliverOrderProgress(settled: boolean): void {
    const fills = this.newFills()
    // Kinds change only at settlement, with a fill, or when a stop triggers; otherwise no order needs reading.
    if (fills.length === 0 && !settled && this.waitingStops === 0) return
    const now = this.view.now
    const updates: Array<OrderUpdateEvent> = []
    for (const [tag, order] of this.tracked) {
      // An ended order changes no more, and the engine may have forgotten it (`engineRetention`)
      // while a recorded run's strategy had not heard of it yet.
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
    let heardFills = fills
    const fillHeardAt = this.timing?.fillHeardAt
    if (fillHeardAt !== undefined && fills.length > 0) {
      const heardNow: Array<RunFill> = []
      for (const fill of fills) {
        const order = this.tracked.get(fill.tag)
        const index = order === undefined || order.clientOrderId !== fill.clientOrderId ? 0 : order.fills++
        const placement = this.placements.get(fill.clientOrderId)
        const heard = placement === undefined ? undefined : fillHeardAt(placement.tag, placement.occurrence, index)
        if (heard !== undefined && heard.atMs > now) this.schedule({ atMs: heard.atMs, order: heard.order, what: "fill", fill })
        else heardNow.push(fill)
      }
      heardFills = heardNow
    }
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

const cronSchedule = (expression: string | undefined): CronSchedule | undefined => {
  if (expression === undefined) return undefined
  const schedule = CronSchedule.of(expression)
  if (schedule === undefined) throw new BacktestSetupInvalid({ message: `schedule "${expression}" is not a valid cron expression` })
  return schedule
}

const DAY_MS = 86_400_000

/**
 * How long the engine keeps ended orders and fills. The run reads every fill and every change of
 * an order by the close of the candle it happens in (at a recorded step or ticker, sooner), and
 * never asks about an ended order again, so a day of tape, or two candles or settle delays if
 * longer, keeps all it reads; what the engine forgets then is garbage before the collector has
 * to copy it, instead of every order of the run held to its end. Never by count: a moment may
 * end any number of orders.
 */
const engineRetention = (setup: BacktestSetup<any, any>): Retention => ({
  terminalMs: Math.max(DAY_MS, 2 * setup.intervalMs, 2 * setup.settleDelayMs),
  terminalCount: Number.MAX_SAFE_INTEGER
})

const checkSetup = (setup: BacktestSetup<any, any>): void => {
  if (setup.candles.length === 0) throw new BacktestSetupInvalid({ message: "no candles to run on (check --from/--to and the data)" })
  if (!Number.isSafeInteger(setup.intervalMs) || setup.intervalMs <= 0) {
    throw new BacktestSetupInvalid({ message: `the candle interval must be a positive whole number of milliseconds, got ${setup.intervalMs}` })
  }
  if (setup.schedule !== undefined && setup.intervalMs % MINUTE_MS !== 0) {
    throw new BacktestSetupInvalid({ message: "a cron schedule needs candles of whole minutes" })
  }
  const tape = setup.tape ?? []
  for (let i = 0; i < tape.length; i++) {
    const timeMs = tape[i]!.timeMs
    if (!Number.isFinite(timeMs)) throw new BacktestSetupInvalid({ message: `tape step ${i} has no time (${timeMs})` })
    if (i > 0 && timeMs < tape[i - 1]!.timeMs) {
      throw new BacktestSetupInvalid({ message: `the tape must be sorted by time: step ${i} at ${timeMs} comes after step ${i - 1} at ${tape[i - 1]!.timeMs}` })
    }
  }
  const others = (setup.strategy.symbols?.(setup.params) ?? []).filter((symbol) => symbol !== setup.pair.symbol)
  if (others.length > 0) {
    throw new BacktestSetupInvalid({
      message: `a backtest runs one pair (${setup.pair.symbol}); ${setup.strategy.name} also reads ${others.join(", ")} with these params`
    })
  }
}

/** What the account held from one candle's close on, until the next entry. */
interface Holdings {
  readonly from: number
  readonly base: Decimal
  readonly quote: Decimal
}

/** The exact equity at every close, from the holdings and the closes: the same Decimals a mark per candle would give. */
const exactEquity = (candles: ReadonlyArray<Candle>, holdings: ReadonlyArray<Holdings>): ReadonlyArray<Decimal> => {
  const equity = new Array<Decimal>(candles.length)
  for (let h = 0; h < holdings.length; h++) {
    const { from, base, quote } = holdings[h]!
    const to = holdings[h + 1]?.from ?? candles.length
    for (let i = from; i < to; i++) equity[i] = base.isZero() ? quote : quote.plus(base.mul(candles[i]!.close))
  }
  return equity
}

/** Runs one backtest. Deterministic: the same setup gives the same fills, equity and metrics. */
export const runBacktest = <P, S>(setup: BacktestSetup<P, S>): Either.Either<BacktestResult, BacktestFailed> => {
  try {
    checkSetup(setup)
    const candles = setup.candles
    const first = candles[0]!
    const intervalMs = setup.intervalMs
    const schedule = cronSchedule(setup.schedule)
    const run = new Run(setup, first.open, first.openTimeMs)
    const noTimers: ReadonlyArray<number> = []
    const tape = setup.tape
    for (const candle of setup.warmup ?? []) {
      run.warmUp(candle, candle.openTimeMs + intervalMs)
    }
    const afterCandle = setup.afterCandle
    for (let i = 0; i < candles.length; i++) {
      const candle = candles[i]!
      let timers = noTimers
      if (schedule !== undefined) {
        const closeMs = candle.openTimeMs + intervalMs
        // Most candles fire nothing: an array only for those that do.
        let due: Array<number> | undefined
        for (let minute = candle.openTimeMs + MINUTE_MS; minute <= closeMs; minute += MINUTE_MS) if (schedule.matches(minute)) (due ??= []).push(minute)
        if (due !== undefined) timers = due
      }
      if (tape === undefined) run.candle(candle, timers)
      else run.replayCandle(tape, candle, candle.openTimeMs + intervalMs, timers)
      run.record(i, candle)
      if (afterCandle !== undefined) afterCandle(i, run.strategyState)
    }
    const last = candles[candles.length - 1]!
    const finalEquity = run.base.isZero() ? run.quote : run.quote.plus(run.base.mul(last.close))
    const recorder = run.recorder
    const metrics = recorder.finish({ intervalMs, fromMs: first.openTimeMs, finalEquity, inMarketCandles: run.inMarketCandles })
    const holdings = run.holdings
    let equity: ReadonlyArray<Decimal> | undefined
    return Either.right({
      fills: run.fills,
      get equity() {
        return (equity ??= exactEquity(candles, holdings))
      },
      equityMarks: recorder.marks,
      metrics,
      balances: run.finalBalances,
      orders: run.counts,
      placements: run.placements
    })
  } catch (error) {
    if (error instanceof StrategyFailed || error instanceof BacktestSetupInvalid) return Either.left(error)
    throw error
  }
}
