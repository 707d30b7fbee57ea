/**
 * Engine updates to the strategy instances that own them, in the order they were
 * published, and what each instance is given to the paper evidence.
 */
import { Duration, Effect, Stream } from "effect"
import type * as EngineModule from "../engine/Engine.js"
import type { EngineEvent, OrderUpdate } from "../engine/EngineBus.js"
import type { PaperEvidenceRecorder } from "../promotion/Evidence.js"
import type { RunningInstance } from "../strategy/Host.js"
import type { HostEvent } from "../strategy/Inbox.js"
import type { OrderUpdateKind } from "../strategy/Strategy.js"
import { fillEventOf } from "./FillEvents.js"

const UPDATE_KINDS: Partial<Record<OrderUpdate["state"], OrderUpdateKind>> = {
  accepted: "pending",
  pending: "pending",
  resting: "resting",
  fill: "fill",
  rejected: "rejected",
  cancelled: "cancelled",
  refused: "refused",
  not_placed: "not_placed",
  lost: "lost"
}

/** How long a candle waits for the updates published before it to reach their instances. */
const CATCH_UP_WAIT_MS = 5_000

/**
 * Routes engine updates and fills to the instance that owns them, one at a time
 * in the order they were published. Returns `catchUp`, which a candle goes
 * through before it is handed to an instance: the instance's live orders are
 * polled (their fills synced first) and everything published by then is in the
 * instance's queue ahead of the candle. That is the order a backtest keeps: the
 * fills and order updates of a moment, then the candle.
 */
export const routeUpdates = (engine: EngineModule.Engine, byId: ReadonlyMap<string, RunningInstance>) =>
  Effect.gen(function* () {
    const updates = yield* engine.updates()
    // What was published before the subscription is not this router's to wait for.
    let forwarded = yield* engine.published
    const forward = (event: EngineEvent): Effect.Effect<void> => {
      const instance = event.update.strategyId === null ? undefined : byId.get(event.update.strategyId)
      if (instance === undefined || event.update.tag === null) return Effect.void
      if (event._tag === "Fill") return instance.deliver([{ _tag: "Fill", event: fillEventOf(event.update.fill, event.update.tag) }])
      const update = event.update
      const kind = UPDATE_KINDS[update.state]
      if (kind === undefined) return Effect.void
      return instance.deliver([{
        _tag: "OrderUpdate",
        event: {
          tag: event.update.tag,
          ...(update.clientOrderId === null ? {} : { clientOrderId: update.clientOrderId }),
          kind,
          ...(update.code === null ? {} : { code: update.code }),
          filledBaseQty: update.filledBaseQty
        }
      }])
    }
    yield* Effect.forkScoped(
      Stream.runForEach(updates, (event) => Effect.zipRight(forward(event), Effect.sync(() => { forwarded = event.seq })))
    )
    /** Waits (bounded) until every event published up to `seq` has been handed to its instance. */
    const reached = (seq: number) =>
      Effect.gen(function* () {
        const deadline = Date.now() + CATCH_UP_WAIT_MS
        while (forwarded < seq && Date.now() < deadline) yield* Effect.sleep(Duration.millis(2))
      })
    return {
      catchUp: (instance: RunningInstance): Effect.Effect<void> => Effect.flatMap(engine.catchUp(instance.id), reached)
    }
  })

/** The instance telling the paper evidence each candle, ticker, order update and fill it is given. */
export const withEventsRecorded = (instance: RunningInstance, evidence: PaperEvidenceRecorder): RunningInstance => ({
  ...instance,
  deliver: (events) => {
    for (const event of events) evidenceOf(instance.id, evidence, event)
    return instance.deliver(events)
  }
})

/** What the paper evidence records of an event given to the instance. */
const evidenceOf = (instanceId: string, evidence: PaperEvidenceRecorder, event: HostEvent): void => {
  switch (event._tag) {
    case "Candle":
      evidence.candleGiven(instanceId, event.event)
      break
    case "Ticker":
      evidence.tickerGiven(instanceId, event.event)
      break
    case "OrderUpdate":
      // A refusal never reached the venue: the replay answers it at once, as the daemon does.
      if (event.event.clientOrderId !== undefined) evidence.orderEventGiven(instanceId, { clientOrderId: event.event.clientOrderId, kind: event.event.kind })
      break
    case "Fill":
      evidence.orderEventGiven(instanceId, { kind: "fill", fillId: event.event.fillId })
      break
  }
}
