/**
 * Entries stopped by an operator (`stopEntries`, from the console): while they are, an instance's
 * placements that open or add to a position are refused and answered a little later, and its
 * exits and cancels go out as usual.
 */
import { Effect, type Scope } from "effect"
import { type Decimal, ZERO } from "../domain/Decimal.js"
import type { Intent, PlaceIntent } from "../domain/Intent.js"
import type { OpenOrder, OrderUpdateEvent } from "./Strategy.js"

/** The code of an entry refused while an operator has the instance's entries stopped. */
export const ENTRIES_STOPPED = "entries-stopped"

/** How long a refused entry waits for its answer: a strategy that asks again on every refusal must not spin. */
const ENTRY_ANSWER_DELAY_MS = 5000

/**
 * Whether a placement opens or adds to a position (an entry) rather than reducing one (an exit).
 * `position` is the instance's own position in the pair; `exiting` what is already on its way out
 * on the same side (resting orders, exits admitted before it). A market buy by quote amount has
 * no size in base to compare with the position, so it counts as an entry.
 */
export const isEntry = (intent: PlaceIntent, position: Decimal, exiting: Decimal): boolean => {
  const reducible = intent.side === "sell" ? position : position.neg()
  if (!reducible.gt(ZERO)) return true
  if (!("baseQty" in intent)) return true
  return intent.baseQty.plus(exiting).gt(reducible)
}

export interface EntryGateOptions {
  readonly strategyId: string
  /** The instance's own position in a pair, from its fills; without it the instance counts as flat. */
  readonly position: ((strategyId: string, symbol: string) => Effect.Effect<Decimal>) | undefined
  /** Hands the instance the answer to a refused entry (into its inbox). */
  readonly answer: (event: OrderUpdateEvent) => void
  /** Where the answers wait for their time. */
  readonly scope: Scope.Scope
}

/** One instance's entries: whether they are stopped, and its intents with the entries taken out while they are. */
export const entryGate = (options: EntryGateOptions) => {
  let stopped = false
  /** Refused entries not answered yet; answered together, ENTRY_ANSWER_DELAY_MS after the first. */
  const pending: Array<OrderUpdateEvent> = []
  const answerLater = Effect.suspend(() =>
    Effect.asVoid(
      Effect.forkIn(
        Effect.delay(
          Effect.sync(() => {
            for (const event of pending.splice(0)) options.answer(event)
          }),
          ENTRY_ANSWER_DELAY_MS
        ),
        options.scope
      )
    )
  )
  return {
    stopped: (): boolean => stopped,
    /** Stops entries; false when they already were. */
    stop: (): boolean => {
      if (stopped) return false
      stopped = true
      return true
    },
    start: (): void => {
      stopped = false
    },
    /** Placements that are not entries while entries are stopped; the entries are refused, answered a little later. */
    withoutEntries: (intents: ReadonlyArray<Intent>, account: { readonly openOrders: ReadonlyMap<string, OpenOrder> }) =>
      Effect.gen(function* () {
        if (!stopped) return intents
        const positions = new Map<string, Decimal>()
        const exiting = new Map<string, Decimal>()
        for (const order of account.openOrders.values()) {
          const key = `${order.symbol}:${order.side}`
          exiting.set(key, (exiting.get(key) ?? ZERO).plus(order.baseQty.minus(order.filledBaseQty)))
        }
        const kept: Array<Intent> = []
        for (const intent of intents) {
          if (intent.type === "cancel") {
            kept.push(intent)
            continue
          }
          let position = positions.get(intent.symbol)
          if (position === undefined) {
            position = options.position === undefined ? ZERO : yield* options.position(options.strategyId, intent.symbol)
            positions.set(intent.symbol, position)
          }
          const key = `${intent.symbol}:${intent.side}`
          const already = exiting.get(key) ?? ZERO
          if (isEntry(intent, position, already)) {
            if (pending.length === 0) yield* answerLater
            pending.push({ tag: intent.tag, kind: "refused", code: ENTRIES_STOPPED, filledBaseQty: ZERO })
            continue
          }
          if ("baseQty" in intent) exiting.set(key, already.plus(intent.baseQty))
          kept.push(intent)
        }
        return kept
      })
  }
}
