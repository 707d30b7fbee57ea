/**
 * Cancels: an order is marked `cancelRequested` once (journaled), and its cancel is
 * sent once, and again only after it failed, until the order is final. Execution
 * marks and sends the cancels strategies ask for, the sender those of orders marked
 * while their placement was on the wire, the tracker those still owed after a poll,
 * and the stop those of cancel-on-stop. After an answer the order is polled at once.
 */
import { Clock, Effect, FiberSet } from "effect"
import { isTerminal } from "../domain/OrderState.js"
import { logEvent } from "../log/Logger.js"
import { OrderJournal } from "../store/OrderJournal.js"
import type { OrderRow } from "../store/OrderRow.js"
import { isOrderNotOpen } from "../svc/Errors.js"
import { SvcClient } from "../svc/SvcClient.js"
import { EngineBus } from "./EngineBus.js"

export class Cancels extends Effect.Service<Cancels>()("svcbot/Cancels", {
  scoped: Effect.gen(function* () {
    const client = yield* SvcClient
    const journal = yield* OrderJournal
    const bus = yield* EngineBus
    /** Cancels sent in the background, for `awaitSent`. */
    const inFlight = yield* FiberSet.make()
    /** Orders whose cancel is out; an order leaves when it is final, or when the cancel failed and may be sent again. */
    const sent = new Set<number>()

    /**
     * The one way an order gets `cancelRequested`, which the tracker follows by sending the cancel
     * (again) until the order is final. A market order is never marked (undefined): the venue fills
     * or rejects it whole, so a cancel of it could only be refused. `send` sends marked orders only.
     */
    const mark = (row: OrderRow): Effect.Effect<OrderRow | undefined> =>
      row.type === "market"
        ? Effect.succeed(undefined)
        : Effect.flatMap(Clock.currentTimeMillis, (now) => journal.update(row.orderId, { cancelRequested: true }, now))

    const send = (row: OrderRow): Effect.Effect<void> =>
      Effect.gen(function* () {
        if (!row.cancelRequested || row.clientOrderId === null || sent.has(row.orderId)) return
        sent.add(row.orderId)
        // The tracker learns how the order ended from its status, at once rather than at the next due poll.
        const pollNow = bus.pollNow([row.orderId])
        yield* client.cancel(row.clientOrderId).pipe(
          Effect.zipRight(pollNow),
          Effect.catchAll((error) =>
            isOrderNotOpen(error)
              ? // The order filled or was rejected before the cancel reached it: a settled outcome, not a
                // failure. It stays among the cancels sent until the tracker sees it end, so no cancel is re-sent.
                Effect.zipRight(
                  pollNow,
                  logEvent("order.cancel-too-late", { strategy: row.strategyId, tag: row.tag, clientOrderId: row.clientOrderId, symbol: row.symbol, side: row.side })
                )
              : Effect.sync(() => sent.delete(row.orderId)).pipe(
                  Effect.zipRight(logEvent("request.failed", { what: "cancel", clientOrderId: row.clientOrderId, error: error.message }))
                )
          ),
          // A cancel cut short (the stop ends the tracker round that sent it) may never have reached the
          // service: forgotten, so that the stop's own cancel goes out instead of being taken for sent.
          Effect.onInterrupt(() => Effect.sync(() => sent.delete(row.orderId)))
        )
      })

    return {
      mark,
      /** Sends a marked order's cancel unless it is out already, and waits for its answer. */
      send,
      /** Sends a marked order's cancel on a fiber of its own: the caller does not wait for the answer. */
      sendInBackground: (row: OrderRow): Effect.Effect<void> => Effect.asVoid(FiberSet.run(inFlight, send(row))),
      /** Waits until every cancel sent in the background has its answer. */
      awaitSent: FiberSet.awaitEmpty(inFlight),
      /** Told of orders that moved (plain, inside the announcement of the move): a final one needs no cancel again. */
      moved: (rows: ReadonlyArray<OrderRow>): void => {
        for (const row of rows) if (isTerminal(row.state)) sent.delete(row.orderId)
      }
    }
  })
}) {}
