/**
 * Replaying a recorded paper run: to judge paper trading fill for fill, the run is
 * given the venue's own price steps (`tape`). Inside each candle's window (t, T] the
 * recorded steps replace the candle path (step 2 of `Run`), played as the venue
 * plays them: at each step time, every order whose settlement time has come settles
 * (each at its own time, against the price in effect then), then the step's price
 * moves the book; steps of one time are played together, as one venue tick. Fills
 * and order updates a step brings are delivered at once, at the step's time
 * (`view.now`), so a strategy answering a fill places its intents then, not at the
 * close; settlements after the window's last step are delivered at `T` (step 1). A
 * window without steps moves no price: the tape, not the candle, decides. The
 * candle, ticker and timers stay at `T`, and steps outside every window are ignored.
 *
 * `timing` gives, per placement intent (its tag and how many placement intents of
 * that tag came before it), the time its order reached the venue; the order is
 * placed with that time when it is later than the intent, so it stays pending,
 * unseen by the steps, until that time plus the settle delay. It gives the same for
 * a cancel intent (counted among the cancels of its tag): the time the venue
 * cancelled the order. Until then the order stays live, as it did on the venue: it
 * can still fill, its tag is still in use, and the strategy hears `cancelled` at that
 * time, played before a step or ticker of a later time and after one of the same
 * time (without a tape, before the next candle's path). Each order's intent is in
 * `placements`, so fills compare intent by intent (`Parity.ts`).
 */
import type { Decimal } from "../domain/Decimal.js"
import { ZERO } from "../domain/Decimal.js"
import type { PlaceIntent } from "../domain/Intent.js"
import type { FillEvent, OrderUpdateEvent, OrderUpdateKind } from "../strategy/Strategy.js"
import type { VenueCandle } from "../venue/PricePath.js"
import type { RunFill } from "./Metrics.js"
import { openOrderOf, toRequest } from "./Events.js"
import { Run, type RunSetup, type Tracked, UID } from "./Run.js"

/** What a replay adds to a run's setup: the recording of the paper run it replays. */
export interface RecordedRun {
  /** The venue's price steps of a recorded run, by time: played instead of the candle paths. */
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
  readonly seq: number
}

/** The occurrence of an order a recorded run started with (`carried`): no intent of the run placed it. */
export const CARRIED = -1

/** True when the setup replays a recorded run, which a plain `Run` cannot. */
export const isReplay = (recording: RecordedRun): boolean =>
  recording.tape !== undefined ||
  recording.timing !== undefined ||
  recording.tickers !== undefined ||
  recording.carried !== undefined ||
  recording.missed !== undefined

/**
 * Something a recorded run had happen later than the moment the replay reaches it: a cancel
 * the venue applied later, or a fill or order update the strategy heard later.
 */
type Postponed = {
  readonly atMs: number
  /** Among things of one time: a cancel (the venue's) first, then what the strategy heard in the order it heard it. */
  readonly seq: number
} & (
  | { readonly what: "cancel"; readonly tag: string; readonly clientOrderId: string }
  | { readonly what: "fill"; readonly fill: RunFill }
  | { readonly what: "update"; readonly update: OrderUpdateEvent }
)

/** Of one order: its fills, and its updates per kind, so far: which one a recorded hearing time is for. */
interface Hearings {
  fills: number
  /** Counted only for a recording that says when its updates were heard (`updateHeardAt`). */
  readonly updates: Map<OrderUpdateKind, number>
}

export class ReplayRun<P, S> extends Run<P, S> {
  protected declare readonly setup: RunSetup<P, S> & RecordedRun
  private readonly timing: ReplayTiming | undefined
  private readonly tape: ReadonlyArray<TapeStep> | undefined
  private readonly tickers: ReadonlyArray<GivenTicker> | undefined
  /** Per order the strategy placed or carried, while it is tracked. */
  private readonly hearings = new WeakMap<Tracked, Hearings>()
  /** Cancel intents seen per tag: the next cancel's `occurrence`. */
  private readonly cancelOccurrences = new Map<string, number>()
  /** Sorted by time, then by `seq`, then in the order postponed. */
  private readonly postponed: Array<Postponed> = []
  /** The first step not played yet. */
  private nextStep = 0
  /** The first given ticker not heard yet. */
  private nextTicker = 0

  constructor(setup: RunSetup<P, S> & RecordedRun, firstPrice: Decimal, startMs: number) {
    super(setup, firstPrice, startMs)
    this.timing = setup.timing
    this.tape = setup.tape
    this.tickers = setup.tickers
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
  protected override openingOrders(startMs: number): void {
    const orders = this.setup.carried ?? []
    if (orders.length === 0) return
    for (const intent of orders) {
      const placed = this.engine.place(UID, toRequest(intent), startMs - this.setup.settleDelayMs)
      if (!placed.ok) continue
      const stop = intent.type === "stop-limit"
      this.tracked.set(intent.tag, { clientOrderId: placed.clientOrderId, stop, kind: "pending", filledBaseQty: ZERO })
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

  /** The recorded tickers are heard when they were given, not at each close. */
  protected override tickerAtEachClose(): boolean {
    return this.tickers === undefined
  }

  /** A recorded order that reached the venue after the intent settles that much later, as it did there. */
  protected override placedAt(tag: string, occurrence: number, now: number): number {
    const placedAt = this.timing?.placedAt(tag, occurrence)
    return placedAt !== undefined && placedAt > now ? placedAt : now
  }

  /** A cancel the venue applied later than the intent takes effect then; until then the order stays live. */
  protected override cancelIntent(tag: string, now: number): boolean {
    const occurrence = this.cancelOccurrences.get(tag) ?? 0
    this.cancelOccurrences.set(tag, occurrence + 1)
    const cancelAt = this.timing?.cancelledAt(tag, occurrence)
    const order = this.tracked.get(tag)
    if (order !== undefined && cancelAt !== undefined && cancelAt > now) {
      this.postpone({ atMs: cancelAt, seq: Number.NEGATIVE_INFINITY, what: "cancel", tag, clientOrderId: order.clientOrderId })
      return false
    }
    return order !== undefined && this.cancel(tag, order, now)
  }

  private hearingsOf(order: Tracked): Hearings {
    let hearings = this.hearings.get(order)
    if (hearings === undefined) this.hearings.set(order, (hearings = { fills: 0, updates: new Map() }))
    return hearings
  }

  /** Counts an update of the order and postpones it when the recorded run heard it after `now`. */
  protected override heardLater(order: Tracked, update: OrderUpdateEvent, now: number): boolean {
    const timing = this.timing
    if (timing?.updateHeardAt === undefined) return false
    const updates = this.hearingsOf(order).updates
    const index = updates.get(update.kind) ?? 0
    updates.set(update.kind, index + 1)
    const placement = this.placements.get(order.clientOrderId)
    const heard = placement === undefined ? undefined : timing.updateHeardAt(placement.tag, placement.occurrence, update.kind, index)
    if (heard === undefined || heard.atMs <= now) return false
    this.postpone({ atMs: heard.atMs, seq: heard.seq, what: "update", update })
    return true
  }

  /** The fills the recorded run's strategy heard after `now` are postponed until then; the rest are heard now. */
  protected override fillsHeardNow(fills: ReadonlyArray<RunFill>, now: number): ReadonlyArray<RunFill> {
    const fillHeardAt = this.timing?.fillHeardAt
    if (fillHeardAt === undefined) return fills
    const heardNow: Array<RunFill> = []
    for (const fill of fills) {
      const order = this.tracked.get(fill.tag)
      // An order no longer tracked (its final update heard) or a later order of the tag counts as its first fill.
      const index = order === undefined || order.clientOrderId !== fill.clientOrderId ? 0 : this.hearingsOf(order).fills++
      const placement = this.placements.get(fill.clientOrderId)
      const heard = placement === undefined ? undefined : fillHeardAt(placement.tag, placement.occurrence, index)
      if (heard !== undefined && heard.atMs > now) this.postpone({ atMs: heard.atMs, seq: heard.seq, what: "fill", fill })
      else heardNow.push(fill)
    }
    return heardNow
  }

  private postpone(item: Postponed): void {
    let i = this.postponed.length
    for (; i > 0; i--) {
      const before = this.postponed[i - 1]!
      if (before.atMs < item.atMs || (before.atMs === item.atMs && before.seq <= item.seq)) break
    }
    this.postponed.splice(i, 0, item)
  }

  /**
   * What was postponed until before `limitMs` (or also until it, `atLimit`), each at its time:
   * what settled by then settles first, and the strategy hears the fills and updates of that
   * moment, then the postponed cancel, fill or update.
   */
  private playPostponedUntil(limitMs: number, atLimit: boolean): void {
    while (this.postponed.length > 0) {
      const next = this.postponed[0]!
      if (next.atMs > limitMs || (!atLimit && next.atMs === limitMs)) return
      this.postponed.shift()
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

  /** Steps 1 to 4 for one candle: what was postponed until its close first; with a tape, the recorded steps of its window instead of its path. */
  override candle(candle: VenueCandle, timers: ReadonlyArray<number>): void {
    const tape = this.tape
    const closeMs = candle.openTimeMs + this.intervalMs
    if (tape === undefined) {
      this.playPostponedUntil(closeMs, true)
      super.candle(candle, timers)
      return
    }
    let at = this.nextStep
    while (at < tape.length && tape[at]!.timeMs <= candle.openTimeMs) at++
    const tickers = this.tickers ?? []
    let heard = this.nextTicker
    while (heard < tickers.length && tickers[heard]!.atMs <= candle.openTimeMs) heard++
    while ((at < tape.length && tape[at]!.timeMs <= closeMs) || (heard < tickers.length && tickers[heard]!.atMs <= closeMs)) {
      // A ticker given at the moment of a step saw the step: it comes after it.
      if (heard < tickers.length && tickers[heard]!.atMs <= closeMs && (at >= tape.length || tickers[heard]!.atMs < tape[at]!.timeMs)) {
        this.playPostponedUntil(tickers[heard]!.atMs, false)
        this.ticker(tickers[heard++]!)
        continue
      }
      const stepMs = tape[at]!.timeMs
      this.playPostponedUntil(stepMs, false)
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
    this.playPostponedUntil(closeMs, true)
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
    this.lastPrices.given = price
    this.handle("onTicker", onTicker, { symbol: this.symbol, price, time: given.timeMs })
  }
}
