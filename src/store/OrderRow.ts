/**
 * An order as the journal holds it: `OrderRow`, the `OrderPatch` of what may change,
 * and the codec between it and the `orders` table (a raw row read back, the columns
 * an insert writes, the columns a change may touch). Plain functions, no SQL run here:
 * the statements are `OrderJournal`'s.
 */
import { Decimal } from "../domain/Decimal.js"
import { isTerminal, type OrderState } from "../domain/OrderState.js"
import type { OrderTerms } from "../domain/OrderTerms.js"
import type { OrderType, Side } from "../svc/Dialect.js"

export type OrderOrigin = "journal" | "external"

export interface OrderRow extends OrderTerms {
  readonly orderId: number
  readonly intentId: string | null
  readonly strategyId: string | null
  readonly tag: string | null
  readonly origin: OrderOrigin
  readonly clientOrderId: string | null
  readonly state: OrderState
  /** Order kinds as the service reported them, in order, without repeats in a row. */
  readonly kindsSeen: ReadonlyArray<string>
  readonly code: string | null
  readonly symbol: string
  readonly filledBaseQty: Decimal
  readonly avgPrice: Decimal | null
  readonly lockAsset: string | null
  readonly lockAmount: Decimal | null
  readonly cancelRequested: boolean
  readonly sentAt: number | null
  /** When the placement's answer was lost (state `unknown`). */
  readonly lostAt: number | null
  readonly acceptedAt: number | null
  /** The venue's own createdAt for the order, when its status answer carries one. */
  readonly venueCreatedAt: number | null
  /** The venue's own time of the cancel, when its status answer for the cancelled order carries one. */
  readonly venueCancelledAt: number | null
  readonly terminalAt: number | null
  readonly nextPollAt: number | null
  readonly polls: number
  /** Status probes in a row that answered ORDER_NOT_FOUND past the settle window. */
  readonly notFoundProbes: number
  /** When an operator acknowledged the order as lost. */
  readonly acknowledgedAt: number | null
  readonly createdAt: number
  readonly updatedAt: number
}

/** Fields that change alongside a state change or on their own (progress, polling). */
export interface OrderPatch {
  readonly clientOrderId?: string
  readonly code?: string | null
  readonly kind?: string
  readonly filledBaseQty?: Decimal
  readonly avgPrice?: Decimal | null
  readonly sentAt?: number
  readonly lostAt?: number
  readonly acceptedAt?: number
  readonly venueCreatedAt?: number
  readonly venueCancelledAt?: number
  readonly nextPollAt?: number | null
  readonly polls?: number
  readonly cancelRequested?: boolean
  readonly notFoundProbes?: number
}

/** An `orders` row as better-sqlite3 reads it. */
export interface RawOrder {
  order_id: number
  intent_id: string | null
  strategy_id: string | null
  tag: string | null
  origin: OrderOrigin
  client_order_id: string | null
  state: OrderState
  kinds_seen: string
  code: string | null
  symbol: string
  side: Side
  type: OrderType
  base_qty: string | null
  quote_order_qty: string | null
  limit_price: string | null
  stop_price: string | null
  max_slippage_bps: number | null
  filled_base_qty: string
  avg_price: string | null
  lock_asset: string | null
  lock_amount: string | null
  cancel_requested: number
  sent_at: number | null
  lost_at: number | null
  accepted_at: number | null
  venue_created_at: number | null
  venue_cancelled_at: number | null
  terminal_at: number | null
  next_poll_at: number | null
  polls: number
  not_found_probes: number
  acknowledged_at: number | null
  created_at: number
  updated_at: number
}

const dec = (text: string | null): Decimal | null => (text === null ? null : new Decimal(text))
export const text = (value: Decimal | undefined | null): string | null => (value === undefined || value === null ? null : value.toFixed())

export const toRow = (raw: RawOrder): OrderRow => ({
  orderId: raw.order_id,
  intentId: raw.intent_id,
  strategyId: raw.strategy_id,
  tag: raw.tag,
  origin: raw.origin,
  clientOrderId: raw.client_order_id,
  state: raw.state,
  kindsSeen: raw.kinds_seen === "" ? [] : raw.kinds_seen.split(","),
  code: raw.code,
  symbol: raw.symbol,
  side: raw.side,
  type: raw.type,
  baseQty: dec(raw.base_qty),
  quoteOrderQty: dec(raw.quote_order_qty),
  limitPrice: dec(raw.limit_price),
  stopPrice: dec(raw.stop_price),
  maxSlippageBps: raw.max_slippage_bps,
  filledBaseQty: new Decimal(raw.filled_base_qty),
  avgPrice: dec(raw.avg_price),
  lockAsset: raw.lock_asset,
  lockAmount: dec(raw.lock_amount),
  cancelRequested: raw.cancel_requested === 1,
  sentAt: raw.sent_at,
  lostAt: raw.lost_at,
  acceptedAt: raw.accepted_at,
  venueCreatedAt: raw.venue_created_at,
  venueCancelledAt: raw.venue_cancelled_at,
  terminalAt: raw.terminal_at,
  nextPollAt: raw.next_poll_at,
  polls: raw.polls,
  notFoundProbes: raw.not_found_probes,
  acknowledgedAt: raw.acknowledged_at,
  createdAt: raw.created_at,
  updatedAt: raw.updated_at
})

/** The columns an insert writes, in the order of `insertedValues`; the others keep their defaults. */
export const INSERTED_COLUMNS = [
  "intent_id",
  "strategy_id",
  "tag",
  "origin",
  "client_order_id",
  "state",
  "kinds_seen",
  "symbol",
  "side",
  "type",
  "base_qty",
  "quote_order_qty",
  "limit_price",
  "stop_price",
  "max_slippage_bps",
  "filled_base_qty",
  "lock_asset",
  "lock_amount",
  "accepted_at",
  "created_at",
  "updated_at"
] as const

/** A new order's values for `INSERTED_COLUMNS`: positional, as binding by name looks each one up in an object, on every intent. */
export const insertedValues = (row: Omit<OrderRow, "orderId">): Array<unknown> => [
  row.intentId,
  row.strategyId,
  row.tag,
  row.origin,
  row.clientOrderId,
  row.state,
  row.kindsSeen.join(","),
  row.symbol,
  row.side,
  row.type,
  text(row.baseQty),
  text(row.quoteOrderQty),
  text(row.limitPrice),
  text(row.stopPrice),
  row.maxSlippageBps,
  row.filledBaseQty.toFixed(),
  row.lockAsset,
  text(row.lockAmount),
  row.acceptedAt,
  row.createdAt,
  row.createdAt
]

/** A column a write may change: whether it did, comparing the rows' fields (no serializing), and its value as the table holds it. */
export interface MutableColumn {
  readonly column: string
  readonly changed: (before: OrderRow, after: OrderRow) => boolean
  readonly value: (row: OrderRow) => unknown
}

/** A column holding a field as it is; a patch that leaves the field alone leaves the very same value (arrays included). */
const plainColumn = (column: string, key: keyof OrderRow, value: (row: OrderRow) => unknown = (row) => row[key]): MutableColumn => ({
  column,
  changed: (before, after) => before[key] !== after[key],
  value
})

/** A column holding an amount: a patch gives a new Decimal for each observation, changed only when its value is. */
const amountColumn = (column: string, key: "filledBaseQty" | "avgPrice"): MutableColumn => ({
  column,
  changed: (before, after) => {
    const was = before[key]
    const is = after[key]
    return was !== is && (was === null || is === null || !was.eq(is))
  },
  value: (row) => text(row[key])
})

/** The columns a state change or progress can touch; `updated_at` is written by every write. */
export const MUTABLE_COLUMNS: ReadonlyArray<MutableColumn> = [
  plainColumn("state", "state"),
  plainColumn("kinds_seen", "kindsSeen", (row) => row.kindsSeen.join(",")),
  plainColumn("client_order_id", "clientOrderId"),
  plainColumn("code", "code"),
  amountColumn("filled_base_qty", "filledBaseQty"),
  amountColumn("avg_price", "avgPrice"),
  plainColumn("cancel_requested", "cancelRequested", (row) => (row.cancelRequested ? 1 : 0)),
  plainColumn("sent_at", "sentAt"),
  plainColumn("lost_at", "lostAt"),
  plainColumn("accepted_at", "acceptedAt"),
  plainColumn("venue_created_at", "venueCreatedAt"),
  plainColumn("venue_cancelled_at", "venueCancelledAt"),
  plainColumn("terminal_at", "terminalAt"),
  plainColumn("next_poll_at", "nextPollAt"),
  plainColumn("polls", "polls"),
  plainColumn("not_found_probes", "notFoundProbes"),
  { column: "updated_at", changed: () => true, value: (row) => row.updatedAt }
]

/**
 * The row a patch leaves, as the table holds it after `UPDATE`. Every field is written out rather
 * than spread over a copy of the row: a spread of some thirty fields cost more than the rest of a
 * journal write, and this runs for every state change of every order.
 */
export const patched = (row: OrderRow, patch: OrderPatch, state: OrderState | undefined, now: number): OrderRow => {
  const terminal = state !== undefined && isTerminal(state)
  const lastKind = row.kindsSeen[row.kindsSeen.length - 1]
  return {
    orderId: row.orderId,
    intentId: row.intentId,
    strategyId: row.strategyId,
    tag: row.tag,
    origin: row.origin,
    clientOrderId: patch.clientOrderId ?? row.clientOrderId,
    state: state ?? row.state,
    kindsSeen: patch.kind !== undefined && lastKind !== patch.kind ? [...row.kindsSeen, patch.kind] : row.kindsSeen,
    code: patch.code !== undefined ? patch.code : row.code,
    symbol: row.symbol,
    side: row.side,
    type: row.type,
    baseQty: row.baseQty,
    quoteOrderQty: row.quoteOrderQty,
    limitPrice: row.limitPrice,
    stopPrice: row.stopPrice,
    maxSlippageBps: row.maxSlippageBps,
    filledBaseQty: patch.filledBaseQty ?? row.filledBaseQty,
    avgPrice: patch.avgPrice !== undefined ? patch.avgPrice : row.avgPrice,
    lockAsset: row.lockAsset,
    lockAmount: row.lockAmount,
    cancelRequested: patch.cancelRequested ?? row.cancelRequested,
    sentAt: patch.sentAt ?? row.sentAt,
    lostAt: patch.lostAt ?? row.lostAt,
    acceptedAt: patch.acceptedAt ?? row.acceptedAt,
    venueCreatedAt: patch.venueCreatedAt ?? row.venueCreatedAt,
    venueCancelledAt: patch.venueCancelledAt ?? row.venueCancelledAt,
    // A finished order is never polled again, whatever the patch asked for.
    terminalAt: terminal ? now : row.terminalAt,
    nextPollAt: terminal ? null : patch.nextPollAt !== undefined ? patch.nextPollAt : row.nextPollAt,
    polls: patch.polls ?? row.polls,
    notFoundProbes: patch.notFoundProbes ?? row.notFoundProbes,
    acknowledgedAt: row.acknowledgedAt,
    createdAt: row.createdAt,
    updatedAt: now
  }
}
