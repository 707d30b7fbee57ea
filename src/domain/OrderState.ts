/**
 * The order state machine of the engine's journal: one exhaustive transition
 * table for live and paper trading (a backtest follows its orders by the matching
 * engine's kinds and keeps no journal). A state change that is not in the table
 * is an `InvalidTransition`, never a silent overwrite.
 *
 *   intent -> submitting -> accepted -> pending/resting -> fill | rejected(code) | cancelled
 *   submitting -> unknown -> accepted | not_placed
 *   submitting -> refused(code)
 *   intent/submitting -> refused(STOPPING) (withdrawn: the engine stopped before it was sent)
 *   accepted/pending/resting -> lost (the service no longer knows the order)
 */
import { Data, Either } from "effect"

export const ORDER_STATES = [
  "intent",
  "submitting",
  "accepted",
  "pending",
  "resting",
  "fill",
  "rejected",
  "cancelled",
  "unknown",
  "not_placed",
  "refused",
  "lost"
] as const
export type OrderState = (typeof ORDER_STATES)[number]

export const ORDER_EVENTS = [
  /** The placement request is about to be sent. */
  "send",
  /** HTTP 202: the service created the clientOrderId. */
  "accept",
  /** The service refused the placement before accepting it (4xx with a code). */
  "refuse",
  /** The answer was lost: timeout, connection reset or 5xx. */
  "lose",
  /** The engine stopped before any sender took the placement: it was never sent, and never will be. */
  "withdraw",
  /** Reconciliation proved the lost placement never reached the book. */
  "proveAbsent",
  /** Order status kinds as the service reports them. */
  "pending",
  "resting",
  "fill",
  "rejected",
  "cancelled",
  /** The service answers ORDER_NOT_FOUND past the settle window and has the order in neither its open orders nor its fills. */
  "vanish"
] as const
export type OrderEvent = (typeof ORDER_EVENTS)[number]

const settlement = {
  pending: "pending",
  resting: "resting",
  fill: "fill",
  rejected: "rejected",
  cancelled: "cancelled",
  // The service lost its state (a venue restarted empty): the order is gone without a final kind.
  vanish: "lost"
} as const

const TABLE: { readonly [S in OrderState]: { readonly [E in OrderEvent]?: OrderState } } = {
  intent: { send: "submitting", withdraw: "refused" },
  // A placement is marked submitting before it waits for a sender; until one takes it, it is not on the wire.
  submitting: { accept: "accepted", refuse: "refused", lose: "unknown", withdraw: "refused" },
  accepted: settlement,
  // A stop-limit waits as pending until its stop triggers, then rests on the book.
  pending: settlement,
  resting: {
    resting: "resting",
    fill: "fill",
    cancelled: "cancelled",
    // A halt of the pair can reject an order that was already resting.
    rejected: "rejected",
    // The service lost its state while the order rested.
    vanish: "lost"
  },
  // Reconciliation found the order in open orders, order status or fills.
  unknown: { accept: "accepted", proveAbsent: "not_placed" },
  fill: {},
  rejected: {},
  cancelled: {},
  not_placed: {},
  refused: {},
  lost: {}
}

/** States no poll changes any more (`lost` waits for an operator, not for the service). */
export const TERMINAL_STATES: ReadonlySet<OrderState> = new Set(["fill", "rejected", "cancelled", "not_placed", "refused", "lost"])
/** States in which the order may be on the service's book and is followed by the tracker. */
export const LIVE_STATES: ReadonlySet<OrderState> = new Set(["accepted", "pending", "resting"])
/** States in which the outcome of a placement is not known yet. */
export const IN_FLIGHT_STATES: ReadonlySet<OrderState> = new Set(["intent", "submitting", "unknown"])

export const isTerminal = (state: OrderState): boolean => TERMINAL_STATES.has(state)

/**
 * True when an order in `state` is where `event` would take it: the event was applied already
 * (two observers of one outcome raced), so it changes nothing and proves no disagreement.
 */
export const alreadyApplied = (state: OrderState, event: OrderEvent): boolean => Object.values(TABLE).some((events) => events[event] === state)
export const isOrderState = (value: string): value is OrderState => (ORDER_STATES as ReadonlyArray<string>).includes(value)
export const isOrderEvent = (value: string): value is OrderEvent => (ORDER_EVENTS as ReadonlyArray<string>).includes(value)

export class InvalidTransition extends Data.TaggedError("InvalidTransition")<{
  readonly from: OrderState
  readonly event: OrderEvent
}> {
  override get message() {
    return `an order in state ${this.from} cannot take event ${this.event}`
  }
}

/** The next state, or `InvalidTransition` when the table has no such edge. */
export const transition = (from: OrderState, event: OrderEvent): Either.Either<OrderState, InvalidTransition> => {
  const to = TABLE[from][event]
  return to === undefined ? Either.left(new InvalidTransition({ from, event })) : Either.right(to)
}

/** The events `from` accepts. */
export const eventsFrom = (from: OrderState): ReadonlyArray<OrderEvent> =>
  ORDER_EVENTS.filter((event) => TABLE[from][event] !== undefined)
