/**
 * A strategy instance's inbox: the events waiting for its handlers, and what a
 * restored instance missed while it did not run. The host's event loop takes
 * everything waiting in one go; deliveries wait for room, market data and timers
 * a paused instance is given are dropped as they are given.
 */
import { Effect } from "effect"
import { fillEventOf } from "../daemon/FillEvents.js"
import type { LedgerFill } from "../store/FillLedger.js"
import type { OwedAnswer } from "../store/OrderJournal.js"
import type { CandleEvent, FillEvent, OrderUpdateEvent, OrderUpdateKind, TickerEvent, TimerEvent } from "./Strategy.js"

export type HostEvent =
  | { readonly _tag: "Candle"; readonly event: CandleEvent }
  | { readonly _tag: "Ticker"; readonly event: TickerEvent }
  | { readonly _tag: "Timer"; readonly event: TimerEvent }
  | { readonly _tag: "OrderUpdate"; readonly event: OrderUpdateEvent }
  | { readonly _tag: "Fill"; readonly event: FillEvent }

/** What became of an order: a final update or a fill, each handed to its instance once. */
export type OutcomeEvent = Extract<HostEvent, { readonly _tag: "OrderUpdate" | "Fill" }>

/**
 * Market data and timers: what matters only when it comes. A paused instance is not given them:
 * handled after a pause it would act on stale prices, or on every schedule it missed at once.
 */
export const isMomentary = (event: HostEvent): boolean => event._tag !== "OrderUpdate" && event._tag !== "Fill"

/**
 * What a restored instance missed, as events in the order they came about: each final update
 * after the fills it reports (the order the engine publishes them in), then the fills of orders
 * still open, order by order.
 */
export const missedEvents = (answers: ReadonlyArray<OwedAnswer>, fills: ReadonlyArray<{ readonly fill: LedgerFill; readonly tag: string }>): Array<OutcomeEvent> => {
  const fillsOf = new Map<string | null, Array<OutcomeEvent>>()
  for (const { fill, tag } of fills) {
    const events = fillsOf.get(fill.clientOrderId) ?? []
    events.push({ _tag: "Fill", event: fillEventOf(fill, tag) })
    fillsOf.set(fill.clientOrderId, events)
  }
  const missed: Array<OutcomeEvent> = []
  for (const answer of answers) {
    if (answer.clientOrderId !== null) {
      missed.push(...(fillsOf.get(answer.clientOrderId) ?? []))
      fillsOf.delete(answer.clientOrderId)
    }
    missed.push({
      _tag: "OrderUpdate",
      event: {
        tag: answer.tag,
        ...(answer.clientOrderId === null ? {} : { clientOrderId: answer.clientOrderId }),
        // A final state is the update kind of its name.
        kind: answer.state as OrderUpdateKind,
        ...(answer.code === null ? {} : { code: answer.code }),
        filledBaseQty: answer.filledBaseQty
      }
    })
  }
  for (const events of fillsOf.values()) missed.push(...events)
  return missed
}

/** How many events may wait for one instance; a delivery beyond it waits for the handler to catch up. */
export const QUEUE_CAPACITY = 1024

/**
 * The instance's queue: events waiting to be handled, oldest first, at most QUEUE_CAPACITY of
 * them from outside. A plain array and two latches rather than an Effect Queue: the handler
 * takes everything waiting in one go, which an Effect Queue rebuilds element by element.
 */
export class Inbox {
  private events: Array<HostEvent> = []
  /** Open while the inbox holds events. */
  private readonly arrived = Effect.unsafeMakeLatch(false)
  /** Open while the inbox has room. */
  private readonly room = Effect.unsafeMakeLatch(true)
  private stopped = false

  /** `paused` says whether the instance is paused now: its market data and timers are then dropped as they are given. */
  constructor(private readonly paused: () => boolean) {}

  /** The instance stopped: whoever waits for room is let go, and what comes after is not handled. */
  stop(): void {
    this.stopped = true
    this.room.unsafeOpen()
  }

  /** Queues an event whatever the room: answers the instance owes itself, which only it could make room for. */
  push(event: HostEvent): void {
    this.events.push(event)
    this.arrived.unsafeOpen()
    if (this.events.length >= QUEUE_CAPACITY) this.room.unsafeClose()
  }

  /** Queues events ahead of everything waiting: what happened while the instance did not run comes first. */
  pushFirst(events: ReadonlyArray<HostEvent>): void {
    if (events.length === 0) return
    this.events = [...events, ...this.events]
    this.arrived.unsafeOpen()
    if (this.events.length >= QUEUE_CAPACITY) this.room.unsafeClose()
  }

  /**
   * Queues events in order, waiting for room whenever the queue is full. Market data and timers a
   * paused instance is given are dropped here, not when the loop next takes them, so that a resume
   * soon after cannot let them through.
   */
  deliver = (events: ReadonlyArray<HostEvent>): Effect.Effect<void> =>
    Effect.suspend(() => {
      const queued = this.enqueue(events)
      return queued === events.length ? Effect.void : Effect.zipRight(this.room.await, this.deliver(events.slice(queued)))
    })

  /** Queues an event if there is room, else drops it: a timer that finds the queue full is skipped, the next one comes. */
  offer(event: HostEvent): void {
    this.enqueue([event])
  }

  /** Queues events in order while there is room; how many it took (queued, or dropped as the pause says). */
  private enqueue(events: ReadonlyArray<HostEvent>): number {
    if (this.stopped) return events.length
    const paused = this.paused()
    const queue = this.events
    let at = 0
    for (; at < events.length; at++) {
      const event = events[at]!
      if (paused && isMomentary(event)) continue
      if (queue.length >= QUEUE_CAPACITY) break
      queue.push(event)
    }
    if (queue.length > 0) this.arrived.unsafeOpen()
    if (queue.length >= QUEUE_CAPACITY) this.room.unsafeClose()
    return at
  }

  /** Everything waiting, once there is something. */
  takeAll: Effect.Effect<ReadonlyArray<HostEvent>> = Effect.suspend(() => {
    if (this.events.length === 0) return Effect.zipRight(this.arrived.await, this.takeAll)
    const events = this.events
    this.events = []
    this.arrived.unsafeClose()
    this.room.unsafeOpen()
    return Effect.succeed(events)
  })
}
